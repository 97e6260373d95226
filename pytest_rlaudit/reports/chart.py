"""The charts of ``--rl-report``: each scenario's ratio and interval over the rating bands
(``summary.png`` / ``.svg``) and, when a record has one, each tolerance curve
(``tolerance.png`` / ``.svg``). Needs matplotlib, ``pip install 'pytest-rlaudit[plot]'``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["chart"]


def chart(doc: dict[str, Any], directory: Path) -> list[Path]:
    """Write summary.png and summary.svg (and tolerance.png and tolerance.svg when a
    record has a tolerance curve) into ``directory``; [] without matplotlib or results."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    results = doc["results"]
    if not results:
        return []
    thresholds = results[0]["thresholds"]
    labels = [f"{r['scenario']}\n{r['agent']}" if len({x['agent'] for x in results}) > 1
              else r["scenario"] for r in results]
    ratios = [r["ratio"] for r in results]
    low = [r["ratio"] - r["ci_low"] for r in results]
    high = [r["ci_high"] - r["ratio"] for r in results]
    top = max(1.1, max(r["ci_high"] for r in results) + 0.05)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(results) + 2), 3.6))
    bands = [(min(0.0, min(r["ci_low"] for r in results) - 0.05), thresholds["degraded"],
              "#f4b6b6", "FAIL"),
             (thresholds["degraded"], thresholds["mild"], "#f8d5a8", "DEGRADED"),
             (thresholds["mild"], thresholds["pass"], "#f6eda4", "MILD"),
             (thresholds["pass"], top, "#c4e6c1", "PASS")]
    for lo, hi, colour, name in bands:
        ax.axhspan(lo, hi, color=colour, zorder=0)
        ax.text(len(results) - 0.5, (lo + hi) / 2, name, ha="right", va="center", fontsize=7,
                color="#555555")
    x = list(range(len(results)))
    ax.errorbar(x, ratios, yerr=[low, high], fmt="o", color="black", capsize=4, zorder=3)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_xlim(-0.6, len(results) - 0.4)
    ax.set_ylim(bands[0][0], top)
    ax.set_ylabel("return ratio (CI)")
    ax.set_title("RL robustness audit", fontsize=10)
    fig.tight_layout()
    paths = _save(fig, directory, "summary")
    curves = [r for r in results if r.get("tolerance")]
    if curves:
        paths += _save(_tolerance_figure(plt, curves), directory, "tolerance")
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


def _tolerance_figure(plt: Any, records: list[dict[str, Any]]) -> Any:
    """One small panel per curve: the ratio and its interval at each tested value, the
    line at min_ratio, the first breaking value (red band) and the scenario's own value
    (dotted) marked. Panels do not share an axis: each curve varies its own parameter."""
    from ..auditing.ladders import value_text  # standard library only

    columns = min(3, len(records))
    rows = -(-len(records) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 2.6 * rows), squeeze=False)
    for ax, rec in zip(axes.flat, records, strict=False):
        t = rec["tolerance"]
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
        ax.set_xlabel(t["param"], fontsize=8)
        ax.set_ylim(min(0.0, *(p[2] for p in t["curve"])) - 0.05,
                    max(1.1, *(p[3] for p in t["curve"])) + 0.05)
        ax.set_title(f"{rec['scenario']} ({rec['agent']})", fontsize=9)
    for ax in list(axes.flat)[len(records):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("return ratio (CI)")
    fig.tight_layout()
    return fig
