"""Unit tests of the report renderers (pytest_rlaudit.reports.summary) on hand-made records."""

from __future__ import annotations

import json
import os
import sys
from html import unescape as html_unescape
from pathlib import Path
from typing import Any

import pytest

from pytest_rlaudit.auditing.diagnosis import BENCHMARKED, UNTESTED
from pytest_rlaudit.reports import summary as report
from pytest_rlaudit.reports.markdown import markdown
from pytest_rlaudit.reports.rows import short_diagnosis, table_rows
from pytest_rlaudit.reports.summary import SUMMARY_SCHEMA, aggregates, summary, write_report
from pytest_rlaudit.reports.terminal import audit_section

DEFAULT_THRESHOLDS = {"pass": 0.95, "mild": 0.8, "degraded": 0.5}
FIX = ("train with Jitter(env, base=2, jitter=1) (a randomised control period); add the "
       "elapsed time to the observation")


def _rating(ratio: float, t: dict[str, float] = DEFAULT_THRESHOLDS) -> str:
    if ratio > t["pass"]:
        return "PASS"
    if ratio > t["mild"]:
        return "MILD"
    return "DEGRADED" if ratio > t["degraded"] else "FAIL"


def rec(scenario: str, ratio: float, *, agent: str = "PPO", env: str = "CartPole-v1",
        category: str | None = None, order: int | None = None, nodeid: str | None = None,
        p_value: float | None = 0.01, diagnosis: dict[str, str] | None = None,
        thresholds: dict[str, float] | None = None, **extra: Any) -> dict[str, Any]:
    thresholds = thresholds or DEFAULT_THRESHOLDS
    category = category or ("stress" if scenario == "speed_5x" else "deployment")
    gate = None if category == "stress" else {"min_ratio": None, "min_rating": "MILD",
                                              "mode": "point"}  # as the plugin gates
    out = {
        "nodeid": nodeid or f"test_x.py::test_x[{scenario}]",
        "agent": agent, "env": env, "scenario": scenario,
        "category": category,
        "episodes": 30, "seed": 0, "ratio": ratio,
        "ci_low": max(0.0, ratio - 0.1), "ci_high": min(1.0, ratio + 0.05),
        "confidence": 0.95, "p_value": p_value, "rating": _rating(ratio, thresholds),
        "diagnosis": diagnosis, "gate": gate, "passed": True, "thresholds": thresholds,
        "nominal_returns": [500.0] * 30, "reference": 0, "reference_score": 0.0,
        **extra,
    }
    if order is not None:
        out["order"] = order
    return out


def diag(fix: str = FIX) -> dict[str, str]:
    return {"pattern": "jitter keeps 64% of the nominal return (DEGRADED)",
            "cause": "the policy assumes a fixed control period", "fix": fix}


# ============================================================================ aggregates


def test_aggregates_take_the_worst_ratio_per_agent_env_and_category():
    records = [
        rec("jitter", 0.9, agent="SAC"),
        rec("delay", 0.62, agent="SAC"),
        rec("speed_5x", 0.3, agent="SAC"),
        rec("jitter", 0.97, agent="A2C", env="Pendulum-v1"),
        rec("spike", 0.81, agent="A2C", env="Pendulum-v1"),
        rec("jitter", 0.4, agent="A2C", env="CartPole-v1"),
    ]
    out = aggregates(records)
    # one entry per (agent, env), sorted
    assert [(a["agent"], a["env"]) for a in out] == [
        ("A2C", "CartPole-v1"), ("A2C", "Pendulum-v1"), ("SAC", "CartPole-v1")]
    assert out[0] == {"agent": "A2C", "env": "CartPole-v1", "nominal": 500.0, "episodes": 30,
                      "reference": 0.0, "reference_kind": "number", "inconclusive": None,
                      "deployment": {"score": 0.4, "rating": "FAIL", "scenario": "jitter"},
                      "stress": None, "mix": None, "mix_mark": None}  # nothing broken to mix
    assert out[1]["deployment"] == {"score": 0.81, "rating": "MILD", "scenario": "spike"}
    assert out[1]["stress"] is None
    assert out[2]["deployment"] == {"score": 0.62, "rating": "DEGRADED", "scenario": "delay"}
    assert out[2]["stress"] == {"score": 0.3, "rating": "FAIL", "scenario": "speed_5x"}


def test_every_report_gives_the_scenario_mix_of_what_broke_each_agent(tmp_path):
    records = [
        rec("jitter", 0.97, mixable=True, order=0),
        rec("spike", 0.2, mixable=True, order=1),
        rec("speed_5x", 0.6, mixable=True, order=2),  # stress, reported only: still broke it
        rec("spike", 0.3, mixable=True, order=3, nodeid="test_y.py::test_y[spike]"),
        rec("obs_noise", 0.3, mixable=False, order=4),  # raw units: not by its name
        rec("delay", 0.85, mixable=True, order=5),  # MILD: bent, not broken
        rec("jitter", 0.9, agent="SAC", env="my_factory", mixable=True),
        rec("delay", 0.1, agent="SAC2", env="my_factory", mixable=True),
    ]
    # records written before episode lengths were kept: uniform weights, which no
    # benchmark backs (they left the bundled agent's failures at FAIL)
    line = 'ScenarioMix(gym.make("CartPole-v1"), ["nominal", "spike", "speed_5x"])'
    by = {a["agent"]: (a["mix"], a["mix_mark"]) for a in aggregates(records)}
    assert by == {"PPO": (line, UNTESTED), "SAC": (None, None),
                  "SAC2": ('ScenarioMix(env, ["nominal", "delay"])', UNTESTED)}
    paths = write_report(summary(records, version="0"), tmp_path)
    for name in ("summary.md", "index.html"):
        assert line in html_unescape((tmp_path / name).read_text()), name
        assert f"({UNTESTED})" in html_unescape((tmp_path / name).read_text()), name
    lines = ["".join(text for text, _ in line) for line in audit_section(records)]
    assert f"  train under what broke it: {line} ({UNTESTED})" in lines
    assert tmp_path / "summary.json" in paths


def steps(scenario: str, ratio: float, length: float, **extra) -> dict:
    """A record of a scenario whose episodes lasted ``length`` env steps (nominal 500)."""
    return rec(scenario, ratio, mixable=True, mean_env_steps=length,
               nominal_mean_env_steps=500.0, **extra)


def test_the_mix_line_weights_each_scenario_by_the_nominal_over_its_episode_length(tmp_path):
    # the bundled fragile agent's audit: spike 103.8 env steps, speed_5x 67.5, nominal 500
    records = [steps("jitter", 1.0, 500.0, order=0), steps("spike", 0.208, 103.8, order=1),
               steps("speed_5x", 0.135, 67.5, order=2)]
    line = ('ScenarioMix(gym.make("CartPole-v1"), ["nominal", "spike", "speed_5x"], '
            'weights=[1, 5, 7])')
    agg = aggregates(records)[0]
    assert agg["mix"] == line
    assert agg["mix_mark"] == BENCHMARKED  # the line benchmarks/bench_fixes.py trained under
    write_report(summary(records, version="0"), tmp_path)
    for name in ("summary.md", "index.html"):
        text = html_unescape((tmp_path / name).read_text())
        assert line in text and f"({agg['mix_mark']})" in text, name
    assert json.loads((tmp_path / "summary.json").read_text())["aggregates"][0]["mix"] == line
    lines = ["".join(text for text, _ in line) for line in audit_section(records)]
    assert f"  train under what broke it: {line} ({agg['mix_mark']})" in lines


def test_equal_episode_lengths_give_the_plain_uniform_line():
    records = [steps("spike", 0.6, 480.0), steps("delay", 0.3, 510.0)]
    assert aggregates(records)[0]["mix"] == (
        'ScenarioMix(gym.make("CartPole-v1"), ["nominal", "delay", "spike"])')


def test_a_mix_line_for_another_env_is_an_untested_suggestion():
    records = [steps("spike", 0.2, 100.0, env="Acrobot-v1")]
    agg = aggregates(records)[0]
    assert agg["mix"] == 'ScenarioMix(gym.make("Acrobot-v1"), ["nominal", "spike"], weights=[1, 5])'
    assert agg["mix_mark"] == UNTESTED


@pytest.mark.parametrize(("ratio", "rating"), [
    (1.0, "PASS"), (0.951, "PASS"), (0.95, "MILD"), (0.81, "MILD"), (0.8, "DEGRADED"),
    (0.51, "DEGRADED"), (0.5, "FAIL"), (0.0, "FAIL"),
])
def test_aggregate_ratings_use_strict_bands(ratio: float, rating: str):
    assert aggregates([rec("jitter", ratio)])[0]["deployment"]["rating"] == rating


def test_aggregate_ratings_use_the_records_thresholds():
    strict = {"pass": 0.99, "mild": 0.9, "degraded": 0.7}
    out = aggregates([rec("jitter", 0.97, thresholds=strict)])
    assert out[0]["deployment"]["rating"] == "MILD"  # PASS under the default bands
    assert aggregates([rec("jitter", 0.97)])[0]["deployment"]["rating"] == "PASS"


def test_aggregates_break_ties_by_scenario_name_and_ignore_other_categories():
    out = aggregates([rec("spike", 0.7), rec("delay", 0.7), rec("obs_noise", 0.9),
                      rec("nominal", 0.1, category="nominal"),
                      rec("my_noise", 0.2, category="custom")])
    assert out[0]["deployment"] == {"score": 0.7, "rating": "DEGRADED", "scenario": "delay"}
    assert out[0]["stress"] is None
    # an agent audited only on custom scenarios has no suite scores
    only_custom = aggregates([rec("my_noise", 0.2, category="custom")])
    assert only_custom == [{"agent": "PPO", "env": "CartPole-v1", "nominal": 500.0,
                            "episodes": 30, "reference": 0.0, "reference_kind": "number",
                            "inconclusive": None, "deployment": None, "stress": None,
                            "mix": None, "mix_mark": None}]


def test_aggregates_of_no_records_is_empty():
    assert aggregates([]) == []
    assert aggregates(iter([rec("jitter", 0.9)]))[0]["deployment"]["score"] == 0.9  # any iterable


# ============================================================================ short_diagnosis


@pytest.mark.parametrize(("fix", "short"), [
    (FIX, "train with Jitter(env, base=2, jitter=1) (a randomised control period)"),
    ("train with Speed(env, k=5) or with a randomised control period; or deploy at the "
     "training rate", "train with Speed(env, k=5)"),
    ("  train with ObservationNoise(env, sigma=0.1)  ", "train with ObservationNoise(env, sigma=0.1)"),
    ("normalise observations", "normalise observations"),
])
def test_short_diagnosis_is_the_first_clause_of_the_fix(fix: str, short: str):
    assert short_diagnosis(rec("jitter", 0.6, diagnosis=diag(fix))) == short


def test_short_diagnosis_without_a_diagnosis_is_empty():
    assert short_diagnosis(rec("jitter", 1.0)) == ""
    without_key = rec("jitter", 1.0)
    del without_key["diagnosis"]
    assert short_diagnosis(without_key) == ""


# ============================================================================ summary


def test_summary_orders_results_by_collection_order_then_nodeid():
    records = [
        rec("spike", 0.9, order=2, nodeid="b.py::t[spike]"),
        rec("delay", 0.9, order=1, nodeid="z.py::t[delay]"),
        rec("jitter", 0.9, order=1, nodeid="a.py::t[jitter]"),
        rec("obs_noise", 0.9, nodeid="m.py::t[obs_noise]"),  # no order: sorts as 0
    ]
    doc = summary(records, version="9.9.9", extra={"seed": 3})
    assert [r["nodeid"] for r in doc["results"]] == [
        "m.py::t[obs_noise]", "a.py::t[jitter]", "z.py::t[delay]", "b.py::t[spike]"]
    assert (doc["schema"], doc["tool"], doc["version"], doc["seed"]) == (
        SUMMARY_SCHEMA, "pytest-rlaudit", "9.9.9", 3)
    assert SUMMARY_SCHEMA == 1
    assert list(doc) == ["schema", "tool", "version", "seed", "results", "aggregates"]
    assert doc["aggregates"] == aggregates(records)
    assert [r["order"] for r in records[:3]] == [2, 1, 1]  # the input is left as it was
    json.dumps(doc)  # plain JSON types only


def test_summary_without_records():
    doc = summary([], version="1")
    assert doc["results"] == [] and doc["aggregates"] == []


# ============================================================================ table_rows


def test_table_rows_have_a_header_then_one_row_per_record_in_order():
    records = [rec("spike", 0.457, order=1, p_value=0.0004, diagnosis=diag()),
               rec("jitter", 1.0, order=0, p_value=None),
               rec("delay", 0.9151, order=2, p_value=0.0123)]
    rows = table_rows(records)
    assert rows[0] == (["agent", "env", "scenario", "n", "nominal", "ref", "ratio", "95% CI",
                        "rating", "p", "diagnosis"], "")
    assert [cells[2] for cells, _ in rows[1:]] == ["jitter", "spike", "delay"]
    assert rows[1] == (["PPO", "CartPole-v1", "jitter", "30", "500.0", "0.0", "1.000",
                        "0.900 to 1.000", "PASS", "-", "-"], "PASS")
    spike, rating = rows[2]
    assert rating == "FAIL"
    assert spike[6:] == ["0.457", "0.357 to 0.507", "FAIL", "<0.001", short_diagnosis(records[0])]
    assert rows[3][0][6] == "0.915" and rows[3][0][9] == "0.012"


def test_table_rows_label_the_interval_with_its_confidence():
    assert table_rows([rec("jitter", 1.0, confidence=0.9)])[0][0][7] == "90% CI"
    assert table_rows([]) == [(["agent", "env", "scenario", "n", "nominal", "ref", "ratio",
                                "95% CI", "rating", "p", "diagnosis"], "")]


# ============================================================================ markdown


def _doc(records: list[dict[str, Any]]) -> dict[str, Any]:
    return summary(records, version="0.1.0", extra={"seed": 0})


def test_markdown_renders_a_table_the_aggregates_and_the_diagnoses():
    records = [rec("jitter", 0.639, order=0, p_value=0.125, diagnosis=diag()),
               rec("delay", 1.0, order=1, p_value=None),
               rec("speed_5x", 0.291, order=2, p_value=0.0001),
               rec("jitter", 0.97, agent="SAC", order=3)]
    text = markdown(_doc(records))
    lines = text.splitlines()
    assert lines[0] == "## RL robustness audit"
    header = lines.index(
        "| agent | env | scenario | n | nominal | ref | ratio | CI | rating | p | diagnosis |")
    assert lines[header + 1] == "|---|---|---|---:|---:|---:|---:|---|---|---:|---|"
    assert lines[header + 2:header + 6] == [
        "| PPO | CartPole-v1 | jitter | 30 | 500.0 | 0.0 | 0.639 | 0.539 to 0.689 | 🟠 DEGRADED | "
        "0.125 | train with Jitter(env, base=2, jitter=1) (a randomised control period) |",
        "| PPO | CartPole-v1 | delay | 30 | 500.0 | 0.0 | 1.000 | 0.900 to 1.000 | ✅ PASS | - | - |",
        "| PPO | CartPole-v1 | speed_5x | 30 | 500.0 | 0.0 | 0.291 | 0.191 to 0.341 | "
        "FAIL (not gated) | <0.001 | - |",
        "| SAC | CartPole-v1 | jitter | 30 | 500.0 | 0.0 | 0.970 | 0.870 to 1.000 | ✅ PASS | "
        "0.010 | - |",
    ]
    assert lines[header + 7].startswith("*not gated*: reported only")
    ratios_of = "; ratios of the nominal mean return 500.0 over 30 episodes, reference 0.0"
    assert ("- **PPO** on CartPole-v1: deployment 🟠 DEGRADED (min ratio 0.639, jitter); "
            "stress ❌ FAIL (min ratio 0.291, speed_5x)" + ratios_of) in lines
    assert ("- **SAC** on CartPole-v1: deployment ✅ PASS (min ratio 0.970, jitter)"
            + ratios_of) in lines
    assert "<details><summary>Diagnoses</summary>" in lines and "</details>" in lines
    assert ("- **PPO / jitter**: jitter keeps 64% of the nominal return (DEGRADED). Likely "
            "cause: the policy assumes a fixed control period. Fix: " + FIX + ".") in lines
    assert text.endswith("\n")


def test_markdown_leaves_out_the_diagnoses_block_when_there_is_none():
    text = markdown(_doc([rec("delay", 1.0)]))
    assert "<details>" not in text and "Diagnoses" not in text
    assert "| PPO | CartPole-v1 | delay |" in text


def test_markdown_of_an_agent_without_suite_scenarios_says_so():
    text = markdown(_doc([rec("my_noise", 0.9, category="custom")]))
    assert ("- **PPO** on CartPole-v1: no suites; ratios of the nominal mean return 500.0 "
            "over 30 episodes, reference 0.0") in text.splitlines()


def test_markdown_without_results():
    assert markdown(_doc([])) == "## RL robustness audit\n\nNo audit results.\n"


def test_markdown_without_results_lists_the_audits_that_errored_and_why():
    doc = {**_doc([]), "errors": [{"nodeid": "rl-audit::jitter", "when": "call",
                                    "message": "PolicyError: cannot load 'x.zip'"}],
           "lost": [{"nodeid": "rl-audit::spike", "scenario": "spike"}]}
    lines = markdown(doc).splitlines()
    assert "No audit results." in lines
    assert "- error: `rl-audit::jitter`: PolicyError: cannot load 'x.zip'" in lines
    assert "- lost with a crashed xdist worker: `rl-audit::spike`" in lines


def test_a_gated_stress_row_is_an_ordinary_row():
    gated = rec("speed_5x", 0.291, gate={"min_ratio": 0.5, "min_rating": None, "mode": "point"})
    assert table_rows([gated])[1][0][8] == "FAIL"
    text = markdown(_doc([gated]))
    assert "| ❌ FAIL |" in text and "not gated" not in text


def test_negative_ratios_and_intervals_read_unambiguously():
    tiny = rec("jitter", -0.0004, ci_low=-0.0012, ci_high=-0.0004)
    assert table_rows([tiny])[1][0][6:8] == ["0.000", "-0.001 to 0.000"]
    below = rec("jitter", -0.5, ci_low=-0.923, ci_high=-0.1)
    assert table_rows([below])[1][0][6:8] == ["-0.500", "-0.923 to -0.100"]
    assert "| -0.500 | -0.923 to -0.100 |" in markdown(_doc([below]))


# ============================================================================ write_report


def _three() -> dict[str, Any]:
    return _doc([rec("jitter", 0.639, order=0, diagnosis=diag()), rec("delay", 1.0, order=1),
                 rec("speed_5x", 0.4, order=2)])


@pytest.fixture
def doc() -> dict[str, Any]:
    return _three()


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """write_report of ``_three()`` with matplotlib, once (no step summary): its folder and
    the paths it returned. The files are only read."""
    pytest.importorskip("matplotlib")
    folder = tmp_path_factory.mktemp("drawn")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GITHUB_STEP_SUMMARY", raising=False)
        return folder, write_report(_three(), folder)


@pytest.fixture
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError


def test_write_report_writes_json_and_markdown_into_a_new_directory(
        tmp_path: Path, doc: dict[str, Any], no_step_summary: None, no_matplotlib: None):
    out = tmp_path / "deep" / "er"
    paths = write_report(doc, str(out))
    assert paths == [out / name for name in ("summary.json", "summary.md", "index.html",
                                             "badge-deployment.svg", "badge-stress.svg")]
    assert json.loads((out / "summary.json").read_text(encoding="utf-8")) == doc
    assert (out / "summary.md").read_text(encoding="utf-8") == markdown(doc)
    assert sorted(p.name for p in out.iterdir()) == [  # no temp files
        "badge-deployment.svg", "badge-stress.svg", "index.html", "summary.json", "summary.md"]


def test_write_report_draws_the_chart_with_matplotlib(drawn: tuple[Path, list[Path]]):
    tmp_path, paths = drawn
    assert [p.name for p in paths] == ["summary.json", "summary.md", "summary.png",
                                       "summary.svg", "index.html", "badge-deployment.svg", "badge-stress.svg"]
    assert (tmp_path / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "summary.svg").read_text(encoding="utf-8")
    assert "<svg" in svg and "<dc:date>" not in svg  # no timestamp in the SVG
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "badge-deployment.svg", "badge-stress.svg", "index.html", "summary.json", "summary.md",
        "summary.png", "summary.svg"]


def test_the_chart_files_are_reproducible(tmp_path: Path, doc: dict[str, Any],
                                          no_step_summary: None,
                                          drawn: tuple[Path, list[Path]]):
    write_report(doc, tmp_path / "b")  # a second, independent drawing of the same doc
    for name in ("summary.json", "summary.md", "summary.png", "summary.svg", "index.html", "badge-deployment.svg", "badge-stress.svg"):
        assert (drawn[0] / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_write_report_without_results_writes_no_chart(tmp_path: Path, no_step_summary: None):
    paths = write_report(_doc([]), tmp_path)
    assert [p.name for p in paths] == ["summary.json", "summary.md", "index.html", "badge-deployment.svg", "badge-stress.svg"]
    assert (tmp_path / "summary.md").read_text(encoding="utf-8").endswith("No audit results.\n")


def test_write_report_appends_the_markdown_to_the_github_step_summary(
        tmp_path: Path, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        no_matplotlib: None):
    step = tmp_path / "step.md"
    step.write_text("# earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    write_report(doc, tmp_path / "one")
    write_report(doc, tmp_path / "two")
    assert step.read_text(encoding="utf-8") == "# earlier step\n" + markdown(doc) * 2
    assert "summary.md" not in {p.name for p in tmp_path.iterdir()}  # it wrote no file there


def test_write_report_does_not_touch_the_step_summary_when_unset(
        tmp_path: Path, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        no_matplotlib: None):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "")
    write_report(doc, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "badge-deployment.svg", "badge-stress.svg", "index.html", "summary.json", "summary.md"]


def test_write_report_replaces_files_atomically(
        tmp_path: Path, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        no_step_summary: None, no_matplotlib: None):
    (tmp_path / "summary.json").write_text('{"old": true}\n', encoding="utf-8")
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def failing_replace(src: Any, dst: Any) -> None:
        replaced.append((Path(src).name, Path(dst).name))
        raise OSError("disk full")

    monkeypatch.setattr(report.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_report(doc, tmp_path)
    # the old file is intact: the new text went to a temporary file first
    assert (tmp_path / "summary.json").read_text(encoding="utf-8") == '{"old": true}\n'
    assert replaced == [(".summary.json.tmp", "summary.json")]

    monkeypatch.setattr(report.os, "replace", real_replace)
    write_report(doc, tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text(encoding="utf-8")) == doc
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_inconclusive_comparison_reads_so_in_every_view(tmp_path: Path):
    from pytest_rlaudit.auditing.comparison import compare_records
    from pytest_rlaudit.auditing.tolerances import parse_tolerance
    from pytest_rlaudit.reports.html import html
    from pytest_rlaudit.reports.terminal import comparison_section

    ours = {**rec("spike", 0.5), "seeds": [0, 1], "returns": [1.0, 1.0],
            "nominal_returns": [2.0, 2.0]}
    comparison = compare_records([{**ours, "nodeid": "elsewhere::x"}], [ours],
                                 [parse_tolerance("return:5%")])
    assert comparison.decision == "inconclusive"
    why = comparison.summary()
    assert why.startswith("inconclusive: nothing was compared: the baseline shares no test "
                          "with this run (baseline: elsewhere::x; this run: test_x.py::")
    doc = summary([ours], version="0", extra={"comparison": {"baseline": "b.json",
                                                             **comparison.to_dict()}})
    assert doc["comparison"]["decision"] == "inconclusive"
    assert doc["comparison"]["summary"] == why and doc["comparison"]["inconclusive"]
    md = markdown(doc)
    assert "### Compared with the baseline: ⚠️ **inconclusive**" in md
    assert "inconclusive: nothing was compared: the baseline shares no test" in md
    page = html(doc, tmp_path)
    assert "Compared with the baseline: inconclusive</h2>" in page
    last = comparison_section(comparison, {}, "b.json")[-1]
    assert last == [("INCONCLUSIVE: " + why.split(": ", 1)[1], "error")]
    assert "ship" not in md.lower() and "ship" not in page.lower()


def test_rows_of_several_tests_are_grouped_under_each_test_and_say_their_parameters(tmp_path):
    """The demo's table: a 10-episode assert_robust row of spike beside the 30-episode
    suite's, and obs_noise at another noise scale than the default suite's."""
    records = [rec("spike", 0.208, nodeid="t.py::test_unit", order=0, episodes=10),
               rec("spike", 0.208, nodeid="t.py::test_suite[spike]", order=1),
               rec("obs_noise", 0.303, nodeid="t.py::test_noise[obs_noise]", order=2,
                   params={"sigma": 0.1, "scale": "absolute"})]
    lines = ["".join(text for text, _ in line) for line in audit_section(records)]
    heads = [line for line in lines if line.endswith(":") and line.startswith("t.py")]
    assert heads == ["t.py::test_unit:", "t.py::test_suite:", "t.py::test_noise:"]
    noise = next(line for line in lines if "obs_noise" in line)
    assert noise.startswith("  PPO") and "obs_noise(scale='absolute')" in noise
    write_report(summary(records, version="0"), tmp_path)
    for name in ("summary.md", "index.html"):
        assert "obs_noise(scale=&#x27;absolute&#x27;)" in (tmp_path / name).read_text() or \
            "obs_noise(scale='absolute')" in (tmp_path / name).read_text(), name
    # one test's rows (the zero-config audit): no group heads
    alone = [rec("spike", 0.2, nodeid="rl-audit::spike"), rec("delay", 1.0, nodeid="rl-audit::delay")]
    assert not any(line.endswith(":") for line in
                   ("".join(t for t, _ in line) for line in audit_section(alone)))
