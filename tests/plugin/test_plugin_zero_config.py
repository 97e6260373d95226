"""Zero-config audits (``--rl-audit --rl-agent ... --rl-env ...``, no test of the user's)
end to end, with ``pytester``: one item per default scenario beside plain tests, the
``rl_audit`` marker, ``--rl-workers`` and ``--rl-scenarios``, the deployment and stress
gates and the options that change them, the failure message, the ``-v`` progress lines,
and a configuration error read once."""

from __future__ import annotations

import json
import re

import pytest
from audit_records import records
from plugin_cli import FRAGILE, USAGE, ZERO, outcomes, text

from pytest_rlaudit.scenarios import DEFAULT, DEPLOYMENT

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
        # the agent as given, so that the line can be pasted
        "  reproduce: assert_robust('agents:fragile', 'CartPole-v1', 'spike', *episodes=4, seed=0)",
    ])
    result.stdout.fnmatch_lines(["FAILED rl-audit::spike - * under spike: ratio *"])
    out = text(result)
    assert "Traceback" not in out and "session.py" not in out and "raise " not in out
    assert not any(line.startswith("E   ") for line in result.outlines)


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


def test_rl_agent_without_paths_audits_that_agent_not_the_ini_testpaths(tester: pytest.Pytester):
    """In a clone of a project whose ini names testpaths, `pytest --rl-audit --rl-agent=X`
    is one audit, not the project's whole suite; a path on the command line runs its tests
    beside it, as before."""
    tester.makeini("[pytest]\ntestpaths = suite\n")
    suite = tester.mkdir("suite")
    # a test module that must not even be imported, and a failing test
    (suite / "test_slow.py").write_text("raise SystemExit('collected')\n")
    (suite / "test_plain.py").write_text("def test_plain():\n    assert False\n")
    alone = tester.runpytest(*ZERO, "--rl-scenarios=delay")
    assert alone.ret == 0, text(alone)
    assert list(outcomes(alone)) == ["rl-audit::delay"]
    alone.stdout.fnmatch_lines(["rl audit: only the --rl-agent audit ran, not the ini's testpaths;"
                                " name paths to run tests with it too (pytest tests/ "
                                "--rl-agent=...)"])
    (suite / "test_slow.py").unlink()
    both = tester.runpytest(*ZERO, "--rl-scenarios=delay", "suite")
    assert both.ret == pytest.ExitCode.TESTS_FAILED
    assert "suite/test_plain.py::test_plain" in outcomes(both)
    assert "only the --rl-agent audit ran" not in text(both)
