"""Ratings and verdicts: the scale a return ratio is judged on. Standard library only.

The pytest plugin's options validate ratings and modes against these names on every run,
so this module imports neither numpy nor scipy.

>>> rating(0.83), rating_floor("MILD")
('MILD', 0.8)
>>> verdict(0.9, (0.85, 0.95), 0.8, "confident").passed
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .._checks import number

__all__ = ["RATINGS", "INCONCLUSIVE", "ALL_RATINGS", "MODES", "Rating", "Mode",
           "check_threshold", "Thresholds", "DEFAULT_THRESHOLDS", "rating", "rating_floor",
           "Verdict", "verdict"]

Rating = Literal["PASS", "MILD", "DEGRADED", "FAIL", "INCONCLUSIVE"]
Mode = Literal["point", "confident", "not_worse"]
#: The rating scale, from best to worst: what a ratio is rated on, and what a threshold
#: (``min_rating``) may name.
RATINGS: tuple[str, ...] = ("PASS", "MILD", "DEGRADED", "FAIL")
#: The fifth rating, off the scale: the agent's nominal return is not clearly above the
#: reference, so its ratios measure mostly noise (see
#: :func:`pytest_rlaudit.stats.paired.reference_margin`). Every threshold fails it.
INCONCLUSIVE = "INCONCLUSIVE"
#: Every rating a result can carry.
ALL_RATINGS: tuple[str, ...] = (*RATINGS, INCONCLUSIVE)
#: Verdict modes for a threshold: on the point estimate, on the interval's low end
#: (pass only when confidently above), or on its high end (fail only when confidently below).
MODES: tuple[str, ...] = ("point", "confident", "not_worse")


def check_threshold(name: str, value: float) -> float:
    return number(name, value, low=0, high=2, low_open=True,
                  why=" (a return ratio: 1.0 is unharmed, 0.8 keeps 80% of the nominal return)")


@dataclass(frozen=True)
class Thresholds:
    """Lower edges of the rating bands: PASS above ``pass_``, MILD above ``mild``,
    DEGRADED above ``degraded``, FAIL at or below ``degraded``.

    One instance is used everywhere a rating is made (scenarios, aggregates, diagnoses,
    verdicts), so a changed scale changes them all alike.

    >>> Thresholds(pass_=0.9).band("PASS")
    0.9
    """

    pass_: float = 0.95
    mild: float = 0.80
    degraded: float = 0.50

    def __post_init__(self) -> None:
        for name in ("pass_", "mild", "degraded"):
            check_threshold(f"rating threshold {name.rstrip('_')}", getattr(self, name))
        if not self.pass_ > self.mild > self.degraded:
            raise ValueError(
                "rating thresholds must decrease: pass > mild > degraded, got "
                f"{self.pass_}, {self.mild}, {self.degraded}"
            )

    def band(self, name: str) -> float:
        """The ratio a rating must exceed (``-inf`` for FAIL)."""
        edges = {"PASS": self.pass_, "MILD": self.mild, "DEGRADED": self.degraded,
                 "FAIL": -math.inf}
        try:
            return edges[name]
        except KeyError:
            raise ValueError(
                f"unknown rating {name!r}; ratings are {', '.join(RATINGS)}"
            ) from None


DEFAULT_THRESHOLDS = Thresholds()


def rating(value: float, thresholds: Thresholds | None = None) -> Rating:
    """The rating of a return ratio: PASS > 0.95, MILD > 0.80, DEGRADED > 0.50, else FAIL.

    >>> [rating(r) for r in (1.0, 0.95, 0.81, 0.5)]
    ['PASS', 'MILD', 'MILD', 'FAIL']
    """
    t = thresholds or DEFAULT_THRESHOLDS
    if math.isnan(value):
        raise ValueError("cannot rate a NaN ratio")
    for name in RATINGS[:-1]:
        if value > t.band(name):
            return name  # type: ignore[return-value]
    return "FAIL"


def rating_floor(name: str, thresholds: Thresholds | None = None) -> float:
    """The ratio a scenario must exceed to be rated ``name`` or better.

    >>> rating_floor("MILD")
    0.8
    """
    if name not in RATINGS:
        raise ValueError(f"unknown rating {name!r}; ratings are {', '.join(RATINGS)}")
    return (thresholds or DEFAULT_THRESHOLDS).band(name)


@dataclass(frozen=True)
class Verdict:
    """Whether a scenario meets its threshold, and why (``reason`` is a readable phrase)."""

    passed: bool
    decided: bool
    threshold: float
    mode: str
    reason: str


def verdict(point: float, ci: tuple[float, float], threshold: float, mode: str = "point",
            *, strict: bool = False, rated: str | None = None) -> Verdict:
    """Apply a threshold to a ratio in one of the :data:`MODES`.

    ``point``: pass when ratio >= threshold. ``confident``: pass only when the interval's
    low end is >= threshold. ``not_worse``: fail only when its high end is < threshold.
    ``strict`` makes ">=" a ">" (rating bands are strict: PASS means ratio > 0.95).
    ``decided`` is True when the whole interval lies on one side of the threshold, so more
    episodes would not change a confident or not_worse verdict. ``rated``: the ratio's
    rating; an :data:`INCONCLUSIVE` one fails every threshold, in every mode.

    >>> verdict(0.9, (0.85, 0.95), 0.8, "confident").passed
    True
    >>> verdict(0.9, (0.75, 0.95), 0.8, "confident").passed
    False
    >>> verdict(0.9, (0.85, 0.95), 0.8, rated="INCONCLUSIVE").reason
    'rated INCONCLUSIVE, which no threshold accepts'
    """
    if mode not in MODES:
        raise ValueError(f"unknown verdict mode {mode!r}; modes are {', '.join(MODES)}")
    if rated == INCONCLUSIVE:
        return Verdict(False, False, threshold, mode,
                       f"rated {INCONCLUSIVE}, which no threshold accepts")
    low, high = ci

    def above(x: float) -> bool:
        return x > threshold if strict else x >= threshold

    decided = above(low) or not above(high)
    meets, misses = ("is above", "is not above") if strict else ("meets", "is below")
    if mode == "point":
        passed = above(point)
        reason = f"ratio {point:.3f} {meets if passed else misses} {threshold:g}"
    elif mode == "confident":
        passed = above(low)
        reason = (f"interval low end {low:.3f} {meets if passed else misses} {threshold:g}"
                  f"{'' if passed else ' (not confidently above it)'}")
    else:
        passed = above(high)
        reason = (f"interval high end {high:.3f} {meets if passed else misses} "
                  f"{threshold:g}{' (confidently below it)' if not passed else ''}")
    return Verdict(passed, decided, threshold, mode, reason)
