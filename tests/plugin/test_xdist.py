"""The plugin under pytest-xdist: the same numbers and reports at any -n, crashes contained.

The main behaviours run without xdist's -n and with -n 2 (workers are real processes; each
reuses its own nominal rollouts); the cheap skipping test with -n 0 too. xdist turns -n 0
into its defaults (dist "no", no workers: xdist/plugin.py's pytest_cmdline_main), so an
audit at -n 0 runs exactly as without -n: one run each in-process for nothing more.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from contextlib import nullcontext

# Loaded here so that in-process pytester runs, which drop the modules they import, reuse
# them (numpy's compiled modules cannot be loaded twice in one process).
import gymnasium  # noqa: F401
import hypothesis  # noqa: F401
import matplotlib.pyplot  # noqa: F401
import numpy.fft  # noqa: F401
import pytest
from cartpole_agents import source
from inner_runs import without_figures

from pytest_rlaudit.auditing.diagnosis import UNTESTED

AGENTS = source()  # written as xdist_agents.py: module names must differ between pytester runs

MARKED = """
import pytest
import xdist_agents as agents

@pytest.fixture(scope="session")
def rl_agent():
    return agents.fragile

@pytest.fixture(scope="session")
def rl_env():
    return "CartPole-v1"

@pytest.mark.rl_scenario("jitter", "delay", "spike", "obs_noise")
@pytest.mark.rl_threshold(min_rating="MILD")
@pytest.mark.rl_episodes(5)
def test_fragile(rl_audit):
    rl_audit()

@pytest.mark.rl_scenario("jitter", "spike")
@pytest.mark.rl_episodes(5)
def test_robust(rl_audit):
    rl_audit(agent=agents.robust)

def test_plain():
    pass
"""

XFAIL = """
import pytest
import xdist_agents as agents

@pytest.mark.rl_scenario("spike", "delay")
@pytest.mark.rl_threshold(min_ratio=0.9)
@pytest.mark.rl_episodes(5)
@pytest.mark.xfail(strict=True, reason="the fragile agent falls over in a spike")
def test_spike(rl_audit):
    rl_audit(agent=agents.fragile, env="CartPole-v1")
"""

MODES = {"no-xdist": [], "n0": ["-n", "0"], "n2": ["-n", "2"]}


@pytest.fixture(params=list(MODES), ids=list(MODES))
def xdist_args(request) -> list[str]:
    return ["-p", "no:benchmark", *MODES[request.param]]


@pytest.fixture(params=["no-xdist", "n2"])
def audit_xdist_args(request) -> list[str]:
    """The modes an audit runs in differently (-n 0 is no -n: the module's docstring)."""
    return ["-p", "no:benchmark", *MODES[request.param]]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(xdist_agents=AGENTS, test_xdist_audit=MARKED)
    pytester.syspathinsert()
    return pytester


def _section(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ rl audit =+", line))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("=", "- rl")))
    return lines[start + 1:end]


def test_marked_audits_and_xfails_report_the_same_everywhere(project, tmp_path):
    # One run per mode of both files (the marked audits and the strict xfail): the same
    # outcomes, table, JUnit properties and summary.json, byte for byte, without xdist and
    # at -n 2 (2 workers for 9 tests: an uneven deal, each worker with its own nominal
    # rollouts; a third worker would add its start-up, not a case; -n 0 would repeat the
    # run without -n: the module's docstring).
    project.makepyfile(test_xdist_xfail=XFAIL)
    docs, tables = {}, {}
    for mode, args in {"no-xdist": [], "n2": ["-n", "2"]}.items():
        xml = tmp_path / f"{mode}.xml"
        report = tmp_path / mode
        # The report's figures and page are drawn from summary.json alone, which must be
        # the same in every mode: the n2 run (its controller in this process, as here)
        # draws them; the other writes it without figures (some 3 CPU s a run).
        with without_figures() if mode != "n2" else nullcontext():
            result = project.runpytest("--rl-audit", "-v", "-p", "no:benchmark", *args,
                                       f"--junitxml={xml}", f"--rl-report={report}")
        # fragile fails jitter and spike; the xfail's delay passes: strict xfail turns it red
        result.assert_outcomes(passed=5, failed=3, xfailed=1)
        rows = _section(result.stdout.str())
        tables[mode] = rows
        assert len([r for r in rows if "CartPole-v1" in r and not r.startswith((
            "fragile on", "robust on", "  train under"))]) == 8, mode
        assert any(r.startswith("fragile on CartPole-v1:") and "deployment" in r for r in rows)
        # weighted by the episodes' lengths; jitter and spike: no benchmark backs that mix
        assert any(r.startswith('  train under what broke it: ScenarioMix(gym.make('
                                '"CartPole-v1"), ["nominal", "jitter", "spike"]')
                   and r.endswith(f"({UNTESTED})") for r in rows), rows
        result.stdout.fnmatch_lines(["*RobustnessError: DEGRADED under jitter*",
                                     "*likely cause:*"])
        result.stdout.fnmatch_lines(["*rl audit: fragile / spike: ratio * DEGRADED*"])
        suite = ET.parse(xml).getroot().find("testsuite")
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        assert props["rl.deployment[fragile@CartPole-v1]"] == "DEGRADED"  # spike, 0.502
        cases = [c for c in suite.iter("testcase") if c.find("properties") is not None]
        assert len(cases) == 8, mode
        for case in cases:
            names = [p.get("name") for p in case.find("properties")]
            assert names[:2] == ["rl.scenario", "rl.ratio"] and "rl.diagnosis" in names
        docs[mode] = (report / "summary.json").read_text()
        doc = json.loads(docs[mode])
        marked = [r for r in doc["results"] if "test_xdist_audit" in r["nodeid"]]
        assert [r["scenario"] for r in marked] == [
            "jitter", "delay", "spike", "obs_noise", "jitter", "spike"]  # collection order
        outcomes = {r["scenario"]: (r["outcome"], r["passed"]) for r in doc["results"]
                    if "test_xdist_xfail" in r["nodeid"]}
        assert outcomes == {"spike": ("xfailed", False), "delay": ("failed", True)}
    # byte for byte: no timing field in the summary
    assert docs["no-xdist"] == docs["n2"]
    assert tables["no-xdist"] == tables["n2"]


def test_zero_config_items_run_and_fail_readably_everywhere(pytester, audit_xdist_args):
    pytester.makepyfile(xdist_agents=AGENTS)
    args = ("--rl-audit", "--rl-agent", "xdist_agents:fragile", "--rl-env", "CartPole-v1",
            "--rl-episodes", "4", *audit_xdist_args)
    if "-n" in audit_xdist_args:
        # In a subprocess, as a user runs it: `python -m pytest` puts the working
        # directory, and so the agents module, on the path of the controller and of
        # every worker.
        result = pytester.runpytest_subprocess(*args)
    else:  # one process runs the items: in-process, the directory on its path as there
        pytester.syspathinsert()
        result = pytester.runpytest(*args)
    result.assert_outcomes(failed=2, passed=3)  # jitter and spike; speed_5x is not gated
    assert len([r for r in _section(result.stdout.str()) if "CartPole-v1  " in r]) == 5
    result.stdout.fnmatch_lines([
        "* under spike: ratio *; required MILD or better",
        "*fix: train with SpeedSchedule.spike(env, start=20, duration=20, k=5)*",
    ])
    assert "Traceback" not in result.stdout.str() and "site-packages" not in result.stdout.str()


def test_audits_are_skipped_without_the_flag_everywhere(project, xdist_args):
    result = project.runpytest("-rs", *xdist_args)
    result.assert_outcomes(passed=1, skipped=6)
    result.stdout.fnmatch_lines(["*--rl-audit*"])


def test_the_plugin_works_with_xdist_disabled(project):
    project.makeconftest("""
def pytest_sessionfinish(session):
    has = session.config.pluginmanager.get_plugin("rlaudit-xdist") is not None
    print("XDIST-HOOKS", has)
""")
    result = project.runpytest("--rl-audit", "-s", "-p", "no:xdist", "-p", "no:benchmark")
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines(["*XDIST-HOOKS False*"])
    # and with xdist, its hooks are there (registered at configure: collecting shows it;
    # the audits at -n 0 are the other tests' business)
    result = project.runpytest("--rl-audit", "-s", "-n", "0", "-p", "no:benchmark", "--co")
    result.stdout.fnmatch_lines(["*XDIST-HOOKS True*"])


def test_a_crashed_worker_loses_only_its_own_scenario(pytester, tmp_path):
    pytester.makeconftest("""
import os
import gymnasium as gym
from pytest_rlaudit import Scenario, scenarios

class Crash(gym.Wrapper):
    def step(self, action):
        os._exit(3)  # an agent or env that kills its process

scenarios.register(Scenario("crash", "custom", Crash), replace=True)
""")
    pytester.makepyfile(xdist_agents=AGENTS, test_crash="""
import pytest
import xdist_agents as agents

@pytest.mark.rl_scenario("jitter", "crash", "delay", "spike")
@pytest.mark.rl_episodes(4)
def test_x(rl_audit):
    rl_audit(agent=agents.robust, env="CartPole-v1")
""")
    pytester.syspathinsert()
    report = tmp_path / "report"
    result = pytester.runpytest("--rl-audit", "-n", "2", "-p", "no:benchmark",
                                f"--rl-report={report}")
    result.assert_outcomes(passed=3, errors=1)
    assert result.ret != 0
    result.stdout.fnmatch_lines([
        "*crashed while running 'test_crash.py::test_x[[]crash[]]': the audit of scenario "
        "'crash' was lost*",
        "*lost: scenario crash (test_crash.py::test_x[[]crash[]])*",
    ])
    doc = json.loads((report / "summary.json").read_text())
    assert doc["lost"] == [{"nodeid": "test_crash.py::test_x[crash]", "scenario": "crash"}]
    assert sorted(r["scenario"] for r in doc["results"]) == ["delay", "jitter", "spike"]
