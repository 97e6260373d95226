"""The pytest plugin end to end, with ``pytester``: options, ini keys and their precedence,
markers and their errors, skipping, fixtures, the nominal cache, zero-config items, the
terminal section, JUnit XML properties and the ``--rl-report`` files.

Agents are cheap numpy controllers written into each pytester directory (``agents.py``);
runs are in-process (``runpytest``) except where process isolation is the point.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

# Loaded here so that in-process pytester runs (which drop the modules they import) reuse
# them instead of importing them afresh on every run (hypothesis's pytest plugin alone
# costs about 0.7 s per run otherwise).
import gymnasium  # noqa: F401
import hypothesis  # noqa: F401
import pytest
from audit_records import bad_marker_run, collection_errors, records

import pytest_rlaudit.reports.summary
import pytest_rlaudit.verdicts.assertions
from pytest_rlaudit.plugin.options import OPTIONS
from pytest_rlaudit.reports.rows import short_diagnosis
from pytest_rlaudit.rollout.replay import REPLAY_STEPS
from pytest_rlaudit.scenarios import DEFAULT, DEPLOYMENT, STRESS

RATINGS = ("PASS", "MILD", "DEGRADED", "FAIL")
USAGE = pytest.ExitCode.USAGE_ERROR
INTERRUPTED = pytest.ExitCode.INTERRUPTED

CLI = ("--rl-audit", "--rl-env", "CartPole-v1", "--rl-episodes", "4")
ZERO = ("--rl-audit", "--rl-agent", "agents:robust", "--rl-env", "CartPole-v1",
        "--rl-episodes", "4")
FRAGILE = ("--rl-audit", "--rl-agent", "agents:fragile", "--rl-env", "CartPole-v1",
           "--rl-episodes", "4")


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """pytest's outcome of each test's call phase, by node id."""
    return {rep.nodeid: rep.outcome
            for rep in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
            if rep.when == "call"}


def text(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


def junit(path: Path) -> tuple[dict[str, str], dict[str, tuple[dict[str, str], ET.Element]]]:
    """(suite properties, {classname::name: (testcase properties, testcase element)})."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    suite_props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    cases = {}
    for case in suite.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.findall("properties/property")}
        cases[f"{case.get('classname')}::{case.get('name')}"] = (props, case)
    return suite_props, cases


# =============================================================================== options


def test_every_option_is_in_help_under_the_rlaudit_group_with_its_ini_key(
        pytester: pytest.Pytester):
    lines = pytester.runpytest("--help").outlines
    start = lines.index("RL robustness audits (pytest-rlaudit):")
    end = next(i for i in range(start + 1, len(lines))
               if lines[i] and not lines[i].startswith(" "))
    group = "\n".join(lines[start:end])
    for option in OPTIONS:
        assert re.search(rf"^  {option.flag}[ =]", group, re.M), option.flag
    # and only there: no rl option leaks into another group
    others = "\n".join(lines[:start] + lines[end:])
    assert not re.search(r"^\s+--rl-", others, re.M)
    for option in OPTIONS:
        kind = "bool" if option.flag in ("--rl-audit", "--rl-fail-stress", "--rl-stochastic",
                                         "--rl-deterministic", "--rl-trusted", "--rl-videos") else "string"
        assert re.search(rf"^  {option.dest} \({kind}\):", "\n".join(lines), re.M), option.dest


def test_ini_keys_configure_a_zero_config_run(tester: pytest.Pytester):
    tester.makeini("""
        [pytest]
        rl_audit = true
        rl_agent = agents:robust
        rl_env = CartPole-v1
        rl_episodes = 3
        rl_seed = 7
        rl_scenarios = jitter, speed_5x
        rl_min_rating = PASS
        rl_fail_stress = true
    """)
    result = tester.runpytest("-v")
    result.stdout.fnmatch_lines(["*collected 2 items"])
    recs = records(result)
    assert list(recs) == ["rl-audit::jitter", "rl-audit::speed_5x"]
    for rec in recs.values():
        assert rec["agent"] == "robust" and rec["env"] == "CartPole-v1"
        assert rec["episodes"] == 3 and rec["seed"] == 7
        # rl_fail_stress = true gates the stress scenario with rl_min_rating too
        assert rec["gate"] == {"min_ratio": None, "min_rating": "PASS", "mode": "point"}
        assert rec["passed"] == (rec["rating"] == "PASS")
    # the seed reaches the rollouts: the failure message names env seeds 7-9
    if not all(r["passed"] for r in recs.values()):
        result.stdout.fnmatch_lines(["*env seeds 7-9*"])


PRECEDENCE_TESTS = """
import pytest

@pytest.mark.rl_episodes(5)
@pytest.mark.rl_threshold(min_rating="DEGRADED")
@pytest.mark.rl_scenario("delay")
def test_marked(rl_audit):
    rl_audit()

@pytest.mark.rl_threshold(mode="not_worse")
@pytest.mark.rl_scenario("delay")
def test_mode_only(rl_audit):
    rl_audit()

@pytest.mark.rl_scenario("delay")
def test_unmarked(rl_audit):
    rl_audit()
"""


def test_precedence_is_marker_then_command_line_then_ini(tester: pytest.Pytester):
    tester.makepyfile(test_prec=PRECEDENCE_TESTS)
    tester.makeini("""
        [pytest]
        rl_agent = agents:robust
        rl_env = CartPole-v1
        rl_episodes = 6
        rl_min_rating = FAIL
    """)
    with_cli = tester.runpytest("--rl-audit", "--rl-episodes", "4", "--rl-min-rating", "PASS",
                                "--junitxml=cli.xml")
    _, cases = junit(tester.path / "cli.xml")
    episodes = {name: props["rl.episodes"] for name, (props, _) in cases.items()}
    assert episodes == {"test_prec::test_marked[delay]": "5",
                        "test_prec::test_mode_only[delay]": "4",
                        "test_prec::test_unmarked[delay]": "4"}
    gates = {nodeid.split("::")[1]: rec["gate"] for nodeid, rec in records(with_cli).items()}
    assert gates == {
        "test_marked[delay]": {"min_ratio": None, "min_rating": "DEGRADED", "mode": "point"},
        # a marker overrides only the arguments it gives
        "test_mode_only[delay]": {"min_ratio": None, "min_rating": "PASS", "mode": "not_worse"},
        "test_unmarked[delay]": {"min_ratio": None, "min_rating": "PASS", "mode": "point"},
    }

    ini_only = tester.runpytest("--rl-audit", "--junitxml=ini.xml")
    _, cases = junit(tester.path / "ini.xml")
    episodes = {name: props["rl.episodes"] for name, (props, _) in cases.items()}
    assert episodes == {"test_prec::test_marked[delay]": "5",
                        "test_prec::test_mode_only[delay]": "6",
                        "test_prec::test_unmarked[delay]": "6"}
    gates = {nodeid.split("::")[1]: rec["gate"]["min_rating"]
             for nodeid, rec in records(ini_only).items()}
    assert gates == {"test_marked[delay]": "DEGRADED", "test_mode_only[delay]": "FAIL",
                     "test_unmarked[delay]": "FAIL"}


@pytest.mark.parametrize(("args", "message"), [
    (("--rl-episodes", "1"), "argument --rl-episodes: must be an integer >= 2*got 1"),
    (("--rl-episodes", "abc"), "argument --rl-episodes: must be an integer >= 2 (paired episodes), got 'abc'"),
    (("--rl-seed", "-1"), "argument --rl-seed: must be an integer >= 0, got -1"),
    (("--rl-seed", str(2**70)),
     "argument --rl-seed: must be an integer in [[]0, 9223372036854775807] (episode i resets "
     "with env seed seed + i, a 64-bit integer), got 1180591620717411303424"),
    (("--rl-reference", "best"), "argument --rl-reference: must be a number or 'random', got 'best'"),
    (("--rl-reference", "nan"), "argument --rl-reference: must be a finite number or 'random'*"),
    (("--rl-min-ratio", "3"), "argument --rl-min-ratio: must be a finite number in (0, 2], got 3.0"),
    (("--rl-min-ratio", "0"), "argument --rl-min-ratio: must be a finite number in (0, 2], got 0.0"),
    (("--rl-min-rating", "GOOD"),
     "argument --rl-min-rating: must be one of PASS, MILD, DEGRADED, FAIL, got 'GOOD'"),
    (("--rl-mode", "strict"),
     "argument --rl-mode: must be one of point, confident, not_worse, got 'strict'"),
    (("--rl-batch-size", "0"), "argument --rl-batch-size: must be an integer >= 1, got 0"),
    (("--rl-scenarios", ","), "argument --rl-scenarios: must name at least one scenario*"),
    (("--rl-workers", "-2"), 'argument --rl-workers: must be an integer >= 0 or "auto"*got -2'),
    (("--rl-workers", "many"),
     'argument --rl-workers: must be an integer >= 0 or "auto"*got \'many\''),
    (("--rl-backend", "dask"), "argument --rl-backend: must be one of local, ray, got 'dask'"),
])
def test_a_bad_option_value_is_a_usage_error_naming_the_option_and_the_rule(
        pytester: pytest.Pytester, args: tuple[str, ...], message: str):
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert "INTERNALERROR" not in text(result)


@pytest.mark.parametrize(("line", "message"), [
    ("rl_episodes = 1", "ini option rl_episodes = '1': must be an integer >= 2*"),
    ("rl_seed = -3", "ini option rl_seed = '-3': must be an integer >= 0, got -3"),
    ("rl_min_rating = good", "ini option rl_min_rating = 'good': must be one of PASS, MILD*"),
    ("rl_mode = strict", "ini option rl_mode = 'strict': must be one of point, confident*"),
    ("rl_reference = best", "ini option rl_reference = 'best': must be a number or 'random'*"),
])
def test_a_bad_ini_value_is_a_usage_error_naming_the_key(
        pytester: pytest.Pytester, line: str, message: str):
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.makeini(f"[pytest]\n{line}\n")
    result = pytester.runpytest()
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert "INTERNALERROR" not in text(result)


@pytest.mark.parametrize("key", ["rl_fail_stress", "rl_audit"])
def test_a_bad_boolean_ini_value_is_a_usage_error_not_an_internal_error(
        pytester: pytest.Pytester, key: str):
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.makeini(f"[pytest]\n{key} = maybe\n")
    result = pytester.runpytest()
    assert "INTERNALERROR" not in text(result)
    assert result.ret == USAGE
    assert key in text(result) and "maybe" in text(result)


# =============================================================================== markers


def test_markers_are_documented_with_their_signatures(pytester: pytest.Pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines([
        "@pytest.mark.rl_audit: *--rl-audit*",
        "@pytest.mark.rl_scenario(*names, **params): *",
        "@pytest.mark.rl_threshold(min_ratio=None, min_rating=None, mode='point'): *",
        "@pytest.mark.rl_episodes(n, max_n=None, target_ci_width=None): *",
    ], consecutive=False)


ALL_MARKERS = """
import pytest

@pytest.mark.rl_audit
@pytest.mark.rl_threshold(min_ratio=0.5, min_rating="DEGRADED", mode="not_worse")
@pytest.mark.rl_episodes(4, max_n=8, target_ci_width=0.5)
@pytest.mark.rl_scenario("jitter", "delay")
def test_x(rl_audit):
    pass
"""


@pytest.mark.parametrize("enabled", [False, True])
def test_rl_scenario_makes_one_item_per_scenario_named_by_it(
        tester: pytest.Pytester, enabled: bool):
    tester.makepyfile(test_ids=ALL_MARKERS)
    args = ("--rl-audit",) if enabled else ()
    result = tester.runpytest("--collect-only", "-q", "--strict-markers", *args)
    assert result.ret == pytest.ExitCode.OK
    collected = [line for line in result.outlines if line.startswith("test_ids.py::")]
    assert collected == ["test_ids.py::test_x[jitter]", "test_ids.py::test_x[delay]"]


SCENARIO_PARAMS = """
import pytest

@pytest.mark.rl_threshold(min_rating="FAIL")
@pytest.mark.rl_scenario("jitter", jitter=2)
def test_wide_jitter(rl_audit, rl_scenario):
    assert rl_scenario.params == {"base": 2, "jitter": 2}
    rl_audit()
"""


def test_rl_scenario_params_reach_the_scenario(tester: pytest.Pytester):
    tester.makepyfile(test_params=SCENARIO_PARAMS)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:robust", "--rl-report", "out")
    result.assert_outcomes(passed=1)
    rec = records(result)["test_params.py::test_wide_jitter[jitter]"]
    assert rec["params"] == {"base": 2, "jitter": 2}
    doc = json.loads((tester.path / "out" / "summary.json").read_text())
    assert doc["results"][0]["params"] == {"base": 2, "jitter": 2}
    if rec["diagnosis"] is not None:
        assert "Jitter(env, base=2, jitter=2)" in rec["diagnosis"]["fix"]


def test_the_reproduce_line_of_a_failure_keeps_the_marker_params(tester: pytest.Pytester):
    tester.makepyfile(test_repro="""
        import pytest

        @pytest.mark.rl_threshold(min_ratio=2.0)
        @pytest.mark.rl_scenario("jitter", jitter=2)
        def test_wide_jitter(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:robust")
    result.assert_outcomes(failed=1)
    # assert_robust(agent, env, 'jitter', ...) would audit jitter=1: other numbers
    result.stdout.fnmatch_lines(["*reproduce: *jitter=2*"])


BAD_MARKERS = [
    ('@pytest.mark.rl_threshold(min_ratoi=0.8)',
     ["rl_threshold", "unexpected keyword argument 'min_ratoi'"]),
    ('@pytest.mark.rl_threshold(min_ratio=5)',
     ["@pytest.mark.rl_threshold: min_ratio must be a finite number in (0, 2], got 5.0"]),
    ('@pytest.mark.rl_threshold(min_rating="GOOD")',
     ["@pytest.mark.rl_threshold: min_rating must be one of PASS, MILD, DEGRADED, FAIL"]),
    ('@pytest.mark.rl_threshold(mode="strict")',
     ["@pytest.mark.rl_threshold: mode must be one of point, confident, not_worse, got 'strict'"]),
    ('@pytest.mark.rl_episodes(1)',
     ["@pytest.mark.rl_episodes: n must be an integer >= 2", "got 1"]),
    ('@pytest.mark.rl_episodes(4.5)', ["@pytest.mark.rl_episodes: n must be an integer >= 2"]),
    ('@pytest.mark.rl_episodes(5, max_n=3)',
     ["@pytest.mark.rl_episodes: max_n (3) must be >= n (5)"]),
    ('@pytest.mark.rl_episodes(4, target_ci_width=0.1)', ["target_ci_width needs max_n"]),
    ('@pytest.mark.rl_episodes()', ["rl_episodes", "missing 1 required positional argument: 'n'"]),
]


@pytest.mark.parametrize(("marker", "fragments"), BAD_MARKERS,
                         ids=[m for m, _ in BAD_MARKERS])
def test_a_bad_marker_is_a_collection_error_that_says_which(
        pytester: pytest.Pytester, marker: str, fragments: list[str]):
    module = f"test_bad_{[m for m, _ in BAD_MARKERS].index(marker)}.py"
    for args in ((), ("--rl-audit",)):  # thresholds and episodes are checked either way
        ret, out = bad_marker_run(pytester, [m for m, _ in BAD_MARKERS], "jitter", args)
        assert ret == INTERRUPTED, args
        errors = collection_errors(out)
        # every module is an error of its own (none hides another's), this one says its own
        assert sorted(errors) == sorted(f"test_bad_{i}.py" for i in range(len(BAD_MARKERS)))
        section = errors[module]
        assert f"{module}::test_x" in section  # names the test
        for fragment in fragments:
            assert fragment in section, (fragment, section)
        assert "INTERNALERROR" not in out


BAD_SCENARIO_MARKERS = {
    "unknown-name": ('@pytest.mark.rl_scenario("jiter")',
                     ["unknown scenario 'jiter'", "Did you mean 'jitter'?", "Known scenarios: ",
                      "delay", "obs_noise"]),
    "no-names": ("@pytest.mark.rl_scenario()",
                 ["rl_scenario(*names, **params) needs at least one scenario name", "known: "]),
    "unknown-param": ('@pytest.mark.rl_scenario("jitter", jiter=2)',
                      ["scenario 'jitter' has no parameter 'jiter'",
                       "its parameters are: base, jitter"]),
    "twice": ('@pytest.mark.rl_scenario("jitter", "delay", "jitter")',
              ["scenario 'jitter' is listed twice; each name may appear once."]),
}
_BAD_SCENARIO_RUN: list[tuple[pytest.ExitCode | int, str]] = []


@pytest.mark.parametrize("case", list(BAD_SCENARIO_MARKERS))
def test_a_bad_rl_scenario_marker_is_a_collection_error_with_rl_audit(
        pytester: pytest.Pytester, case: str):
    # one --rl-audit run (made once per process) of a module per case, test_bad_<case>.py:
    # each collection error is its module's, and each case reads its own module's section
    if not _BAD_SCENARIO_RUN:
        pytester.makepyfile(**{f"test_bad_{name.replace('-', '_')}": f"""
            import pytest

            {marker}
            def test_x(rl_audit):
                rl_audit()
        """ for name, (marker, _) in BAD_SCENARIO_MARKERS.items()})
        result = pytester.runpytest("--rl-audit")
        _BAD_SCENARIO_RUN.append((result.ret, text(result)))
    ret, out = _BAD_SCENARIO_RUN[0]
    assert ret == INTERRUPTED
    errors = collection_errors(out)
    modules = {name: f"test_bad_{name.replace('-', '_')}.py" for name in BAD_SCENARIO_MARKERS}
    assert sorted(errors) == sorted(modules.values())  # each module an error of its own
    section = errors[modules[case]]
    assert f"{modules[case]}::test_x: @pytest.mark.rl_scenario" in section
    for fragment in BAD_SCENARIO_MARKERS[case][1]:
        assert fragment in section, (fragment, section)
    assert "INTERNALERROR" not in out


@pytest.mark.parametrize("enabled", [False, True])
def test_rl_scenario_on_a_test_without_the_fixture_is_a_collection_error(
        pytester: pytest.Pytester, enabled: bool):
    pytester.makepyfile(test_bad="""
        import pytest

        @pytest.mark.rl_scenario("jitter")
        def test_x():
            pass
    """)
    result = pytester.runpytest(*(("--rl-audit",) if enabled else ()))
    assert result.ret == INTERRUPTED
    out = text(result)
    assert "test_bad.py::test_x: @pytest.mark.rl_scenario parametrizes the rl_scenario fixture" in out
    assert "use the rl_audit (or rl_scenario) fixture" in out


def test_marker_errors_are_reported_once_without_chained_exception_noise(
        pytester: pytest.Pytester):
    pytester.makepyfile(test_bad="""
        import pytest

        @pytest.mark.rl_episodes(1)
        @pytest.mark.rl_scenario("jitter")
        def test_x(rl_audit):
            pass
    """)
    result = pytester.runpytest("--rl-audit")
    assert result.ret == INTERRUPTED
    out = text(result)
    assert "n must be an integer >= 2" in out
    assert "During handling of the above exception, another exception occurred" not in out


def test_a_marker_signature_error_shows_the_signature_as_documented(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_threshold="""
            import pytest

            @pytest.mark.rl_threshold(min_ratoi=0.8)
            @pytest.mark.rl_scenario("jitter")
            def test_x(rl_audit):
                pass
        """,
        test_episodes="""
            import pytest

            @pytest.mark.rl_episodes(4, 8, 0.1, 9)
            @pytest.mark.rl_scenario("jitter")
            def test_x(rl_audit):
                pass
        """)
    out = text(pytester.runpytest("--rl-audit"))
    # as `pytest --markers` shows them, not with type annotations and a return type
    assert "@pytest.mark.rl_threshold(min_ratio=None, min_rating=None, mode='point'): " in out
    assert "@pytest.mark.rl_episodes(n, max_n=None, target_ci_width=None): " in out
    assert "dict[str, Any]" not in out


def test_every_marker_is_registered_under_strict_markers(tester: pytest.Pytester):
    tester.makepyfile(test_all=ALL_MARKERS)
    assert tester.runpytest("--strict-markers").ret == pytest.ExitCode.OK
    result = tester.runpytest("--strict-markers", "--rl-audit", "--collect-only")
    assert result.ret == pytest.ExitCode.OK


# ============================================================================== skipping

SKIPPED_TESTS = """
import pytest

@pytest.mark.rl_audit
def test_marked():
    pass

@pytest.mark.rl_scenario("jitter", "delay")
def test_scenarios(rl_audit):
    rl_audit()

def test_fixture_only(rl_audit):
    rl_audit()

@pytest.mark.rl_threshold(min_ratio=0.9)
def test_threshold_only():
    pass

def test_plain():
    pass
"""


def test_audit_tests_are_skipped_without_rl_audit_with_a_reason_naming_it(
        pytester: pytest.Pytester):
    pytester.makepyfile(test_skip=SKIPPED_TESTS)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=5)
    assert outcomes(result) == {"test_skip.py::test_plain": "passed"}  # only it ran
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert sum(int(re.match(r"SKIPPED \[(\d+)\]", line)[1]) for line in skips) == 5
    assert all("run it with --rl-audit" in line for line in skips), skips


def test_without_rl_audit_nothing_heavy_is_imported(pytester: pytest.Pytester):
    pytester.makepyfile(test_skip=SKIPPED_TESTS)
    pytester.makeconftest("""
        import sys

        HEAVY = ("gymnasium", "torch", "scipy", "stable_baselines3", "matplotlib",
                 "pytest_rlaudit.scenarios", "pytest_rlaudit.verdicts.assertions")

        def _heavy():
            return ",".join(m for m in HEAVY if m in sys.modules) or "none"

        def pytest_collection_finish(session):
            print("\\nHEAVY-AT-COLLECTION=" + _heavy())

        def pytest_sessionfinish(session):
            print("\\nHEAVY-AT-END=" + _heavy())
    """)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=5)
    result.stdout.fnmatch_lines(["HEAVY-AT-COLLECTION=none", "HEAVY-AT-END=none"])


# ============================================================================== fixtures


def test_rl_agent_and_rl_env_default_to_the_options(tester: pytest.Pytester):
    tester.makepyfile(test_fixtures="""
        def test_fixtures(rl_agent, rl_env):
            assert rl_agent.name == "robust"
            assert rl_env.name == "CartPole-v1"
            assert rl_env.make().observation_space.shape == (4,)
    """)
    result = tester.runpytest("--rl-agent", "agents:robust", "--rl-env", "CartPole-v1")
    result.assert_outcomes(passed=1)


def test_conftest_fixtures_override_the_options(tester: pytest.Pytester):
    tester.makeconftest("""
        import pytest
        import agents

        @pytest.fixture(scope="session")
        def rl_agent():
            return agents.fragile

        @pytest.fixture(scope="session")
        def rl_env():
            return agents.cartpole
    """)
    tester.makepyfile(test_override="""
        import pytest

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    # options naming another agent and an env it could not act in: the fixtures win
    result = tester.runpytest("--rl-audit", "--rl-agent", "agents:robust", "--rl-env",
                              "Acrobot-v1", "--rl-episodes", "4")
    result.assert_outcomes(passed=1)
    rec = records(result)["test_override.py::test_x[delay]"]
    assert (rec["agent"], rec["env"]) == ("fragile", "cartpole")
    # ... and the run says that the options went unused, where, and how to use them
    result.stdout.fnmatch_lines([
        "*PytestConfigWarning: --rl-agent agents:robust is not used: the rl_agent fixture at "
        "*conftest.py:4 overrides it*pytestconfig.getoption('rl_agent') when it is set.",
        "*PytestConfigWarning: --rl-env Acrobot-v1 is not used: the rl_env fixture at "
        "*conftest.py:8 overrides it*"], consecutive=False)
    assert text(result).count("is not used") == 2  # once per option, not per test


def test_the_plugins_own_fixtures_use_the_options_without_a_warning(tester: pytest.Pytester):
    tester.makepyfile(test_defaults="""
        import pytest

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:robust", "-W", "error::pytest.PytestConfigWarning")
    result.assert_outcomes(passed=1)
    assert "is not used" not in text(result)


def test_a_fixture_that_reads_the_option_is_not_warned_about(tester: pytest.Pytester):
    tester.makeconftest("""
        import pytest

        @pytest.fixture(scope="session")
        def rl_agent(pytestconfig):
            return pytestconfig.getoption("rl_agent") or "agents:fragile"
    """)
    tester.makepyfile(test_reads="""
        import pytest

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:robust")
    result.assert_outcomes(passed=1)
    assert records(result)["test_reads.py::test_x[delay]"]["agent"] == "robust"


@pytest.mark.parametrize(("args", "message"), [
    (("--rl-env", "CartPole-v1"),
     "*no agent to audit: pass --rl-agent PATH_OR_IMPORT*override the rl_agent fixture in "
     "conftest.py*"),
    (("--rl-agent", "agents:robust"),
     "*no env to audit on: pass --rl-env ID*override the rl_env fixture in conftest.py*"),
])
def test_a_missing_agent_or_env_is_a_clear_failure(
        tester: pytest.Pytester, args: tuple[str, ...], message: str):
    tester.makepyfile(test_missing="""
        import pytest

        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest("--rl-audit", *args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in text(result)


def test_rl_audit_arguments_override_the_fixtures_and_it_returns_the_result(
        tester: pytest.Pytester):
    tester.makeconftest("""
        import pytest

        @pytest.fixture(scope="session")
        def rl_agent():
            pytest.fail("the rl_agent fixture was used")

        @pytest.fixture(scope="session")
        def rl_env():
            pytest.fail("the rl_env fixture was used")
    """)
    tester.makepyfile(test_args="""
        import pytest
        import agents

        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            result = rl_audit(agent=agents.robust, env=agents.cartpole)
            assert result.name == "delay"
            assert result.rating in ("PASS", "MILD", "DEGRADED", "FAIL")
            low, high = result.ci
            assert 0.0 <= low <= result.ratio <= high
            assert result.episodes == 4
    """)
    result = tester.runpytest(*CLI)
    result.assert_outcomes(passed=1)
    rec = records(result)["test_args.py::test_x[delay]"]
    assert (rec["agent"], rec["env"], rec["scenario"]) == ("robust", "cartpole", "delay")


CACHE_CONFTEST = """
import json
import numpy as np
import pytest

W = np.array([0.02, 0.0, 1.0, 0.2])
SEEN = {"rows": 0, "deltas": {}}


def counting(obs):
    obs = np.asarray(obs)
    SEEN["rows"] += obs.shape[0]
    return (obs @ W > 0).astype(np.int64)


@pytest.fixture(scope="session")
def rl_agent():
    return counting


@pytest.fixture
def seen():
    return SEEN


def pytest_sessionfinish(session):
    cache = session.config.pluginmanager.get_plugin("rlaudit-session").audits.cache
    SEEN["nominal_keys"] = sum(1 for key in cache if key[0] == "nominal")
    with open("counts.json", "w") as f:
        json.dump(SEEN, f)
"""

CACHE_TESTS = """
import pytest

def _audit(request, rl_audit, seen):
    before = seen["rows"]
    rl_audit()
    seen["deltas"][request.node.name] = seen["rows"] - before

@pytest.mark.rl_scenario("jitter", "delay", "obs_noise")
def test_a(request, rl_audit, seen):
    _audit(request, rl_audit, seen)

@pytest.mark.rl_scenario("delay")
def test_b(request, rl_audit, seen):
    _audit(request, rl_audit, seen)
"""


def test_the_nominal_rollout_runs_once_per_process_across_scenarios_and_tests(
        tester: pytest.Pytester):
    tester.makeconftest(CACHE_CONFTEST)
    tester.makepyfile(test_cache=CACHE_TESTS)
    counts = tester.path / "counts.json"

    tester.runpytest(*CLI, "-k", "test_b").assert_outcomes(passed=1)
    alone = json.loads(counts.read_text())
    tester.runpytest(*CLI).assert_outcomes(passed=4)
    shared = json.loads(counts.read_text())

    assert alone["nominal_keys"] == shared["nominal_keys"] == 1
    d = shared["deltas"]
    # the first audit pays for nominal; the others, in this test and the next, do not
    assert d["test_a[delay]"] == d["test_b[delay]"] == d["test_a[obs_noise]"]
    first_rows = alone["deltas"]["test_b[delay]"] - d["test_b[delay]"]
    # the controller balances all 4 nominal episodes; the seed-replay check (once per
    # process too) runs the first REPLAY_STEPS steps of one of them twice, a row a step
    nominal_rows = first_rows - 2 * REPLAY_STEPS
    assert nominal_rows == 4 * 500
    assert d["test_a[jitter]"] > nominal_rows
    assert shared["rows"] == sum(d.values())


# ============================================================================ zero-config


_ZERO_VERBOSE: list[pytest.RunResult] = []


def _zero_verbose(tester: pytest.Pytester) -> pytest.RunResult:
    """The robust agent's zero-config run with -v, made once per process: two tests read
    its output (what the run does does not depend on the test that asks)."""
    if not _ZERO_VERBOSE:
        _ZERO_VERBOSE.append(tester.runpytest(*ZERO, "-v"))
    return _ZERO_VERBOSE[0]


def test_zero_config_makes_one_item_per_default_scenario(tester: pytest.Pytester):
    result = _zero_verbose(tester)
    result.stdout.fnmatch_lines(["*collected 5 items"])
    result.stdout.fnmatch_lines([f"rl-audit::{name} PASSED*" for name in DEFAULT])
    assert list(outcomes(result)) == [f"rl-audit::{name}" for name in DEFAULT]
    result.assert_outcomes(passed=5)
    assert list(DEFAULT) == ["jitter", "delay", "spike", "obs_noise", "speed_5x"]


def test_zero_config_runs_beside_plain_tests_but_not_beside_audit_tests(
        tester: pytest.Pytester):
    tester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = tester.runpytest(*ZERO, "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_plain.py::test_plain",
                                 *[f"rl-audit::{name}" for name in DEFAULT],
                                 "6 tests collected*"])
    tester.makepyfile(test_own="""
        import pytest

        @pytest.mark.rl_scenario("delay")
        def test_own(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*ZERO, "--collect-only", "-q")
    result.stdout.fnmatch_lines(["2 tests collected*"])
    assert "rl-audit::" not in text(result)


def test_the_rl_audit_marker_selects_the_zero_config_items_too(tester: pytest.Pytester):
    tester.makepyfile(test_plain="def test_plain():\n    pass\n")
    chosen = tester.runpytest(*ZERO, "-m", "rl_audit", "--collect-only", "-q")
    chosen.stdout.fnmatch_lines([*[f"rl-audit::{name}" for name in DEFAULT],
                                 "5/6 tests collected (1 deselected)*"])
    others = tester.runpytest(*ZERO, "-m", "not rl_audit", "--collect-only", "-q")
    others.stdout.fnmatch_lines(["test_plain.py::test_plain", "1/6 tests collected (5 deselected)*"])


_LOCAL_RECORDS: list[dict] = []


@pytest.mark.parametrize("where", [("--rl-workers", "2"), ("--rl-workers", "auto")])
def test_rl_workers_changes_where_envs_step_not_a_number(tester: pytest.Pytester, where):
    chosen = ("--rl-scenarios", "jitter,obs_noise")
    if not _LOCAL_RECORDS:  # the run without --rl-workers, made once per process
        _LOCAL_RECORDS.append(records(tester.runpytest(*ZERO, *chosen)))
    local = json.loads(json.dumps(_LOCAL_RECORDS[0]))
    spread = records(tester.runpytest(*ZERO, *chosen, *where))
    for record in (*local.values(), *spread.values()):
        record.pop("seconds", None)
    assert local == spread and len(local) == 2


def test_rl_scenarios_picks_the_zero_config_scenarios(tester: pytest.Pytester):
    result = tester.runpytest(*ZERO, "--rl-scenarios", "jitter,delay")
    result.stdout.fnmatch_lines(["*collected 2 items"])
    assert list(outcomes(result)) == ["rl-audit::jitter", "rl-audit::delay"]


def test_an_unknown_rl_scenarios_name_is_a_usage_error_listing_known_names(
        tester: pytest.Pytester):
    result = tester.runpytest(*ZERO, "--rl-scenarios", "jitter,jiter")
    out = text(result)
    assert "INTERNALERROR" not in out
    assert "--rl-scenarios: unknown scenario 'jiter'. Did you mean 'jitter'?" in out
    assert "Known scenarios: " in out
    assert result.ret == USAGE
    assert "Traceback" not in out and "session.py" not in out


_FRAGILE_RUNS: dict[tuple[str, ...], tuple[dict, dict]] = {}


def _fragile_run(tester: pytest.Pytester, *args: str) -> tuple[dict, dict]:
    """The records and outcomes of the fragile agent's zero-config run with ``args``: run
    once per process (the default run serves two tests; the records are plain data)."""
    if args not in _FRAGILE_RUNS:
        result = tester.runpytest(*FRAGILE, *args)
        _FRAGILE_RUNS[args] = records(result), outcomes(result)
    recs, outs = _FRAGILE_RUNS[args]
    return json.loads(json.dumps(recs)), dict(outs)


def test_deployment_scenarios_fail_below_mild_and_stress_is_only_reported(
        tester: pytest.Pytester):
    recs, outs = _fragile_run(tester)
    assert set(recs) == {f"rl-audit::{name}" for name in DEFAULT}
    for nodeid, rec in recs.items():
        if rec["category"] == "deployment":
            assert rec["gate"] == {"min_ratio": None, "min_rating": "MILD", "mode": "point"}
            assert rec["passed"] == (rec["ratio"] > 0.8), rec
            assert outs[nodeid] == ("passed" if rec["passed"] else "failed")
        else:
            assert rec["gate"] is None and rec["passed"] and outs[nodeid] == "passed"
    assert not all(recs[f"rl-audit::{n}"]["passed"] for n in DEPLOYMENT)  # it is fragile
    speed = recs["rl-audit::speed_5x"]
    assert speed["category"] == "stress" and speed["rating"] in ("DEGRADED", "FAIL")

    recs, outs = _fragile_run(tester, "--rl-fail-stress")
    assert recs["rl-audit::speed_5x"]["gate"]["min_rating"] == "MILD"
    assert outs["rl-audit::speed_5x"] == "failed"


def test_rl_min_rating_and_rl_min_ratio_change_the_verdicts(tester: pytest.Pytester):
    default = {n for n, o in _fragile_run(tester)[1].items() if o == "failed"}

    recs, outs = _fragile_run(tester, "--rl-min-rating", "DEGRADED")
    degraded = {n for n, o in outs.items() if o == "failed"}
    for name in DEPLOYMENT:
        rec = recs[f"rl-audit::{name}"]
        assert rec["passed"] == (rec["ratio"] > 0.5), rec
    assert degraded < default  # strictly fewer failures than at MILD

    recs, outs = _fragile_run(tester, "--rl-min-ratio", "0.99")
    for name in DEPLOYMENT:
        rec = recs[f"rl-audit::{name}"]
        assert rec["gate"] == {"min_ratio": 0.99, "min_rating": None, "mode": "point"}
        assert rec["passed"] == (rec["ratio"] >= 0.99), rec
        assert outs[f"rl-audit::{name}"] == ("passed" if rec["passed"] else "failed")
    assert any(o == "failed" for o in outs.values())
    assert outs["rl-audit::speed_5x"] == "passed"


def test_a_zero_config_failure_shows_the_message_without_a_traceback(tester: pytest.Pytester):
    result = tester.runpytest(*FRAGILE, "--rl-scenarios", "spike")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*_ rl-audit: spike _*",
        "* under spike: ratio * (95% CI *); required MILD or better",
        "  required: rating MILD or better (ratio > 0.8) in 'point' mode;*",
        "  reproduce: assert_robust(agent, 'CartPole-v1', 'spike', *episodes=4, seed=0)",
    ])
    result.stdout.fnmatch_lines(["FAILED rl-audit::spike - * under spike: ratio *"])
    out = text(result)
    assert "Traceback" not in out and "session.py" not in out and "raise " not in out
    assert not any(line.startswith("E   ") for line in result.outlines)


# =============================================================================== terminal


def test_the_rl_audit_section_follows_the_tests(tester: pytest.Pytester):
    result = tester.runpytest(*FRAGILE, "-rf")
    lines = result.outlines
    recs = records(result)
    section = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ rl audit =+", line))
    failures = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ FAILURES =+", line))
    summary = next(i for i, line in enumerate(lines) if "short test summary info" in line)
    assert failures < section < summary
    assert re.fullmatch(r"agent\s+env\s+scenario\s+n\s+nominal\s+ref\s+ratio\s+95% CI\s+rating"
                        r"\s+p\s+diagnosis",
                        lines[section + 1])
    for offset, name in enumerate(DEFAULT, start=2):
        rec = recs[f"rl-audit::{name}"]
        cells = re.split(r"\s{2,}", lines[section + offset].strip())
        stress = name in STRESS  # reported, not gated: the row says so
        assert cells == [
            "fragile", "CartPole-v1", name, str(rec["episodes"]),
            f"{sum(rec['nominal_returns']) / rec['episodes']:.1f}", "0.0", f"{rec['ratio']:.3f}",
            f"{rec['ci_low']:.3f} to {rec['ci_high']:.3f}",
            rec["rating"] + (" (not gated)" if stress else ""),
            "<0.001" if rec["p_value"] < 0.001 else f"{rec['p_value']:.3f}",
            short_diagnosis(rec) or "-"], lines[section + offset]
    worst = min((r for r in recs.values() if r["category"] == "deployment"),
                key=lambda r: r["ratio"])
    speed = recs["rl-audit::speed_5x"]
    result.stdout.fnmatch_lines([
        f"fragile on CartPole-v1:*deployment {worst['rating']} (min ratio {worst['ratio']:.3f}, "
        f"{worst['scenario']})*stress {speed['rating']} (min ratio {speed['ratio']:.3f}, "
        f"speed_5x)"])
    assert not any("rl audit:" in line for line in lines)  # progress lines need -v


def test_verbose_runs_print_an_rl_audit_line_per_scenario(tester: pytest.Pytester):
    result = _zero_verbose(tester)
    progress = [line for line in result.outlines if line.strip().startswith("rl audit:")]
    assert len(progress) == len(DEFAULT)
    for line, name in zip(progress, DEFAULT, strict=True):
        assert re.fullmatch(rf"\s+rl audit: robust / {name}: ratio \d\.\d{{3}} "
                            rf"\(\d\.\d{{3}} to \d\.\d{{3}}\) (PASS|MILD|DEGRADED|FAIL)", line), line
    # each follows its own test's result line
    lines = result.outlines
    for name in DEFAULT:
        i = next(i for i, line in enumerate(lines) if line.startswith(f"rl-audit::{name} "))
        assert f"robust / {name}:" in next(line for line in lines[i + 1:] if line.strip())


def test_a_failed_audit_says_its_diagnosis_once(tester: pytest.Pytester):
    tester.makepyfile(test_diag="""
        import pytest

        @pytest.mark.rl_scenario("spike")
        def test_x(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:fragile", "-rf")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    (rec,) = records(result).values()
    d = rec["diagnosis"]
    # in the failure's message, each part once (the table keeps the fix's first clause)
    assert out.count(d["pattern"]) == 1 and out.count(d["cause"]) == 1
    assert out.count(d["fix"]) == 1
    assert "rl audit diagnosis" not in out
    # the short summary line: the essence, not pytest_rlaudit.verdicts.assertions....
    result.stdout.fnmatch_lines(["FAILED test_diag.py::test_x[[]spike[]] - FAIL under spike: ratio*"])


def test_a_test_that_fails_after_its_audit_gets_the_diagnosis_beside_its_own_error(
        tester: pytest.Pytester):
    tester.makepyfile(test_diag="""
        import pytest

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("spike")
        def test_x(rl_audit):
            rl_audit()
            assert False, "the test's own check"
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:fragile")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*- rl audit diagnosis -*",
        "fragile on CartPole-v1, scenario spike: ratio *, *; nominal 500.0 over 4 episodes, "
        "reference 0.0",
        "what broke:   spike (speed goes 1 -> 5 for 20 steps at step 20) keeps *",
        "likely cause: *",
        "fix:          train with SpeedSchedule.spike(env, start=20, duration=20, k=5)*",
    ])


# ================================================================================= JUnit


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_junit_xml_carries_the_numbers_as_properties(tester: pytest.Pytester, family: str):
    result = tester.runpytest(*FRAGILE, "--junitxml=out.xml", "-o", f"junit_family={family}")
    out = text(result)
    assert "junit_family" not in out and "xunit" not in out and "INTERNALERROR" not in out
    warnings = [str(call.warning_message.message)
                for call in result.reprec.getcalls("pytest_warning_recorded")]  # type: ignore[attr-defined]
    assert not [w for w in warnings if re.search(r"junit|xunit|record_property", w, re.I)]
    result.assert_outcomes(passed=3, failed=2)  # obs_noise, sized by the spread, passes
    recs = records(result)
    suite, cases = junit(tester.path / "out.xml")
    assert set(cases) == {f"rl-audit::{name}" for name in DEFAULT}
    keys = ["rl.scenario", "rl.ratio", "rl.ci_low", "rl.ci_high", "rl.rating", "rl.nominal_mean",
            "rl.reference", "rl.p_value", "rl.episodes", "rl.diagnosis"]
    for name, (props, case) in cases.items():
        rec = recs[name]
        assert list(props) == keys
        assert all(isinstance(v, str) for v in props.values())
        assert props["rl.scenario"] == rec["scenario"]
        assert float(props["rl.ratio"]) == pytest.approx(rec["ratio"], abs=1e-6)
        assert float(props["rl.ci_low"]) <= float(props["rl.ratio"]) <= float(props["rl.ci_high"])
        assert props["rl.rating"] == rec["rating"] and props["rl.episodes"] == "4"
        assert float(props["rl.p_value"]) == pytest.approx(rec["p_value"], rel=1e-5)
        # what the ratio is a ratio of
        assert float(props["rl.nominal_mean"]) == pytest.approx(
            sum(rec["nominal_returns"]) / len(rec["nominal_returns"]), rel=1e-5)
        assert float(props["rl.reference"]) == rec["reference_score"] == 0
        if rec["diagnosis"] is not None:
            assert "Likely cause: " in props["rl.diagnosis"] and "Fix: " in props["rl.diagnosis"]
        failure = case.find("failure")
        assert (failure is not None) == (not rec["passed"])
        if failure is not None:
            # pytest >= 9.2 keeps only the first 500 characters of the attribute: they
            # must say what failed, by how much and what to do
            first = failure.get("message")[:500]
            assert first.startswith(f"{rec['rating']} under {rec['scenario']}: ratio "
                                    f"{rec['ratio']:.3f} (95% CI {rec['ci_low']:.3f} to "
                                    f"{rec['ci_high']:.3f}); required MILD or better")
            assert short_diagnosis(rec) and f"  fix: {short_diagnosis(rec)}" in first
            # the element text keeps the whole diagnosis
            assert "likely cause: " in failure.text and "fix: " in failure.text
    deployment = min((r for r in recs.values() if r["category"] == "deployment"),
                     key=lambda r: r["ratio"])
    assert suite["rl.deployment"] == deployment["rating"]
    assert suite["rl.stress"] == recs["rl-audit::speed_5x"]["rating"]


def test_junit_suite_properties_are_per_agent_when_several_are_audited(tester: pytest.Pytester):
    tester.makepyfile(test_two="""
        import pytest
        import agents

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("delay", "speed_5x")
        @pytest.mark.parametrize("agent", ["robust", "fragile"])
        def test_x(rl_audit, agent):
            rl_audit(agent=getattr(agents, agent))
    """)
    result = tester.runpytest(*CLI, "--junitxml=out.xml")
    result.assert_outcomes(passed=4)
    suite, _ = junit(tester.path / "out.xml")
    assert set(suite) == {f"rl.{c}[{a}@CartPole-v1]" for c in ("deployment", "stress")
                          for a in ("robust", "fragile")}
    assert all(v in RATINGS for v in suite.values())


# =============================================================================== reports


def test_rl_report_writes_json_markdown_chart_and_the_step_summary(
        tester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    step = tmp_path / "step_summary.md"
    step.write_text("previous step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    tester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = tester.runpytest(*ZERO, "--rl-report", "out/rl")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*rl audit report: out/rl/summary.json, out/rl/summary.md, "
                                 "out/rl/summary.png, out/rl/summary.svg*"])
    out = tester.path / "out" / "rl"
    doc = json.loads((out / "summary.json").read_text())
    assert (doc["schema"], doc["tool"], doc["version"], doc["seed"]) == (
        1, "pytest-rlaudit", pytest_rlaudit.__version__, 0)
    fields = {"nodeid", "agent", "env", "scenario", "category", "ratio", "ci_low", "ci_high",
              "p_value", "rating", "diagnosis", "episodes", "passed", "outcome"}
    assert [r["nodeid"] for r in doc["results"]] == [f"rl-audit::{n}" for n in DEFAULT]
    for rec in doc["results"]:
        assert fields <= set(rec), fields - set(rec)
        assert (rec["agent"], rec["env"], rec["episodes"]) == ("robust", "CartPole-v1", 4)
        assert rec["category"] == ("stress" if rec["scenario"] in STRESS else "deployment")
        assert rec["rating"] in RATINGS and rec["ci_low"] <= rec["ratio"] <= rec["ci_high"]
        assert rec["passed"] is True and rec["outcome"] == "passed"
    deployment = min((r for r in doc["results"] if r["category"] == "deployment"),
                     key=lambda r: r["ratio"])
    assert doc["aggregates"] == [{
        "agent": "robust", "env": "CartPole-v1", "nominal": 500.0,
        "episodes": len(doc["results"][0]["nominal_returns"]), "reference": 0.0,
        "reference_kind": "number", "inconclusive": None,
        "deployment": {"score": deployment["ratio"], "rating": deployment["rating"],
                       "scenario": deployment["scenario"]},
        "stress": {"score": doc["results"][-1]["ratio"], "rating": doc["results"][-1]["rating"],
                   "scenario": "speed_5x"},
        "mix": None}]  # nothing broke the robust agent
    # the default suite's scenarios as the registry has them, obs_noise (sized by the
    # agent's own spread) aside
    assert {r["scenario"]: r["mixable"] for r in doc["results"]} == {
        name: name != "obs_noise" for name in DEFAULT}

    md = (out / "summary.md").read_text()
    assert "| agent | env | scenario | n | nominal | ref | ratio | CI | rating | p | diagnosis |" in md
    rows = [line for line in md.splitlines() if line.startswith("| robust | CartPole-v1 |")]
    assert [row.split(" | ")[2] for row in rows] == list(DEFAULT)
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (out / "summary.svg").read_text()
    assert not list(out.glob(".*.tmp"))
    assert step.read_text() == "previous step\n" + md


def test_rl_report_is_written_when_every_audit_errors_and_lists_why(tester: pytest.Pytester):
    result = tester.runpytest("--rl-audit", "--rl-agent", "agents:no_such_agent", "--rl-env",
                              "CartPole-v1", "--rl-scenarios", "jitter,delay", "--rl-report", "out")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*= rl audit =*",
                                 "error: rl-audit::jitter (and 1 more: rl-audit::delay): "
                                 "*no_such_agent*",
                                 "*rl audit report: out/summary.json, out/summary.md*"])
    doc = json.loads((tester.path / "out" / "summary.json").read_text())
    assert doc["results"] == [] and doc["aggregates"] == []
    assert [(e["nodeid"], e["when"], e["same_as"]) for e in doc["errors"]] == [
        ("rl-audit::jitter", "call", None), ("rl-audit::delay", "call", "rl-audit::jitter")]
    assert "no_such_agent" in doc["errors"][0]["message"]
    assert doc["errors"][1]["message"].startswith("the same PolicyError as rl-audit::jitter")
    md = (tester.path / "out" / "summary.md").read_text()
    assert "No audit results." in md and "- error: `rl-audit::jitter`: " in md


def test_rl_report_without_rl_audit_writes_an_empty_summary_that_says_why(
        tester: pytest.Pytester):
    tester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = tester.runpytest("--rl-report", "out")
    result.assert_outcomes(passed=1)
    doc = json.loads((tester.path / "out" / "summary.json").read_text())
    assert doc["results"] == [] and doc["note"] == "audit tests were skipped: run with --rl-audit"
    assert "audit tests were skipped: run with --rl-audit" in (tester.path / "out" / "summary.md").read_text()


def test_the_report_line_is_on_a_line_of_its_own_in_quiet_mode(tester: pytest.Pytester):
    result = tester.runpytest(*ZERO, "--rl-scenarios", "delay", "--rl-report", "out", "-q")
    line = next(line for line in result.outlines if "rl audit report:" in line)
    assert re.match(r"-+ rl audit report: out/summary\.json", line), line


def test_xfailed_and_xpassed_audits_are_recorded_with_their_outcome(tester: pytest.Pytester):
    tester.makepyfile(test_xfail="""
        import pytest

        @pytest.mark.xfail(strict=True, reason="known fragile")
        @pytest.mark.rl_threshold(min_ratio=2.0)
        @pytest.mark.rl_scenario("jitter")
        def test_known_bad(rl_audit):
            rl_audit()

        @pytest.mark.xfail(strict=False)
        @pytest.mark.rl_scenario("delay")
        def test_maybe(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:robust", "--rl-report", "out", "-rxX")
    result.assert_outcomes(xfailed=1, xpassed=1)
    result.stdout.fnmatch_lines(["XFAIL test_xfail.py::test_known_bad[[]jitter[]]*"])
    doc = json.loads((tester.path / "out" / "summary.json").read_text())
    by_id = {r["nodeid"]: r for r in doc["results"]}
    bad = by_id["test_xfail.py::test_known_bad[jitter]"]
    assert (bad["outcome"], bad["passed"]) == ("xfailed", False)
    assert by_id["test_xfail.py::test_maybe[delay]"]["outcome"] == "xpassed"


def test_a_negative_return_env_without_a_reference_says_which_option_to_set(pytester):
    pytester.makepyfile(pend_agent="""
import numpy as np

def controller(obs):
    cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
    return np.clip(-(6.0 * np.arctan2(sin, cos) + 1.0 * vel), -2, 2)[:, None]
""")
    args = ["--rl-audit", "--rl-agent", "pend_agent:controller", "--rl-env", "Pendulum-v1",
            "--rl-scenarios", "obs_noise", "-p", "no:benchmark"]
    # any nominal return of Pendulum is negative: 4 episodes show it
    result = pytester.runpytest(*args, "--rl-episodes", "4")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*does not exceed the reference (0)*--rl-reference random*"])
    assert "Traceback" not in result.stdout.str() and "stats.py" not in result.stdout.str()
    # clearly beating random actions takes more (at 10 episodes the audit is INCONCLUSIVE)
    pytester.runpytest(*args, "--rl-episodes", "30", "--rl-reference", "random"
                       ).assert_outcomes(passed=1)


def test_settings_have_one_field_per_option():
    from dataclasses import fields

    from pytest_rlaudit.plugin.options import Settings

    assert [f"rl_{f.name}" for f in fields(Settings)] == [o.dest for o in OPTIONS]


def test_a_configuration_error_is_read_once_not_once_per_scenario(tester: pytest.Pytester):
    tester.makepyfile(stuck="""
        import numpy as np

        def left(obs):  # worse than random actions: the audit refuses to rate it
            return np.zeros(len(obs), dtype=np.int64)
    """)
    result = tester.runpytest("--rl-audit", "--rl-agent=stuck:left", "--rl-env=CartPole-v1",
                              "--rl-episodes=4", "-rf")
    result.assert_outcomes(failed=len(DEFAULT))
    out = result.stdout.str()
    first, *rest = [f"rl-audit::{name}" for name in DEFAULT]
    # the whole message (its list of usual causes) once, under the first scenario
    assert out.count("VecNormalize statistics missing or wrong") == 1
    for nodeid in rest:
        result.stdout.fnmatch_lines([f"FAILED {nodeid} - the same MisloadedAgentError as {first}*"])
    # the rl audit section folds them into one line
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {first} (and {len(rest)} more: {', '.join(rest)}): agent left "
                      "does no better than random actions: nominal mean return 9.8 against "
                      "28.8 for a uniform random policy on the same 4 episode seeds, so a "
                      "robustness ratio would measure nothing. Agents that load but do this "
                      "badly usually miss something they were trained with:"]
