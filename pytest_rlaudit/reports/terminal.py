"""The terminal's renderers: the "rl audit" and "rl audit comparison" sections, the
diagnosis section of a failed audit and the ``-v`` progress line, as functions of records.

A line is a list of segments ``(text, style)``; the style is a rating (``"PASS"`` ...),
a comparison status, ``"bold"``, ``"error"``, ``"warn"`` or ``""``. The pytest face maps
styles to colours; nothing here knows pytest.

>>> rec = {"nodeid": "t::x[jitter]", "agent": "PPO", "env": "CartPole-v1",
...        "scenario": "jitter", "category": "deployment", "ratio": 0.5, "ci_low": 0.4,
...        "ci_high": 0.6, "p_value": 0.01, "rating": "FAIL", "diagnosis": None}
>>> progress_line(rec)
[('    rl audit: PPO / jitter: ratio 0.500 (0.400 to 0.600) FAIL', 'FAIL')]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._format import fixed, interval
from ..auditing.records import Record
from ..stats.ratings import INCONCLUSIVE
from .attribution import attribution_lines
from .rows import (
    agg_baseline,
    baseline_text,
    gated,
    mix_mark_of,
    order_key,
    rating_cell,
    table_rows,
    test_of,
    tolerance_text,
)
from .summary import aggregates

__all__ = ["Line", "audit_section", "comparison_section", "diagnosis_text", "progress_line",
           "scenario_line"]

Line = list[tuple[str, str]]


def progress_line(rec: Record) -> Line:
    """The ``-v`` line printed as each audit finishes."""
    return [(f"    rl audit: {rec['agent']} / {rec['scenario']}: {_ratio_word(rec)} {fixed(rec['ratio'])} "
             f"({interval(rec['ci_low'], rec['ci_high'])}) {rec['rating']}", rec["rating"])]


def audit_section(records: Sequence[Record], *, lost: Sequence[dict[str, str]] = (),
                  errors: Sequence[dict[str, Any]] = ()) -> list[Line]:
    """The "rl audit" section: lost and errored audits, the table, the schedules that
    broke an agent, a line per tolerance curve, and each agent's deployment and stress
    ratings, with the ScenarioMix line that trains under what broke it."""
    lines: list[Line] = [[(f"lost: scenario {x['scenario']} ({x['nodeid']}): its xdist worker "
                           "crashed, so it has no result", "error")] for x in lost]
    lines += [[(f"error: {x['nodeid']}{_also(x, errors)}: {x['message']}", "error")]
              for x in errors if not x.get("same_as")]
    if not records:
        return lines
    rows = table_rows(records)
    widths = [max(len(cells[i]) for cells, _ in rows) for i in range(len(rows[0][0]) - 1)]
    # rows of several tests (10-episode assert_robust calls beside a 30-episode suite, one
    # scenario audited twice): each test's rows under its name, so two rows of one
    # scenario say why they differ
    tests = [None, *(test_of(rec) for rec in sorted(records, key=order_key))]
    grouped = len(set(tests[1:])) > 1
    for i, (cells, rated) in enumerate(rows):
        if grouped and i and tests[i] != tests[i - 1]:
            lines.append([(f"{tests[i]}:", "")])
        text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False))
        lines.append([(f"{'  ' if grouped else ''}{text}  {cells[-1]}".rstrip(),
                       rated or "bold")])
    for rec in sorted(records, key=order_key):
        schedule = rec.get("schedule")
        if schedule and not (rec["passed"] and rec["rating"] == "PASS"):
            what = ("smallest failing schedule" if not rec["passed"] and rec.get("hypothesis")
                    else "schedule")
            verb = {"FAIL": "breaks", "DEGRADED": "breaks", "MILD": "degrades",
                    INCONCLUSIVE: "cannot be rated"}.get(rec["rating"], "holds")
            lines.append([(f"{rec['nodeid']}: {what}: {verb} when "
                           f"{schedule['description']} (ratio {fixed(rec['ratio'])}, "
                           f"{rec['rating']}): {schedule['repr']}", rec["rating"])])
    for rec in sorted(records, key=order_key):
        said = rec.get("attribution")
        if said:
            lines += attribution_lines(rec["nodeid"], said)
    for rec in sorted(records, key=order_key):
        if rec.get("tolerance"):
            sentence, points = tolerance_text(rec)
            style = "" if not gated(rec) else ("PASS" if rec["passed"] else "FAIL")
            lines.append([(f"{sentence}; {points} ({rec['agent']} on {rec['env']})", style)])
    for agg in aggregates(records):
        if not (agg["deployment"] or agg["stress"]):
            continue
        line: Line = [(f"{agg['agent']} on {agg['env']}:", "")]
        for category in ("deployment", "stress"):
            if agg[category]:
                a = agg[category]
                line += [(f"  {category} ", "bold"), (a["rating"], a["rating"])]
                if a["rating"] != INCONCLUSIVE:  # its ratios are mostly noise: no number
                    iqm = "IQM " if agg.get("runs") else ""  # training runs: their IQMs
                    line.append((f" (min {iqm}ratio {fixed(a['score'])}, {a['scenario']})", ""))
        lines.append(line)
        lines.append([(f"  ratios of: {agg_baseline(agg)}", "")])
        lines += [[(f"  agent: {line}", "")] for line in agg.get("agent_details", ())]
        if agg.get("inconclusive"):
            lines.append([(f"  {INCONCLUSIVE}: ", INCONCLUSIVE), (agg["inconclusive"], "")])
        if agg["mix"]:
            lines.append([(f"  train under what broke it: {agg['mix']} ({mix_mark_of(agg)})",
                           "")])
    return lines


def _also(error: dict[str, Any], errors: Sequence[dict[str, Any]]) -> str:
    """" (and 4 more: rl-audit::delay, ...)": the tests whose error repeats this one."""
    same = [x["nodeid"] for x in errors if x.get("same_as") == error["nodeid"]]
    return f" (and {len(same)} more: {', '.join(same)})" if same else ""


def comparison_section(comparison: Any, baseline: dict[str, Any], path: str,
                       failed: int = 0) -> list[Line]:
    """The "rl audit comparison" section of a
    :class:`~pytest_rlaudit.auditing.comparison.Comparison` with the baseline at ``path``.
    ``failed``: tests of the run that failed (thresholds, errors): when the gate would pass
    the run, its last line says that they decide the exit status, not the gate."""
    c = comparison
    partial = "" if baseline.get("complete", True) else " (a PARTIAL run)"
    lines: list[Line] = [[(f"baseline {path}: pytest-rlaudit {baseline.get('version', '?')}, "
                           f"{baseline.get('created', '?')}{partial}", "")]]
    # one line per test, its changes indented below it: a node id and a change on one
    # line ran past 130 characters
    shown = [ch for ch in c.changes if ch.status != "same"]
    for key in dict.fromkeys(ch.key for ch in shown):
        lines.append([(key, "")])
        lines += [[(f"  {ch.status.upper():9}  {ch.describe()}", ch.status)]
                  for ch in shown if ch.key == key]
    same = sum(ch.status == "same" for ch in c.changes)
    if same:
        lines.append([(f"{same} of {len(c.changes)} comparisons show no significant change", "")])
    lines += [[(f"CANNOT COMPARE  {problem}", "error")] for problem in c.mismatches]
    if c.new:
        lines.append([(f"new (not in the baseline): {', '.join(c.new)}", "")])
    if c.missing:
        lines.append([(f"in the baseline, not in this run: {', '.join(c.missing)}", "")])
    if c.power_note and c.decision != "inconclusive":  # else the decision's line says it
        lines.append([(f"note: {c.power_note}", "warn")])
    decision, _, why = c.summary(listed="above").partition(": ")
    style = {"ship": "improved", "hold": "error", "inconclusive": "error"}.get(
        c.decision, "worse" if c.drops or not c.changes else "")
    lines.append([(f"{decision.upper()}: {why}", style)])
    if failed and c.decision not in ("hold", "inconclusive"):
        lines.append([(f"the run fails all the same: {failed} test(s) failed; "
                       f"{decision.upper()} is about the baseline only", "error")])
    return lines


def scenario_line(rec: Record) -> str:
    """One audit in a line: ``PPO on CartPole-v1, scenario spike: ratio 0.434 (0.310 to
    0.560), FAIL (not gated); nominal 500.0 over 30 episodes, reference 0.0``; the "rl
    audit" section of a passed test's report (what pytest-html and ``-rP`` show) and the
    first line of a failed one's diagnosis."""
    return (f"{rec['agent']} on {rec['env']}, scenario {rec['scenario']}: {_ratio_word(rec)} "
            f"{fixed(rec['ratio'])} ({interval(rec['ci_low'], rec['ci_high'])}), "
            f"{rating_cell(rec)}; {baseline_text(rec)}")


def _ratio_word(rec: Record) -> str:
    """"ratio", or a runs record's "IQM ratio of 3 runs"."""
    return f"IQM ratio of {rec['runs']} runs" if "runs" in rec else "ratio"


def diagnosis_text(rec: Record) -> str:
    """The "rl audit diagnosis" section of a failed audit: what broke, why, what to do."""
    d = rec["diagnosis"]
    assert d is not None  # the section of a diagnosed record only
    return (f"{scenario_line(rec)}\n"
            f"what broke:   {d['pattern']}\nlikely cause: {d['cause']}\nfix:          {d['fix']}\n")
