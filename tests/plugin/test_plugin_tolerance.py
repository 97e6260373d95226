"""``@pytest.mark.rl_tolerance`` end to end, with ``pytester``: the curve of each scenario,
its verdict, the terminal line, JUnit properties, the summary.json record, the chart,
marker errors, and the same summary under xdist.

Agents are the cheap numpy controllers of ``cartpole_agents`` (``agents.py`` in each
pytester directory); runs are in-process.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

# Loaded here so that in-process pytester runs, which drop the modules they import, reuse
# them (numpy's compiled modules cannot be loaded twice in one process).
import gymnasium  # noqa: F401
import matplotlib.pyplot  # noqa: F401
import pytest
from audit_records import INTERRUPTED, bad_marker_run, collection_errors, records
from cartpole_agents import fragile
from inner_runs import without_figures

from pytest_rlaudit import audit, tolerance

CONFTEST = """
import pytest
import {module} as agents

@pytest.fixture(scope="session")
def rl_agent():
    return agents.fragile

@pytest.fixture(scope="session")
def rl_env():
    return "CartPole-v1"
"""

CURVES = """
import pytest

@pytest.mark.rl_tolerance()
@pytest.mark.rl_scenario("delay", "jitter", "speed_5x")
@pytest.mark.rl_episodes(4)
def test_curve(rl_audit):
    curve = rl_audit()
    assert curve.values[0] < curve.values[-1]

@pytest.mark.rl_scenario("delay")
@pytest.mark.rl_episodes(4)
def test_point(rl_audit):
    rl_audit()
"""


def junit_cases(path: Path) -> dict[str, dict[str, str]]:
    root = ET.parse(path).getroot()
    return {case.get("name"): {p.get("name"): p.get("value")
                               for p in case.findall("properties/property")}
            for case in root.iter("testcase")}


@pytest.fixture
def project(tester: pytest.Pytester) -> pytest.Pytester:
    tester.makeconftest(CONFTEST.format(module="agents"))
    tester.makepyfile(test_rl_curves=CURVES)
    return tester


def test_a_curve_test_reports_its_curve_in_every_report_and_the_same_summary_under_xdist(
        project: pytest.Pytester, tmp_path: Path):
    xml, out = tmp_path / "junit.xml", tmp_path / "rl"
    result = project.runpytest("--rl-audit", f"--junitxml={xml}", f"--rl-report={out}")
    # jitter breaks fragile at its own value; speed_5x breaks it too, but stress is not gated
    result.assert_outcomes(passed=3, failed=1)
    expected = {name: tolerance(fragile, "CartPole-v1", name, episodes=4)
                for name in ("delay", "jitter", "speed_5x")}
    assert (expected["delay"].tolerated, expected["delay"].breaks_at) == (3, 4)
    # the terminal: a line per curve, after the table
    result.stdout.fnmatch_lines([
        "*=== rl audit ===*",
        "delay: tolerates 3 steps, breaks at 4; ratio by steps: 1 0.915, 2 0.874, 3 0.829, "
        "4 0.714, 6 0.023, 8 0.021 (fragile on CartPole-v1)",
        "jitter: tolerates none of the values tested, breaks at jitter 1 (the mildest); "
        "ratio by jitter: 1 0.639, *",
        "speed_5x: tolerates k 3, breaks at 4; *",
    ])
    # the failure says where it broke, against what, and how to reproduce it
    shown = result.stdout.str()
    for line in [
        "RobustnessError: jitter: tolerates none of the values tested, breaks at jitter 1 (the "
        "mildest): at or below the scenario's own jitter 1 (ratio 0.639 < 0.8 at 1)",
        "  fix: train with Jitter(env, base=2, jitter=1)",
        "  what broke: jitter keeps 64% of the nominal return (DEGRADED);",
        "  curve: 1: 0.639, 2: 0.444, 3: 0.230, 4: 0.209, 6: 0.038 (jitter: ratio)",
        "  reproduce: tolerance(agent, 'CartPole-v1', 'jitter', param='jitter', values=[1, 2, "
        "3, 4, 6], min_ratio=0.8, episodes=4, seed=0)",
    ]:
        assert line in shown, line
    # the records: the point at the scenario's own value, and the curve
    recs = records(result)
    for name, curve in expected.items():
        rec = recs[f"test_rl_curves.py::test_curve[{name}]"]
        assert rec["tolerance"] == json.loads(json.dumps(curve.to_dict()))
        assert rec["scenario"] == name and rec["ratio"] == curve.at(curve.default).ratio
    assert recs["test_rl_curves.py::test_curve[jitter]"]["passed"] is False
    speed = recs["test_rl_curves.py::test_curve[speed_5x]"]
    assert (speed["gate"], speed["passed"]) == (None, True)
    # ... and the curve goes through the single-point audit of the same scenario
    point, curve = recs["test_rl_curves.py::test_point[delay]"], recs["test_rl_curves.py::test_curve[delay]"]
    assert point["tolerance"] is None
    for key in ("returns", "nominal_returns", "ratio", "ci_low", "ci_high", "rating", "params"):
        assert curve[key] == point[key], key
    # JUnit: the values as strings, "" for none
    cases = junit_cases(xml)
    assert (cases["test_curve[delay]"]["rl.tolerated"], cases["test_curve[delay]"]["rl.breaks_at"]) == ("3", "4")
    assert (cases["test_curve[jitter]"]["rl.tolerated"], cases["test_curve[jitter]"]["rl.breaks_at"]) == ("", "1")
    assert "rl.tolerated" not in cases["test_point[delay]"]
    # summary.json, summary.md and the chart
    doc = json.loads((out / "summary.json").read_text())
    assert [r["tolerance"] is not None for r in doc["results"]] == [True, True, True, False]
    md = (out / "summary.md").read_text()
    assert "### Tolerance curves" in md and "delay: tolerates 3 steps, breaks at 4 ✅" in md
    assert (out / "tolerance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (out / "tolerance.svg").read_text()
    # under xdist (-n 2: workers with rollouts of their own), the same summary, byte for byte
    # (its figures and page are drawn from summary.json alone, drawn above from the same
    # summary: this run writes it without matplotlib, no figures, some 3 CPU s less)
    n2 = tmp_path / "n2"
    with without_figures():
        result = project.runpytest("--rl-audit", "-p", "no:benchmark", "-n", "2",
                                   f"--rl-report={n2}")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["delay: tolerates 3 steps, breaks at 4; *"])
    assert (n2 / "summary.json").read_text() == (out / "summary.json").read_text()


def test_the_scenarios_own_value_is_measured_and_min_ratio_comes_from_rl_threshold(
        tester: pytest.Pytester):
    tester.makeconftest(CONFTEST.format(module="agents"))
    tester.makepyfile(test_lines="""
        import pytest

        @pytest.mark.rl_tolerance(values=[2, 3])
        @pytest.mark.rl_scenario("delay")
        @pytest.mark.rl_episodes(4)
        def test_default_line(rl_audit):
            rl_audit()

        @pytest.mark.rl_tolerance(values=[2, 3])
        @pytest.mark.rl_threshold(min_ratio=0.85)
        @pytest.mark.rl_scenario("delay")
        @pytest.mark.rl_episodes(4)
        def test_ratio_line(rl_audit):
            rl_audit()

        @pytest.mark.rl_tolerance(param="k", values=[2, 3])
        @pytest.mark.rl_threshold(min_rating="PASS")
        @pytest.mark.rl_scenario("spike", k=3)
        @pytest.mark.rl_episodes(4)
        def test_rating_line(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest("--rl-audit")
    recs = records(result)
    default = recs["test_lines.py::test_default_line[delay]"]["tolerance"]
    assert [p[0] for p in default["curve"]] == [1, 2, 3]  # delay's own steps=1 added
    assert (default["min_ratio"], default["tolerated"], default["breaks_at"]) == (0.8, 3, None)
    ratio = recs["test_lines.py::test_ratio_line[delay]"]["tolerance"]
    assert (ratio["min_ratio"], ratio["tolerated"], ratio["breaks_at"]) == (0.85, 2, 3)
    rating = recs["test_lines.py::test_rating_line[spike]"]
    assert rating["tolerance"]["min_ratio"] == 0.95 and rating["tolerance"]["default"] == 3
    assert rating["params"]["k"] == 3
    # 0.874 at 2 steps: breaks beyond the scenario's own value only, so it passes
    outcomes = {r.nodeid: r.outcome for r in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
                if r.when == "call"}
    assert outcomes["test_lines.py::test_ratio_line[delay]"] == "passed"
    assert outcomes["test_lines.py::test_rating_line[spike]"] == "failed"  # 0.837 at k=3


def test_the_returned_curve_matches_the_function(tester: pytest.Pytester):
    tester.makeconftest(CONFTEST.format(module="agents"))
    tester.makepyfile(test_same="""
        import pytest
        import agents
        from pytest_rlaudit import ToleranceCurve, tolerance

        @pytest.mark.rl_tolerance(values=[1, 4, 6])
        @pytest.mark.rl_scenario("action_delay")
        @pytest.mark.rl_episodes(3)
        def test_x(rl_audit):
            curve = rl_audit()
            assert isinstance(curve, ToleranceCurve)
            alone = tolerance(agents.fragile, "CartPole-v1", "action_delay", values=[1, 4, 6],
                              episodes=3)
            assert curve.curve == alone.curve
    """)
    tester.runpytest("--rl-audit").assert_outcomes(passed=1)


BAD_MARKERS = [
    ('@pytest.mark.rl_tolerance(params="steps")',
     ["@pytest.mark.rl_tolerance(param=None, values=None): rl_tolerance got an unexpected "
      "keyword argument 'params'"], True),
    ('@pytest.mark.rl_tolerance("steps", [1, 2], 3)',
     ["rl_tolerance", "takes from 0 to 2 positional arguments but 3 were given"], False),
    ('@pytest.mark.rl_tolerance(param=2)',
     ["@pytest.mark.rl_tolerance: param must be a parameter name (a string), got 2"], False),
    ('@pytest.mark.rl_tolerance(values="1, 2")',
     ["@pytest.mark.rl_tolerance: values must be a list of numbers, mildest first"], True),
    ('@pytest.mark.rl_tolerance(param="sigma")',
     ["@pytest.mark.rl_tolerance: scenario 'delay' sets no parameter 'sigma'; its parameters "
      "are steps"], False),
    ('@pytest.mark.rl_tolerance(values=[2, 1])',
     ["@pytest.mark.rl_tolerance: values must increase strictly, mildest first: 1 comes after 2"],
     False),
    ('@pytest.mark.rl_tolerance(values=[1, 1.5])',
     ["'delay''s parameter 'steps' takes integers, got 1.5"], False),
    ('@pytest.mark.rl_tolerance()\n@pytest.mark.rl_threshold(mode="confident")',
     ["rl_threshold(mode='confident') does not apply: drop mode"], False),
    ('@pytest.mark.rl_tolerance()\n@pytest.mark.rl_episodes(3, max_n=9)',
     ["runs a fixed number of episodes per value: drop rl_episodes' max_n"], False),
]


@pytest.mark.parametrize(("marker", "fragments", "always"), BAD_MARKERS,
                         ids=[m.split("\n")[-1] for m, _, _ in BAD_MARKERS])
def test_a_bad_rl_tolerance_marker_is_a_collection_error_that_says_which(
        pytester: pytest.Pytester, marker: str, fragments: list[str], always: bool):
    module = f"test_bad_{[m for m, _, _ in BAD_MARKERS].index(marker)}.py"
    # the marker's own arguments are checked either way (``always``: tried both ways, the
    # run without --rl-audit of those modules only); a scenario's parameters only when
    # audits run (the registry imports gymnasium)
    every = [f"test_bad_{i}.py" for i in range(len(BAD_MARKERS))]
    runs = {("--rl-audit",): every, (): [m for m, (_, _, a) in zip(every, BAD_MARKERS, strict=True) if a]}
    for args in (("--rl-audit",), ()) if always else (("--rl-audit",),):
        ret, out = bad_marker_run(pytester, [m for m, _, _ in BAD_MARKERS], "delay", args, runs[args])
        assert ret == INTERRUPTED, args
        errors = collection_errors(out)
        # every module run is an error of its own (none hides another's); this one's says
        # its own
        assert sorted(errors) == sorted(runs[args]), args
        section = errors[module]
        assert f"{module}::test_x" in section
        for fragment in fragments:
            assert fragment in section, (fragment, section)
        assert "INTERNALERROR" not in out


def test_rl_tolerance_without_rl_scenario_is_a_collection_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_bad="""
        import pytest

        @pytest.mark.rl_tolerance()
        def test_x(rl_audit):
            rl_audit()
    """)
    result = pytester.runpytest("--rl-audit")
    assert result.ret == INTERRUPTED
    result.stdout.fnmatch_lines(["*test_bad.py::test_x: @pytest.mark.rl_tolerance measures the "
                                 "tolerance curve of the test's scenario: add "
                                 "@pytest.mark.rl_scenario('delay')*"])


def test_the_point_audit_of_the_curve_is_the_single_point_audit():
    """What the records above rely on: the scenario's own value keeps its name."""
    curve = tolerance(fragile, "CartPole-v1", "delay", values=[1, 2], episodes=3)
    single = audit(fragile, "CartPole-v1", "delay", episodes=3)["delay"]
    assert curve.at(1).ratio == single.ratio and curve.at(1).ci == single.ci
