"""Renderers of a run's audit records: terminal rows, ``summary.json``, ``summary.md``, a chart.

A *record* is one audited test as plain JSON types; its fields are listed once, in
:data:`pytest_rlaudit.auditing.records.FIELDS`. The renderers know nothing of pytest.

>>> rec = {"nodeid": "t::x[jitter]", "agent": "PPO", "env": "CartPole-v1",
...        "scenario": "jitter", "category": "deployment", "ratio": 0.5, "ci_low": 0.4,
...        "ci_high": 0.6, "p_value": 0.01, "rating": "FAIL", "diagnosis": None,
...        "thresholds": {"pass": 0.95, "mild": 0.8, "degraded": 0.5}}
>>> aggregates([rec])[0]["deployment"]
{'score': 0.5, 'rating': 'FAIL', 'scenario': 'jitter'}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .._format import fixed, interval, p_value, short_fix

__all__ = ["SUMMARY_SCHEMA", "aggregates", "summary", "table_rows", "markdown", "write_report",
           "short_diagnosis"]

#: Version of summary.json's layout.
SUMMARY_SCHEMA = 1
_BADGE = {"PASS": "✅ PASS", "MILD": "🟡 MILD", "DEGRADED": "🟠 DEGRADED", "FAIL": "❌ FAIL"}


def _rate(value: float, thresholds: dict[str, float]) -> str:
    from ..stats.ratings import Thresholds, rating

    return rating(value, Thresholds(pass_=thresholds["pass"], mild=thresholds["mild"],
                                    degraded=thresholds["degraded"]))


def aggregates(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (agent, env): the deployment and stress scores (min ratio) and their ratings."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in records:
        groups.setdefault((rec["agent"], rec["env"]), []).append(rec)
    out = []
    for (agent, env), members in sorted(groups.items()):
        entry: dict[str, Any] = {"agent": agent, "env": env}
        for category in ("deployment", "stress"):
            scored = [r for r in members if r["category"] == category]
            if scored:
                worst = min(scored, key=lambda r: (r["ratio"], r["scenario"]))
                entry[category] = {"score": worst["ratio"],
                                   "rating": _rate(worst["ratio"], worst["thresholds"]),
                                   "scenario": worst["scenario"]}
            else:
                entry[category] = None
        out.append(entry)
    return out


def summary(records: Iterable[dict[str, Any]], *, version: str,
            extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary.json document: versioned, records in collection order."""
    ordered = sorted(records, key=_order)
    return {"schema": SUMMARY_SCHEMA, "tool": "pytest-rlaudit", "version": version,
            **(extra or {}), "results": ordered, "aggregates": aggregates(ordered)}


def _order(rec: dict[str, Any]) -> tuple[int, str]:
    """Collection order (the same on every xdist worker), then node id."""
    return (rec.get("order", 0), rec["nodeid"])


def short_diagnosis(rec: dict[str, Any]) -> str:
    """The first clause of the fix ("train with Jitter(env, base=2, jitter=1)"), or ''."""
    diagnosis = rec.get("diagnosis")
    return short_fix(diagnosis["fix"]) if diagnosis else ""


def gated(rec: dict[str, Any]) -> bool:
    """Whether the record's verdict counted (stress scenarios are reported ungated unless
    --rl-fail-stress or a marker gates them). Records without the key count."""
    return "gate" not in rec or rec["gate"] is not None


def rating_cell(rec: dict[str, Any], badges: dict[str, str] | None = None) -> str:
    """The rating as a table shows it, saying "not gated" for a row that gated nothing."""
    rating = rec["rating"]
    if not gated(rec):
        return f"{rating} (not gated)"
    return badges[rating] if badges else rating


def table_rows(records: Sequence[dict[str, Any]]) -> list[tuple[list[str], str]]:
    """Terminal rows (cells, rating): a header, then one row per record."""
    level = records[0].get("confidence", 0.95) if records else 0.95
    rows: list[tuple[list[str], str]] = [(
        ["agent", "env", "scenario", "ratio", f"{level:.0%} CI", "rating", "p", "diagnosis"], "")]
    for rec in sorted(records, key=_order):
        rows.append(([rec["agent"], rec["env"], rec["scenario"], fixed(rec["ratio"]),
                      interval(rec["ci_low"], rec["ci_high"]), rating_cell(rec),
                      p_value(rec.get("p_value")), short_diagnosis(rec) or "-"], rec["rating"]))
    return rows


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
    if doc.get("comparison"):
        lines += ["", *_comparison_markdown(doc["comparison"])]
    diagnosed = [r for r in results if r.get("diagnosis")]
    if diagnosed:
        lines += ["", "<details><summary>Diagnoses</summary>", ""]
        for rec in diagnosed:
            d = rec["diagnosis"]
            timeline = f" `{rec['schedule']['repr']}`" if rec.get("schedule") else ""
            lines.append(f"- **{rec['agent']} / {rec['scenario']}**{timeline}: {d['pattern']}. "
                         f"Likely cause: {d['cause']}. Fix: {d['fix']}.")
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


def _chart(doc: dict[str, Any], directory: Path) -> list[Path]:
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


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_report(doc: dict[str, Any], directory: str | os.PathLike[str]) -> list[Path]:
    """Write summary.json, summary.md and (with matplotlib) summary.png / summary.svg.

    Also appends the Markdown to ``$GITHUB_STEP_SUMMARY`` when that variable is set.
    Returns the paths written.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(doc)
    _atomic_write(out / "summary.json", json.dumps(doc, indent=2, sort_keys=False) + "\n")
    _atomic_write(out / "summary.md", text)
    written = [out / "summary.json", out / "summary.md", *_chart(doc, out)]
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(text)
    return written
