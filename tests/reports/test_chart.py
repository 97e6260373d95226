"""The figures of pytest_rlaudit.reports.chart on hand-made records: small multiples of
horizontal forest plots that stay readable with many agents and scenarios."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from pytest_rlaudit.reports.chart import (
    BANDS,
    chart,
    forest_figure,
    paired_figure,
    pairs,
    pyplot,
    ratio_range,
)
from pytest_rlaudit.reports.summary import summary

plt = pytest.importorskip("matplotlib.pyplot")  # a dev dependency: present wherever tests run

THRESHOLDS = {"pass": 0.95, "mild": 0.8, "degraded": 0.5}
SCENARIOS = ("jitter", "delay", "spike", "obs_noise", "action_noise", "sticky_actions",
             "action_delay", "dropped_obs", "push", "adversarial_obs", "speed_5x", "frame_skip",
             "gravity", "friction", "mass", "wind", "schedule_ramp_with_a_long_name")


def rec(scenario: str, ratio: float, agent: str = "PPO", **extra: Any) -> dict[str, Any]:
    return {"nodeid": f"t.py::t[{agent}-{scenario}]", "agent": agent, "env": "CartPole-v1",
            "scenario": scenario, "category": "deployment", "ratio": ratio,
            "ci_low": ratio - 0.1, "ci_high": ratio + 0.05, "confidence": 0.95,
            "rating": "FAIL", "thresholds": THRESHOLDS, "gate": None,
            "returns": [1.0, 2.0], "nominal_returns": [2.0, 2.0], **extra}


def doc_of(agents: int, scenarios: int) -> dict[str, Any]:
    """The demo's shape: every agent on every scenario, ratios spread over the bands."""
    records = [rec(s, 0.05 + (i * 7 + a * 3) % 11 / 10, agent=f"Agent{a}(agent_{a}.zip)")
               for a in range(agents) for i, s in enumerate(SCENARIOS[:scenarios])]
    for order, r in enumerate(records):
        r["order"] = order
    return summary(records, version="1")


def panels(doc: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(f"{agg['agent']} on {agg['env']}", records) for agg, records in pairs(doc)]


def draw(doc: dict[str, Any]) -> tuple[Any, list[Any]]:
    fig = forest_figure(plt, panels(doc), ratio_range(doc["results"]))
    fig.canvas.draw()  # lays the figure out
    return fig, fig.axes


def test_one_horizontal_panel_per_pair_with_a_row_per_scenario():
    doc = doc_of(3, 6)
    fig, axes = draw(doc)
    try:
        assert len(axes) == 3
        for ax, (agg, records) in zip(axes, pairs(doc), strict=True):
            assert [t.get_text() for t in ax.get_yticklabels()] == list(SCENARIOS[:6])
            assert ax.get_ylim() == (5.5, -0.5)  # the first scenario on top
            assert ax.get_xlim() == ratio_range(doc["results"])  # shared across panels
            assert agg["agent"] in ax.get_title(loc="left")
            assert len(records) == 6
    finally:
        plt.close(fig)


def test_labels_do_not_overlap_with_many_agents_and_scenarios():
    fig, axes = draw(doc_of(3, 17))
    try:
        renderer = fig.canvas.get_renderer()
        for ax in axes:
            boxes = [t.get_window_extent(renderer) for t in ax.get_yticklabels()]
            boxes += [t.get_window_extent(renderer) for t in ax.texts]  # the values on the right
            boxes += [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
            for a, b in combinations(boxes, 2):
                assert not a.overlaps(b), (a, b)
        # nor do the panels (titles, tick labels) run into each other or the legend
        whole = [ax.get_tightbbox(renderer) for ax in axes]
        whole += [fig.legends[0].get_window_extent(renderer)]
        for a, b in combinations(whole, 2):
            assert not a.overlaps(b), (a, b)
        # and everything lies inside the figure
        figure = fig.bbox
        for box in whole:
            assert figure.x0 <= box.x0 and box.x1 <= figure.x1 + 1
    finally:
        plt.close(fig)


def test_the_figure_grows_with_the_rows_and_keeps_its_width(tmp_path: Path):
    from PIL import Image

    sizes = []
    for agents in (1, 3):
        out = tmp_path / str(agents)
        out.mkdir()
        assert [p.name for p in chart(doc_of(agents, 3), out)] == ["summary.png", "summary.svg"]
        with Image.open(out / "summary.png") as image:
            sizes.append(image.size)
    assert sizes[0][0] == sizes[1][0]
    assert sizes[1][1] > 2 * sizes[0][1]  # each panel takes its own height
    # and a panel's height grows with its rows
    inches = []
    for scenarios in (2, 6, 17):
        fig = forest_figure(plt, panels(doc_of(1, scenarios)), (0.0, 1.1))
        inches.append(fig.get_size_inches())
        plt.close(fig)
    assert inches[0][0] == inches[1][0] == inches[2][0]
    assert inches[0][1] < inches[1][1] < inches[2][1]
    assert inches[2][1] - inches[1][1] == pytest.approx((17 - 6) / (6 - 2) * (
        inches[1][1] - inches[0][1]))  # linearly


def test_bands_follow_each_records_thresholds():
    strict = {"pass": 0.99, "mild": 0.9, "degraded": 0.7}
    records = [rec("jitter", 0.6), rec("delay", 0.6), rec("spike", 0.6, thresholds=strict)]
    fig = forest_figure(plt, [("PPO", records)], (-0.05, 1.1))
    try:
        from matplotlib.colors import to_hex

        spans = {}  # band name -> [(y0, y1, x0, x1)]
        colour_names = {colour: name for name, colour in BANDS}
        for collection in fig.axes[0].collections:
            faces = collection.get_facecolor()
            colour = to_hex(faces[0]) if len(faces) else None
            if colour in colour_names:
                box = collection.get_paths()[0].get_extents()
                spans.setdefault(colour_names[colour], []).append(
                    (box.y0, box.y1, round(box.x0, 6), round(box.x1, 6)))
        # one span per run of equal thresholds: rows 0-1, then row 2
        assert sorted(spans["PASS"]) == [(-0.5, 1.5, 0.95, 1.1), (1.5, 2.5, 0.99, 1.1)]
        assert sorted(spans["FAIL"]) == [(-0.5, 1.5, -0.05, 0.5), (1.5, 2.5, -0.05, 0.7)]
    finally:
        plt.close(fig)


def test_a_ratio_off_the_range_points_to_it_from_the_edge():
    records = [rec("jitter", -3.0), rec("delay", 0.5)]
    lo, hi = ratio_range(records)
    assert (lo, hi) == (-1.05, 1.1)  # clipped: the number is in the tables
    fig = forest_figure(plt, [("PPO", records)], (lo, hi))
    try:
        ax = fig.axes[0]
        points = [line for line in ax.lines if line.get_marker() in ("<", "o")]
        assert [line.get_marker() for line in points] == ["<", "o"]
        x = points[0].get_xdata()[0]
        assert lo < x < lo + 0.05  # just inside the left edge
        assert "-3.000" in [t.get_text().split()[0] for t in ax.texts]
    finally:
        plt.close(fig)


def test_repeated_names_get_the_test_name_and_dollars_read_literally():
    records = [rec("jitter", 0.5, nodeid="a.py::test_one[jitter]"),
               rec("jitter", 0.6, nodeid="a.py::test_two[jitter]"),
               rec("cost $5 $6", 0.7)]
    fig = forest_figure(plt, [("PPO", records)], (-0.05, 1.1))
    try:
        fig.canvas.draw()
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        assert labels == ["jitter [test_one[jitter]]", "jitter [test_two[jitter]]",
                          r"cost \$5 \$6"]  # "$5 $" would be mathtext
    finally:
        plt.close(fig)


def test_a_reported_only_row_is_a_hollow_dot():
    gated = rec("jitter", 0.5, gate={"min_ratio": None, "min_rating": "MILD", "mode": "point"})
    fig = forest_figure(plt, [("PPO", [gated, rec("speed_5x", 0.3)])], (-0.05, 1.1))
    try:
        from matplotlib.colors import to_hex

        faces = [to_hex(line.get_markerfacecolor()) for line in fig.axes[0].lines
                 if line.get_marker() == "o"]
        assert faces == ["#000000", "#ffffff"]
    finally:
        plt.close(fig)


def test_the_paired_returns_plot_each_episode_against_its_nominal_twin():
    record = rec("jitter", 0.5, returns=[100.0, 250.0, 40.0], nominal_returns=[200.0, 260.0, 90.0])
    fig = paired_figure(plt, record)
    try:
        ax = fig.axes[0]
        points = ax.collections[0].get_offsets().tolist()
        assert points == [[200.0, 100.0], [260.0, 250.0], [90.0, 40.0]]
        diagonal = ax.lines[0]
        assert list(diagonal.get_xdata()) == list(diagonal.get_ydata())  # y = x
        assert ax.get_xlim() == ax.get_ylim()
    finally:
        plt.close(fig)


def test_pyplot_is_none_without_matplotlib(monkeypatch: pytest.MonkeyPatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert pyplot() is None
    assert chart(doc_of(1, 2), Path("/nonexistent")) == []  # writes nothing, needs no folder
