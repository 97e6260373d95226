"""Reports of a runs record (``--rl-agent`` a glob of training runs): the record, the
terminal and summary.md rows, and index.html's per-run dots and performance profile."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_rlaudit.auditing.records import (
    FIELDS,
    REQUIRED,
    RUNS_KEYS,
    Record,
    runs_record,
    validate,
)
from pytest_rlaudit.reports.markdown import markdown
from pytest_rlaudit.reports.rows import table_rows
from pytest_rlaudit.reports.summary import summary
from pytest_rlaudit.reports.terminal import audit_section


def _controller(gain: float):
    return lambda obs: (obs[:, 2] + gain * obs[:, 3] > 0).astype(np.int64)


@pytest.fixture(scope="module")
def records() -> list[Record]:
    """The records of three "runs" (one controller, differently tuned) on delay and spike."""
    from pytest_rlaudit import audit_runs

    runs = audit_runs([_controller(g) for g in (0.0, 0.5, 1.0)], "CartPole-v1",
                      scenarios=["delay", "spike"], episodes=4, name="gains")
    gate = {"min_ratio": None, "min_rating": "MILD", "mode": "point"}
    return [runs_record(f"rl-audit::{s.name}", runs, s.name, gate, passed=True, reference=0)
            for s in runs]


def test_a_runs_record_is_a_valid_record_and_old_records_need_nothing_new(records):
    rec = records[0]
    assert validate(rec) is rec
    assert REQUIRED == ("nodeid", "agent", "env", "scenario", "seeds", "returns",
                        "nominal_returns", "ratio")  # the new keys are optional
    assert set(RUNS_KEYS) <= set(rec) and set(RUNS_KEYS) <= set(FIELDS)
    assert rec["runs"] == 3 and len(rec["per_run"]) == len(rec["labels"]) == 3
    assert len(rec["seeds"]) == len(rec["returns"]) == 3 * 4  # every run's episodes
    assert rec["ci_low"] <= rec["ratio"] <= rec["ci_high"]


def test_terminal_and_markdown_rows_show_the_iqm_its_interval_the_runs_and_the_nominal_iqm(
        records):
    header, *rows = table_rows(records)
    cells = dict(zip(header[0], rows[0][0], strict=True))
    rec = records[0]
    assert cells["n"] == "3 runs x 4"
    assert cells["ratio"] == f"IQM {rec['ratio']:.3f}"
    assert cells["nominal"] == f"{rec['nominal_iqm']:.1f}"
    text = "\n".join("".join(t for t, _ in line) for line in audit_section(records))
    assert "nominal IQM return" in text and "across 3 runs of 4 episodes" in text
    assert "(min IQM ratio " in text
    md = markdown(summary(records, version="0"))
    assert "| 3 runs x 4 |" in md and "### Training runs" in md
    assert f"IQM {rec['ratio']:.3f}" in md and "(min IQM ratio " in md


def _page(records: list[Record], folder: Path) -> tuple[Path, dict[str, Any]]:
    from pytest_rlaudit.reports.html import html

    doc = summary(records, version="0")
    page = folder / "index.html"
    page.write_text(html(doc, folder), encoding="utf-8")
    return page, doc


@pytest.fixture(scope="module")
def drawn_page(records, tmp_path_factory) -> Path:
    """index.html of the records, drawn with matplotlib once: one test reads it, the other
    renders it in Chromium."""
    pytest.importorskip("matplotlib")
    return _page(records, tmp_path_factory.mktemp("runs_page"))[0]


def test_the_page_draws_each_runs_dots_and_its_performance_profile(records, drawn_page):
    from pytest_rlaudit.reports.chart import pyplot
    from pytest_rlaudit.reports.runs import profile_points, runs_figure

    page = drawn_page
    text = page.read_text(encoding="utf-8")
    assert text.count('<figure class="runs"><svg') == 2  # one per scenario, inline SVG
    assert "performance profile" in text and 'table class="runs"' in text
    rec = records[1]
    profile = profile_points(rec)
    assert profile[0] == pytest.approx(np.mean(np.array(rec["per_run"]) > 0))
    assert all(a >= b for a, b in itertools.pairwise(profile))  # falls
    plt = pyplot()
    fig = runs_figure(plt, rec)
    assert fig.axes[0].collections[0].get_offsets()[:, 0].tolist() == rec["per_run"]
    plt.close(fig)


def test_chromium_renders_the_runs_figures(drawn_page, tmp_path):
    from test_html import chromium

    dom, console, _ = chromium(drawn_page, tmp_path, size=(1280, 1200))
    assert console == []
    assert dom.count('class="runs"') >= 4  # two figures, two tables
    assert "performance profile" in dom
