"""--rl-save, --rl-compare and --rl-compare-fail end to end, with pytester: saving, passing
and failing comparisons, mismatched, corrupt and partial baselines, reports, xdist."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

# In-process pytester runs reuse these instead of importing them afresh on every run.
import gymnasium  # noqa: F401
import hypothesis  # noqa: F401
import pytest
from inner_runs import without_figures

import pytest_rlaudit.verdicts.assertions  # noqa: F401  (the engine, and scipy with it)

SCENARIOS = ("--rl-scenarios", "spike,delay")


def zero_config(agent: str, *extra: str) -> tuple[str, ...]:
    return ("--rl-audit", "--rl-agent", f"agents:{agent}", "--rl-env", "CartPole-v1",
            "--rl-episodes", "10", *SCENARIOS, "-p", "no:cacheprovider", *extra)


@pytest.fixture(scope="module")
def _saved() -> dict[str, str]:
    """The text of the first baseline a test of this module (in this process) saved."""
    return {}


@pytest.fixture
def baseline(tester: pytest.Pytester, _saved: dict[str, str]):
    """A baseline of the robust agent, saved by a first run: the first test to ask for it
    saves it, the others get a copy of that file (the same run would save the same
    results; the test that reads the file checks what --rl-save wrote)."""
    path = tester.path / "baseline.json"
    if "text" in _saved:
        path.write_text(_saved["text"])
        return path
    result = tester.runpytest(*zero_config("robust", f"--rl-save={path}"))
    result.assert_outcomes(passed=2)
    _saved["text"] = path.read_text()
    return path


def test_save_writes_every_result_with_its_episodes(tester, baseline):
    doc = json.loads(baseline.read_text())
    assert doc["kind"] == "pytest-rlaudit baseline" and doc["schema"] == 1 and doc["complete"]
    assert doc["options"]["rl_seed"] == 0 and doc["options"]["rl_episodes"] == 10
    assert doc["machine"]["cpus"] and doc["version"]
    by_scenario = {r["scenario"]: r for r in doc["results"]}
    assert set(by_scenario) == {"spike", "delay"}
    spike = by_scenario["spike"]
    assert spike["seeds"] == list(range(10)) and len(spike["returns"]) == 10
    assert spike["nominal_returns"] == [500.0] * 10
    assert {"ratio", "ci_low", "ci_high", "rating", "agent", "env"} <= set(spike)
    assert spike["agent"] == "robust" and spike["env"] == "CartPole-v1"


def test_the_same_agent_compares_clean_and_ships_and_says_nothing_more(tester, baseline,
                                                                      tmp_path):
    junit = tmp_path / "junit.xml"
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={baseline}",
                                           "--rl-compare-fail", "return:5%",
                                           f"--junitxml={junit}"))
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*= rl audit comparison =*", "baseline *baseline.json: *",
                                 "5 of 5 comparisons show no significant change",
                                 "SHIP: no significant regression beyond return:5% in 5 comparisons"])
    # nothing failed: no word on what decided the exit (the test below has one)
    assert "fails all the same" not in result.stdout.str()
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["rl.compare"] == "ship"


def test_a_gate_that_ships_while_a_threshold_fails_says_what_decided_the_exit(tester, baseline):
    # the same agent: nothing regressed, so the gate says SHIP; but a stricter threshold
    # than it meets fails its tests, and the exit status is theirs
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={baseline}",
                                           "--rl-compare-fail", "return:5%",
                                           "--rl-min-ratio", "0.999"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    failed = result.parseoutcomes()["failed"]
    section = result.stdout.str().split("rl audit comparison", 1)[1].splitlines()
    ship = next(i for i, line in enumerate(section) if line.startswith("SHIP: "))
    assert section[ship + 1] == (
        f"the run fails all the same: {failed} test(s) failed; SHIP is about the baseline only")
    # (where nothing failed, nothing more is said: the test above)


def test_a_degraded_agent_fails_the_run_naming_each_regression(tester, baseline, tmp_path):
    report = tmp_path / "report"
    # Thresholds at FAIL: every test passes, so only the comparison can fail the run. The
    # report is written without matplotlib (no figures: not what this test reads, ~1 CPU s).
    with without_figures():
        result = tester.runpytest(*zero_config("fragile", f"--rl-compare={baseline}",
                                               "--rl-compare-fail", "return:5%",
                                               "--rl-compare-fail", "ratio:0.05",
                                               "--rl-min-rating", "FAIL",
                                               f"--rl-report={report}"))
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*= rl audit comparison =*",
        "rl-audit::spike",
        "  REGRESSED  spike: mean return 439.1 -> 216.9 (-222.2, -50.6%, p = *) beyond return:5%",
        "  REGRESSED  spike: ratio 0.878 -> 0.434 (-0.444, CI *) beyond ratio:0.05",
        # the rows above name the test: the decision counts them, in under 100 characters
        "HOLD: 2 significant regression(s) beyond return:5%, ratio:0.05 (listed above)",
    ])
    section = result.stdout.str().split("rl audit comparison", 1)[1].splitlines()
    assert max(len(line) for line in section[1:] if not line.startswith(("baseline ", "="))) <= 100
    doc = json.loads((report / "summary.json").read_text())
    assert doc["comparison"]["decision"] == "hold"
    assert {c["status"] for c in doc["comparison"]["changes"] if c["key"] == "rl-audit::spike"} == {
        "regressed"}
    md = (report / "summary.md").read_text()
    assert "### Compared with the baseline: ❌ **hold**" in md
    assert "| rl-audit::spike | spike | return | 439.1 | 216.9 | -222 | ❌ regressed |" in md


_FRAGILE_RUN: dict = {}


def _fragile_compared(tester: pytest.Pytester, baseline) -> tuple[pytest.RunResult, str]:
    """The fragile agent's run compared with the robust baseline, without fail tolerances,
    which saves its own results as a baseline too: run once per process, its output read by
    the report-only test and its saved baseline by the improvement test (a run that
    compares and saves at once saves the same results: test_xdist_saves_...)."""
    if not _FRAGILE_RUN:
        path = tester.path / "fragile.json"
        result = tester.runpytest(*zero_config("fragile", f"--rl-compare={baseline}",
                                               "--rl-min-rating", "FAIL", f"--rl-save={path}"))
        _FRAGILE_RUN.update(result=result, saved=path.read_text())
    return _FRAGILE_RUN["result"], _FRAGILE_RUN["saved"]


def test_without_fail_tolerances_a_comparison_only_reports(tester, baseline):
    result, _ = _fragile_compared(tester, baseline)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "rl-audit::spike",
        "  WORSE      spike: mean return 439.1 -> 216.9*",
        "REPORT ONLY: nothing gated (no --rl-compare-fail); "
        "* significant drop(s) (listed above)"])
    assert "SHIP" not in result.stdout.str() and "HOLD" not in result.stdout.str()


def test_an_improvement_is_reported(tester, baseline, tmp_path):
    path = tmp_path / "fragile.json"  # the fragile agent's baseline
    path.write_text(_fragile_compared(tester, baseline)[1])
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={path}",
                                           "--rl-compare-fail", "return:5%"))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["rl-audit::spike", "  IMPROVED   spike: mean return 216.9 -> 439.1*",
                                 "SHIP: * 2 improved"])


@pytest.mark.parametrize(("option", "value", "match"), [
    ("--rl-episodes", "8", "made with --rl-episodes 10, this run uses 8*--rl-episodes 10"),
    ("--rl-seed", "3", "made with --rl-seed 0, this run uses 3*--rl-seed 0"),
])
def test_a_baseline_made_with_other_options_is_a_usage_error(tester, baseline, option, value,
                                                             match):
    args = list(zero_config("robust", f"--rl-compare={baseline}"))
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    result = tester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --rl-compare *baseline.json: the baseline was {match}*"])


def test_a_result_made_on_other_seeds_cannot_be_compared_and_fails(tester, baseline):
    tester.makepyfile(test_marked='''
import pytest

@pytest.mark.rl_scenario("spike")
@pytest.mark.rl_episodes(6)
def test_spike(rl_audit):
    rl_audit()
''')
    # the baseline's zero-config items are not in this run; a marked test reuses one id
    doc = json.loads(baseline.read_text())
    doc["results"][0]["nodeid"] = "test_marked.py::test_spike[spike]"
    baseline.write_text(json.dumps(doc))
    result = tester.runpytest("--rl-audit", "--rl-agent", "agents:robust", "--rl-env",
                              "CartPole-v1", "--rl-episodes", "10", f"--rl-compare={baseline}",
                              "test_marked.py")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "CANNOT COMPARE  test_marked.py::test_spike?spike?: the baseline used 10 episodes with "
        "env seeds 0-9, this run 6 episodes with env seeds 0-5; *",
        "in the baseline, not in this run: rl-audit::delay",
        "HOLD: 1 result(s) cannot be paired with the baseline"])


def test_a_runs_baseline_against_one_agent_says_it_holds_runs_with_one_fix(tester, baseline):
    # as --rl-agent='runs/*.zip' saves it: every run's episodes, run after run (2 x 10)
    doc = json.loads(baseline.read_text())
    for rec in doc["results"]:
        rec.update(seeds=rec["seeds"] * 2, returns=rec["returns"] * 2,
                   nominal_returns=rec["nominal_returns"] * 2, agent="runs/*.zip", runs=2,
                   labels=["runs/a.zip", "runs/b.zip"], per_run=[rec["ratio"]] * 2,
                   nominal_means=[500.0, 500.0], nominal_iqm=500.0)
    baseline.write_text(json.dumps(doc))
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={baseline}",
                                           "--rl-compare-fail", "return:5%"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "CANNOT COMPARE  rl-audit::spike: the baseline holds 2 training runs of runs/[*].zip "
        "(10 episodes each, env seeds 0-9), this run audits one agent, robust (10 episodes "
        "with env seeds 0-9); a runs baseline pairs only with runs: compare runs with runs: "
        "pass --rl-agent a glob matching the baseline's runs (runs/a.zip, runs/b.zip), or "
        "save a new baseline with --rl-save from a run of this one agent",
        "HOLD: 2 result(s) cannot be paired with the baseline"])
    assert "--rl-episodes" not in result.stdout.str()  # no episode count to contradict


@pytest.mark.parametrize(("content", "match"), [
    ('{"kind": "pytest-rlaudit baseline", "schema": 1, "results": [{"nodeid"',
     "is not valid JSON*truncated*--rl-save*"),
    ('{"kind": "something else"}', "is not a pytest-rlaudit baseline*"),
])
def test_a_corrupt_baseline_is_a_usage_error(tester, content, match):
    path = tester.path / "corrupt.json"
    path.write_text(content)
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={path}"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: *corrupt.json {match}"])
    assert path.read_text() == content


def test_save_never_overwrites_a_file_that_is_not_a_baseline(tester):
    path = tester.path / "important.json"
    path.write_text('{"my": "data"}')
    result = tester.runpytest(*zero_config("robust", f"--rl-save={path}"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rl-save *important.json: the file exists and is not "
                                 "a valid baseline, so it is not overwritten*"])
    assert path.read_text() == '{"my": "data"}'


def test_save_replaces_a_baseline_and_compare_can_update_it_in_one_run(tester, baseline):
    before = json.loads(baseline.read_text())["created"]
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={baseline}",
                                           f"--rl-save={baseline}"))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["REPORT ONLY:*no significant drop*",
                                 "*rl audit baseline: saved 2 results to *baseline.json*"])
    assert json.loads(baseline.read_text())["created"] >= before


def test_a_partial_run_is_saved_marked_and_says_so(tester, tmp_path):
    path = tmp_path / "partial.json"
    result = tester.runpytest(*zero_config("fragile", f"--rl-save={path}", "-x"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*rl audit baseline: PARTIAL run saved to *partial.json (marked "
                                 "complete: false): *"])
    doc = json.loads(path.read_text())
    assert doc["complete"] is False
    assert doc["incomplete"] or doc["missing"]
    compared = tester.runpytest(*zero_config("fragile", f"--rl-compare={path}",
                                             "--rl-min-rating", "FAIL"))
    compared.stdout.fnmatch_lines(["baseline *partial.json: * (a PARTIAL run)"])


def test_nothing_is_saved_when_no_audit_ran(tester, tmp_path):
    tester.makepyfile(test_plain="def test_plain():\n    pass\n")
    path = tmp_path / "empty.json"
    result = tester.runpytest(f"--rl-save={path}", "test_plain.py")
    assert result.ret == 0 and not path.exists()
    # --rl-save on the command line turned auditing on; there was nothing to audit
    result.stdout.fnmatch_lines(["*rl audit baseline: nothing saved to *empty.json: no audit ran "
                                 "(no test here audits: mark one rl_audit, or give --rl-agent "
                                 "and --rl-env)*"])


@pytest.mark.parametrize(("args", "match"), [
    (("--rl-compare-fail", "return:5%"), "ERROR: --rl-compare-fail needs --rl-compare PATH*"),
    (("--rl-compare", "x.json", "--rl-compare-fail", "speed:5%"),
     "*--rl-compare-fail: *'speed:5%' is not a tolerance*"),
    (("--rl-compare", "missing.json"), "ERROR: baseline missing.json does not exist; create it "
                                       "with pytest --rl-audit --rl-save missing.json"),
])
def test_bad_compare_options_are_usage_errors(tester, args, match):
    result = tester.runpytest(*zero_config("robust", *args))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([match])


MARKED = '''
import pytest
from agents import robust


@pytest.fixture(scope="session")
def rl_agent():
    return robust


@pytest.fixture(scope="session")
def rl_env():
    return "CartPole-v1"


@pytest.mark.rl_scenario("jitter", "delay", "spike")
@pytest.mark.rl_episodes(6)
def test_x(rl_audit):
    rl_audit()
'''


def test_xdist_saves_the_same_results_as_one_process(tester, tmp_path):
    tester.makepyfile(test_marked_xdist=MARKED)
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    tester.runpytest("--rl-audit", f"--rl-save={one}").assert_outcomes(passed=3)
    # one xdist run (its workers are the costly part) saves and compares at once
    compared = tester.runpytest("--rl-audit", f"--rl-save={two}", f"--rl-compare={one}", "-n",
                                "2", "--rl-compare-fail", "return:5%")
    compared.assert_outcomes(passed=3)
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert a["results"] == b["results"] and a["complete"] and b["complete"]
    # 6 episodes over 4 mean-return rows: no drop could be significant, so never SHIP
    compared.stdout.fnmatch_lines(["7 of 7 comparisons show no significant change",
                                   "INCONCLUSIVE: return:5% could not fail: * use at least 7 "
                                   "episodes"])
    assert compared.ret == pytest.ExitCode.TESTS_FAILED


def test_compare_and_its_tolerances_can_live_in_the_ini_file(tester, baseline):
    tester.makeini(f"[pytest]\nrl_compare = {baseline}\nrl_compare_fail = return:5%, ratio:0.05\n")
    result = tester.runpytest(*zero_config("fragile", "--rl-min-rating", "FAIL"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["HOLD: 2 significant regression(s) beyond return:5%, ratio:0.05*"])


# ----------------------------------------------------------------- the gate's truth table


def _variant(baseline, case: str):
    """The baseline of each case: as saved, or made to share nothing, hold nothing, or
    hold the first 5 of its 10 episodes (seeds 0-4, the episodes a 5-episode run pairs)."""
    doc = json.loads(baseline.read_text())
    if case == "no pairs":
        for rec in doc["results"]:
            rec["nodeid"] = "elsewhere/" + rec["nodeid"]
    elif case == "empty baseline":
        doc["results"] = []
    elif case == "under-powered":
        for rec in doc["results"]:
            for key in ("seeds", "returns", "nominal_returns"):
                rec[key] = rec[key][:5]
        doc["options"]["rl_episodes"] = 5
    path = baseline.with_name(f"{case.replace(' ', '-')}.json")
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("case", "agent", "word", "why", "ret"), [
    ("no pairs", "robust", "INCONCLUSIVE",
     "nothing was compared: the baseline shares no test with this run (baseline: "
     "elsewhere/rl-audit::spike, elsewhere/rl-audit::delay; this run: rl-audit::spike, "
     "rl-audit::delay); check the baseline's node ids, and pass the baseline as "
     "--rl-compare=PATH *", 1),
    ("empty baseline", "robust", "INCONCLUSIVE", "nothing was compared: the baseline holds no "
     "results; save it again with --rl-save from a run that audits", 1),
    # spike's mean return halves on 5 episodes: 3 rows x 2^-5 > 0.05, no drop can be significant
    ("under-powered", "fragile", "INCONCLUSIVE", "return:5% could not fail: with 5 paired "
     "episodes no mean-return drop can be significant over 3 comparisons at alpha 0.05; use "
     "at least 6 episodes", 1),
    ("clear drop", "fragile", "HOLD", "1 significant regression(s) beyond return:5% (listed above)",
     1),
    ("clear pass", "robust", "SHIP", "no significant regression beyond return:5% in 5 "
     "comparisons", 0),
])
def test_the_gate_says_ship_only_when_it_could_have_failed(tester, baseline, case, agent, word,
                                                          why, ret):
    path = _variant(baseline, case)
    episodes = "5" if case == "under-powered" else "10"
    args = [*zero_config(agent, f"--rl-compare={path}", "--rl-compare-fail", "return:5%",
                         "--rl-min-rating", "FAIL")]
    args[args.index("--rl-episodes") + 1] = episodes
    result = tester.runpytest(*args)
    result.assert_outcomes(passed=2)  # only the gate can fail these runs
    result.stdout.fnmatch_lines([f"{word}: {why}"])
    assert result.ret == ret
    assert ("SHIP" in result.stdout.str()) == (word == "SHIP")


@pytest.mark.parametrize("case", ["no pairs", "empty baseline"])
def test_without_fail_tolerances_nothing_paired_is_report_only_never_ship(tester, baseline, case):
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={_variant(baseline, case)}"))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["REPORT ONLY: nothing gated (no --rl-compare-fail); "
                                 "nothing was compared: *"])
    assert "SHIP" not in result.stdout.str()


@pytest.mark.parametrize(("change", "match"), [
    ({"schema": -1}, "has schema -1, which no pytest-rlaudit writes: re-create it with "
                     "--rl-save on the baseline commit (this version reads schema 1)"),
    ({"schema": 2}, "has schema 2, from a newer pytest-rlaudit: upgrade pytest-rlaudit or "
                    "re-create it*"),
    ({"complete": "yes"}, "'complete' is a string, not true or false; re-create it*"),
    ({"options": []}, "'options' is a list, not an object; re-create it*"),
])
def test_a_baseline_of_another_schema_or_with_malformed_fields_is_a_usage_error(
        tester, change, match):
    path = tester.path / "odd.json"
    path.write_text(json.dumps({"kind": "pytest-rlaudit baseline", "schema": 1, "results": [],
                                **change}))
    result = tester.runpytest(*zero_config("robust", f"--rl-compare={path}"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: baseline *odd.json{'' if 'schema' in change else ':'} "
                                 f"{match}"])
