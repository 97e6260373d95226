"""JUnit XML: each audited test's properties and the suite's ratings.

Properties are strings (``rl.scenario``, ``rl.ratio``, ..., ``rl.nominal_mean`` and
``rl.reference``: what the ratio is a ratio of; and ``rl.tolerated`` and
``rl.breaks_at`` for tolerance curves; ``rl.runs`` and ``rl.per_run``, each run's ratio,
for training runs, whose ``rl.ratio`` is their IQM); they reach the file through
``item.user_properties``, which pytest's junitxml reads when it writes a test case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

from .._format import diagnosis_sentence

if TYPE_CHECKING:
    from ..auditing.records import Record

__all__ = ["properties", "replay_properties", "add_suite_properties"]


def _writer(config: pytest.Config) -> Any:
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - pytest moved it
        return None
    return config.stash.get(xml_key, None)


def properties(record: Record) -> list[tuple[str, object]]:
    from ..reports.rows import nominal_mean  # light, but only once an audit has run

    d, schedule = record["diagnosis"], record.get("schedule")
    return [
        ("rl.scenario", record["scenario"]),
        ("rl.ratio", f"{record['ratio']:.6f}"),
        ("rl.ci_low", f"{record['ci_low']:.6f}"),
        ("rl.ci_high", f"{record['ci_high']:.6f}"),
        ("rl.rating", record["rating"]),
        ("rl.nominal_mean", f"{nominal_mean(record):.6g}"),
        ("rl.reference", f"{record.get('reference_score', 0):.6g}"),
        ("rl.p_value", "" if record["p_value"] is None else f"{record['p_value']:.6g}"),
        ("rl.episodes", str(record["episodes"])),
        ("rl.diagnosis", "" if d is None else diagnosis_sentence(**d)),
    ] + ([] if not schedule else [
        ("rl.schedule", schedule["description"]),
        ("rl.schedule_repr", schedule["repr"]),
    ]) + ([] if "runs" not in record else [  # training runs: rl.ratio is their IQM
        ("rl.runs", str(record["runs"])),
        ("rl.per_run", " ".join(f"{r:.6f}" for r in record.get("per_run", []))),
    ]) + _tolerance_properties(record.get("tolerance")) + _attribution_properties(
        record.get("attribution"))


def _attribution_properties(doc: dict[str, Any] | None) -> list[tuple[str, object]]:
    """--rl-attribute's finding: the diagnosis, the culprits, and each group's ratio alone
    and all-but (``group=ratio`` pairs, space-separated)."""
    if not doc:
        return []
    return [("rl.attribution", doc["diagnosis"]),
            ("rl.culprits", ",".join(doc["culprits"])),
            ("rl.attribution_confirmed", "" if doc["confirmed"] is None
             else str(doc["confirmed"]).lower()),
            ("rl.attribution_only", " ".join(f"{g}={c['ratio']:.6f}"
                                             for g, c in doc["only"].items())),
            ("rl.attribution_all_but", " ".join(f"{g}={c['ratio']:.6f}"
                                                for g, c in doc["all_but"].items()))]


def replay_properties(record: dict[str, Any]) -> list[tuple[str, object]]:
    """A replay test's properties: ``rl.kind`` (replay), ``rl.divergence``,
    ``rl.disagreement`` and ``rl.ood_actions`` with their intervals' ends
    (``_ci_low``, ``_ci_high``), ``rl.failed`` (episodes the candidate raised on) and
    ``rl.diagnosis``."""
    out: list[tuple[str, object]] = [("rl.kind", "replay"),
                                     ("rl.candidate", record["candidate"]),
                                     ("rl.recording", record["recording"])]
    for key in ("divergence", "disagreement", "ood_actions"):
        est = record[key]  # null: not measured, an empty property
        out += [(f"rl.{name}", "" if est[field] is None else f"{est[field]:.6f}")
                for name, field in ((key, "value"), (f"{key}_ci_low", "ci_low"),
                                    (f"{key}_ci_high", "ci_high"))]
    return [*out, ("rl.episodes", str(record["episodes"])),
            ("rl.failed", str(len(record["failed"]))), ("rl.diagnosis", record["diagnosis"])]


def _tolerance_properties(curve: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``rl.tolerated`` and ``rl.breaks_at`` of a tolerance curve: the values ("" for none)."""
    if not curve:
        return []
    from ..auditing.ladders import value_text  # standard library only

    return [(f"rl.{key}", "" if curve[key] is None else value_text(curve[key]))
            for key in ("tolerated", "breaks_at")]


def add_suite_properties(config: pytest.Config, records: Sequence[Record],
                         comparison: Any) -> None:
    """``rl.deployment`` and ``rl.stress`` (per agent and env when several), and
    ``rl.compare`` with a baseline; nothing without ``--junitxml`` or records."""
    xml = _writer(config)
    if xml is None or not records:
        return
    # only past the return: every run ends here, and one that audited nothing must not
    # pay for the report renderers (the cost of installing the plugin, DESIGN.md section 16)
    from ..reports.summary import aggregates

    groups = aggregates(records)
    for agg in groups:
        suffix = "" if len(groups) == 1 else f"[{agg['agent']}@{agg['env']}]"
        for category in ("deployment", "stress"):
            if agg[category]:
                xml.add_global_property(f"rl.{category}{suffix}", agg[category]["rating"])
    if comparison is not None:
        xml.add_global_property("rl.compare", comparison.decision)
