"""What the plugin's end-to-end modules (tests/plugin/test_plugin_*.py: options, markers,
skipping, fixtures, zero-config, terminal, JUnit, reports) share: the command lines they run
and what they read from an in-process pytester run (each test's outcome, the whole output,
a JUnit XML file).

Agents are cheap numpy controllers written into each pytester directory (``agents.py``);
runs are in-process (``runpytest``) except where process isolation is the point.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

# Loaded here, by every module that imports this one, so that in-process pytester runs
# (which drop the modules they import) reuse them instead of importing them afresh on every
# run (hypothesis's pytest plugin alone costs about 0.7 s per run otherwise).
import gymnasium  # noqa: F401
import hypothesis  # noqa: F401
import pytest

import pytest_rlaudit.reports.summary
import pytest_rlaudit.verdicts.assertions  # noqa: F401

RATINGS = ("PASS", "MILD", "DEGRADED", "FAIL")
USAGE = pytest.ExitCode.USAGE_ERROR

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
