"""The terminal output of audits, with ``pytester``: the rl audit section after the tests
and its per-agent line, and a failed audit's diagnosis, said once, or beside the test's
own error."""

from __future__ import annotations

import re

import pytest
from audit_records import records
from plugin_cli import CLI, FRAGILE

from pytest_rlaudit.reports.rows import short_diagnosis
from pytest_rlaudit.scenarios import DEFAULT, STRESS


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
