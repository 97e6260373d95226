"""Adaptive sampling: paired episodes in rounds until the verdict is decided.

See :func:`adaptive_sample` for the error control of repeated looks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .paired import paired_ratio_ci, ratio
from .ratings import verdict

__all__ = ["AdaptiveResult", "adaptive_sample"]


@dataclass(frozen=True)
class AdaptiveResult:
    """The outcome of :func:`adaptive_sample`: the data it ended with and why it stopped."""

    nominal: np.ndarray
    perturbed: np.ndarray
    ci: tuple[float, float]
    looks: int
    planned_looks: int
    look_confidence: float
    stopped: str


def adaptive_sample(
    more: Callable[[int, int], tuple[np.ndarray, np.ndarray]],
    *,
    episodes: int,
    max_episodes: int,
    threshold: float | None = None,
    target_ci_width: float | None = None,
    reference: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    round_size: int | None = None,
    strict: bool = False,
    n_resamples: int = 9999,
) -> AdaptiveResult:
    """Add paired episodes in rounds until the verdict is decided or the interval is narrow.

    ``more(start, stop)`` returns the nominal and perturbed returns of episodes
    ``start .. stop-1``. The first look uses ``episodes``; each further round adds
    ``round_size`` (default: ``episodes``) up to ``max_episodes``. It stops early when the
    interval lies wholly on one side of ``threshold`` (the verdict is decided) or is
    narrower than ``target_ci_width``.

    Error control over repeated looks: alpha spending with equal shares over the planned
    looks. With ``K`` planned looks, each interval is computed at confidence
    ``1 - (1 - confidence) / K``; by the Bonferroni inequality the chance that any look
    wrongly excludes the true ratio is at most ``1 - confidence``, so stopping at the first
    decisive look keeps the error rate of a one-sided verdict at most ``(1 - confidence)/2``
    (tested by simulation in ``tests/test_stats.py``). It is conservative: the price of
    peeking is somewhat wider intervals at every look.

    >>> rng = np.random.default_rng(0)
    >>> def more(start, stop):
    ...     n = rng.normal(100, 5, stop - start)
    ...     return n, n * 0.5
    >>> res = adaptive_sample(more, episodes=10, max_episodes=40, threshold=0.8)
    >>> res.stopped, res.looks
    ('decided', 1)
    """
    # Longer than most: the looks, their alpha spending and the stopping rules are one
    # loop whose state (episodes so far, the look count, the interval) they all read.
    if episodes < 2 or max_episodes < episodes:
        raise ValueError(
            f"adaptive sampling needs 2 <= episodes <= max_episodes, got {episodes}, {max_episodes}"
        )
    if threshold is None and target_ci_width is None:
        raise ValueError("adaptive sampling needs a threshold or a target_ci_width to stop on")
    if target_ci_width is not None and not target_ci_width > 0:
        raise ValueError(f"target_ci_width must be > 0, got {target_ci_width}")
    step = round_size or episodes
    planned = 1 + math.ceil((max_episodes - episodes) / step)
    look_conf = 1.0 - (1.0 - confidence) / planned
    nominal, perturbed = more(0, episodes)
    nominal, perturbed = np.asarray(nominal, float), np.asarray(perturbed, float)
    look = 0
    while True:
        look += 1
        point = ratio(nominal, perturbed, reference)
        ci = paired_ratio_ci(nominal, perturbed, reference=reference, confidence=look_conf,
                             seed=seed, n_resamples=n_resamples)
        if threshold is not None and verdict(point, ci, threshold, "confident",
                                             strict=strict).decided:
            stopped = "decided"
        elif target_ci_width is not None and ci[1] - ci[0] <= target_ci_width:
            stopped = "narrow"
        elif len(nominal) >= max_episodes:
            stopped = "max_episodes"
        else:
            start = len(nominal)
            stop = min(max_episodes, start + step)
            n_new, p_new = more(start, stop)
            nominal = np.concatenate([nominal, np.asarray(n_new, float)])
            perturbed = np.concatenate([perturbed, np.asarray(p_new, float)])
            continue
        return AdaptiveResult(nominal, perturbed, ci, look, planned, look_conf, stopped)
