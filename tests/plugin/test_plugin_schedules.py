"""Property tests over schedules under the plugin: the smallest failing schedule reaches the
terminal section, the failure's diagnosis, JUnit XML and summary.json; assert_robust calls
in ordinary tests are reported like audits; a hypothesis test's examples share nominals."""

from __future__ import annotations

import glob
import json
import re
import xml.etree.ElementTree as ET
from contextlib import nullcontext
from pathlib import Path

# In-process pytester runs reuse these instead of importing them afresh on every run.
import gymnasium  # noqa: F401
import hypothesis  # noqa: F401
import pytest
from cartpole_agents import fragile
from inner_runs import without_figures

import pytest_rlaudit.reports.summary
import pytest_rlaudit.strategies
import pytest_rlaudit.verdicts.falsify
from pytest_rlaudit import Schedule
from pytest_rlaudit.verdicts.assertions import check_robust

CONFTEST = '''
import pytest


@pytest.fixture(scope="session")
def rl_env():
    return "CartPole-v1"
'''

PROPERTY_TESTS = '''
from hypothesis import given
from pytest_rlaudit import assert_robust
from pytest_rlaudit.strategies import audit_settings, schedules
from agents import fragile, robust

DETERMINISTIC = dict(derandomize=True, database=None)


# one event: the same smallest failing schedule (speed=[1, 4]) in 20 checks instead of 35
@audit_settings(max_examples=15, **DETERMINISTIC)
@given(schedule=schedules(kinds=("speed",), max_steps=40, max_events=1))
def test_fragile_agent(rl_env, schedule):
    assert_robust(fragile, rl_env, schedule, min_ratio=0.8, episodes=4)


@audit_settings(max_examples=4, **DETERMINISTIC)
@given(schedule=schedules(kinds=("obs_noise",), max_noise=0.05, max_steps=10, max_events=1))
def test_robust_agent_mild(rl_env, schedule):
    assert_robust(robust, rl_env, schedule, min_ratio=0.8, episodes=3)
'''


@pytest.fixture
def project(tester: pytest.Pytester) -> pytest.Pytester:
    tester.makeconftest(CONFTEST)
    return tester


def _properties(xml_path) -> dict[str, dict[str, str]]:
    root = ET.parse(xml_path).getroot()
    return {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
            for case in root.iter("testcase")}


# Counts the engine's rollouts in the run without xdist (in-process: test_count reads
# them): the nominal-episodes test below reads that run's test_count instead of searching
# test_fragile_agent's schedules a third time.
COUNTING = CONFTEST + '''
import pytest_rlaudit.auditing.settings as A  # where the engine runs episodes

CALLS = []
_run = A.run_episodes


def _counting(policy, env, scenarios, *args, **kwargs):
    if policy.name != "random":  # the random reference's rollouts come through here too
        CALLS.append((policy.name, tuple(s.name for s in scenarios)))
    return _run(policy, env, scenarios, *args, **kwargs)


def pytest_configure(config):
    A.run_episodes = _counting


def pytest_unconfigure(config):
    A.run_episodes = _run
'''

COUNT = '''
def test_count():
    import conftest

    assert conftest.CALLS.count(("fragile", ("nominal",))) == 1
    assert conftest.CALLS.count(("fragile", ("schedule",))) >= 5
'''

_SCHEDULE_RUNS: dict[str, tuple[pytest.RunResult, Path]] = {}


def _schedule_runs(project: pytest.Pytester, tmp_path: Path, *modes: str) -> dict[
        str, tuple[pytest.RunResult, Path]]:
    """PROPERTY_TESTS run without xdist (after them, COUNT) and at -n 2 (the result, and
    the folder of its junit.xml and report/), each made once per process when a test first
    asks for it: each case of the test below reads its own (and the n2 case the other's
    summary.json), the nominal-episodes test the first alone (an xdist worker of this
    suite that runs only that test makes only that run). Their summary.json is the same
    (checked below), so only the first draws the report's figures from it: the -n 2 run,
    whose controller is this process, writes it without matplotlib (no figures, some 2 CPU
    s less)."""
    for mode in modes:
        if mode in _SCHEDULE_RUNS:
            continue
        project.makeconftest(COUNTING)
        project.makepyfile(test_sched_reports=PROPERTY_TESTS, test_sched_count=COUNT)
        args = (["test_sched_reports.py", "test_sched_count.py"] if mode == "no-xdist"
                else ["-n", "2", "test_sched_reports.py"])
        folder = tmp_path / mode
        with without_figures() if mode == "n2" else nullcontext():
            result = project.runpytest("--rl-audit", f"--junitxml={folder / 'junit.xml'}",
                                       f"--rl-report={folder / 'report'}", *args)
        _SCHEDULE_RUNS[mode] = result, folder
    return _SCHEDULE_RUNS


@pytest.mark.parametrize("mode", ["no-xdist", "n2"])
def test_the_smallest_failing_schedule_reaches_every_report(project, tmp_path, mode):
    runs = _schedule_runs(project, tmp_path, "no-xdist", mode)
    result, folder = runs[mode]
    junit, report = folder / "junit.xml", folder / "report"
    result.assert_outcomes(passed=1 if mode == "n2" else 2, failed=1)  # and test_count
    assert ("created: 2/2 workers" in result.stdout.str()) == (mode == "n2")
    # the same summary.json in both modes, byte for byte (the figures are drawn from it)
    assert (report / "summary.json").read_text() == (
        runs["no-xdist"][1] / "report" / "summary.json").read_text()
    # hypothesis prints the example with our repr, not as the strategy's mapping call
    shown_as = [line for line in result.outlines if re.search(r"\bschedule=(?!schedules\()", line)]
    assert shown_as and all("schedule=Schedule(" in line for line in shown_as), shown_as
    falsifying = shown_as[0]
    shown = falsifying[falsifying.index("Schedule("):].rstrip(",) ")
    if shown.count("(") > shown.count(")"):
        shown += ")"
    schedule = eval(shown, {"Schedule": Schedule})  # hypothesis prints our repr

    # the terminal section names it in plain words, with the expression that rebuilds it
    words = schedule.describe()
    result.stdout.fnmatch_lines([
        "*= rl audit =*",
        f"test_sched_reports.py::test_fragile_agent: smallest failing schedule: breaks when "
        f"{words} (ratio *): {glob.escape(repr(schedule))}",
    ])
    # the failure's message: its diagnosis, once
    result.stdout.fnmatch_lines([f"E         what broke: breaks when {words}: keeps*"])
    assert "rl audit diagnosis" not in result.stdout.str()
    # JUnit
    props = _properties(junit)["test_fragile_agent"]
    assert props["rl.scenario"] == "schedule" and props["rl.schedule"] == words
    assert props["rl.schedule_repr"] == repr(schedule)
    assert props["rl.diagnosis"].startswith(f"breaks when {words}: keeps")
    assert props["rl.rating"] in ("DEGRADED", "FAIL")
    # summary.json carries the timeline itself, which rebuilds the same schedule
    doc = json.loads((report / "summary.json").read_text())
    rec = next(r for r in doc["results"] if r["nodeid"].endswith("test_fragile_agent"))
    assert rec["schedule"]["description"] == words and not rec["passed"] and rec["hypothesis"]
    assert Schedule.from_dict(rec["schedule"]["timeline"]) == schedule
    assert f"`{schedule!r}`: breaks when {words}" in (report / "summary.md").read_text()
    assert not check_robust(fragile, "CartPole-v1", schedule, min_ratio=0.8, episodes=4).passed
    # the passing property test reports its closest call over all its examples
    mild = next(r for r in doc["results"] if r["nodeid"].endswith("test_robust_agent_mild"))
    assert mild["passed"] and mild["checks"] >= 2 and mild["rating"] == "PASS"


def test_a_property_test_on_the_rl_fixtures_passes_the_health_check(project):
    """rl_agent and rl_env are session-scoped: @given tests may use them (hypothesis refuses
    function-scoped fixtures, which are not reset between examples)."""
    project.makepyfile(test_sched_health='''
from hypothesis import given
from pytest_rlaudit import assert_robust
from pytest_rlaudit.strategies import audit_settings, schedules


@audit_settings(max_examples=3, derandomize=True, database=None)
@given(schedule=schedules(kinds=("delay",), max_delay=1, max_steps=5, max_events=1))
def test_delay(rl_agent, rl_env, schedule):
    assert_robust(rl_agent, rl_env, schedule, min_ratio=0.5, episodes=3)
''')
    result = project.runpytest("--rl-audit", "--rl-agent", "agents:robust")
    result.assert_outcomes(passed=1)
    assert "HealthCheck" not in result.stdout.str()


def test_a_hypothesis_test_runs_its_nominal_episodes_once(project, tmp_path):
    result = _schedule_runs(project, tmp_path, "no-xdist")["no-xdist"][0]
    counted = [rep for rep in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
               if rep.nodeid == "test_sched_count.py::test_count" and rep.when == "call"]
    assert [rep.outcome for rep in counted] == ["passed"], result.stdout.str()
    assert pytest_rlaudit.auditing.settings.run_episodes.__name__ == "run_episodes"


def test_assert_robust_in_an_ordinary_test_is_reported_like_an_audit(project, tmp_path):
    project.makepyfile(test_plain_checks='''
import pytest
from pytest_rlaudit import assert_robust, RobustnessError
from agents import fragile, robust


def test_two_checks():
    assert_robust(robust, "CartPole-v1", "delay", min_ratio=0.8, episodes=3)
    with pytest.raises(RobustnessError):
        assert_robust(fragile, "CartPole-v1", "spike", min_ratio=0.8, episodes=3)


def test_no_checks():
    pass
''')
    junit = tmp_path / "junit.xml"
    result = project.runpytest(f"--junitxml={junit}")  # no --rl-audit: these are unit tests
    result.assert_outcomes(passed=2)
    props = _properties(junit)
    assert props["test_two_checks"]["rl.scenario"] == "spike"  # the worst of its checks
    assert props["test_two_checks"]["rl.rating"] == "FAIL"
    assert props["test_no_checks"] == {}
    result.stdout.fnmatch_lines(["*= rl audit =*", "fragile*CartPole-v1*spike*FAIL*"])


def test_schedules_in_the_rl_scenario_marker(project):
    project.makepyfile(test_sched_marker='''
import pytest
from pytest_rlaudit import Schedule


@pytest.mark.rl_scenario(Schedule.spike(at=10, duration=3, speed=2))
@pytest.mark.rl_threshold(min_ratio=0.5)
@pytest.mark.rl_episodes(3)
def test_marker(rl_audit):
    rl_audit(agent="agents:robust")
''')
    result = project.runpytest("--rl-audit", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_marker?schedule? PASSED*"])
    skipped = project.runpytest()
    skipped.assert_outcomes(skipped=1)
