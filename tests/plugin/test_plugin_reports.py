"""``--rl-report`` end to end, with ``pytester``: summary.json, summary.md, the chart and
GitHub's step summary; the report when every audit errors and without ``--rl-audit``; its
line in quiet mode; xfailed and xpassed audits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from plugin_cli import CLI, RATINGS, ZERO

import pytest_rlaudit
from pytest_rlaudit.scenarios import DEFAULT, STRESS


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
        "mix": None, "mix_mark": None}]  # nothing broke the robust agent
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
    tester.makepyfile(broken_agents="def broken(obs):\n    raise RuntimeError('no_such_agent')\n")
    result = tester.runpytest("--rl-audit", "--rl-agent", "broken_agents:broken", "--rl-env",
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
    assert doc["errors"][1]["message"].startswith("the same RolloutError as rl-audit::jitter")
    md = (tester.path / "out" / "summary.md").read_text()
    assert "No audit results." in md and "- error: `rl-audit::jitter`: " in md


def test_rl_report_lists_an_agent_that_could_not_be_loaded(tester: pytest.Pytester):
    result = tester.runpytest("--rl-audit", "--rl-agent", "agents:no_such_agent", "--rl-env",
                              "CartPole-v1", "--rl-scenarios", "jitter,delay", "--rl-report", "out")
    result.assert_outcomes(errors=1)  # a collection error: could not audit, not 2 failures
    result.stdout.fnmatch_lines(["*= rl audit =*", "error: rl-audit: *no_such_agent*"])
    doc = json.loads((tester.path / "out" / "summary.json").read_text())
    assert [(e["nodeid"], e["when"]) for e in doc["errors"]] == [("rl-audit", "collect")]
    assert "module 'agents' has no attribute 'no_such_agent'" in doc["errors"][0]["message"]


def test_rl_report_without_rl_audit_writes_an_empty_summary_that_says_why(
        tester: pytest.Pytester):
    # from the ini file (on the command line it turns auditing on: test_could_not_audit.py)
    tester.makeini("[pytest]\nrl_report = out\n")
    tester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = tester.runpytest()
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
