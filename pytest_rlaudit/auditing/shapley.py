"""Shapley shares of a ratio lost among observation groups, with paired bootstrap
intervals: the arithmetic of :mod:`.attribution`, apart from the runs.

A coalition S of groups has the loss ``1 - ratio(S)`` (the scenario seen on S only); a
group's share is its mean marginal loss over orders of the groups, so the shares sum to
the loss with every group perturbed (the full scenario's, when the groups cover the
observation). Every coalition's returns are paired on the same episodes, so
one bootstrap resample of episode indices moves them all together.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Share", "shapley_shares", "pair_synergy", "RESAMPLES"]

#: Bootstrap resamples of the shares' intervals.
RESAMPLES = 2000


@dataclass(frozen=True)
class Share:
    """A group's Shapley share of the ratio lost (the shares sum to the loss with every
    group perturbed: ``1 - full ratio`` when the groups cover the observation), with its
    bootstrap interval."""

    value: float
    ci: tuple[float, float]

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "ci_low": self.ci[0], "ci_high": self.ci[1]}


def shapley_shares(returns: Mapping[frozenset[str], np.ndarray], names: Sequence[str], *,
                   reference: float = 0.0, confidence: float = 0.95, seed: int = 0,
                   orders: Sequence[Sequence[str]] | None = None) -> dict[str, Share]:
    """Each of ``names``' share of the ratio lost. ``returns``: each coalition's episode
    returns (the empty one: nominal's), paired; every coalition when ``orders`` is None
    (exact shares), else those along each of ``orders`` (sampled shares, whose interval
    resamples the orders too).

    >>> nominal, pole = np.array([500.0, 400.0]), np.array([250.0, 200.0])
    >>> shares = shapley_shares({frozenset(): nominal, frozenset({"cart"}): nominal,
    ...                          frozenset({"pole"}): pole, frozenset({"cart", "pole"}): pole},
    ...                         ["cart", "pole"])
    >>> shares["cart"].value, shares["pole"].value
    (0.0, 0.5)
    """
    loss, index, rng = _losses(returns, reference, seed)
    alpha = 1.0 - confidence
    out = {}
    for g in names:
        if orders is None:
            share = _exact(loss, index, names, g)
        else:
            gains = np.array([loss[index[frozenset(o[:list(o).index(g) + 1])]]
                              - loss[index[frozenset(o[:list(o).index(g)])]] for o in orders])
            chosen = rng.integers(0, len(orders), size=(RESAMPLES, len(orders)))
            share = np.concatenate([[gains[:, 0].mean()],
                                    gains[chosen, np.arange(1, RESAMPLES + 1)[:, None]].mean(axis=1)])
        point, boot = float(share[0]), share[1:][np.isfinite(share[1:])]
        low, high = (np.quantile(boot, [alpha / 2, 1 - alpha / 2]) if len(boot)
                     else (point, point))
        out[g] = Share(point, (float(min(low, point)), float(max(high, point))))
    return out


def pair_synergy(returns: Mapping[frozenset[str], np.ndarray], *, reference: float = 0.0,
                 confidence: float = 0.95, seed: int = 0
                 ) -> list[tuple[str, str, float, tuple[float, float]]]:
    """For each pair of groups whose coalitions were run ({a}, {b} and {a, b}): the loss
    together minus the two losses alone (> 0: they compound; < 0: they overlap), with a
    bootstrap interval simultaneous over the pairs (Bonferroni).

    >>> n, half = np.array([500.0, 400.0]), np.array([250.0, 200.0])
    >>> pair_synergy({frozenset(): n, frozenset({"a"}): n, frozenset({"b"}): n,
    ...               frozenset({"a", "b"}): half})
    [('a', 'b', 0.5, (0.5, 0.5))]
    """
    loss, index, _ = _losses(returns, reference, seed)
    singles = sorted(next(iter(c)) for c in index if len(c) == 1)
    pairs = [(a, b) for a, b in itertools.combinations(singles, 2) if frozenset({a, b}) in index]
    alpha = (1.0 - confidence) / max(len(pairs), 1)
    out = []
    for a, b in pairs:
        gap = (loss[index[frozenset({a, b})]] - loss[index[frozenset({a})]]
               - loss[index[frozenset({b})]])
        boot = gap[1:][np.isfinite(gap[1:])]
        low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2]) if len(boot) else (gap[0],) * 2
        out.append((a, b, float(gap[0]), (float(min(low, gap[0])), float(max(high, gap[0])))))
    return out


def _losses(returns: Mapping[frozenset[str], np.ndarray], reference: float, seed: int
            ) -> tuple[np.ndarray, dict[frozenset[str], int], np.random.Generator]:
    """Each coalition's loss (a row), on the data (column 0) and on :data:`RESAMPLES`
    resamples of the episodes, every coalition resampled alike; the rows' index; the
    generator, for more draws."""
    coalitions = list(returns)
    index = {c: i for i, c in enumerate(coalitions)}
    table = np.array([returns[c] for c in coalitions], dtype=np.float64)
    n = table.shape[1]
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5A4B]))
    picks = rng.integers(0, n, size=(RESAMPLES, n))
    means = np.concatenate([table.mean(axis=1)[:, None], table[:, picks].mean(axis=2)], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = 1.0 - (means - reference) / (means[index[frozenset()]] - reference)
    return loss, index, rng


def _exact(loss: np.ndarray, index: Mapping[frozenset[str], int], names: Sequence[str],
           g: str) -> np.ndarray:
    others = [x for x in names if x != g]
    share = np.zeros(loss.shape[1])
    for size in range(len(others) + 1):
        weight = (math.factorial(size) * math.factorial(len(names) - size - 1)
                  / math.factorial(len(names)))
        for combo in itertools.combinations(others, size):
            s = frozenset(combo)
            share += weight * (loss[index[s | {g}]] - loss[index[s]])
    return share
