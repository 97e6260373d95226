"""``summary.json``: a run's records, in collection order, with per-agent aggregates; and the
``--rl-report`` folder (``summary.json``, ``summary.md``, the chart, ``index.html``, badges).

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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..auditing.records import Record
from ..stats.ratings import INCONCLUSIVE
from .badges import badges
from .chart import chart
from .files import atomic_write
from .html import html
from .markdown import markdown
from .rows import mix_fix, nominal_mean, order_key

__all__ = ["SUMMARY_SCHEMA", "aggregates", "summary", "write_report"]

#: Version of summary.json's layout.
SUMMARY_SCHEMA = 1


def _rate(value: float, thresholds: dict[str, float]) -> str:
    from ..stats.ratings import Thresholds, rating

    return rating(value, Thresholds(pass_=thresholds["pass"], mild=thresholds["mild"],
                                    degraded=thresholds["degraded"]))


def aggregates(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Per (agent, env): what its ratios are ratios of (``nominal``: the mean nominal
    return over ``episodes``, the most any of its records ran, and ``reference``: the
    reference score, ``reference_kind`` "random" or "number"); ``inconclusive``: why its
    scenarios could not be rated, or None; the deployment and stress scores (min ratio)
    and their ratings (INCONCLUSIVE when any scored scenario is), and ``mix``: the
    ScenarioMix line that trains under what broke it (or None) and ``mix_mark``, whether a
    benchmark showed that line to raise the ratios or it is an untested suggestion. Training runs (records
    with ``runs``): ``runs`` too, and ``nominal`` is their nominal IQM, ``episodes`` each
    run's. ``agent_details``: what the agent says of itself (its records'), where it says
    anything."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for rec in records:
        groups.setdefault((rec["agent"], rec["env"]), []).append(rec)
    out = []
    for (agent, env), members in sorted(groups.items()):
        widest = max(members, key=lambda r: (len(r.get("nominal_returns") or []), -r.get("order", 0)))
        unrated = next((r for r in members if r["rating"] == INCONCLUSIVE), None)
        entry: dict[str, Any] = {
            "agent": agent, "env": env, "nominal": nominal_mean(widest),
            "episodes": len(widest.get("nominal_returns") or []),
            "reference": float(widest.get("reference_score", 0) or 0),
            "reference_kind": "random" if widest.get("reference") == "random" else "number",
            "inconclusive": None if unrated is None else (
                (unrated.get("diagnosis") or {}).get("pattern") or INCONCLUSIVE)}
        details = next((r["agent_details"] for r in members if r.get("agent_details")), None)
        if details:  # what the agent says of itself (an exported robot policy's metadata)
            entry["agent_details"] = list(details)
        if "runs" in widest:  # a runs record: its nominal is the runs' IQM, per run
            entry.update(runs=widest["runs"], episodes=widest.get("episodes", 0))
        for category in ("deployment", "stress"):
            scored = [r for r in members if r["category"] == category]
            if scored:
                worst = min(scored, key=lambda r: (r["ratio"], r["scenario"]))
                rated = (INCONCLUSIVE if any(r["rating"] == INCONCLUSIVE for r in scored)
                         else _rate(worst["ratio"], worst["thresholds"]))
                entry[category] = {"score": worst["ratio"], "rating": rated,
                                   "scenario": worst["scenario"]}
            else:
                entry[category] = None
        fix = mix_fix(members)
        entry["mix"], entry["mix_mark"] = fix if fix is not None else (None, None)
        out.append(entry)
    return out


def summary(records: Iterable[Record], *, version: str,
            extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary.json document: versioned, records in collection order."""
    ordered = sorted(records, key=order_key)
    return {"schema": SUMMARY_SCHEMA, "tool": "pytest-rlaudit", "version": version,
            **(extra or {}), "results": ordered, "aggregates": aggregates(ordered)}


def write_report(doc: dict[str, Any], directory: str | os.PathLike[str]) -> list[Path]:
    """Write the report folder ``directory`` (created if need be) and return the paths
    written, in this order: summary.json, summary.md, with matplotlib summary.png and
    summary.svg (and tolerance.png and tolerance.svg when a record has a curve), then
    index.html (the self-contained page; without matplotlib, tables only) and the badges
    badge-deployment.svg and badge-stress.svg.

    Also appends the Markdown to ``$GITHUB_STEP_SUMMARY`` when that variable is set.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    # the data first: whatever breaks in a renderer after it, summary.json is there
    atomic_write(out / "summary.json", json.dumps(doc, indent=2, sort_keys=False) + "\n")
    text = markdown(doc)
    atomic_write(out / "summary.md", text)
    written = [out / "summary.json", out / "summary.md", *chart(doc, out)]
    pages = {"index.html": html(doc, out), **badges(doc)}
    for name, page in pages.items():
        atomic_write(out / name, page)
        written.append(out / name)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(text)
    return written
