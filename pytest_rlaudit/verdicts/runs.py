"""The verdict on one scenario across training runs: its IQM judged by a gate, by the
same rules (:func:`~pytest_rlaudit.stats.verdict`, the gate's thresholds) as a single
audit's ratio, so ``--rl-min-ratio 0.8`` or ``min_rating="MILD"`` mean the same for both.

>>> import numpy as np
>>> from pytest_rlaudit.auditing.runs import RunsScenario
>>> s = RunsScenario("delay", "deployment", ("a", "b"), np.array([0.9, 0.7]),
...                  ((0.8, 1.0), (0.6, 0.8)), ("MILD", "FAIL"), np.array([500.0, 480.0]),
...                  0.8, (0.7, 0.9), "MILD")
>>> passed, message = runs_verdict(s, {"min_ratio": 0.85, "min_rating": None, "mode": "point"})
>>> passed, message
(False, 'MILD under delay across 2 runs: IQM ratio 0.800 (95% CI 0.700 to 0.900); ...')
>>> message.split("; ", 1)[1]
'required ratio >= 0.85; runs 0.900, 0.700'
"""

from __future__ import annotations

from typing import Any

from .._format import fixed, interval
from ..auditing.records import Gate
from ..stats import DEFAULT_THRESHOLDS, Thresholds, verdict
from .assertions import _thresholds

__all__ = ["runs_verdict"]


def runs_verdict(s: Any, gate: Gate | None,
                 scale: Thresholds = DEFAULT_THRESHOLDS) -> tuple[bool, str]:
    """Whether the :class:`~pytest_rlaudit.auditing.runs.RunsScenario` ``s`` meets
    ``gate`` (None: reported only, it passes), judged on its IQM and interval; and the
    failure message (empty when it passes), its first line the essence as a single
    audit's is."""
    failed = []
    for threshold, strict, band in _thresholds(gate, scale):
        v = verdict(s.iqm, s.ci, threshold, gate["mode"] if gate else "point",
                    strict=strict, rated=s.rating)
        if not v.passed:
            failed.append((v, band))
    if not failed:
        return True, ""
    v, band = failed[0]
    need = f"{band} or better" if band else f"ratio >= {v.threshold:g}"
    runs = ", ".join(fixed(float(r)) for r in s.per_run)
    return False, (f"{s.rating} under {s.name} across {s.runs} runs: IQM ratio "
                   f"{fixed(s.iqm)} ({s.confidence * 100:.4g}% CI {interval(*s.ci)}); "
                   f"required {need}; runs {runs}")
