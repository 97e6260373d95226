"""Regression tolerances (``return:5%``, ``ratio:0.05``): how far a metric may drop.

Kept free of numpy so the plugin can parse ``--rl-compare-fail`` at start-up.

>>> parse_tolerance("return:5%")
Tolerance(metric='return', amount=0.05, relative=True)
>>> parse_tolerance("ratio:0.05").exceeded(0.9, 0.8)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["Tolerance", "parse_tolerance", "Metric"]

Metric = Literal["return", "ratio"]


@dataclass(frozen=True)
class Tolerance:
    """A drop of ``amount`` in ``metric`` (a fraction of the baseline when ``relative``)."""

    metric: Metric
    amount: float
    relative: bool

    def __str__(self) -> str:
        if self.relative:
            return f"{self.metric}:{round(self.amount * 100, 10):g}%"
        return f"{self.metric}:{self.amount:g}"

    def _change(self, base: float, current: float) -> float:
        if not self.relative:
            return current - base
        if base == 0:
            return math.copysign(math.inf, current - base) if current != base else 0.0
        return (current - base) / abs(base)

    def exceeded(self, base: float, current: float) -> bool:
        """Whether ``current`` is below ``base`` by more than the tolerance."""
        return -self._change(base, current) > self.amount


def parse_tolerance(text: str) -> Tolerance:
    """``return:5%`` (relative), ``return:10`` (return units), ``ratio:0.05`` (absolute) or
    ``ratio:5%`` (relative) as a :class:`Tolerance`; anything else is a ValueError."""
    metric, sep, amount = str(text).strip().partition(":")
    if not sep or metric not in ("return", "ratio"):
        raise ValueError(f"{text!r} is not a tolerance: write METRIC:AMOUNT with METRIC return "
                         "or ratio, e.g. return:5% (relative) or ratio:0.05 (absolute)")
    relative = amount.endswith("%")
    try:
        value = float(amount[:-1] if relative else amount)
    except ValueError:
        raise ValueError(f"{text!r}: {amount!r} is not a number (e.g. return:5% or "
                         "ratio:0.05)") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{text!r}: the tolerance must be a finite number >= 0")
    return Tolerance(metric, value / 100.0 if relative else value, relative)  # type: ignore[arg-type]
