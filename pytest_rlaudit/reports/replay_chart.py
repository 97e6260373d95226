"""Replay records (``summary.json``'s ``replays`` list) in the report folder: the table cells
summary.md and index.html share, and index.html's two figures per replay: each episode's
divergence with the overall divergence and its interval as a band, and the worst
episode's recorded and candidate actions over time, one small panel per action dimension.

Open-loop replay measures how closely the candidate's actions agree with the recorded
ones; nothing here is the candidate's return or success (the recording's own returns are
labelled as the recording's). The cells need only the standard library; the figures need
matplotlib (:func:`~pytest_rlaudit.reports.chart.pyplot`).

>>> est = {"value": 0.0417, "ci_low": 0.0, "ci_high": 0.075}
>>> rec = {"candidate": "PPO", "recording": "/data/run.npz", "episodes": 3, "steps": 30,
...        "divergence": est, "disagreement": est, "ood_actions": est, "ood_recorded": est,
...        "failed": [], "limits": None, "passed": None}
>>> cells = replay_cells(rec)
>>> cells["recording"], cells["divergence"], cells["disagreement"], cells["verdict"]
('run.npz', '0.042 [0.000, 0.075]', '4.2% [0.0%, 7.5%]', 'report only')
"""

from __future__ import annotations

import math
import os
from typing import Any

from .chart import _text

__all__ = ["REPLAY_COLUMNS", "REPLAY_NOTE", "MAX_PANELS", "replay_cells", "verdict",
           "limits_text", "baseline_text", "divergence_figure", "actions_figure",
           "shown_dimensions"]

#: The replay table's columns, in order (keys of :func:`replay_cells`, then their headers).
REPLAY_COLUMNS = (("candidate", "candidate"), ("recording", "recording"),
                  ("episodes", "episodes"), ("divergence", "divergence [CI]"),
                  ("disagreement", "disagreement [CI]"), ("ood_actions", "out of space"),
                  ("ood_recorded", "beyond record"), ("failed", "failed episodes"),
                  ("verdict", "verdict"))
#: What every replay section says of what replay measures.
REPLAY_NOTE = ("Open-loop replay feeds the recording's observations to the candidate and "
               "measures how closely its actions agree with the recorded ones: divergence, "
               "the mean per-step action distance (a share of the action range; Discrete: "
               "of steps whose action differs); disagreement, the share of steps further "
               "apart than the tolerance; out of space, actions outside the action space "
               "before clipping; beyond record, actions outside the recorded range. The "
               "candidate never drives the env: none of this is its return or success.")
#: At most this many action dimensions get a panel in the worst-episode figure.
MAX_PANELS = 8


def _finite(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def _measure(est: dict[str, float], share: bool) -> str:
    """``value [ci_low, ci_high]``, as a share or with 3 decimals; "-" if nothing was
    measured (NaN)."""
    v, lo, hi = est["value"], est["ci_low"], est["ci_high"]
    if not _finite(v, lo, hi):
        return "-"
    if share:
        return f"{v:.1%} [{lo:.1%}, {hi:.1%}]"
    return f"{_fixed(v)} [{_fixed(lo)}, {_fixed(hi)}]"


def _fixed(value: float) -> str:
    text = f"{value:.3f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _basename(path: str) -> str:
    return os.path.basename(os.path.normpath(path)) or path


def verdict(rec: dict[str, Any]) -> str:
    """"PASS" or "FAIL" where limits were set, else "report only"."""
    passed = rec.get("passed")
    return "report only" if passed is None else ("PASS" if passed else "FAIL")


def replay_cells(rec: dict[str, Any]) -> dict[str, str]:
    """A replay record's table cells as plain text (each medium escapes them)."""
    steps = rec.get("steps")
    return {
        "candidate": str(rec["candidate"]),
        "recording": _basename(str(rec["recording"])),
        "episodes": f"{rec['episodes']}" + (f" ({steps:,} steps)" if steps is not None else ""),
        "divergence": _measure(rec["divergence"], share=False),
        "disagreement": _measure(rec["disagreement"], share=True),
        "ood_actions": _measure(rec["ood_actions"], share=True),
        "ood_recorded": _measure(rec["ood_recorded"], share=True),
        "failed": str(len(rec.get("failed") or [])),
        "verdict": verdict(rec),
    }


def limits_text(rec: dict[str, Any]) -> str:
    """The limits the replay was held to, or "" when none was set.

    >>> limits_text({"limits": {"max_disagreement": 0.1, "max_divergence": None,
    ...                         "mode": "point"}})
    'held to disagreement at most 10.0%, mode point'
    """
    limits = rec.get("limits")
    if not limits:
        return ""
    parts = []
    if limits.get("max_divergence") is not None:
        parts.append(f"divergence at most {limits['max_divergence']:g}")
    if limits.get("max_disagreement") is not None:
        parts.append(f"disagreement at most {limits['max_disagreement']:.1%}")
    if limits.get("mode"):
        parts.append(f"mode {limits['mode']}")
    return "held to " + ", ".join(parts) if parts else ""


def baseline_text(rec: dict[str, Any]) -> str:
    """The recording's own returns, labelled as the recording's, or "" without them.

    >>> text = baseline_text({"baseline": {"returns": [1.0, 3.0], "lengths": [5, 5]}})
    >>> text[:61]
    "the recording's own return: mean 2 over 2 recorded episode(s)"
    >>> text[61:]
    " (the recorded agent's, not the candidate's)"
    """
    returns = (rec.get("baseline") or {}).get("returns")
    if not returns:
        return ""
    mean = sum(returns) / len(returns)
    return (f"the recording's own return: mean {mean:.4g} over {len(returns)} recorded "
            "episode(s) (the recorded agent's, not the candidate's)")


# ----------------------------------------------------------------------------- figures

def divergence_figure(plt: Any, rec: dict[str, Any]) -> Any:
    """Each measured episode's divergence (a dot, in recording order, labelled by episode
    id when few), the overall divergence (a line) and its interval (a band), and the
    limit on divergence when one was set.

    >>> from pytest_rlaudit.reports.chart import pyplot
    >>> plt = pyplot()
    >>> rec = {"divergence": {"value": 0.05, "ci_low": 0.0, "ci_high": 0.1},
    ...        "per_episode": [{"id": 0, "divergence": 0.0, "steps": 5},
    ...                        {"id": 1, "divergence": 0.1, "steps": 5}],
    ...        "confidence": 0.95, "limits": None}
    >>> fig = divergence_figure(plt, rec)
    >>> [float(y) for y in fig.axes[0].lines[-1].get_ydata()]  # the episodes
    [0.0, 0.1]
    >>> plt.close(fig)
    """
    episodes = rec["per_episode"]
    values = [float(e["divergence"]) for e in episodes]
    x = list(range(len(values)))
    d = rec["divergence"]
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    fig.subplots_adjust(left=0.15, right=0.97, bottom=0.18, top=0.86)
    level = rec.get("confidence", 0.95)
    if _finite(d["value"], d["ci_low"], d["ci_high"]):
        ax.axhspan(d["ci_low"], d["ci_high"], color="#1f4e79", alpha=0.15, linewidth=0,
                   label=f"overall, {level:.0%} interval", zorder=1)
        ax.axhline(d["value"], color="#1f4e79", linewidth=1.2, zorder=2)
    limit = (rec.get("limits") or {}).get("max_divergence")
    if limit is not None:
        ax.axhline(limit, color="#c0392b", linestyle="--", linewidth=1, label="limit",
                   zorder=2)
    size = 4 if len(values) <= 50 else 2
    ax.plot(x, values, "o", color="black", markersize=size, zorder=3, label="episode")
    if 0 < len(values) <= 20:
        ax.set_xticks(x, [str(e["id"]) for e in episodes], fontsize=7)
        ax.set_xlabel("episode id", fontsize=8)
    else:
        ax.set_xlabel("episode (recording order)", fontsize=8)
    ax.set_xlim(-0.6, max(len(values), 1) - 0.4)
    top = max([*values, d["ci_high"] if _finite(d["ci_high"]) else 0.0,
               limit if limit is not None else 0.0, 1e-3])
    ax.set_ylim(0, top * 1.35)  # room for the legend above the dots
    ax.set_ylabel("divergence", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(f"divergence per episode ({len(values)} measured)", fontsize=8)
    ax.legend(fontsize=6.5, loc="upper right", frameon=False, ncols=3)
    return fig


def shown_dimensions(worst: dict[str, Any], limit: int = MAX_PANELS) -> list[int]:
    """The action dimensions the worst-episode figure shows: all, or the ``limit`` whose
    recorded and candidate actions differ most in that episode, in dimension order.

    >>> shown_dimensions({"recorded": [[0, 0, 0]], "candidate": [[1, 0, 3]]}, 2)
    [0, 2]
    """
    recorded, candidate = worst["recorded"], worst["candidate"]
    count = len(recorded[0]) if recorded else 0
    if count <= limit:
        return list(range(count))
    gap = [sum(abs(float(c[k]) - float(r[k])) for r, c in zip(recorded, candidate, strict=True))
           for k in range(count)]
    top = sorted(range(count), key=lambda k: (-gap[k], k))[:limit]
    return sorted(top)


def actions_figure(plt: Any, rec: dict[str, Any]) -> Any:
    """The worst episode's recorded and candidate actions over its steps, one small panel
    per shown action dimension (:func:`shown_dimensions`); the record must have a
    ``worst_episode``."""
    worst = rec["worst_episode"]
    names = [p["name"] for p in rec.get("per_dimension") or []]
    dims = shown_dimensions(worst)
    columns = min(4, max(len(dims), 1))
    rows = -(-max(len(dims), 1) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.6 * columns + 0.4, 1.9 * rows + 0.5),
                             squeeze=False, layout="constrained")
    steps = list(range(len(worst["recorded"])))
    style = {"drawstyle": "steps-mid"} if rec.get("discrete") else {}
    for ax, k in zip(axes.flat, dims, strict=False):
        ax.plot(steps, [float(r[k]) for r in worst["recorded"]], color="#777777",
                linewidth=1.6, label="recorded", **style)
        ax.plot(steps, [float(c[k]) for c in worst["candidate"]], color="#c0392b",
                linewidth=1.0, label="candidate", **style)
        name = names[k] if k < len(names) else f"a[{k}]"
        ax.set_title(_text(name, 30), fontsize=8)
        ax.tick_params(labelsize=6.5)
    for ax in list(axes.flat)[len(dims):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("step", fontsize=7)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=2, fontsize=7,
               frameon=False)
    return fig
