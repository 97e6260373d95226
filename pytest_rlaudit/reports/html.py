"""``index.html``: the ``--rl-report`` folder as one self-contained page.

Per agent and env: its scores, a forest plot of every scenario's ratio and interval over
the rating bands, a table, then per scenario the paired per-episode returns, the full
diagnosis, its tolerance curve and its video; then the replays (``summary.json``'s
``replays``: a row per replay, each one's diagnosis, its divergence per episode and its
worst episode's actions; :mod:`.replay_chart`). Works offline: figures are inline SVG,
images ``data:`` URIs, no script, and a Content-Security-Policy forbids every fetch.
Without matplotlib the page has the tables and says how to get the plots.

>>> page = html({"schema": 1, "results": [], "aggregates": [], "note": "a <note>"}, ".")
>>> "No audit results." in page and "a &lt;note&gt;" in page
True
"""

from __future__ import annotations

import base64
import mimetypes
import re
from html import escape
from pathlib import Path
from typing import Any

from .._format import fixed, interval, p_value
from ..auditing.records import Gate, Record
from ..stats.ratings import INCONCLUSIVE
from .badges import badge, badge_value
from .chart import (
    BANDS,
    forest_figure,
    pair_title,
    paired_figure,
    pairs,
    pyplot,
    ratio_range,
    svg_text,
    tolerance_figure,
)
from .replay_chart import (
    MAX_PANELS,
    REPLAY_COLUMNS,
    REPLAY_NOTE,
    actions_figure,
    baseline_text,
    divergence_figure,
    limits_text,
    replay_cells,
    shown_dimensions,
)
from .rows import (
    agg_baseline,
    agg_reference,
    episodes_cell,
    gated,
    mix_mark_of,
    nominal_mean,
    rating_cell,
    ratio_cell,
    reference_text,
    scenario_label,
    score_text,
    short_diagnosis,
    tolerance_text,
)

__all__ = ["html", "PLOT_HINT"]

#: What the page says when it has no plots.
PLOT_HINT = "Plots need matplotlib: pip install 'pytest-rlaudit[plot]'"

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 2px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
figure { margin: 0.5em 1em 0.5em 0; display: inline-block; vertical-align: top; }
figure svg, figure img { max-width: 100%; height: auto; }
figure.forest { display: block; margin: 1em 0; }
.body { display: flex; flex-wrap: wrap; gap: 0 2em; align-items: flex-start; }
.body > div { flex: 1 1 24em; } .body > div.figures { flex: 2 1 30em; }
h3 span { padding: 0 0.3em; border-radius: 3px; font-size: 0.85em; }
figcaption { font-size: 0.85em; color: #555; max-width: 24em; }
.forest figcaption { max-width: none; }
.scenario { border-left: 4px solid #ddd; padding-left: 1em; margin: 1.5em 0; }
.note { color: #555; font-style: italic; }
.badges img { margin-right: 0.4em; vertical-align: middle; }
dl.diagnosis dt { font-weight: bold; } dl.diagnosis dd { margin: 0 0 0.4em 1.5em; }
.regressed { background: #f4b6b6; } .worse { background: #f8d5a8; }
.improved { background: #c4e6c1; } .INCONCLUSIVE { background: #b3d7f0; }
table.glance td.why { max-width: 30em; }
.replay { border-left: 4px solid #ddd; padding-left: 1em; margin: 1.5em 0; }
.replay figure.actions { display: block; }
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def html(doc: dict[str, Any], directory: str | Path) -> str:
    """The report page of the summary.json document ``doc``, whose files (videos) are
    read from ``directory``."""
    results = doc["results"]
    replays = doc.get("replays") or []
    plt = pyplot() if results or replays else None
    groups = pairs(doc)
    body = [f"<h1>RL robustness audit</h1><p>{_e(doc.get('tool', 'pytest-rlaudit'))} "
            f"{_e(doc.get('version', ''))}, seed {_e(doc.get('seed', '-'))}: "
            f"{len(results)} result(s), {len(groups)} agent/env pair(s)"
            + (f", {len(replays)} replay(s)" if replays else "") + ".</p>",
            _badges(doc["aggregates"]), _glance(doc["aggregates"])]
    if groups:
        body.append("<nav><ul>" + "".join(
            f'<li><a href="#g{i}">{_e(pair_title(agg))}</a></li>'
            for i, (agg, _) in enumerate(groups, 1)) + "</ul></nav>")
    body += _problems(doc)
    if doc.get("comparison"):
        body.append(_comparison(doc["comparison"]))
    if doc.get("history"):  # the run is kept in a history folder: its page is beside this
        body.append(f'<p>Robustness over time: <a href="{_e(doc["history"]["page"])}">every '
                    f'run kept in {_e(doc["history"]["folder"])}</a>.</p>')
    if not results and not replays:
        body.append("<p>No audit results.</p>")
    elif plt is None:
        body.append(f'<p class="note">{_e(PLOT_HINT)}</p>')
    xlim = ratio_range(results)
    body += [_pair(f"g{i}", agg, records, xlim, plt, Path(directory))
             for i, (agg, records) in enumerate(groups, 1)]
    if replays:
        body.append(_replays(replays, plt))
    return page("RL robustness audit", body)


def page(title: str, body: list[str]) -> str:
    """A self-contained page of ``body``'s parts: the report's style and rating bands,
    and a policy that loads nothing from anywhere."""
    bands = "".join(f".{name} {{ background: {colour}; }}\n" for name, colour in BANDS)
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title><style>{_CSS}{bands}</style></head>\n"
            "<body>\n" + "\n".join(body) + "\n</body></html>\n")


def _glance(aggregates: list[dict[str, Any]]) -> str:
    """The top of the page: per agent and env, what the ratios are ratios of (the nominal
    mean return and the reference score), its ratings, and, when one could not be rated,
    why."""
    if not aggregates:
        return ""
    unrated = any(agg.get("inconclusive") for agg in aggregates)
    rows = []
    for agg in aggregates:
        cells = "".join(
            f'<td class="{_e(agg[c]["rating"])}">{_e(score_text(agg[c]))}</td>'
            if agg.get(c) else "<td>-</td>"
            for c in ("deployment", "stress"))
        why = f'<td class="why">{_e(agg.get("inconclusive") or "-")}</td>' if unrated else ""
        rows.append(f"<tr><td>{_e(agg['agent'])}</td><td>{_e(agg['env'])}</td>"
                    f'<td class="num">{fixed(agg.get("nominal", float("nan")), 1)}</td>'
                    f'<td class="num">{_e(agg.get("episodes", "?"))}</td>'
                    f'<td class="num">{_e(agg_reference(agg))}</td>{cells}{why}</tr>')
    return ('<table class="glance"><tr><th>agent</th><th>env</th><th>nominal return</th>'
            "<th>episodes</th><th>reference</th><th>deployment</th><th>stress</th>"
            + ("<th>cannot rate because</th>" if unrated else "") + "</tr>"
            + "".join(rows) + "</table>"
            '<p class="note">A ratio is (perturbed - reference) / (nominal - reference): '
            "the share of the nominal return above the reference that the agent keeps."
            + (" INCONCLUSIVE: the nominal return is not clearly above the reference, so no "
               "ratio of it can be rated." if unrated else "") + "</p>")


def _badges(aggregates: list[dict[str, Any]]) -> str:
    """The deployment and stress badges over ``aggregates`` (those it has), as images."""
    items = []
    for category in ("deployment", "stress"):
        value, colour, title = badge_value(aggregates, category)
        if value != "n/a":
            svg = badge(category, value, colour, title).encode()
            items.append(f'<img alt="{_e(title)}" title="{_e(title)}" '
                         f'src="{_data("image/svg+xml", svg)}">')
    return f'<p class="badges">{"".join(items)}</p>' if items else ""


def _data(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _svg(fig: Any, salt: str) -> str:
    """A figure as SVG inside the page: without the XML prolog and metadata, and without
    namespace declarations (HTML puts <svg> in its namespace; none is a URL to fetch)."""
    svg = svg_text(fig, f"pytest-rlaudit-{salt}")
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)


def _problems(doc: dict[str, Any]) -> list[str]:
    items = [f"<li>lost with a crashed xdist worker: <code>{_e(x['nodeid'])}</code></li>"
             for x in doc.get("lost", [])]
    items += [f"<li>error: <code>{_e(x['nodeid'])}</code>: {_e(x['message'])}</li>"
              for x in doc.get("errors", [])]
    out = [f'<p class="note">{_e(doc["note"])}</p>'] if doc.get("note") else []
    return out + ([f"<h2>Problems</h2><ul>{''.join(items)}</ul>"] if items else [])


def _pair(anchor: str, agg: dict[str, Any], records: list[Record],
          xlim: tuple[float, float], plt: Any, directory: Path) -> str:
    """One agent on one env: scores, forest plot, table, then each scenario."""
    scores = "; ".join(f"{cat}: worst {_e(score_text(agg[cat]))} "
                       f"({_e(agg[cat]['scenario'])})" for cat in ("deployment", "stress")
                       if agg.get(cat)) or "no deployment or stress scenario"
    base = f"Ratios of the {_e(agg_baseline(agg))}"
    why = f" {_e(INCONCLUSIVE)}: {_e(agg['inconclusive'])}." if agg.get("inconclusive") else ""
    out = [f'<section class="pair" id="{anchor}"><h2>{_e(agg["agent"])} on {_e(agg["env"])}'
           f"</h2>", _badges([agg]), f"<p>{base}.{why}</p>", f"<p>{scores}</p>"]
    if agg.get("agent_details"):  # an exported robot policy's batching and metadata
        out.append('<h3>Agent</h3><ul class="agent">' + "".join(
            f"<li>{_e(line)}</li>" for line in agg["agent_details"]) + "</ul>")
    if agg.get("mix"):
        out.append(f"<p>Train under what broke it (<code>pytest_rlaudit.perturbations"
                   f".ScenarioMix</code>): <code>{_e(agg['mix'])}</code> "
                   f"({_e(mix_mark_of(agg))})</p>")
    if plt is not None:
        fig = forest_figure(plt, [("", records)], xlim)
        out.append(f'<figure class="forest">{_svg(fig, anchor)}<figcaption>Each scenario\'s '
                   "return ratio (perturbed / nominal) and its interval over the rating "
                   "bands; a hollow dot gated nothing (reported only).</figcaption></figure>")
    level = records[0].get("confidence", 0.95)
    out.append(f"<table><tr><th>scenario</th><th>category</th><th>n</th><th>nominal</th>"
               f"<th>ref</th><th>ratio</th><th>{level:.0%} CI</th><th>rating</th><th>p</th>"
               "<th>diagnosis</th></tr>")
    for j, rec in enumerate(records, 1):
        out.append(
            f'<tr><td><a href="#{anchor}-s{j}">{_e(scenario_label(rec))}</a></td>'
            f'<td>{_e(rec.get("category", ""))}</td>'
            f'<td class="num">{_e(episodes_cell(rec))}</td>'
            f'<td class="num">{fixed(nominal_mean(rec), 1)}</td>'
            f'<td class="num">{_e(reference_text(rec))}</td>'
            f'<td class="num">{_e(ratio_cell(rec))}</td>'
            f'<td class="num">{interval(rec["ci_low"], rec["ci_high"])}</td>'
            f'<td class="{_e(rec["rating"])}">{_e(rating_cell(rec))}</td>'
            f'<td class="num">{p_value(rec.get("p_value"))}</td>'
            f"<td>{_e(short_diagnosis(rec) or '-')}</td></tr>")
    out.append("</table>")
    out += [_scenario(f"{anchor}-s{j}", rec, plt, directory)
            for j, rec in enumerate(records, 1)]
    return "\n".join([*out, "</section>"])


def _scenario(anchor: str, rec: Record, plt: Any, directory: Path) -> str:
    """One record: its numbers, diagnosis, paired returns, tolerance curve and video."""
    gate = rec.get("gate")
    verdict = ("gated" + (f" ({'passed' if rec.get('passed') else 'failed'})"
                          if "passed" in rec else "")) if gated(rec) else "reported only"
    level = rec.get("confidence", 0.95)
    episodes = len(rec.get("returns") or []) or rec.get("episodes", "?")
    out = [f'<section class="scenario" id="{anchor}"><h3>{_e(scenario_label(rec))} '
           f'<span class="{_e(rec["rating"])}">{_e(rec["rating"])}</span></h3>',
           f"<p>{_ratio_word(rec)} "
           f"{fixed(rec['ratio'])} ({level:.0%} CI "
           f"{interval(rec['ci_low'], rec['ci_high'])}), p {p_value(rec.get('p_value'))}, "
           f"{_e(episodes)} paired episodes, nominal {fixed(nominal_mean(rec), 1)}, "
           f"reference {_e(reference_text(rec))}, "
           f"{_e(rec.get('category', '?'))}, {verdict}"
           + (f" by {_e(_gate_text(gate))}" if gate else "")
           + f"; test <code>{_e(rec['nodeid'])}</code></p>"]
    schedule = rec.get("schedule")
    if schedule:
        out.append(f"<p>Schedule: {_e(schedule.get('description', ''))} "
                   f"<code>{_e(schedule.get('repr', ''))}</code></p>")
    d = rec.get("diagnosis")
    diagnosis = "" if not d else (
        f"<dl class=\"diagnosis\"><dt>Pattern</dt><dd>{_e(d['pattern'])}</dd>"
        f"<dt>Likely cause</dt><dd>{_e(d['cause'])}</dd><dt>Fix</dt><dd>{_e(d['fix'])}</dd></dl>")
    out.append(f'<div class="body"><div>{diagnosis}{_returns_table(rec)}</div>')
    figures = []
    if plt is not None and rec.get("returns") and rec.get("nominal_returns"):
        figures.append(f"<figure>{_svg(paired_figure(plt, rec), anchor + '-paired')}"
                       "<figcaption>Each episode's perturbed return against its nominal twin "
                       "(same seed); on the diagonal, the perturbation changed nothing."
                       "</figcaption></figure>")
    if rec.get("tolerance"):
        sentence, points = tolerance_text(rec)
        svg = ("" if plt is None else
               _svg(tolerance_figure(plt, [rec]), anchor + "-tolerance"))
        figures.append(f"<figure>{svg}<figcaption>Tolerance curve: {_e(sentence)} "
                       f"({_e(points)}).</figcaption></figure>")
    if "runs" in rec:  # training runs: each run's ratio, and their performance profile
        from .runs import runs_figure, runs_table

        svg = "" if plt is None else _svg(runs_figure(plt, rec), anchor + "-runs")
        figures.append(f'<figure class="runs">{svg}<figcaption>Each run\'s ratio (dots) '
                       "beside the IQM and its interval; the performance profile: the "
                       "fraction of runs whose ratio exceeds each tau.</figcaption>"
                       f"{runs_table(rec)}</figure>")
    video = rec.get("video")
    if video:
        figures.append(_video(video, directory))
    doc = rec.get("attribution")
    if doc:
        from .attribution import attribution_figure, attribution_html

        svg = "" if plt is None else _svg(attribution_figure(plt, doc), anchor + "-attribution")
        figures.append(attribution_html(doc, svg))
    out += ['<div class="figures">', *figures, "</div></div></section>"]
    return "\n".join(out)


def _ratio_word(rec: Record) -> str:
    return f"IQM ratio of {rec['runs']} runs" if "runs" in rec else "ratio"


def _gate_text(gate: Gate) -> str:
    parts = [f"min ratio {gate['min_ratio']}" if gate.get("min_ratio") is not None else "",
             f"min rating {gate['min_rating']}" if gate.get("min_rating") else "",
             f"mode {gate['mode']}" if gate.get("mode") else ""]
    return ", ".join(p for p in parts if p)


def _returns_table(rec: Record) -> str:
    """The paired returns as numbers, folded away."""
    returns, nominal = rec.get("returns") or [], rec.get("nominal_returns") or []
    if not returns or len(nominal) != len(returns):
        return ""
    seeds: list[int] | list[str] = rec.get("seeds") or ["?"] * len(returns)
    rows = "".join(f'<tr><td class="num">{_e(s)}</td><td class="num">{n:.1f}</td>'
                   f'<td class="num">{r:.1f}</td></tr>'
                   for s, n, r in zip(seeds, nominal, returns, strict=False))
    return ("<details><summary>Per-episode returns</summary><table><tr><th>seed</th>"
            f"<th>nominal</th><th>perturbed</th></tr>{rows}</table></details>")


def _video(video: dict[str, Any], directory: Path) -> str:
    """The scenario's video as a data: URI (the page stays one file), or why there is none."""
    if video.get("skipped") or not video.get("file"):
        return f'<p class="note">No video: {_e(video.get("skipped", "no file recorded"))}</p>'
    name = str(video["file"])
    mime = mimetypes.guess_type(name)[0] or ""
    try:
        data = (directory / name).read_bytes()
    except OSError as exc:
        return f'<p class="note">Video {_e(name)} cannot be read: {_e(exc.strerror or exc)}</p>'
    if not mime.startswith("image/"):
        return f'<p class="note">Video {_e(name)} is not an image file.</p>'
    parts = [f"episode {video['episode']}" if "episode" in video else "",
             f"seed {video['seed']}" if "seed" in video else "",
             f"env steps {video['start']} to {video['stop'] - 1}" if "start" in video else ""]
    caption = "Perturbed (left) and nominal (right), " + ", ".join(p for p in parts if p)
    if video.get("parting_step") is not None:
        caption += f"; the two runs part at step {video['parting_step']}"
    return (f'<figure><img alt="{_e(caption)}" src="{_data(mime, data)}">'
            f"<figcaption>{_e(caption)}.</figcaption></figure>")


def _comparison(comparison: dict[str, Any]) -> str:
    """The comparison with a baseline: the decision, then every compared row."""
    decision = {"ship": "ship", "hold": "hold", "inconclusive": "inconclusive"}.get(
        comparison["decision"], "report only")
    tolerances = ", ".join(comparison["tolerances"]) or "none (report only: nothing was gated)"
    out = [f"<h2>Compared with the baseline: {_e(decision)}</h2>",
           f"<p>Baseline <code>{_e(comparison.get('baseline', '?'))}</code>; fail tolerances: "
           f"{_e(tolerances)}.</p>"]
    if comparison.get("summary"):
        out.append(f"<p><strong>{_e(comparison['summary'])}</strong></p>")
    if comparison.get("power_note") and comparison["decision"] != "inconclusive":
        out.append(f'<p class="note">{_e(comparison["power_note"])}</p>')
    if comparison["changes"]:
        out.append("<table><tr><th>test</th><th>scenario</th><th>metric</th><th>baseline</th>"
                   "<th>now</th><th>change</th><th>status</th></tr>")
        for c in comparison["changes"]:
            fmt = "{:.1f}" if c["metric"] == "return" else "{:.3f}"
            status = c["status"] if c["status"] in ("regressed", "worse", "improved") else ""
            out.append(f'<tr class="{status}"><td>{_e(c["key"])}</td><td>{_e(c["scenario"])}'
                       f'</td><td>{_e(c["metric"])}</td>'
                       f'<td class="num">{fmt.format(c["baseline"])}</td>'
                       f'<td class="num">{fmt.format(c["current"])}</td>'
                       f'<td class="num">{c["delta"]:+.3g}</td><td>{_e(c["status"])}</td></tr>')
        out.append("</table>")
    items = [f"<li>cannot compare: {_e(m)}</li>" for m in comparison["mismatches"]]
    if comparison["new"]:
        items.append(f"<li>new (not in the baseline): {_e(', '.join(comparison['new']))}</li>")
    if comparison["missing"]:
        items.append("<li>in the baseline, not in this run: "
                     f"{_e(', '.join(comparison['missing']))}</li>")
    return "\n".join(out + ([f"<ul>{''.join(items)}</ul>"] if items else []))


def _replays(replays: list[dict[str, Any]], plt: Any) -> str:
    """The replays: what they measure, a row per replay, then per replay its diagnosis,
    the divergence of each episode and the worst episode's actions."""
    head = "".join(f"<th>{_e(title)}</th>" for _, title in REPLAY_COLUMNS)
    rows = []
    for i, rec in enumerate(replays, 1):
        cells = replay_cells(rec)
        tds = []
        for key, _ in REPLAY_COLUMNS:
            text = _e(cells[key])
            if key == "candidate":
                tds.append(f'<td><a href="#r{i}">{text}</a></td>')
            elif key == "recording":
                tds.append(f'<td title="{_e(rec["recording"])}">{text}</td>')
            elif key == "verdict":
                tds.append(f'<td class="{_e(cells[key].replace(" ", "-"))}">{text}</td>')
            elif " [" in cells[key]:  # the interval under its value: the table fits the page
                value, ci = cells[key].split(" [", 1)
                tds.append(f'<td class="num">{_e(value)}<br><small>[{_e(ci)}</small></td>')
            else:
                tds.append(f'<td class="num">{text}</td>')
        rows.append("<tr>" + "".join(tds) + "</tr>")
    out = ['<section id="replays"><h2>Replays: action agreement with recordings</h2>',
           f'<p class="note">{_e(REPLAY_NOTE)}</p>']
    if plt is None:
        out.append(f'<p class="note">{_e(PLOT_HINT)}</p>')
    out += [f"<table><tr>{head}</tr>{''.join(rows)}</table>",
            *(_replay(f"r{i}", rec, plt) for i, rec in enumerate(replays, 1)), "</section>"]
    return "\n".join(out)


def _replay(anchor: str, rec: dict[str, Any], plt: Any) -> str:
    """One replay: its verdict, diagnosis, failed episodes, limits, the recording's own
    returns, and its two figures."""
    cells = replay_cells(rec)
    verdict = cells["verdict"]
    out = [f'<section class="replay" id="{anchor}"><h3>{_e(rec["candidate"])} vs '
           f'{_e(cells["recording"])} <span class="{_e(verdict.replace(" ", "-"))}">'
           f"{_e(verdict)}</span></h3>",
           f"<p>{_e(rec.get('format', '?'))} recording <code>{_e(rec['recording'])}</code>"
           + (f", recorded by {_e(rec['recorded_by'])}" if rec.get("recorded_by") else "")
           + f": {_e(cells['episodes'])}, tolerance {_e(rec.get('tolerance', '?'))}; "
           f"test <code>{_e(rec['nodeid'])}</code></p>",
           f"<p><strong>Diagnosis:</strong> {_e(rec.get('diagnosis') or '-')}</p>"]
    items = [f"<li>failed episode {_e(f['id'])} at step {_e(f['step'])}: "
             f"<code>{_e(f['error'])}</code></li>" for f in rec.get("failed") or []]
    items += [f"<li>{_e(text)}</li>" for text in (limits_text(rec), baseline_text(rec)) if text]
    if items:
        out.append(f"<ul>{''.join(items)}</ul>")
    figures = []
    if plt is not None and rec.get("per_episode"):
        level = rec.get("confidence", 0.95)
        figures.append(f"<figure>{_svg(divergence_figure(plt, rec), anchor + '-divergence')}"
                       "<figcaption>Each measured episode's divergence (its steps' mean "
                       f"action distance); the line and band: the overall divergence and its "
                       f"{level:.0%} interval over episodes"
                       + (f"; {len(rec['failed'])} failed episode(s) not shown"
                          if rec.get("failed") else "") + ".</figcaption></figure>")
    worst = rec.get("worst_episode")
    if plt is not None and worst and worst.get("recorded"):
        total = len(worst["recorded"][0])
        shown = len(shown_dimensions(worst))
        hidden = (f" Showing the {shown} of {total} action dimensions that differ most in "
                  f"this episode; {total - shown} hidden (at most {MAX_PANELS} panels)."
                  if shown < total else "")
        figures.append(f'<figure class="actions">'
                       f"{_svg(actions_figure(plt, rec), anchor + '-actions')}"
                       f"<figcaption>The worst episode (id {_e(worst['id'])}, the highest "
                       "divergence): the recorded action (grey) and the candidate's (red) at "
                       f"each step, per action dimension.{_e(hidden)}</figcaption></figure>")
    elif plt is not None and rec.get("per_episode"):
        figures.append('<p class="note">No worst-episode chart: the candidate took the '
                       "recorded action at every measured step.</p>")
    out += figures
    return "\n".join([*out, "</section>"])
