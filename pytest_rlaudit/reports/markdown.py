"""``summary.md``: a PR-ready Markdown summary of a summary.json document."""

from __future__ import annotations

from typing import Any

from .._format import diagnosis_sentence, fixed, interval, p_value
from .rows import gated, rating_cell, short_diagnosis, tolerance_text

__all__ = ["markdown"]

_BADGE = {"PASS": "✅ PASS", "MILD": "🟡 MILD", "DEGRADED": "🟠 DEGRADED", "FAIL": "❌ FAIL"}


def markdown(doc: dict[str, Any]) -> str:
    """A PR-ready Markdown summary of a summary.json document."""
    lines = ["## RL robustness audit", ""]
    results = doc["results"]
    problems = [f"- lost with a crashed xdist worker: `{x['nodeid']}`" for x in doc.get("lost", [])]
    problems += [f"- error: `{x['nodeid']}`: {x['message']}" for x in doc.get("errors", [])]
    if not results:
        note = [doc["note"], ""] if doc.get("note") else []
        return "\n".join([*lines, "No audit results.", "", *note, *problems,
                          *([""] if problems else [])])
    lines += ["| agent | env | scenario | ratio | CI | rating | p | diagnosis |",
              "|---|---|---|---:|---|---|---:|---|"]
    for rec in results:
        lines.append(
            f"| {rec['agent']} | {rec['env']} | {rec['scenario']} | {fixed(rec['ratio'])} | "
            f"{interval(rec['ci_low'], rec['ci_high'])} | {rating_cell(rec, _BADGE)} | "
            f"{p_value(rec.get('p_value'))} | {short_diagnosis(rec) or '-'} |")
    if not all(gated(r) for r in results):
        lines += ["", "*not gated*: reported only, these rows cannot fail the run (stress "
                      "scenarios, unless `--rl-fail-stress` or an `rl_threshold` marker gates them)."]
    lines += ["", *problems] if problems else []
    lines.append("")
    for agg in doc["aggregates"]:
        parts = [f"{cat} {_BADGE[agg[cat]['rating']]} (min ratio {fixed(agg[cat]['score'])}, "
                 f"{agg[cat]['scenario']})" for cat in ("deployment", "stress") if agg[cat]]
        lines.append(f"- **{agg['agent']}** on {agg['env']}: {'; '.join(parts) or 'no suites'}")
        if agg.get("mix"):
            lines.append(f"  - train under what broke it: `{agg['mix']}`")
    curves = [r for r in results if r.get("tolerance")]
    if curves:
        lines += ["", "### Tolerance curves", ""]
        for rec in curves:
            sentence, points = tolerance_text(rec)
            verdict = "" if not gated(rec) else (" ✅" if rec["passed"] else " ❌")
            lines.append(f"- **{rec['agent']}** on {rec['env']}: {sentence}{verdict} ({points})")
    if doc.get("comparison"):
        lines += ["", *_comparison_markdown(doc["comparison"])]
    diagnosed = [r for r in results if r.get("diagnosis")]
    if diagnosed:
        lines += ["", "<details><summary>Diagnoses</summary>", ""]
        for rec in diagnosed:
            d = rec["diagnosis"]
            timeline = f" `{rec['schedule']['repr']}`" if rec.get("schedule") else ""
            lines.append(f"- **{rec['agent']} / {rec['scenario']}**{timeline}: "
                         f"{diagnosis_sentence(**d)}")
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


_STATUS = {"regressed": "❌ regressed", "worse": "🟠 worse", "improved": "✅ improved",
           "same": "same"}


def _comparison_markdown(comparison: dict[str, Any]) -> list[str]:
    """The comparison with a baseline: the decision, then every row that changed."""
    badge = {"ship": "✅ **ship**", "hold": "❌ **hold**"}.get(comparison["decision"],
                                                             "ℹ️ **report only**")
    tolerances = ", ".join(comparison["tolerances"]) or "none (report only: nothing was gated)"
    lines = [f"### Compared with the baseline: {badge}", "",
             f"Baseline `{comparison.get('baseline', '?')}`; fail tolerances: {tolerances}.", ""]
    changed = [c for c in comparison["changes"] if c["status"] != "same"]
    if changed:
        lines += ["| test | scenario | metric | baseline | now | change | status |",
                  "|---|---|---|---:|---:|---:|---|"]
        for c in changed:
            fmt = "{:.1f}" if c["metric"] == "return" else "{:.3f}"
            lines.append(f"| {c['key']} | {c['scenario']} | {c['metric']} | "
                         f"{fmt.format(c['baseline'])} | {fmt.format(c['current'])} | "
                         f"{c['delta']:+.3g} | {_STATUS[c['status']]} |")
    lines.append(f"{len(comparison['changes']) - len(changed)} of {len(comparison['changes'])} "
                 "comparisons show no significant change.")
    lines += [f"- cannot compare: {m}" for m in comparison["mismatches"]]
    if comparison["new"]:
        lines.append(f"- new (not in the baseline): {', '.join(comparison['new'])}")
    if comparison["missing"]:
        lines.append(f"- in the baseline, not in this run: {', '.join(comparison['missing'])}")
    return lines
