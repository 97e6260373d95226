"""``summary.md``: a PR-ready Markdown summary of a summary.json document.

It goes into ``$GITHUB_STEP_SUMMARY``, which GitHub renders as Markdown with some HTML, so
every text that comes from users (agent, env, scenario and test names, paths, error
messages, diagnoses that quote them) goes through :func:`md`, the one escaper of this
medium: HTML cannot pass, and a ``|`` or a newline cannot break a table or start a heading
(:func:`md_code` sets a text to copy, such as the ScenarioMix line, as a code span).
"""

from __future__ import annotations

import re
from typing import Any

from .._format import diagnosis_sentence, fixed, interval, p_value
from .replay_chart import REPLAY_COLUMNS, REPLAY_NOTE, baseline_text, limits_text, replay_cells
from .rows import (
    agg_baseline,
    episodes_cell,
    gated,
    mix_mark_of,
    nominal_mean,
    rating_cell,
    ratio_cell,
    reference_text,
    runs_text,
    scenario_label,
    short_diagnosis,
    tolerance_text,
)

__all__ = ["markdown", "md", "md_code"]

# Line breaks of any kind end a table row or a list item; a heading or a list could follow.
_BREAKS = re.compile(r"\r\n|[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
# Markdown that acts mid-line, escaped with a backslash (CommonMark renders the character
# itself): code spans, emphasis and strikethrough (an underscore only at a word's edge:
# within a word, as in speed_5x, it is text already), table cells, and the "](" of an
# inline link or image (nothing else makes one: no text here can start a line with a
# link definition). Line-start syntax (headings, lists, quotes) cannot arise either.
_ACTIVE = re.compile(r"[\\`*~|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|(?<=\])\(")


def md(value: Any) -> str:
    r"""``value`` as inert Markdown text, in a table cell or in running text: on one line,
    ``<`` and ``&`` as entities (no HTML tag, comment or entity can start; a lone ``>``
    is text mid-line), Markdown punctuation escaped (no emphasis, links, code spans or
    cell breaks).

    >>> md("evil</td><script>|x\n## head")
    'evil&lt;/td>&lt;script>\\|x ## head'
    >>> md("test_x[speed_5x]"), md("_a_ *b* [c](d)")
    ('test_x[speed_5x]', '\\_a\\_ \\*b\\* [c]\\(d)')
    """
    text = _BREAKS.sub(" ", str(value))
    text = text.replace("&", "&amp;").replace("<", "&lt;")
    return _ACTIVE.sub(lambda m: "\\" + m.group(), text)


_BADGE = {"PASS": "✅ PASS", "MILD": "🟡 MILD", "DEGRADED": "🟠 DEGRADED", "FAIL": "❌ FAIL",
          "INCONCLUSIVE": "❔ INCONCLUSIVE"}


def markdown(doc: dict[str, Any]) -> str:
    """A PR-ready Markdown summary of a summary.json document (user text through :func:`md`)."""
    lines = ["## RL robustness audit", ""]
    results = doc["results"]
    problems = [f"- lost with a crashed xdist worker: {md_code(x['nodeid'])}"
                for x in doc.get("lost", [])]
    problems += [f"- error: {md_code(x['nodeid'])}: {md(x['message'])}"
                 for x in doc.get("errors", [])]
    replays = _replays_markdown(doc.get("replays") or [])
    if not results:
        note = [md(doc["note"]), ""] if doc.get("note") else []
        empty = [] if replays else ["No audit results.", ""]
        return "\n".join([*lines, *empty, *note, *problems, *([""] if problems else []),
                          *replays])
    lines += ["| agent | env | scenario | n | nominal | ref | ratio | CI | rating | p | diagnosis |",
              "|---|---|---|---:|---:|---:|---:|---|---|---:|---|"]
    for rec in results:
        lines.append(
            f"| {md(rec['agent'])} | {md(rec['env'])} | {md(scenario_label(rec))} | "
            f"{episodes_cell(rec)} | {fixed(nominal_mean(rec), 1)} | "
            f"{md(reference_text(rec))} | "
            f"{ratio_cell(rec)} | {interval(rec['ci_low'], rec['ci_high'])} | "
            f"{rating_cell(rec, _BADGE)} | {p_value(rec.get('p_value'))} | "
            f"{md(short_diagnosis(rec) or '-')} |")
    if not all(gated(r) for r in results):
        lines += ["", "*not gated*: reported only, these rows cannot fail the run (stress "
                      "scenarios, unless `--rl-fail-stress` or an `rl_threshold` marker gates them)."]
    lines += ["", *problems] if problems else []
    lines.append("")
    for agg in doc["aggregates"]:
        parts = [f"{cat} {_BADGE[agg[cat]['rating']]}" + (
                     "" if agg[cat]["rating"] == "INCONCLUSIVE" else
                     f" (min {'IQM ' if agg.get('runs') else ''}ratio "
                     f"{fixed(agg[cat]['score'])}, {md(agg[cat]['scenario'])})")
                 for cat in ("deployment", "stress") if agg[cat]]
        lines.append(f"- **{md(agg['agent'])}** on {md(agg['env'])}: "
                     f"{'; '.join(parts) or 'no suites'}; ratios of the "
                     f"{md(agg_baseline(agg))}")
        lines += [f"  - agent: {md(line)}" for line in agg.get("agent_details", ())]
        if agg.get("inconclusive"):
            lines.append(f"  - {_BADGE['INCONCLUSIVE']}: {md(agg['inconclusive'])}")
        if agg.get("mix"):
            lines.append(f"  - train under what broke it: {md_code(agg['mix'])} "
                         f"({md(mix_mark_of(agg))})")
    runs = [r for r in results if "runs" in r]
    if runs:  # each run's ratio: the IQM row's spread, run by run
        lines += ["", "### Training runs", ""]
        lines += [f"- **{md(rec['agent'])}** / {md(rec['scenario'])}: IQM "
                  f"{fixed(rec['ratio'])} across {rec['runs']} runs: {md(runs_text(rec))}"
                  for rec in runs]
    curves = [r for r in results if r.get("tolerance")]
    if curves:
        lines += ["", "### Tolerance curves", ""]
        for rec in curves:
            sentence, points = tolerance_text(rec)
            verdict = "" if not gated(rec) else (" ✅" if rec["passed"] else " ❌")
            lines.append(f"- **{md(rec['agent'])}** on {md(rec['env'])}: {md(sentence)}"
                         f"{verdict} ({md(points)})")
    if doc.get("comparison"):
        lines += ["", *_comparison_markdown(doc["comparison"])]
    diagnosed = [r for r in results if r.get("diagnosis")]
    if diagnosed:
        lines += ["", "<details><summary>Diagnoses</summary>", ""]
        for rec in diagnosed:
            d = rec["diagnosis"]
            timeline = f" {md_code(rec['schedule']['repr'])}" if rec.get("schedule") else ""
            lines.append(f"- **{md(rec['agent'])} / {md(rec['scenario'])}**{timeline}: "
                         f"{md(diagnosis_sentence(**d))}")
        lines += ["", "</details>"]
    if replays:
        lines += ["", *replays[:-1]]
    return "\n".join(lines) + "\n"


def md_code(value: Any) -> str:
    """``value`` as a code span, for copying: on one line, between enough backticks that none
    inside ends it (HTML and Markdown are inert in a span, and no escape works there, so
    :func:`md` would show its backslashes). Not for table cells, whose ``|`` splits even
    a span.

    >>> md_code('ScenarioMix(env, ["nominal", "spike"])'), md_code("a`b")
    ('`ScenarioMix(env, ["nominal", "spike"])`', '``a`b``')
    """
    text = _BREAKS.sub(" ", str(value))
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" else ""  # CommonMark strips it again
    return f"{fence}{pad}{text}{pad}{fence}"


_STATUS = {"regressed": "❌ regressed", "worse": "🟠 worse", "improved": "✅ improved",
           "same": "same"}
_DECISION = {"ship": "✅ **ship**", "hold": "❌ **hold**", "inconclusive": "⚠️ **inconclusive**"}


def _comparison_markdown(comparison: dict[str, Any]) -> list[str]:
    """The comparison with a baseline: the decision and why, then every row that changed."""
    badge = _DECISION.get(comparison["decision"], "ℹ️ **report only**")
    tolerances = ", ".join(comparison["tolerances"]) or "none (report only: nothing was gated)"
    lines = [f"### Compared with the baseline: {badge}", "",
             f"Baseline {md_code(comparison.get('baseline', '?'))}; fail tolerances: "
             f"{md(tolerances)}.", ""]
    if comparison.get("summary"):
        lines += [md(comparison["summary"]), ""]
    changed = [c for c in comparison["changes"] if c["status"] != "same"]
    if changed:
        lines += ["| test | scenario | metric | baseline | now | change | status |",
                  "|---|---|---|---:|---:|---:|---|"]
        for c in changed:
            fmt = "{:.1f}" if c["metric"] == "return" else "{:.3f}"
            lines.append(f"| {md(c['key'])} | {md(c['scenario'])} | {md(c['metric'])} | "
                         f"{fmt.format(c['baseline'])} | {fmt.format(c['current'])} | "
                         f"{c['delta']:+.3g} | {_STATUS[c['status']]} |")
        lines.append("")  # a line right after a table would be read as one more row
    lines.append(f"{len(comparison['changes']) - len(changed)} of {len(comparison['changes'])} "
                 "comparisons show no significant change.")
    lines += [f"- cannot compare: {md(m)}" for m in comparison["mismatches"]]
    if comparison["new"]:
        lines.append(f"- new (not in the baseline): {md(', '.join(comparison['new']))}")
    if comparison["missing"]:
        lines.append(f"- in the baseline, not in this run: "
                     f"{md(', '.join(comparison['missing']))}")
    return lines


_VERDICT = {"PASS": "✅ PASS", "FAIL": "❌ FAIL", "report only": "report only"}


def _replays_markdown(replays: list[dict[str, Any]]) -> list[str]:
    """The replays: what they measure, a row per replay, then each one's diagnosis, failed
    episodes, limits and the recording's own returns (labelled as the recording's); ends
    with an empty line. [] without replays."""
    if not replays:
        return []
    lines = ["### Replays: action agreement with recordings", "", md(REPLAY_NOTE), "",
             "| " + " | ".join(title for _, title in REPLAY_COLUMNS) + " |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for rec in replays:
        cells = replay_cells(rec)
        cells["verdict"] = _VERDICT[cells["verdict"]]
        lines.append("| " + " | ".join(md(cells[key]) for key, _ in REPLAY_COLUMNS) + " |")
    lines.append("")
    for rec in replays:
        head = f"- **{md(rec['candidate'])}** vs {md(replay_cells(rec)['recording'])}"
        lines.append(f"{head}: {md(rec.get('diagnosis') or '-')}")
        lines += [f"  - failed episode {f['id']} at step {f['step']}: {md(f['error'])}"
                  for f in rec.get("failed") or []]
        for extra in (limits_text(rec), baseline_text(rec)):
            if extra:
                lines.append(f"  - {md(extra)}")
    return [*lines, ""]
