"""The figures of ``--rl-report``, drawn once for every medium: the forest plot (each
scenario's ratio and interval over the rating bands, one panel per agent and env), the
paired per-episode returns and the tolerance curves. :func:`chart` writes them as files
(``summary.png`` / ``.svg``, ``tolerance.png`` / ``.svg``); the HTML report inlines the
same figures as SVG text. Needs matplotlib, ``pip install 'pytest-rlaudit[plot]'``.

>>> ratio_range([{"ci_low": 0.2, "ci_high": 0.9}, {"ci_low": 0.6, "ci_high": 1.3}])
(-0.05, 1.35)
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._format import clip, fixed
from ..auditing.records import Record
from .rows import score_text

if TYPE_CHECKING:
    from matplotlib.artist import Artist

__all__ = ["BANDS", "chart", "pyplot", "pairs", "pair_title", "ratio_range", "forest_figure",
           "paired_figure", "tolerance_figure", "svg_text"]

#: The rating bands, lowest first, and their colours in every figure.
BANDS = (("FAIL", "#f4b6b6"), ("DEGRADED", "#f8d5a8"), ("MILD", "#f6eda4"),
         ("PASS", "#c4e6c1"))
_ROW = 0.25  # inches per scenario row of a forest panel
_PANEL = 0.8  # inches per forest panel for its title and axis


def pyplot() -> Any | None:
    """matplotlib.pyplot on the Agg backend, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def pairs(doc: dict[str, Any]) -> list[tuple[dict[str, Any], list[Record]]]:
    """Each (agent, env) aggregate of ``doc`` with its records, in the aggregates' order.

    >>> doc = {"results": [{"agent": "PPO", "env": "E", "scenario": "jitter"}],
    ...        "aggregates": [{"agent": "PPO", "env": "E"}]}
    >>> [(agg["agent"], [r["scenario"] for r in recs]) for agg, recs in pairs(doc)]
    [('PPO', ['jitter'])]
    """
    return [(agg, [r for r in doc["results"]
                   if (r["agent"], r["env"]) == (agg["agent"], agg["env"])])
            for agg in doc["aggregates"]]


def pair_title(agg: dict[str, Any], sep: str = ": ") -> str:
    """"PPO on CartPole-v1: deployment FAIL 0.208 (spike); stress ..." for an aggregate
    (``sep`` between the pair and its scores).

    >>> pair_title({"agent": "PPO", "env": "CartPole-v1", "stress": None,
    ...             "deployment": {"score": 0.208, "rating": "FAIL", "scenario": "spike"}})
    'PPO on CartPole-v1: deployment FAIL 0.208 (spike)'
    """
    parts = [f"{cat} {score_text(agg[cat])} ({agg[cat]['scenario']})"
             for cat in ("deployment", "stress") if agg.get(cat)]
    return f"{agg['agent']} on {agg['env']}" + (sep + "; ".join(parts) if parts else "")


def ratio_range(records: Sequence[Record]) -> tuple[float, float]:
    """The x range of forest plots: 0 to 1.1 and every interval, within -1 to 2 (a ratio
    beyond is drawn at the edge: the tables carry the number)."""
    low = min([0.0, *(r["ci_low"] for r in records)]) - 0.05
    high = max([1.1, *(r["ci_high"] + 0.05 for r in records)])
    return round(max(low, -1.05), 6), round(min(high, 2.05), 6)


def _text(label: str, limit: int = 40) -> str:
    """A label as matplotlib prints it literally: "$" would start mathtext."""
    return clip(label, limit).replace("$", r"\$")


def _panel_title(agg: dict[str, Any]) -> str:
    """The pair's title: the pair, then its scores (one line would run past the panel)."""
    return _text(pair_title(agg, "\n"), 200)


def _labels(records: Sequence[Record]) -> list[str]:
    """Scenario names; a name audited by several tests gets the test's name too."""
    names = [r["scenario"] for r in records]
    return [_text(n if names.count(n) == 1 else f"{n} [{r['nodeid'].split('::')[-1]}]")
            for n, r in zip(names, records, strict=True)]


def forest_figure(plt: Any, panels: Sequence[tuple[str, Sequence[Record]]],
                  xlim: tuple[float, float]) -> Any:
    """One horizontal forest plot per (title, records) panel, stacked, on the shared x range
    ``xlim``: a row per record (its ratio, its interval as whiskers, a hollow dot when it
    gated nothing) over its rating bands; the figure grows with the rows.

    >>> rec = {"nodeid": "t::x", "scenario": "jitter", "ratio": 0.6, "ci_low": 0.5,
    ...        "ci_high": 0.7, "rating": "DEGRADED",
    ...        "thresholds": {"pass": 0.95, "mild": 0.8, "degraded": 0.5}}
    >>> fig = forest_figure(pyplot(), [("PPO on CartPole-v1", [rec])], (0.0, 1.1))
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['jitter']
    >>> "jitter" in svg_text(fig, "doctest")  # svg_text closes the figure
    True
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    heights = [max(len(records), 1) for _, records in panels]
    fig, axes = plt.subplots(
        len(panels), 1, squeeze=False, height_ratios=heights, layout="constrained",
        figsize=(8.0, 0.6 + sum(_ROW * n + _PANEL for n in heights)))
    for ax, (title, records) in zip(axes[:, 0], panels, strict=True):
        _forest(ax, records, xlim)
        ax.set_title(title, loc="left", fontsize=9)
    level = panels[0][1][0].get("confidence", 0.95) if panels and panels[0][1] else 0.95
    axes[-1, 0].set_xlabel(f"return ratio, perturbed / nominal ({level:.0%} interval)",
                           fontsize=8)
    handles: list[Artist] = [Patch(color=colour, label=name) for name, colour in BANDS]
    handles += [Line2D([], [], marker="o", color="black", linestyle="", label="gated"),
                Line2D([], [], marker="o", color="black", markerfacecolor="white",
                       linestyle="", label="reported only")]
    fig.legend(handles=handles, loc="outside upper center", ncols=6, fontsize=7.5,
               frameon=False)
    return fig


def _forest(ax: Any, records: Sequence[Record], xlim: tuple[float, float]) -> None:
    from .rows import gated

    lo, hi = xlim
    start = 0
    for i in range(1, len(records) + 1):  # one band span per run of equal thresholds
        if i < len(records) and records[i]["thresholds"] == records[start]["thresholds"]:
            continue
        t = records[start]["thresholds"]
        edges = [lo, *(min(max(t[k], lo), hi) for k in ("degraded", "mild", "pass")), hi]
        for (_, colour), left, right in zip(BANDS, edges, edges[1:], strict=False):
            ax.fill_betweenx([start - 0.5, i - 0.5], left, right, color=colour, linewidth=0,
                             zorder=0)
        start = i
    ax.axvline(1.0, color="#777777", linewidth=0.8, linestyle="--", zorder=1)
    for y, rec in enumerate(records):
        ratio, marker = rec["ratio"], "o"
        inset = 0.015 * (hi - lo)  # a ratio off the range points to it from just inside
        if ratio < lo:
            ratio, marker = lo + inset, "<"
        elif ratio > hi:
            ratio, marker = hi - inset, ">"
        ax.errorbar(ratio, y, xerr=[[max(ratio - rec["ci_low"], 0.0)],
                                    [max(rec["ci_high"] - ratio, 0.0)]],
                    fmt=marker, color="black", markersize=5, capsize=3, elinewidth=1.2,
                    markerfacecolor="black" if gated(rec) else "white", zorder=3)
        ax.text(1.01, y, f"{fixed(rec['ratio'])} {rec['rating']}", fontsize=7.5,
                va="center", transform=ax.get_yaxis_transform(), clip_on=False)
    ax.set_yticks(range(len(records)), _labels(records), fontsize=8)
    ax.set_ylim(len(records) - 0.5, -0.5)  # the first scenario on top
    ax.set_xlim(lo, hi)
    ax.tick_params(axis="x", labelsize=8)
    ax.tick_params(axis="y", length=0)


def paired_figure(plt: Any, rec: Record) -> Any:
    """Each episode's perturbed return against its nominal twin (same seed), with the
    diagonal where the perturbation changed nothing.

    >>> plt = pyplot()
    >>> fig = paired_figure(plt, {"returns": [1.0, 2.0], "nominal_returns": [2.0, 2.0]})
    >>> fig.axes[0].collections[0].get_offsets().tolist()  # (nominal, perturbed)
    [[2.0, 1.0], [2.0, 2.0]]
    >>> plt.close(fig)
    """
    nominal, perturbed = rec["nominal_returns"], rec["returns"]
    fig, ax = plt.subplots(figsize=(3.0, 2.8))
    fig.subplots_adjust(left=0.24, right=0.95, bottom=0.16, top=0.9)  # one per scenario: fast
    values = [*nominal, *perturbed] or [0.0]
    low, high = min(values), max(values)
    pad = (high - low) * 0.06 or max(abs(high) * 0.06, 1.0)
    edge = (low - pad, high + pad)
    ax.plot(edge, edge, color="#777777", linewidth=0.8, linestyle="--", zorder=1)
    ax.scatter(nominal, perturbed, s=16, color="#1f4e79", alpha=0.7, linewidths=0, zorder=2)
    ax.set_xlim(edge)
    ax.set_ylim(edge)
    ax.set_aspect("equal")
    ax.set_xlabel("nominal return", fontsize=8)
    ax.set_ylabel("perturbed return", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{len(perturbed)} paired episodes", fontsize=8)
    return fig


def tolerance_figure(plt: Any, records: list[Record]) -> Any:
    """One small panel per curve: the ratio and its interval at each tested value, the
    line at min_ratio, the first breaking value (red band) and the scenario's own value
    (dotted) marked. Panels do not share an axis: each curve varies its own parameter."""
    from ..auditing.ladders import value_text  # standard library only

    columns = min(3, len(records))
    rows = -(-len(records) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 2.6 * rows), squeeze=False)
    for ax, rec in zip(axes.flat, records, strict=False):
        t = rec["tolerance"]
        assert t is not None  # the records of tolerance curves only
        values = [p[0] for p in t["curve"]]
        ratios = [p[1] for p in t["curve"]]
        x = list(range(len(values)))  # evenly spaced: ladders grow roughly geometrically
        ax.errorbar(x, ratios, yerr=[[r - p[2] for r, p in zip(ratios, t["curve"], strict=True)],
                                     [p[3] - r for r, p in zip(ratios, t["curve"], strict=True)]],
                    fmt="o-", color="black", capsize=3, zorder=3)
        ax.axhline(t["min_ratio"], color="#c0392b", linestyle="--", linewidth=1)
        if t["breaks_at"] is not None:
            ax.axvline(values.index(t["breaks_at"]), color="#c0392b", alpha=0.3, linewidth=6)
        if t["default"] in values:  # where the scenario's single-point audit stands
            ax.axvline(values.index(t["default"]), color="#555555", linestyle=":", linewidth=1)
        ax.set_xticks(x, [value_text(v) for v in values], fontsize=8)
        ax.set_xlabel(_text(t["param"]), fontsize=8)
        ax.set_ylim(min(0.0, *(p[2] for p in t["curve"])) - 0.05,
                    max(1.1, *(p[3] for p in t["curve"])) + 0.05)
        ax.set_title(_text(f"{rec['scenario']} ({rec['agent']})"), fontsize=9)
    for ax in list(axes.flat)[len(records):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("return ratio (CI)")
    fig.tight_layout()
    return fig


def svg_text(fig: Any, salt: str) -> str:
    """``fig`` as SVG text (then closed), stable for a given ``salt``; text stays text
    (smaller, searchable). Figures inlined in one page need distinct salts: the salt
    makes their element ids distinct."""
    import matplotlib
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue()


def chart(doc: dict[str, Any], directory: Path) -> list[Path]:
    """Write summary.png and summary.svg (and tolerance.png and tolerance.svg when a
    record has a tolerance curve) into ``directory``; [] without matplotlib or results."""
    plt = pyplot()
    results = doc["results"]
    if plt is None or not results:
        return []
    panels = [(_panel_title(agg), records) for agg, records in pairs(doc)]
    paths = _save(forest_figure(plt, panels, ratio_range(results)), directory, "summary")
    curves = [r for r in results if r.get("tolerance")]
    if curves:
        paths += _save(tolerance_figure(plt, curves), directory, "tolerance")
    return paths


def _save(fig: Any, directory: Path, stem: str) -> list[Path]:
    import matplotlib
    import matplotlib.pyplot as plt

    paths = [directory / f"{stem}.png", directory / f"{stem}.svg"]
    with matplotlib.rc_context({"svg.hashsalt": "pytest-rlaudit"}):  # stable SVG ids
        for path in paths:
            fig.savefig(path, dpi=120, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return paths
