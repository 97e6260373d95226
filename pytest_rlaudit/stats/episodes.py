"""Intervals over episodes for per-step measures: the episode is the unit.

A replay measures something at every step (a distance, a yes/no); steps within an
episode are not independent, episodes are. The estimate is the share or mean over all
steps (each episode weighted by its steps); its interval is a percentile bootstrap
that resamples whole episodes, with a fixed generator so that the same data give the same
interval.

>>> sums, steps = np.array([1.0, 2.0, 3.0, 2.0]), np.array([10, 10, 10, 10])
>>> est = step_mean_ci(sums, steps)
>>> round(est.value, 3), est.low <= est.value <= est.high
(0.2, True)
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

__all__ = ["Estimate", "step_mean_ci", "paired_step_mean_ci", "RESAMPLES"]

#: Bootstrap resamples of the episodes.
RESAMPLES = 4000


class Estimate(NamedTuple):
    """A value with its interval (``low``, ``high``) at ``confidence``."""

    value: float
    low: float
    high: float
    confidence: float = 0.95

    def to_dict(self) -> dict[str, float | None]:
        """``{value, ci_low, ci_high}`` as plain floats; None for what was not measured
        (NaN: strict JSON has no NaN)."""
        def plain(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        return {"value": plain(self.value), "ci_low": plain(self.low),
                "ci_high": plain(self.high)}


@functools.lru_cache(maxsize=8)
def _weights(episodes: int, seed: int) -> np.ndarray:
    """Bootstrap counts: how often each episode is drawn in each resample (the same for
    every measure of one replay, so made once; read only)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, episodes]))
    weights = rng.multinomial(episodes, np.full(episodes, 1.0 / episodes),
                              size=RESAMPLES).astype(np.float64)
    weights.flags.writeable = False
    return weights


def step_mean_ci(sums: np.ndarray, steps: np.ndarray, *, confidence: float = 0.95,
                 seed: int = 0) -> Estimate:
    """The mean over all steps of a per-step measure whose per-episode totals are
    ``sums`` over ``steps`` steps, with a bootstrap interval over episodes. One episode
    gives no interval beyond the value itself: its ends are the value."""
    sums, steps = np.asarray(sums, dtype=np.float64), np.asarray(steps, dtype=np.float64)
    value = float(sums.sum() / steps.sum())
    if len(sums) < 2:
        return Estimate(value, value, value, confidence)
    w = _weights(len(sums), seed)
    resampled = (w @ sums) / (w @ steps)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Estimate(value, float(min(low, value)), float(max(high, value)), confidence)


def paired_step_mean_ci(sums_a: np.ndarray, sums_b: np.ndarray, steps: np.ndarray, *,
                        confidence: float = 0.95, seed: int = 0) -> Estimate:
    """The difference ``mean(a) - mean(b)`` of two per-step measures taken on the same
    steps (two candidates on one recording), with a bootstrap interval that resamples
    episodes once for both: paired by episode.

    >>> steps = np.array([10, 10, 10])
    >>> d = paired_step_mean_ci(np.array([3.0, 4.0, 5.0]), np.array([1.0, 1.0, 2.0]), steps)
    >>> round(d.value, 3), d.low > 0
    (0.267, True)
    """
    a, b = np.asarray(sums_a, dtype=np.float64), np.asarray(sums_b, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    value = float((a.sum() - b.sum()) / steps.sum())
    if len(a) < 2:
        return Estimate(value, value, value, confidence)
    w = _weights(len(a), seed)
    resampled = (w @ (a - b)) / (w @ steps)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Estimate(value, float(min(low, value)), float(max(high, value)), confidence)
