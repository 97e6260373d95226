"""The parts of ``index.html`` a runs record adds (``--rl-agent`` a glob of training
runs): each run's ratio as a dot beside the IQM and its interval, the performance profile
(the fraction of runs whose ratio exceeds each ratio tau, as rliable draws it), and a
table of the runs. Drawn with matplotlib like :mod:`.chart`; inlined as SVG by
:mod:`.html`.

>>> rec = {"ratio": 0.4, "ci_low": 0.1, "ci_high": 1.0, "runs": 3,
...        "labels": ["a", "b", "c"], "per_run": [0.1, 1.0, 0.1],
...        "nominal_means": [500.0, 480.0, 500.0]}
>>> profile_points(rec, [0.0, 0.5, 1.0])
[1.0, 0.3333333333333333, 0.0]
>>> "<td>b</td>" in runs_table(rec)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from .._format import fixed
from ..auditing.records import Record
from ..stats.runs import performance_profile
from .chart import BANDS

__all__ = ["TAUS", "profile_points", "runs_figure", "runs_table"]

#: The ratios tau at which the profile is drawn: 0 to 1.2 in steps of 0.01 (a ratio
#: above 1.2 is rare and means the same as 1.2 here: no harm).
TAUS = [round(i * 0.01, 2) for i in range(121)]


def profile_points(rec: Record, taus: Sequence[float] = TAUS) -> list[float]:
    """The fraction of the record's runs whose ratio exceeds each of ``taus``."""
    return [float(x) for x in performance_profile(rec["per_run"], taus)]


def runs_figure(plt: Any, rec: Record) -> Any:
    """Two panels: each run's ratio (dots) beside the IQM and its interval (over the rating
    bands), and the performance profile over :data:`TAUS`.

    >>> from pytest_rlaudit.reports.chart import pyplot
    >>> plt = pyplot()
    >>> fig = runs_figure(plt, {"ratio": 0.4, "ci_low": 0.1, "ci_high": 1.0,
    ...                         "per_run": [0.1, 1.0, 0.1], "thresholds": {}})
    >>> len(fig.axes), fig.axes[0].collections[0].get_offsets().shape
    (2, (3, 2))
    >>> plt.close(fig)
    """
    per_run = rec["per_run"]
    fig, (dots, profile) = plt.subplots(1, 2, figsize=(6.0, 2.4))
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.22, top=0.86, wspace=0.35)
    low = min(0.0, *per_run, rec["ci_low"]) - 0.05
    high = max(1.2, *per_run, rec["ci_high"]) + 0.05
    edges = [low, *_band_floors(rec), high]
    for (_, colour), start, stop in zip(BANDS, edges, edges[1:], strict=False):
        dots.axvspan(start, stop, color=colour, zorder=0, linewidth=0)
    # runs spread over a small vertical jitter so equal ratios stay visible, one row
    ys = [0.6 + 0.3 * (j % 3) / 2 for j in range(len(per_run))]
    dots.scatter(per_run, ys, s=22, color="#1f4e79", alpha=0.75, linewidths=0, zorder=3)
    dots.errorbar([rec["ratio"]], [0.2], xerr=[[rec["ratio"] - rec["ci_low"]],
                                              [rec["ci_high"] - rec["ratio"]]],
                  fmt="D", color="#222222", markersize=5, capsize=3, zorder=4)
    dots.set_xlim(low, high)
    dots.set_ylim(0, 1.1)
    dots.set_yticks([0.2, 0.75], ["IQM", "runs"], fontsize=7)
    dots.set_xlabel("return ratio", fontsize=8)
    dots.tick_params(labelsize=7)
    dots.set_title(f"{len(per_run)} runs: IQM {fixed(rec['ratio'])}", fontsize=8)
    profile.step(TAUS, profile_points(rec), where="post", color="#1f4e79")
    profile.set_xlim(0, TAUS[-1])
    profile.set_ylim(-0.03, 1.03)
    profile.set_xlabel("ratio tau", fontsize=8)
    profile.set_ylabel("fraction of runs > tau", fontsize=8)
    profile.tick_params(labelsize=7)
    profile.set_title("performance profile", fontsize=8)
    return fig


def _band_floors(rec: Record) -> list[float]:
    """The floors of DEGRADED, MILD and PASS: the record's scale, else the default."""
    t = {"degraded": 0.5, "mild": 0.8, "pass": 0.95, **(rec.get("thresholds") or {})}
    return [t["degraded"], t["mild"], t["pass"]]


def runs_table(rec: Record) -> str:
    """An HTML table of the runs: label, ratio, nominal mean return."""
    rows = "".join(f'<tr><td>{escape(str(label))}</td><td class="num">{fixed(r)}</td>'
                   f'<td class="num">{fixed(n, 1)}</td></tr>'
                   for label, r, n in zip(rec.get("labels", []), rec["per_run"],
                                          rec.get("nominal_means", []), strict=False))
    return ('<table class="runs"><tr><th>run</th><th>ratio</th><th>nominal</th></tr>'
            f"{rows}</table>")
