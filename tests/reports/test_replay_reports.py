"""Replay records (summary.json's ``replays``) in summary.md and index.html: the table,
the diagnoses, the charts; and the audit part of a report unchanged beside them. The
records come from real replays of a tiny ``.npz`` recording."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from pytest_rlaudit.auditing.replay_records import replay_record
from pytest_rlaudit.auditing.replays import replay
from pytest_rlaudit.reports.html import PLOT_HINT, html
from pytest_rlaudit.reports.markdown import markdown, md
from pytest_rlaudit.reports.replay_chart import (
    MAX_PANELS,
    actions_figure,
    replay_cells,
    shown_dimensions,
)
from pytest_rlaudit.reports.summary import summary, write_report

BOX = spaces.Box(-1.0, 1.0, (2,))


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """30 steps in 3 episodes: 3-dimensional observations, 2-dimensional actions."""
    path = tmp_path_factory.mktemp("rec") / "run.npz"
    obs = np.random.default_rng(0).normal(size=(30, 3))
    np.savez(path, observations=obs, actions=np.tanh(obs[:, :2]),
             episode_starts=np.arange(30) % 10 == 0)
    return path


def same(obs: np.ndarray) -> np.ndarray:
    return np.tanh(obs[:, :2])


def drifting(obs: np.ndarray) -> np.ndarray:
    """Off by 0.5 where obs[2] > 1."""
    acts = np.tanh(obs[:, :2])
    acts[obs[:, 2] > 1] += 0.5
    return acts


@pytest.fixture(scope="module")
def records(recording) -> list[dict[str, Any]]:
    passed = replay_record("test_replay.py::test_same", replay(same, recording, action_space=BOX),
                           limits={"max_disagreement": 0.1, "max_divergence": None,
                                   "mode": "point"}, passed=True)
    first = np.load(recording)["observations"][10]

    def flaky(obs: np.ndarray) -> np.ndarray:
        """drifting, raising on any batch with episode 1's first observation (replay
        retries a failed batch episode by episode: only episode 1 is lost)."""
        if np.isclose(obs, first).all(axis=1).any():
            raise ValueError("boom <in episode 1>")
        return drifting(obs)

    failed = replay_record("test_replay.py::test_drift", replay(flaky, recording,
                                                                  action_space=BOX,
                                                                  name="drifting"),
                           limits={"max_disagreement": 0.05, "max_divergence": 0.01,
                                   "mode": "point"}, passed=False)
    return [passed, failed]


def test_the_records_are_what_the_tests_need(records):
    passed, failed = records
    assert passed["passed"] is True and passed["worst_episode"] is None
    assert passed["divergence"]["value"] == 0.0
    assert failed["passed"] is False and failed["worst_episode"] is not None
    assert len(failed["failed"]) == 1, failed["failed"]
    assert failed["divergence"]["value"] > 0


def _replay_doc(records: list[dict[str, Any]], results: list[dict[str, Any]] | None = None
                ) -> dict[str, Any]:
    return summary(results or [], version="0.0.test", extra={"replays": records})


def test_write_report_renders_replays_without_audit_results(records, tmp_path):
    written = write_report(_replay_doc(records), tmp_path)
    assert {p.name for p in written} >= {"summary.json", "summary.md", "index.html"}
    text = (tmp_path / "summary.md").read_text()
    passed, failed = records
    assert "### Replays: action agreement with recordings" in text
    assert "No audit results." not in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| candidate | recording | episodes | divergence [CI] |")
    assert "out of space" in rows[0] and "beyond record" in rows[0]
    assert "failed episodes" in rows[0] and "verdict" in rows[0]
    same_row, drift_row = rows[1:]
    assert "| same | run.npz | 3 (30 steps) | 0.000 [0.000, 0.000] | 0.0% [0.0%, 0.0%] |" \
        in same_row and same_row.endswith("| 0 | ✅ PASS |")
    cells = replay_cells(failed)
    assert cells["episodes"] == "2 (20 steps)"
    for key in ("divergence", "disagreement", "ood_actions", "ood_recorded"):
        assert cells[key] in drift_row
    assert drift_row.endswith("| 1 | ❌ FAIL |")
    assert f": {md(passed['diagnosis'])}" in text
    diagnosis = md(failed["diagnosis"])  # as a cell of Markdown: | and * escaped
    assert diagnosis in text and "episode" in diagnosis
    assert "failed episode 1 at step 0: ValueError: boom &lt;in episode 1>" in text
    assert "held to divergence at most 0.01, disagreement at most 5.0%" in text
    # never the candidate's return or success
    assert "candidate's return" not in text.replace("none of this is its return", "")
    assert "none of this is its return or success" in text

    page = (tmp_path / "index.html").read_text()
    assert '<section id="replays">' in page and "No audit results." not in page
    for key in ("divergence", "disagreement", "ood_actions", "ood_recorded"):
        value, ci = cells[key].split(" [")
        assert f'<td class="num">{value}<br><small>[{ci}</small></td>' in page
    assert "boom &lt;in episode 1&gt;" in page
    assert escape(failed["diagnosis"], quote=True) in page
    assert escape(passed["diagnosis"], quote=True) in page
    assert '<td class="PASS">PASS</td>' in page and '<td class="FAIL">FAIL</td>' in page


def test_the_page_charts_each_replay_and_the_worst_episode(records, tmp_path):
    pytest.importorskip("matplotlib")
    write_report(_replay_doc(records), tmp_path)
    page = (tmp_path / "index.html").read_text()
    r1, r2 = page.split('<section class="replay" id="r1">')[1].split(
        '<section class="replay" id="r2">')
    assert r1.count("<svg") == 1  # divergence only: no worst episode to draw
    assert "No worst-episode chart" in r1
    assert r2.count("<svg") == 2 and "The worst episode (id" in r2
    assert "1 failed episode(s) not shown" in r2
    assert "hidden" not in r2  # 2 dimensions: every one drawn
    assert "a[0]" in r2 and "a[1]" in r2
    assert escape(PLOT_HINT, quote=True) not in page
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", page)  # self-contained


def test_without_matplotlib_the_page_has_the_tables(records, monkeypatch):
    import pytest_rlaudit.reports.html as module

    monkeypatch.setattr(module, "pyplot", lambda: None)
    page = module.html(_replay_doc(records), ".")
    assert "<svg" not in page and '<section id="replays">' in page
    assert escape(PLOT_HINT, quote=True) in page


def test_many_action_dimensions_show_the_most_different_eight(records):
    worst = {"id": 0, "recorded": [[0.0] * 12] * 3,
             "candidate": [[0.1 * k for k in range(12)]] * 3}
    assert shown_dimensions(worst) == list(range(4, 12))
    plt = pytest.importorskip("matplotlib.pyplot")
    rec = {**records[1], "worst_episode": worst,
           "per_dimension": [{"name": f"joint{k}"} for k in range(12)]}
    fig = actions_figure(plt, rec)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == \
        [f"joint{k}" for k in range(4, 12)]
    plt.close(fig)
    page = html({**_replay_doc([rec])}, ".")
    assert f"Showing the {MAX_PANELS} of 12 action dimensions" in page and "4 hidden" in page


def audit_rec(scenario: str, ratio: float) -> dict[str, Any]:
    """An audit record as the plugin writes one, with 3 paired episodes."""
    nominal = [500.0, 480.0, 490.0]
    return {
        "nodeid": f"test_x.py::test_x[PPO-{scenario}]", "agent": "PPO", "env": "CartPole-v1",
        "scenario": scenario, "category": "deployment", "params": {}, "schedule": None,
        "episodes": 3, "seed": 0, "seeds": [0, 1, 2], "returns": [x * ratio for x in nominal],
        "nominal_returns": nominal, "reference": 0.0, "reference_score": 0.0,
        "mean_return": 490.0 * ratio, "ratio": ratio, "ci_low": ratio - 0.1,
        "ci_high": min(1.0, ratio + 0.05), "confidence": 0.95, "p_value": 0.01,
        "rating": "PASS" if ratio > 0.95 else "DEGRADED", "diagnosis": None, "passed": True,
        "order": 0, "thresholds": {"pass": 0.95, "mild": 0.8, "degraded": 0.5},
        "gate": {"min_ratio": None, "min_rating": "MILD", "mode": "point"}, "tolerance": None,
    }


def _without_replays(text: str) -> str:
    return re.sub(r'\n<section id="replays">.*?</section>\n</section>', "", text, flags=re.S)


def test_the_audit_part_is_unchanged_beside_replays(records):
    results = [audit_rec("jitter", 0.6), audit_rec("speed_5x", 0.97)]
    plain = summary(results, version="0.0.test")
    both = _replay_doc(records, results)
    assert markdown(both).startswith(markdown(plain).rstrip("\n") + "\n\n### Replays")
    page = html(both, ".")
    assert page.count('<section id="replays">') == 1
    # the audit part as it was, but for the header's count of replays
    count = f", {len(records)} replay(s)."
    assert _without_replays(page).replace(count, ".") == html(plain, ".")
    assert count in page


def test_a_doc_without_replays_renders_as_before():
    doc = summary([], version="0.0.test")
    assert "No audit results." in markdown(doc) and "Replays" not in markdown(doc)
    assert "No audit results." in html(doc, ".") and "replays" not in html(doc, ".")
