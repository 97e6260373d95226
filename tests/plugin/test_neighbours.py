"""Beside the plugins users already run: pytest-rerunfailures, pytest-randomly, pytest-html,
an --rl-compare path pytest took for a test path, and ``-p no:rlaudit``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from contextlib import nullcontext

# In-process pytester runs reuse these instead of importing them afresh on every run. (The
# inner test modules have names no module of this suite has: the suite's test_html.py,
# imported under that name, would shadow an inner test_html.py.)
import gymnasium  # noqa: F401
import pytest
from inner_runs import without_figures

import pytest_rlaudit.verdicts.assertions  # noqa: F401  (the engine, and scipy with it)

# the plugins this module is about, which other inner runs leave out (tests/inner_runs.py)
pytestmark = pytest.mark.inner_plugins(
    "rewrite", "randomly", "html", "html_fixtures", "metadata")

AUDITS = '''
import pytest
from agents import fragile, robust

@pytest.fixture(scope="session")
def rl_agent():
    return robust

@pytest.fixture(scope="session")
def rl_env():
    return "CartPole-v1"
'''

RERUNS = AUDITS + '''
ATTEMPTS = []

@pytest.mark.rl_scenario("delay")
@pytest.mark.rl_episodes(4)
def test_passes(rl_audit):
    rl_audit()

@pytest.mark.rl_scenario("spike")
@pytest.mark.rl_episodes(4)
@pytest.mark.rl_threshold(min_ratio=0.99)
def test_fails(rl_audit):
    rl_audit(agent=fragile)

@pytest.mark.rl_scenario("jitter")
@pytest.mark.rl_episodes(4)
@pytest.mark.rl_threshold(min_ratio=0.99)
def test_audits_once_then_breaks_before_it(rl_audit):
    ATTEMPTS.append(1)
    if len(ATTEMPTS) > 1:
        raise RuntimeError("this attempt ran no audit")
    rl_audit(agent=fragile)
'''


def test_reruns_leave_one_record_per_test_the_last_attempt(tester: pytest.Pytester, tmp_path):
    tester.makepyfile(test_reruns=RERUNS)
    report, junit, base = tmp_path / "report", tmp_path / "junit.xml", tmp_path / "base.json"
    # the report without matplotlib: its summary.json and .md are read, not its figures
    with without_figures():
        result = tester.runpytest("--rl-audit", "--reruns", "2", f"--rl-report={report}",
                                  f"--rl-save={base}", f"--junitxml={junit}",
                                  "-p", "no:cacheprovider")
    assert result.parseoutcomes() == {"passed": 1, "failed": 2, "rerun": 4}
    text = result.stdout.str()
    # the terminal table: one row per audited test
    rows = re.findall(r"^ *(robust|fragile) +CartPole-v1 +(\w+) +\d+ +[\d.]+ +0\.0 +\d\.\d{3} ", text, re.M)
    assert rows == [("robust", "delay"), ("fragile", "spike")]
    result.stdout.fnmatch_lines(["error: test_reruns.py::test_audits_once_then_breaks_before_it[[]jitter]: "
                                 "RuntimeError: this attempt ran no audit",
                                 "*rl audit baseline: PARTIAL run saved to *base.json*"])
    doc = json.loads((report / "summary.json").read_text())
    assert [r["nodeid"] for r in doc["results"]] == ["test_reruns.py::test_passes[delay]",
                                                     "test_reruns.py::test_fails[spike]"]
    md = (report / "summary.md").read_text()
    assert md.count("| robust |") + md.count("| fragile |") == 2
    saved = json.loads(base.read_text())
    assert [r["nodeid"] for r in saved["results"]] == [r["nodeid"] for r in doc["results"]]
    cases = {c.get("name"): [p.get("value") for p in c.iter("property") if p.get("name")
                             == "rl.scenario"]
             for c in ET.parse(junit).getroot().iter("testcase")}
    # no stale record on the attempt that ran no audit; one set of properties each
    assert cases == {"test_passes[delay]": ["delay"], "test_fails[spike]": ["spike"],
                     "test_audits_once_then_breaks_before_it[jitter]": []}
    # the gate compares each test once: each agent's nominal, each record's return and ratio
    compared = tester.runpytest("--rl-audit", "--reruns", "2", f"--rl-compare={base}",
                                "-p", "no:cacheprovider")
    compared.stdout.fnmatch_lines(["6 of 6 comparisons show no significant change"])


RANDOMLY_A = AUDITS + '''
@pytest.mark.rl_scenario("spike")
@pytest.mark.rl_episodes(3)
def test_spike(rl_audit):
    rl_audit(agent=fragile)

@pytest.mark.rl_scenario("jitter")
@pytest.mark.rl_episodes(3)
def test_jitter(rl_audit):
    rl_audit(agent=fragile)
'''

RANDOMLY_B = AUDITS + '''
@pytest.mark.rl_scenario("delay")
@pytest.mark.rl_episodes(3)
def test_delay(rl_audit):
    rl_audit(agent=fragile)

@pytest.mark.rl_scenario("speed_5x")
@pytest.mark.rl_episodes(3)
def test_fast(rl_audit):
    rl_audit(agent=fragile)
'''


def test_randomly_shuffles_the_run_but_not_the_report(tester: pytest.Pytester, tmp_path):
    tester.makepyfile(test_shuffled_a=RANDOMLY_A, test_shuffled_b=RANDOMLY_B)
    runs, docs = [], []
    for seed in (1, 2):
        report = tmp_path / f"report{seed}"
        # seed 2's report without figures: its summary.json is compared, its figures are
        # not (~1 CPU s)
        with without_figures() if seed == 2 else nullcontext():
            result = tester.runpytest("--rl-audit", "-p", "randomly", f"--randomly-seed={seed}",
                                      "--rl-min-rating", "FAIL", f"--rl-report={report}", "-v",
                                      "-p", "no:cacheprovider")
        result.assert_outcomes(passed=4)
        runs.append(re.findall(r"^(test_shuffled_\w\.py::\S+) PASSED", result.stdout.str(),
                               re.M))
        docs.append((report / "summary.json").read_bytes())
    assert runs[0] != runs[1], "the two seeds should run the tests in other orders"
    assert docs[0] == docs[1]
    doc = json.loads(docs[0])
    assert [r["scenario"] for r in doc["results"]] == ["spike", "jitter", "delay", "speed_5x"]
    assert doc["aggregates"][0]["mix"].startswith('ScenarioMix(gym.make("CartPole-v1"), '
                                                  '["nominal", "spike", "jitter"')


HTML = AUDITS + '''
@pytest.mark.rl_scenario("delay", "speed_5x")
@pytest.mark.rl_episodes(3)
def test_x(rl_audit):
    rl_audit(agent=fragile)
'''


def test_pytest_html_shows_each_passed_audits_scenario_line(tester: pytest.Pytester, tmp_path):
    tester.makepyfile(test_beside_html=HTML)
    page = tmp_path / "page.html"
    result = tester.runpytest("--rl-audit", f"--html={page}", "--self-contained-html",
                              "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)  # speed_5x is stress: rated FAIL, reported, not gated
    text = page.read_text()
    assert re.search(r"fragile on CartPole-v1, scenario delay: ratio \d\.\d{3} \(\d\.\d{3} to "
                     r"\d\.\d{3}\), (PASS|MILD|DEGRADED|FAIL)", text)
    assert re.search(r"fragile on CartPole-v1, scenario speed_5x: ratio \d\.\d{3} \(\d\.\d{3} "
                     r"to \d\.\d{3}\), FAIL \(not gated\)", text)


def test_a_compare_path_pytest_took_for_a_test_path_is_a_usage_error_naming_the_fix(
        tester: pytest.Pytester):
    tester.makepyfile(test_beside_html=HTML)
    outside = tester.path.parent / f"{tester.path.name}-baseline.json"
    tester.runpytest("--rl-audit", f"--rl-save={outside}", "-p", "no:cacheprovider")
    given = f"../{outside.name}"
    # "--rl-compare PATH": pytest reads PATH as a test path too when it chooses the rootdir
    # (the plugin's options are not known yet), which would rename every test: refused
    result = tester.runpytest("--rl-audit", "--rl-compare", given, "--rl-compare-fail",
                              "return:5%", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest read '--rl-compare {given}' as a test path too when it chose its "
        f"rootdir and ini file *: every test id would change. Write the option and its value "
        f"as one word, which pytest never takes for a test path: --rl-compare={given}"])
    fixed = tester.runpytest("--rl-audit", f"--rl-compare={given}", "-p", "no:cacheprovider")
    fixed.stdout.fnmatch_lines(["REPORT ONLY: *no significant drop in 5 comparisons*"])


def test_no_rlaudit_unloads_the_plugin(tester: pytest.Pytester):
    tester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = tester.runpytest("-p", "no:rlaudit", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "rl audit" not in result.stdout.str()
    helped = tester.runpytest("-p", "no:rlaudit", "--help")
    assert "--rl-audit" not in helped.stdout.str() and "rlaudit" not in helped.stdout.str()
    refused = tester.runpytest("-p", "no:rlaudit", "--rl-audit")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*unrecognized arguments: --rl-audit*"])
