"""Renderers of a history folder (:mod:`~pytest_rlaudit.auditing.history`): the list of
its runs, each scenario's trend as terminal lines, and the history page (``history.html``):
each scenario's ratio and interval run by run, with the first significant paired drop
marked at its run and commit.

>>> from pathlib import Path
>>> from pytest_rlaudit.auditing.history import Run
>>> from pytest_rlaudit.auditing.trend import Point, Trend
>>> run = Run(Path("0001_abc.json"), 1, "abc", False, True, {"rl_episodes": 6})
>>> trend = Trend("t::spike", "spike", "PPO", "CartPole-v1", [Point(run, 0.9, 0.8, 1.0, "MILD")])
>>> for line in trend_lines([trend]):
...     print("".join(text for text, _ in line))
t::spike (PPO on CartPole-v1, spike)
  #0001 abc         ratio 0.900 (0.800 to 1.000) MILD
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._format import fixed, interval
from ..auditing.history import Runs, settings_text
from ..auditing.trend import Trend
from .chart import BANDS, pyplot
from .html import PLOT_HINT, _e, _svg, page
from .terminal import Line

__all__ = ["run_lines", "trend_lines", "history_page", "SHOWN_RUNS", "PAGE_RUNS"]

#: Runs a terminal trend shows (the latest).
SHOWN_RUNS = 10
#: Runs the page a test run writes shows (the latest): each costs a paired comparison
#: with the run before (``python -m pytest_rlaudit history DIR --html`` shows them all).
PAGE_RUNS = 30


def run_lines(runs: Runs) -> list[Line]:
    """One line per run of a history folder (number, commit, marks, date, settings,
    results), then each file skipped and why."""
    lines: list[Line] = []
    for run in runs.runs:
        results = len(run.doc.get("results", []))
        workers = f", {run.workers} workers" if run.workers else ""
        lines.append([(f"{run.label:32} {run.created[:16]:16}  {results} result(s){workers}; "
                       f"{settings_text(run.key)}", "" if run.complete else "warn")])
    lines += [[(f"skipped {why}", "warn")] for why in runs.skipped]
    return lines or [[("no run in this folder", "")]]


def _commit(run: Any) -> str:
    """``0123456789ab dirty partial``: a run's commit and marks."""
    return " ".join([run.commit[:12]] + ["dirty"] * run.dirty + ["partial"] * (not run.complete))


def _point_text(point: Any, width: int) -> str:
    return (f"  #{point.run.number:04d} {_commit(point.run):{width}} ratio {fixed(point.ratio)} "
            f"({interval(point.ci_low, point.ci_high)}) {point.rating}")


def trend_lines(trends: Sequence[Trend], last: int = SHOWN_RUNS) -> list[Line]:
    """Each test's trend over its ``last`` runs; each significant drop marked with its
    change against the run before, the first as such where every run was looked at."""
    lines: list[Line] = []
    for trend in trends:
        lines.append([(f"{trend.key} ({trend.agent} on {trend.env}, {trend.scenario})", "bold")])
        shown = trend.points[-last:]
        hidden = trend.earlier + len(trend.points) - len(shown)
        if hidden:
            lines.append([(f"  ({hidden} earlier run(s) not shown)", "")])
        first = trend.first_drop
        width = max(len(_commit(p.run)) for p in shown)
        for point in shown:
            line: Line = [(_point_text(point, width), point.rating)]
            if point.drop is not None:
                lead = "first significant drop" if point is first else "significant drop"
                line.append((f"  <- {lead} against the run before: {_change(point.drop)}",
                             "worse"))
            lines.append(line)
    return lines or [[("no audited test in these runs", "")]]


def _change(drop: Any) -> str:
    """``-0.454 (CI -0.665 to -0.240)``: a ratio's change against the run before."""
    ci = f" (CI {drop.ci[0]:+.3f} to {drop.ci[1]:+.3f})" if drop.ci else ""
    return f"{drop.delta:+.3f}{ci}"


def _figure(plt: Any, trend: Trend) -> Any:
    """Ratio and interval by run, the rating bands behind, the first drop ringed."""
    xs = list(range(len(trend.points)))
    ratios = [p.ratio for p in trend.points]
    low = [max(0.0, p.ratio - p.ci_low) for p in trend.points]
    high = [max(0.0, p.ci_high - p.ratio) for p in trend.points]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(xs) + 2), 2.6))
    top = max(1.05, max(p.ci_high for p in trend.points) + 0.05)
    t = trend.thresholds
    if t:  # the latest run's bands, as the report's forest plot draws them
        edges = [0.0, *(min(max(float(t[k]), 0.0), top) for k in ("degraded", "mild", "pass")),
                 top]
        for (_, colour), lo, hi in zip(BANDS, edges, edges[1:], strict=False):
            ax.axhspan(lo, hi, color=colour, lw=0, zorder=0)
    ax.errorbar(xs, ratios, yerr=[low, high], fmt="o-", color="#333", capsize=3, lw=1)
    first = trend.first_drop
    if first is not None:
        at = trend.points.index(first)
        ax.plot([at], [first.ratio], "o", ms=14, mfc="none", mec="#c00", mew=2)
    ax.set_xticks(xs, [f"#{p.run.number}\n{p.run.commit[:7]}" for p in trend.points],
                  fontsize=7)
    ax.set_ylim(0, top)
    ax.set_ylabel("return ratio")
    ax.set_title(f"{trend.scenario}: {trend.agent} on {trend.env}", loc="left", fontsize=9)
    fig.tight_layout()
    return fig


def _row(point: Any, first: bool) -> str:
    """A run's row of a test's table on the page; a significant drop shaded and said."""
    drop = "" if point.drop is None else (
        ("first significant drop " if first else "significant drop ") + _change(point.drop))
    return (f'<tr class="{"worse" if drop else ""}"><td>#{point.run.number:04d}</td>'
            f"<td><code>{_e(point.run.commit[:12])}</code>{_e(_commit(point.run)[12:])}</td>"
            f'<td class="num">{fixed(point.ratio)}</td>'
            f'<td class="num">{_e(interval(point.ci_low, point.ci_high))}</td>'
            f'<td class="{_e(point.rating)}">{_e(point.rating)}</td><td>{_e(drop)}</td></tr>')


def history_page(trends: Sequence[Trend], runs: Runs, folder: str) -> str:
    """The history page: the runs, then per test its chart and table."""
    plt = pyplot() if trends else None
    settings = f" with {settings_text(runs.runs[0].key)}" if runs.runs else ""
    earlier = max((trend.earlier for trend in trends), default=0)
    window = f"; the latest {len(runs.runs) - earlier} are shown" if earlier else ""
    body = [f"<h1>RL robustness over time</h1><p>History {_e(folder)}: {len(runs.runs)} "
            f"run(s){_e(settings)}{_e(window)}.</p>"]
    if runs.skipped:
        body.append("<h2>Skipped files</h2><ul>" + "".join(
            f"<li>{_e(why)}</li>" for why in runs.skipped) + "</ul>")
    body.append("<h2>Runs</h2><table><tr><th>run</th><th>commit</th><th>created</th>"
                "<th>results</th><th>settings</th></tr>" + "".join(
                    f"<tr><td>#{run.number:04d}</td><td><code>{_e(run.commit[:12])}</code>"
                    f"{' dirty' if run.dirty else ''}{'' if run.complete else ' partial'}</td>"
                    f"<td>{_e(run.created)}</td><td class=\"num\">"
                    f"{len(run.doc.get('results', []))}</td><td>{_e(settings_text(run.key))}</td></tr>"
                    for run in runs.runs) + "</table>")
    if trends and plt is None:
        body.append(f'<p class="note">{_e(PLOT_HINT)}</p>')
    for i, trend in enumerate(trends, 1):
        first = trend.first_drop
        drops = [p for p in trend.points if p.drop is not None]
        mark = (f"first significant drop at run #{first.run.number:04d} (commit "
                f"<code>{_e(first.run.commit[:12])}</code>): {_e(_change(first.drop))}"
                if first is not None and first.drop is not None
                else f"{len(drops)} significant drop(s) in the runs shown" if drops
                else "no significant drop between consecutive runs")
        out = [f'<section class="scenario" id="t{i}"><h2>{_e(trend.key)}</h2>'
               f"<p>{_e(trend.agent)} on {_e(trend.env)}, {_e(trend.scenario)}: "
               f'<span class="first">{mark}</span>.</p>']
        if plt is not None:
            fig = _figure(plt, trend)
            out.append(f"<figure>{_svg(fig, f'history-{i}')}<figcaption>Each run's ratio and "
                       "interval over the rating bands; the ring marks the first significant "
                       "drop.</figcaption></figure>")
            plt.close(fig)
        out.append("<table><tr><th>run</th><th>commit</th><th>ratio</th><th>interval</th>"
                   "<th>rating</th><th>against the run before</th></tr>"
                   + "".join(_row(p, p is first) for p in trend.points) + "</table></section>")
        body.append("".join(out))
    if not trends:
        body.append("<p>No audited test in these runs.</p>")
    return page("RL robustness over time", body)
