"""JUnit XML of audits, with ``pytester``: each test case's properties and failure message,
under both JUnit families, and the suite's properties, per agent when several are audited."""

from __future__ import annotations

import re

import pytest
from audit_records import records
from plugin_cli import CLI, FRAGILE, RATINGS, junit, text

from pytest_rlaudit.auditing.fixes import UNTESTED
from pytest_rlaudit.reports.rows import short_diagnosis
from pytest_rlaudit.scenarios import DEFAULT


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
            # the fix's first clause leads its line (the short form ends in the fix's
            # mark, which the whole fix carries at its end)
            clause = short_diagnosis(rec).removesuffix(f" ({UNTESTED})")
            assert clause and f"  fix: {clause}" in first
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
