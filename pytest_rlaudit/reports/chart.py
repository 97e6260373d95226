"""The chart of ``--rl-report``: each scenario's ratio and interval over the rating bands
(PNG and SVG; needs matplotlib, ``pip install 'pytest-rlaudit[plot]'``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["chart"]


def chart(doc: dict[str, Any], directory: Path) -> list[Path]:
    """Write summary.png and summary.svg into ``directory``; [] without matplotlib or results."""
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
    paths = [directory / "summary.png", directory / "summary.svg"]
    with matplotlib.rc_context({"svg.hashsalt": "pytest-rlaudit"}):  # stable SVG ids
        for path in paths:
            fig.savefig(path, dpi=120, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return paths
