"""--rl-attribute and @pytest.mark.rl_attribute end to end: a failing observation
scenario is attributed to observation groups, and the terminal, JUnit XML,
summary.json and the HTML report say which; a passing or non-observation scenario is
left alone."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

# In-process pytester runs reuse these instead of importing them afresh on every run.
import gymnasium  # noqa: F401
import pytest
from browser import chromium

import pytest_rlaudit.verdicts.assertions  # noqa: F401  (the engine, and scipy with it)
from pytest_rlaudit import attribute
from pytest_rlaudit.auditing.records import validate
from pytest_rlaudit.scenarios import get

AGENTS = """
import numpy as np

def pole(obs):
    # balances CartPole from the pole's angle and angular velocity alone
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(int)
"""
namespace: dict[str, object] = {}
exec(AGENTS, namespace)
_pole = namespace["pole"]

MARKED = """
import pytest
from agents import pole

@pytest.mark.rl_audit
@pytest.mark.rl_scenario("delay", steps=3)
@pytest.mark.rl_episodes(8)
@pytest.mark.rl_attribute(groups={"cart": [0, 1], "pole": [2, 3]})
def test_pole(rl_audit):
    rl_audit(agent=pole, env="CartPole-v1")
"""


@pytest.fixture
def project(tester: pytest.Pytester) -> pytest.Pytester:
    tester.makepyfile(agents=AGENTS)
    return tester


def test_a_marked_test_names_the_sensor_its_failure_comes_through(project):
    project.makepyfile(test_pole=MARKED)
    result = project.runpytest("--rl-audit", "--junitxml=out.xml", "--rl-report=report",
                               "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*which sensor: delay breaks it through pole: pole alone keeps *, everything but "
        "pole keeps 100%; within them, pole[[]1[]] alone keeps *",
        "*test_pole.py::test_pole[[]delay[]]: which sensor: delay breaks it through pole*",
        "*group*size*alone*95% CI (2 contrasts)*all but*Shapley",
        "*cart*2*1.000*1.000 to 1.000*",
        "*groups: groups= as given; * runs of the episodes",
    ])
    props = {p.get("name"): p.get("value") for p in ET.parse(project.path / "out.xml").iter(
        "property")}
    assert props["rl.culprits"] == "pole[1]"
    assert props["rl.attribution"].startswith("delay breaks it through pole")
    assert props["rl.attribution_only"].startswith("cart=1.000000 pole=")
    doc = json.loads((project.path / "report" / "summary.json").read_text())
    (rec,) = doc["results"]
    validate(rec)
    said = rec["attribution"]
    assert said["kind"] == "attribution" and said["culprit_groups"] == ["pole"]
    assert said["only"]["cart"]["ratio"] == 1.0
    # the same numbers as attribute() on its own, which runs the whole scenario the
    # failing audit had already run: the plugin takes those episodes from the audit
    alone = attribute(_pole, "CartPole-v1", get("delay").with_params(steps=3), episodes=8,
                      groups={"cart": [0, 1], "pole": [2, 3]}).to_dict()
    assert said["runs"] == alone["runs"] - 1
    for key in ("full", "only", "all_but", "shapley", "culprits", "confirmed", "diagnosis"):
        assert said[key] == alone[key], key
    page = (project.path / "report" / "index.html").read_text()
    assert "<h4>Which sensor</h4>" in page and "delay breaks it through pole" in page
    assert page.count("<svg") >= 2  # the paired returns, and the groups' chart
    dom, console, shot = chromium(project.path / "report" / "index.html", project.path)
    assert "Which sensor" in dom and "on this group alone" in dom and not console
    assert shot.stat().st_size > 10_000


def test_the_option_attributes_failing_observation_scenarios_only(project):
    unmarked = MARKED.replace(
        '@pytest.mark.rl_attribute(groups={"cart": [0, 1], "pole": [2, 3]})\n', "")
    fast = unmarked.replace('"delay", steps=3', '"speed_5x"').replace("test_pole", "test_fast") \
        .replace("@pytest.mark.rl_audit\n", "@pytest.mark.rl_audit\n@pytest.mark.rl_threshold("
                 "min_rating='MILD')\n")  # a stress scenario, gated
    project.makepyfile(test_pole=unmarked + fast.replace("from agents import pole", ""))
    result = project.runpytest("--rl-audit", "--rl-attribute", "--junitxml=out.xml",
                               "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    # delay: groups from the env (one per element); speed_5x is no observation scenario
    result.stdout.fnmatch_lines(["*test_pole[[]delay[]]: which sensor: delay breaks it "
                                 "through dim_3*", "*groups: one group per element*"])
    assert "test_fast[speed_5x]: which sensor" not in result.stdout.str()
    props = [p.get("name") for p in ET.parse(project.path / "out.xml").iter("property")]
    assert props.count("rl.attribution") == 1
    # without the option or the marker, nothing is attributed
    result = project.runpytest("--rl-audit", "-p", "no:cacheprovider")
    assert "which sensor" not in result.stdout.str()


def test_groups_that_do_not_fit_the_env_leave_the_failure_a_robustness_failure(project):
    project.makepyfile(test_pole=MARKED.replace('"pole": [2, 3]', '"pole": [2, 9]'))
    result = project.runpytest("--rl-audit", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RobustnessError: DEGRADED under delay*",
                                 "*which sensor: not attributed: groups: 'pole' must be a "
                                 "slice or indices of the observation's 4 elements*"])


def test_a_malformed_marker_is_a_collection_error(project):
    project.makepyfile(test_pole=MARKED.replace(
        'groups={"cart": [0, 1], "pole": [2, 3]}', 'groups=["cart"]'))
    result = project.runpytest("--rl-audit", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*@pytest.mark.rl_attribute: groups must map two or more "
                                 "names to parts of the observation*"])
    assert result.ret != 0
