"""Statistics across training runs: the interquartile mean (IQM) of per-run return
ratios, its interval over both levels of noise, the probability of improvement and
performance profiles (the measures of rliable: Agarwal et al., "Deep Reinforcement
Learning at the Edge of the Statistical Precipice", NeurIPS 2021).

A recipe's robustness is a claim about its training runs, not about one checkpoint. Each
run ``j`` has paired nominal and perturbed episode returns (row ``j`` of two
``(runs, episodes)`` arrays, the same episode seeds in every run); its return ratio is
:func:`~pytest_rlaudit.stats.paired.ratio` of them, the number a plain audit of it gives.

Pure numpy and scipy: no agents, no envs. Every resampling draws from a generator seeded
from ``seed``, and the probability of improvement's interval is in closed form, so the
same inputs give the same intervals, bit for bit.

>>> import numpy as np
>>> iqm([0.0, 0.5, 0.75, 1.0, 9.0])     # the middle half: 0.5, 0.75, 1.0
0.75
>>> probability_of_improvement([0.9, 0.95, 1.0], [0.5, 0.95, 0.6])
0.8333333333333334
>>> performance_profile([0.2, 0.9, 0.95, 1.0], [0.5, 0.95]).tolist()
[0.75, 0.25]
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import confidence as check_confidence
from .._checks import integer
from .scipy_lazy import scipy_stats

__all__ = ["iqm", "run_ratios", "runs_ratio_ci", "probability_of_improvement",
           "improvement_ci", "performance_profile", "iqm_ci", "expanded_level", "RUNS_RESAMPLES"]

#: Bootstrap resamples of the interval of an IQM. rliable uses 50,000; at 10,000 the 95%
#: interval's ends of 10 runs move by a standard deviation of 0.003 from one seed to the
#: next (at 5 runs not at all: they are the extreme resamples), and it takes 5 ms.
RUNS_RESAMPLES = 10_000

#: At most this many resampled episode returns are held at once (about 64 MB of float64
#: and indices): resamples are drawn in chunks, so 100 runs of 1,000 episodes fit too.
_CHUNK_ELEMENTS = 4_000_000

ArrayLike = Sequence[float] | np.ndarray


def iqm(values: ArrayLike) -> float:
    """The interquartile mean: the mean of the middle half of ``values``
    (``scipy.stats.trim_mean(values, 0.25)``, rliable's ``aggregate_iqm`` on one task).

    Robust to a run that diverged (unlike the mean) yet uses half the runs (unlike the
    median), so it needs fewer runs for the same precision. With fewer than 4 values
    nothing is trimmed: it is the mean.

    >>> iqm([1.0, 2.0, 3.0]), iqm([0.0, 1.0, 1.0, 100.0])
    (2.0, 1.0)
    """
    arr = _values("values", values)
    return float(scipy_stats().trim_mean(arr, 0.25))


def run_ratios(nominal: Any, perturbed: Any, reference: float = 0.0) -> np.ndarray:
    """Each run's return ratio: ``(mean(perturbed[j]) - ref) / (mean(nominal[j]) - ref)``.

    >>> run_ratios([[100.0, 200.0], [50.0, 50.0]], [[75.0, 150.0], [50.0, 40.0]]).tolist()
    [0.75, 0.9]
    """
    n, p = _runs(nominal, perturbed)
    ratios: np.ndarray = (p.mean(axis=1) - reference) / (n.mean(axis=1) - reference)
    return ratios


def expanded_level(confidence: float, size: int) -> float:
    """The percentile level that makes a bootstrap over ``size`` runs cover
    ``confidence``: ``2 * Phi(t[n-1](1 - alpha/2)) - 1``, Student's quantile where the
    percentile interval in effect uses the normal's.

    A percentile interval is too narrow over few units: over 5 runs a nominal 95% interval
    of the IQM covers 0.90-0.91, over 10 runs 0.93-0.94 (``benchmarks/bench_runs.py``,
    four populations of runs). Hesterberg's expanded percentile interval (The American
    Statistician, 2015), which the single audit's interval uses over its episodes, also
    widens by ``sqrt(n / (n - 1))``; for the IQM that over-covers at 10 runs (0.963-0.976
    in a first simulation of the same populations). Student's quantile alone covers
    0.938-0.940 at 5 runs and 0.961-0.965 at 10, in every population.

    >>> round(expanded_level(0.95, 5), 4), round(expanded_level(0.95, 10), 4)
    (0.9945, 0.9763)
    """
    alpha, st = 1.0 - confidence, scipy_stats()
    t = float(st.t.ppf(1.0 - alpha / 2.0, size - 1))
    return float(2.0 * st.norm.cdf(t) - 1.0)


def runs_ratio_ci(
    nominal: Any,
    perturbed: Any,
    *,
    reference: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    n_resamples: int = RUNS_RESAMPLES,
    resample_episodes: bool = False,
) -> tuple[float, float]:
    """Interval of the IQM of per-run return ratios, over both levels of noise: the
    spread of runs of one recipe, and the episode noise of each run's ratio.

    ``nominal`` and ``perturbed``: ``(runs, episodes)`` returns, row ``j`` run ``j``'s
    paired episodes. Each resample draws runs with replacement (the recipe is the one
    stratum: rliable's stratified bootstrap on one task) and takes the IQM of their
    ratios. That already counts the episode noise: each run's ratio is an estimate from
    its episodes, and the spread of the estimates is the runs' spread plus it. Resampling
    the episodes within each drawn run too (``resample_episodes=True``, the same indices
    for nominal and perturbed: they are paired) counts the episode noise twice (Davison
    and Hinkley, Bootstrap Methods and their Application, 1997, section 3.8: for
    hierarchical data resample the top level, with replacement; the second, if at all,
    without); in the simulations of ``benchmarks/bench_runs.py`` it covers 0.99 where
    episodes are as noisy as runs differ. It stays as an option to show that.

    The interval is the percentile interval at :func:`expanded_level` for the number of
    runs, containing the point estimate; measured coverage of a 95% interval: 0.93-0.97
    at 5 and at 10 runs (population: run ratios drawn from a Beta distribution, noisy
    episodes around each; estimand: the IQM of the run ratios' population). Needs at
    least 2 runs; below 5 the interval is wide and its coverage unmeasured.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> nominal = rng.normal(400, 30, (6, 10))
    >>> perturbed = nominal * np.linspace(0.7, 0.95, 6)[:, None]
    >>> low, high = runs_ratio_ci(nominal, perturbed, n_resamples=2000)
    >>> bool(low <= iqm(run_ratios(nominal, perturbed)) <= high)
    True
    """
    n, p = _runs(nominal, perturbed)
    confidence = check_confidence(confidence)
    n_resamples = integer("n_resamples", n_resamples, minimum=100)
    runs = n.shape[0]
    if runs < 2:
        raise ValueError(f"an interval across runs needs at least 2 runs, got {runs}")
    ratios = run_ratios(n, p, reference)
    if not resample_episodes:
        return iqm_ci(ratios, confidence=confidence, seed=seed, n_resamples=n_resamples)
    rng = _generator(seed, 0x1A)
    iqms = np.concatenate([scipy_stats().trim_mean(b, 0.25, axis=1)
                           for b in _resampled_ratios(n, p, reference, n_resamples, rng)])
    return _percentile(iqms, iqm(ratios), expanded_level(confidence, runs))


def iqm_ci(per_run: ArrayLike, *, confidence: float = 0.95, seed: int = 0,
           n_resamples: int = RUNS_RESAMPLES) -> tuple[float, float]:
    """:func:`runs_ratio_ci` from the per-run ratios alone (all its default method needs):
    the runs resampled with replacement, the IQM of each resample, the percentile interval
    at :func:`expanded_level`, containing the point estimate.

    >>> iqm_ci([0.5, 0.5, 0.5]), iqm_ci([0.9, 1.0], confidence=0.5, n_resamples=200)
    ((0.5, 0.5), (0.9, 1.0))
    """
    ratios = _values("per_run", per_run)
    if len(ratios) < 2:
        raise ValueError(f"an interval across runs needs at least 2 runs, got {len(ratios)}")
    confidence = check_confidence(confidence)
    n_resamples = integer("n_resamples", n_resamples, minimum=100)
    runs = len(ratios)
    rng = _generator(seed, 0x1A)
    iqms = scipy_stats().trim_mean(ratios[rng.integers(0, runs, size=(n_resamples, runs))],
                                  0.25, axis=1)
    return _percentile(iqms, iqm(ratios), expanded_level(confidence, runs))


def probability_of_improvement(x: ArrayLike, y: ArrayLike) -> float:
    """The probability that a run of X beats a run of Y: the Mann-Whitney estimate
    ``mean over pairs (i, j) of [x_i > y_j] + 0.5 [x_i == y_j]`` (rliable's
    ``probability_of_improvement`` on one task: its U statistic over ``len(x) *
    len(y)``). 0.5: no better, no worse; 1: every run of X beats every run of Y.

    >>> probability_of_improvement([1.0, 2.0], [0.0, 2.0])
    0.625
    """
    a, b = _values("x", x), _values("y", y)
    return float(_improvement(a[None, :], b[None, :])[0])


def improvement_ci(x: ArrayLike, y: ArrayLike, *,
                   confidence: float = 0.95) -> tuple[float, float]:
    """Interval of :func:`probability_of_improvement` of X's per-run values over Y's:
    Newcombe's method 5 (Statistics in Medicine, 2006, "Confidence intervals for an effect
    size measure based on the Mann-Whitney statistic, part 2"), a score interval: the
    ``t`` with ``(t - estimate)^2 <= z^2 V(t)``, where ``V`` is Hanley and McNeil's variance
    of the estimate at ``t`` with ``N* = (m + n) / 2 - 1``.

    Not rliable's bootstrap, which resamples each recipe's runs: when every run of X beats
    every run of Y (at 5 runs each, 37% of the time for recipes whose true probability is
    0.92) every resample does too, and its interval is the point 1.0, so it covered 0.65
    where 0.95 was asked; Newcombe's interval covered 0.946-0.97 at 5 and 10 runs, true
    probabilities 0.5, 0.76 and 0.92 (``benchmarks/bench_runs.py``). Each run's value
    carries its episode noise, as in :func:`runs_ratio_ci`. Closed form: no resampling,
    the same numbers every time.

    >>> low, high = improvement_ci([0.9, 0.95, 1.0, 0.92, 0.97], [0.5, 0.6, 0.7, 0.55, 0.65])
    >>> round(low, 3), high
    (0.643, 1.0)
    """
    a, b = _values("x", x), _values("y", y)
    if min(len(a), len(b)) < 2:
        raise ValueError(f"a probability of improvement's interval needs at least 2 runs of "
                         f"each recipe, got {len(a)} and {len(b)}")
    confidence = check_confidence(confidence)
    m, n = len(a), len(b)
    point = probability_of_improvement(a, b)
    z2 = float(scipy_stats().norm.ppf(0.5 + confidence / 2)) ** 2
    pairs = (m + n) / 2 - 1

    def outside(t: float) -> float:  # > 0 outside the interval, <= 0 inside
        variance = t * (1 - t) * (1 + pairs * ((1 - t) / (2 - t) + t / (1 + t))) / (m * n)
        return (t - point) ** 2 - z2 * variance

    return (_score_end(outside, point, 0.0), _score_end(outside, point, 1.0))


def _score_end(outside: Any, point: float, edge: float) -> float:
    """The end of a score interval between ``point`` and ``edge`` (0 or 1): ``edge`` when
    it is inside, else the root of ``outside`` between them. At an estimate of 0 or 1 the
    variance vanishes there, so the search starts a little inside."""
    if outside(edge) <= 0:
        return edge
    inner = point
    step = (edge - point) * 1e-6 if point in (0.0, 1.0) else 0.0
    while step and outside(inner) >= 0 and abs(step) < 0.5:
        step *= 2
        inner = point + step
    if outside(inner) > 0:
        return point  # no room: the interval is the point (not reached for 2+ runs)
    from scipy.optimize import brentq  # with scipy.stats: see .scipy_lazy

    return float(brentq(outside, min(inner, edge), max(inner, edge)))


def performance_profile(per_run: ArrayLike, taus: ArrayLike) -> np.ndarray:
    """The fraction of runs whose ratio exceeds each ``tau`` (rliable's run-score
    distribution, ``mean(scores > tau)``): a curve a report can draw, falling from 1 to 0.

    >>> performance_profile([0.5, 1.0], [0.0, 0.5, 0.99, 1.0]).tolist()
    [1.0, 0.5, 0.5, 0.0]
    """
    values = _values("per_run", per_run, minimum=1)
    thresholds = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    profile: np.ndarray = (values[None, :] > thresholds[:, None]).mean(axis=1)
    return profile


# ---------------------------------------------------------------------------- helpers


def _values(name: str, values: ArrayLike, minimum: int = 1) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or len(arr) < minimum:
        raise ValueError(f"{name} must be a 1-D sequence of at least {minimum} per-run "
                         f"values, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} has a non-finite value: {arr.tolist()}")
    return arr


def _runs(nominal: Any, perturbed: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two ``(runs, episodes)`` float arrays of the same shape, finite, >= 2 episodes."""
    n = np.asarray(nominal, dtype=np.float64)
    p = np.asarray(perturbed, dtype=np.float64)
    if n.ndim != 2 or n.shape != p.shape:
        raise ValueError(
            "nominal and perturbed must be (runs, episodes) arrays of one shape: every run "
            f"audited on the same episodes; got shapes {n.shape} and {p.shape}")
    if n.shape[1] < 2:
        raise ValueError(f"each run needs at least 2 paired episodes, got {n.shape[1]}")
    if not (np.isfinite(n).all() and np.isfinite(p).all()):
        raise ValueError("a run has a non-finite episode return; check the env's rewards")
    return n, p


def _generator(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), stream]))


def _resampled_ratios(nominal: np.ndarray, perturbed: np.ndarray, reference: float,
                      n_resamples: int, rng: np.random.Generator) -> Any:
    """Blocks of ``(resamples, runs)`` per-run ratios of the two-stage bootstrap: runs
    drawn with replacement, then each drawn run's episode indices (one draw for its
    nominal and perturbed returns: they are paired)."""
    runs, episodes = nominal.shape
    per_block = max(1, _CHUNK_ELEMENTS // (runs * episodes))
    done = 0
    while done < n_resamples:
        size = min(per_block, n_resamples - done)
        drawn = rng.integers(0, runs, size=(size, runs))
        steps = rng.integers(0, episodes, size=(size, runs, episodes))
        nom = nominal[drawn[..., None], steps].mean(axis=2)
        per = perturbed[drawn[..., None], steps].mean(axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            yield (per - reference) / (nom - reference)
        done += size


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mann-Whitney P(X > Y) + 0.5 P(X = Y) of each row pair of ``x`` and ``y``."""
    diff = x[:, :, None] - y[:, None, :]
    wins: np.ndarray = (diff > 0).mean(axis=(1, 2)) + 0.5 * (diff == 0).mean(axis=(1, 2))
    return wins


def _percentile(values: np.ndarray, point: float, level: float) -> tuple[float, float]:
    """The percentile interval of ``values`` at ``level``, widened to hold ``point``.
    A resample whose nominal mean fell to the reference has no ratio (NaN): dropped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(values, [50 * (1 - level), 50 * (1 + level)])
    if not (np.isfinite(low) and np.isfinite(high)):
        return (point, point)
    return (min(float(low), point), max(float(high), point))
