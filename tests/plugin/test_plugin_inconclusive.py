"""INCONCLUSIVE through the plugin: an agent that does not clearly beat the reference fails
its gated items with one line that says why, and every output carries the rating and what
the ratios are ratios of (terminal, JUnit, summary.json and .md, the baseline)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import gymnasium  # noqa: F401  (kept loaded across in-process runs)
import pytest
from inner_runs import without_figures

AGENT = """
import numpy as np

def swing_up(obs):
    cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
    return np.clip(-(6.0 * np.arctan2(sin, cos) + 1.0 * vel), -2, 2)[:, None]
"""
ARGS = ("--rl-audit", "--rl-agent=pend:swing_up", "--rl-env=Pendulum-v1", "--rl-episodes=3",
        "--rl-reference=random", "--rl-scenarios=obs_noise,jitter", "-p", "no:cacheprovider")


def test_an_agent_that_does_not_clearly_beat_random_fails_and_every_output_says_why(
        pytester: pytest.Pytester):
    pytester.makepyfile(pend=AGENT)
    report, xml, base = (pytester.path / "report", pytester.path / "out.xml",
                         pytester.path / "base.json")
    # the report without matplotlib: summary.json and .md are read, the figures are not
    with without_figures():
        result = pytester.runpytest(*ARGS, f"--rl-report={report}", f"--junitxml={xml}",
                                    f"--rl-save={base}", "-rf")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    # the short summary's line starts with the essence, not an exception's dotted path
    # (at 80 columns, pytest's width here)
    result.stdout.re_match_lines([r"FAILED rl-audit::obs_noise - INCONCLUSIVE under obs_noise: "
                                  r"the agent does not\.\.\."])
    # the table: nominal and reference beside the ratio; the agent's line says why once
    assert re.search(r"swing_up +Pendulum-v1 +obs_noise +3 +-\d+\.\d +-\d+\.\d \(random\) "
                     r"+-?\d\.\d{3} .* INCONCLUSIVE ", out)
    assert out.count("  INCONCLUSIVE: the agent does not clearly beat random actions (") == 1
    assert "ratios of: nominal mean return" in out
    doc = json.loads((report / "summary.json").read_text())
    assert {r["rating"] for r in doc["results"]} == {"INCONCLUSIVE"}
    (agg,) = doc["aggregates"]
    assert agg["deployment"]["rating"] == "INCONCLUSIVE"
    assert agg["reference_kind"] == "random" and agg["episodes"] == 3
    assert agg["inconclusive"].startswith("the agent does not clearly beat random actions")
    md = (report / "summary.md").read_text()
    assert "❔ INCONCLUSIVE" in md and "does not clearly beat random actions" in md
    ratings = {p.get("value") for p in ET.parse(xml).getroot().iter("property")
               if p.get("name") == "rl.rating"}
    assert ratings == {"INCONCLUSIVE"}
    suite = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    assert suite["rl.deployment"] == "INCONCLUSIVE"
    # the baseline keeps the rating, and reads back
    saved = json.loads(base.read_text())
    assert {r["rating"] for r in saved["results"]} == {"INCONCLUSIVE"}
    compared = pytester.runpytest(*ARGS, f"--rl-compare={base}")
    compared.assert_outcomes(failed=2)
    compared.stdout.fnmatch_lines(["*comparisons show no significant change*"])


def test_reported_only_it_fails_nothing(pytester: pytest.Pytester):
    pytester.makepyfile(pend=AGENT)
    pytester.makeini("[pytest]\nrl_fail_stress = false\n")
    # stress scenarios are reported, not gated: INCONCLUSIVE there fails no test
    result = pytester.runpytest(*ARGS[:5], "--rl-scenarios=speed_5x", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*INCONCLUSIVE (not gated)*"])
