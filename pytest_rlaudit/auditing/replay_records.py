"""The replay record: one replay test as plain JSON types (``"kind": "replay"``), and the
one place its fields live.

Replay records travel like audit records (on a pytest report, across xdist's channel)
and fill ``summary.json``'s ``replays`` list; they are never mixed with the audit
``results`` (a replay has no ratio, rating or return of its own). :func:`validate_replay`
checks one (records received from xdist workers, files read back). Standard library
only: the plugin's controller reads records without the engine.

>>> est = {"value": 0.1, "ci_low": 0.05, "ci_high": 0.2}
>>> rec = {"kind": "replay", "nodeid": "t::r", "candidate": "PPO", "recording": "rec",
...        "format": "minari", "episodes": 2, "steps": 10, "tolerance": 0.05,
...        "confidence": 0.95, "divergence": est, "disagreement": est,
...        "ood_actions": est, "ood_recorded": est, "per_episode": [], "failed": [],
...        "diagnosis": "...", "passed": True}
>>> validate_replay(rec) is rec
True
>>> try:
...     validate_replay({**rec, "divergence": {"value": "x"}})
... except RecordError as exc:
...     print(exc)
(t::r) lacks a valid 'divergence' ({value, ci_low, ci_high}, finite numbers, or all null: not measured)
"""

from __future__ import annotations

import math
from typing import Any

from .records import RecordError

__all__ = ["REPLAY_FIELDS", "ESTIMATES", "validate_replay", "replay_record"]

#: The measures a replay record holds as ``{value, ci_low, ci_high}``.
ESTIMATES = ("divergence", "disagreement", "ood_actions", "ood_recorded")

#: Every field a replay record must have: its JSON types and what it holds.
REPLAY_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "kind": ((str,), "'replay'"),
    "nodeid": ((str,), "the pytest node id of the replay test"),
    "candidate": ((str,), "the candidate policy's name"),
    "recording": ((str,), "where the recording was read from"),
    "format": ((str,), "minari, lerobot or npz"),
    "episodes": ((int,), "episodes measured (those the candidate did not raise on)"),
    "steps": ((int,), "steps measured"),
    "tolerance": ((int, float), "the distance beyond which a step disagrees"),
    "confidence": ((int, float), "the intervals' level"),
    "divergence": ((dict,), "{value, ci_low, ci_high}: mean per-step action distance, per "
                   "dimension over the action range (Discrete: share of steps that differ)"),
    "disagreement": ((dict,), "{value, ci_low, ci_high}: share of steps beyond tolerance"),
    "ood_actions": ((dict,), "{value, ci_low, ci_high}: share of actions outside the action "
                    "space before clipping"),
    "ood_recorded": ((dict,), "{value, ci_low, ci_high}: share outside the recorded range"),
    "per_episode": ((list,), "[{id, divergence, steps}] per measured episode"),
    "failed": ((list,), "[{episode, id, step, error}] episodes the candidate raised on"),
    "diagnosis": ((str,), "where the candidate departs most, and what sets it apart"),
    "passed": ((bool, type(None)), "the verdict of the limits; null when none was set"),
}


def _estimate_ok(value: Any) -> bool:
    """Finite numbers, or all three null: not measured (every episode failed, or
    ``ood_actions`` of a candidate that clips where its actions cannot be read)."""
    if not isinstance(value, dict):
        return False
    numbers = [value.get(k) for k in ("value", "ci_low", "ci_high")]
    if all(x is None for x in numbers):
        return True
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
               for x in numbers)


def validate_replay(rec: Any) -> dict[str, Any]:
    """``rec`` if it is a valid replay record, else a
    :class:`~pytest_rlaudit.auditing.records.RecordError` naming the field."""
    if not isinstance(rec, dict):
        raise RecordError("is not an object")
    nodeid = rec.get("nodeid", "?")
    for key, (kinds, _) in REPLAY_FIELDS.items():
        value = rec.get(key)
        if key not in rec or not isinstance(value, kinds) or (
                isinstance(value, bool) and bool not in kinds):
            raise RecordError(f"({nodeid}) lacks a valid {key!r}")
    if rec["kind"] != "replay":
        raise RecordError(f"({nodeid}) has kind {rec['kind']!r}, not 'replay'")
    for key in ESTIMATES:
        if not _estimate_ok(rec[key]):
            raise RecordError(f"({nodeid}) lacks a valid {key!r} ({{value, ci_low, ci_high}}, "
                              "finite numbers, or all null: not measured)")
    return rec


def replay_record(nodeid: str, result: Any, *, limits: dict[str, Any] | None,
                  passed: bool | None) -> dict[str, Any]:
    """The record of ``result`` (a :class:`~.replays.ReplayResult`) for the test
    ``nodeid``: its :meth:`~.replays.ReplayResult.to_dict`, the node id, the ``limits``
    it was held to (``{max_disagreement, max_divergence, mode}``, or None) and the
    verdict."""
    rec = {"nodeid": nodeid, **result.to_dict(), "limits": limits, "passed": passed}
    return validate_replay(rec)
