"""Paired statistics of episode returns: ratios, bootstrap intervals, p-values, Holm.

Episode ``i`` of a scenario and episode ``i`` of the nominal env share their env seed,
so resampling and permuting act on episode indices, keeping each pair together.

>>> import numpy as np
>>> nominal = np.array([500.0, 480, 500, 470, 500, 490])
>>> perturbed = np.array([400.0, 380, 450, 300, 420, 410])
>>> low, high = paired_ratio_ci(nominal, perturbed)
>>> bool(low < ratio(nominal, perturbed) < high)
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import confidence as check_confidence
from ..errors import ReferenceScoreError
from .scipy_lazy import scipy_stats

__all__ = ["check_returns", "check_reference", "ratio", "paired_ratio_ci", "ratio_change_ci",
           "degradation_p_value", "holm", "PRECISION", "Margin", "reference_margin"]


def check_returns(name: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` as a 1-D float array, or a ValueError naming what is wrong with it."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of episode returns, got shape {arr.shape}")
    if len(arr) < 2:
        raise ValueError(f"{name} needs at least 2 episodes, got {len(arr)}")
    if not np.isfinite(arr).all():
        bad = int(np.argmin(np.isfinite(arr)))
        raise ValueError(
            f"{name} has a non-finite return ({arr[bad]}) at episode {bad}; check the env's "
            "rewards (pytest_rlaudit.audit reports where non-finite rewards occur)"
        )
    return arr


def check_reference(nominal_mean: float, reference: float) -> None:
    """Raise when the nominal mean does not exceed the reference (a ratio would mislead)."""
    if not nominal_mean > reference:
        raise ReferenceScoreError(
            f"the nominal mean return ({nominal_mean:.4g}) does not exceed the reference "
            f"({reference:.4g}), so a return ratio would be meaningless or sign-flipped (returns "
            "are negative on envs like Pendulum). Set reference='random' to measure from a "
            "random policy, or reference=<a number below the nominal return> (for example the "
            "worst return you would accept)."
        )


#: How many standard errors the margin must lie above 0 for ratios of it to be rated: its
#: standard error at most a quarter of it (see :attr:`Margin.clear`).
PRECISION = 4.0


@dataclass(frozen=True)
class Margin:
    """How far the nominal returns lie above the reference: the mean margin per episode
    and its interval (at ``confidence``, over ``episodes`` paired episodes)."""

    mean: float
    low: float
    high: float
    episodes: int
    confidence: float
    spread: float = 0.0  # the margins' standard deviation

    @property
    def standard_error(self) -> float:
        return self.spread / math.sqrt(self.episodes)

    @property
    def clear(self) -> bool:
        """Whether the margin is clearly positive: its interval lies above 0, and it is
        at least :data:`PRECISION` (4) standard errors, so the denominator of every ratio
        is known to within a quarter of itself.

        Merely above 0 is not enough: a PPO trained for 5k steps on Pendulum leads random
        actions by 70 per episode over 30 episodes (95% interval 2 to 138, significant:
        2.1 standard errors), and its ratios' intervals run from -1.5 to 1.0, a rating of
        which would be a coin toss. A trained agent's lead is many standard errors even
        over 3 episodes (the zoo's Pendulum TQC: about 6 there).

        >>> Margin(70.0, 2.4, 137.6, 30, 0.95, spread=181.0).clear
        False
        >>> Margin(1100.0, 355.0, 1845.0, 3, 0.95, spread=300.0).clear
        True
        """
        return self.low > 0 and self.mean >= PRECISION * self.standard_error

    def episodes_needed(self, power: float = 0.8, limit: int = 100_000) -> int | None:
        """About how many episodes would show a margin of this mean and spread as clear
        (:attr:`clear`) with probability ``power`` (the textbook sample size of a one-sided
        t test, against 0 at the interval's level and against :data:`PRECISION` standard
        errors); None when the mean margin is not positive, or more than ``limit``. An
        estimate: over a few episodes the spread itself is uncertain.

        >>> Margin(70.0, 2.4, 137.6, 30, 0.95, spread=181.0).episodes_needed()
        157
        """
        if self.mean <= 0:
            return None
        if self.spread == 0:
            return 2
        level = 0.5 + self.confidence / 2
        st = scipy_stats()

        def enough(n: int) -> bool:
            beyond = float(st.t.ppf(power, n - 1))
            need = max(float(st.t.ppf(level, n - 1)), PRECISION) + beyond
            return need * self.spread / math.sqrt(n) <= self.mean

        # t quantiles exceed the normal's: the normal answer is a lower bound to start from
        z = PRECISION + float(st.norm.ppf(power))
        start = max(2, math.ceil((z * self.spread / self.mean) ** 2))
        return next((n for n in range(start, limit + 1) if enough(n)), None)


def reference_margin(nominal: Sequence[float] | np.ndarray,
                     reference: float | Sequence[float] | np.ndarray, *,
                     confidence: float = 0.95) -> Margin:
    """The nominal returns' margin over the reference: a number, or a reference policy's
    returns on the same episode seeds (paired: the first ``min(len)`` episodes of both).

    A ratio is ``(perturbed - ref) / (nominal - ref)``: when ``nominal - ref`` is not
    clearly positive (:attr:`Margin.clear`: above 0, and by 4 standard errors), every
    ratio is mostly noise, and a rating of it would be a coin toss. The interval is Student's t on the paired
    margins, not a permutation test: an exact sign-flip test cannot reach p < 2^-n, so
    at 5 episodes it could never call even a perfect agent clear, while t, on margins
    that are all far from 0, can. Margins with no spread (a number against capped
    returns) give the point interval.

    >>> reference_margin([500.0, 500.0, 500.0], 0.0).clear
    True
    >>> m = reference_margin([-1150.0, -900, -1400, -1100], [-1206.0, -1000, -1300, -1300])
    >>> round(m.mean, 1), m.clear
    (64.0, False)
    """
    n = check_returns("nominal", nominal)
    confidence = check_confidence(confidence)
    if np.ndim(reference) == 0:
        ref = np.full(len(n), float(reference))  # type: ignore[arg-type]
    else:
        ref = check_returns("reference", reference)  # type: ignore[arg-type]
    size = min(len(n), len(ref))
    margins = n[:size] - ref[:size]
    mean = float(np.mean(margins))
    spread = float(np.std(margins, ddof=1))
    half = 0.0 if spread == 0 else float(
        scipy_stats().t.ppf(0.5 + confidence / 2, size - 1) * spread / math.sqrt(size))
    return Margin(mean, mean - half, mean + half, size, confidence, spread)


def ratio(nominal: Sequence[float] | np.ndarray, perturbed: Sequence[float] | np.ndarray,
          reference: float = 0.0) -> float:
    """``(mean(perturbed) - reference) / (mean(nominal) - reference)``.

    >>> ratio([10.0, 10.0], [5.0, 7.0])
    0.6
    """
    n_mean, p_mean = float(np.mean(nominal)), float(np.mean(perturbed))
    check_reference(n_mean, reference)
    return (p_mean - reference) / (n_mean - reference)


def _pair(nominal: Sequence[float] | np.ndarray,
          perturbed: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = check_returns("nominal", nominal)
    p = check_returns("perturbed", perturbed)
    if n.shape != p.shape:
        raise ValueError(
            f"nominal and perturbed must pair episode by episode: {len(n)} vs {len(p)} episodes"
        )
    return n, p


def paired_ratio_ci(
    nominal: Sequence[float] | np.ndarray,
    perturbed: Sequence[float] | np.ndarray,
    *,
    reference: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    n_resamples: int = 9999,
) -> tuple[float, float]:
    """Paired bootstrap interval of the return ratio (BCa, resampling episode indices).

    Runs ``scipy.stats.bootstrap(paired=True, method="BCa", vectorized=True)`` seeded with
    ``seed``, so the interval is reproducible. Bootstrap intervals are too narrow in small
    samples (in effect they use n rather than n - 1, and normal rather than t quantiles:
    at 30 episodes a nominal 95% covers about 92%), so, following Hesterberg's expanded
    percentile interval (The American Statistician, 2015), the level is first expanded to
    ``2 * Phi(sqrt(n / (n - 1)) * t[n-1](1 - alpha/2)) - 1`` (0.9625 at 30 episodes).
    Measured coverage of the 95% interval: see ``tests/test_stats.py``. Degenerate data,
    where the ratio cannot vary (every episode capped at 500 in both, or all returns equal), gives the point
    interval ``(r, r)``; where BCa is undefined but the ratio does vary, the percentile
    interval is used instead. Never NaN, never a warning storm.

    >>> paired_ratio_ci([500.0] * 5, [500.0] * 5)
    (1.0, 1.0)
    """
    n, p = _pair(nominal, perturbed)
    confidence = check_confidence(confidence)
    point = ratio(n, p, reference)
    residual = (p - reference) - point * (n - reference)
    if np.abs(residual).max() <= 1e-12 * max(1.0, np.abs(p).max(), np.abs(n).max()):
        # p_i - ref = r (n_i - ref) for every episode (all capped at 500, say): every
        # resample has the same ratio, and BCa's acceleration would be 0/0.
        return (point, point)

    def statistic(nom: np.ndarray, per: np.ndarray, axis: int = -1) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios: np.ndarray = (per.mean(axis=axis) - reference) / (nom.mean(axis=axis) - reference)
            return ratios

    alpha, size, st = 1.0 - confidence, len(n), scipy_stats()
    expanded = 2.0 * st.norm.cdf(
        math.sqrt(size / (size - 1)) * st.t.ppf(1.0 - alpha / 2.0, size - 1)) - 1.0
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED]))
    return _paired_bootstrap((n, p), statistic, point, expanded, n_resamples, rng)


def _paired_bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., np.ndarray], point: float,
                      confidence: float, n_resamples: int,
                      rng: np.random.Generator) -> tuple[float, float]:
    """scipy's paired, vectorised bootstrap: BCa, else the percentile interval where BCa is
    undefined, else the point; the interval always contains the point estimate."""
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = scipy_stats().bootstrap(
                data, statistic, paired=True, vectorized=True, method=method,
                confidence_level=confidence, n_resamples=n_resamples, rng=rng)
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return (min(low, point), max(high, point))
    return (point, point)


def ratio_change_ci(
    base_nominal: Sequence[float] | np.ndarray,
    base_perturbed: Sequence[float] | np.ndarray,
    nominal: Sequence[float] | np.ndarray,
    perturbed: Sequence[float] | np.ndarray,
    *,
    base_reference: float = 0.0,
    reference: float = 0.0,
    confidence: float = 0.90,
    seed: int = 0,
    n_resamples: int = 9999,
) -> tuple[float, float]:
    """Paired bootstrap interval of ``ratio(nominal, perturbed) - ratio(base_nominal,
    base_perturbed)``: two runs (a baseline and a candidate) on the same episode seeds,
    resampled by episode index jointly, so the pairing of all four arrays is kept.

    BCa, falling back to the percentile interval where BCa is undefined; identical runs
    give ``(0.0, 0.0)``. A one-sided test at level a uses ``confidence = 1 - 2a``.

    >>> ratio_change_ci([500.0, 480.0], [200.0, 100.0], [500.0, 480.0], [200.0, 100.0])
    (0.0, 0.0)
    """
    arrays = [check_returns(name, v) for name, v in (
        ("base_nominal", base_nominal), ("base_perturbed", base_perturbed),
        ("nominal", nominal), ("perturbed", perturbed))]
    if len({len(a) for a in arrays}) != 1 or len(arrays[0]) < 2:
        raise ValueError("ratio_change_ci needs four paired arrays of the same length >= 2 "
                         f"(got lengths {[len(a) for a in arrays]})")
    confidence = check_confidence(confidence)
    bn, bp, cn, cp = arrays
    point = ratio(cn, cp, reference) - ratio(bn, bp, base_reference)
    if all(np.array_equal(x, y) for x, y in ((bn, cn), (bp, cp))) and base_reference == reference:
        return (point, point)

    def statistic(bn: np.ndarray, bp: np.ndarray, cn: np.ndarray, cp: np.ndarray,
                  axis: int = -1) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            gaps: np.ndarray = (
                (cp.mean(axis=axis) - reference) / (cn.mean(axis=axis) - reference)
                - (bp.mean(axis=axis) - base_reference) / (bn.mean(axis=axis) - base_reference))
            return gaps

    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xC0DE]))
    return _paired_bootstrap((bn, bp, cn, cp), statistic, point, confidence, n_resamples, rng)


def degradation_p_value(
    nominal: Sequence[float] | np.ndarray,
    perturbed: Sequence[float] | np.ndarray,
    *,
    seed: int = 0,
    n_resamples: int = 9999,
) -> float:
    """One-sided paired p-value of H0 "the perturbation does not lower the mean return".

    A sign-flip permutation test of the mean paired difference: under H0 each episode's
    difference is as likely negated, so the p-value is the share of sign patterns whose
    mean difference is at most the observed one. Exact (all 2^n patterns) when 2^n is at
    most ``n_resamples``; otherwise ``n_resamples`` seeded random patterns, counted with
    the observed one. No normality is assumed, which matters for capped, skewed returns
    like CartPole's. The ratio is below 1 exactly when the mean difference is negative,
    whatever the reference, so the test needs none. This is the test of
    ``scipy.stats.permutation_test(permutation_type="samples")`` on the differences,
    written out in numpy because scipy's generic path (permuting the two values of every
    pair) cost 12 ms a call, most of an audit's statistics time.

    >>> degradation_p_value([500.0] * 8, [500.0] * 8)
    1.0
    >>> degradation_p_value([10.0, 10, 10, 10], [9.0, 8, 7, 6])  # exact: 1 of 16 patterns
    0.0625
    """
    n, p = _pair(nominal, perturbed)
    diff = p - n
    if not diff.any():
        return 1.0
    size = len(diff)
    observed = diff.mean()
    ties = observed + 1e-12 * max(1.0, abs(observed))  # float noise must not break ties
    if 2**size <= n_resamples:
        patterns = np.arange(2**size, dtype=np.int64)[:, None] >> np.arange(size)
        null = (1 - 2 * (patterns & 1)) @ diff / size
        return float(np.mean(null <= ties))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xD1FF]))
    hits, done = 0, 0
    while done < n_resamples:  # in blocks, so long audits stay light on memory
        rows = min(2000, n_resamples - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(rows, size), dtype=np.int8)
        hits += int(np.sum(signs @ diff / size <= ties))
        done += rows
    return (hits + 1) / (n_resamples + 1)


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error).

    >>> holm({"a": 0.01, "b": 0.04, "c": 0.03})
    {'a': 0.03, 'b': 0.06, 'c': 0.06}
    """
    names = sorted(p_values, key=lambda k: p_values[k])
    m = len(names)
    adjusted: dict[str, float] = {}
    running = 0.0
    for rank, name in enumerate(names):
        running = max(running, min(1.0, (m - rank) * float(p_values[name])))
        adjusted[name] = round(running, 12)
    return {name: adjusted[name] for name in p_values}
