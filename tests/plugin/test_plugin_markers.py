"""The plugin's markers end to end, with ``pytester``: their documentation, one item per
``rl_scenario`` name, its params, the collection errors of bad markers (each module's own,
once, with the signature as documented), and every marker registered under
``--strict-markers``."""

from __future__ import annotations

import json

import pytest
from audit_records import INTERRUPTED, bad_marker_run, collection_errors, records
from plugin_cli import CLI, text


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
