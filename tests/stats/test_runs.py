"""Statistics across training runs (pytest_rlaudit.stats.runs): agreement with rliable's
definitions, reproducibility, and the coverage of the IQM's interval by simulation.

The populations of runs are defined once here; ``benchmarks/bench_runs.py`` imports them
and measures coverage with many more simulations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_rlaudit.stats.runs import (
    expanded_level,
    improvement_ci,
    iqm,
    iqm_ci,
    performance_profile,
    probability_of_improvement,
    run_ratios,
    runs_ratio_ci,
)

# Scores on which rliable 1.2.0 (metrics.aggregate_iqm, metrics.probability_of_improvement,
# library.create_performance_profile, library.get_interval_estimates with 50,000 reps) was
# run once, in a separate venv (it needs arch, statsmodels, pandas < 3, seaborn: not a
# dev dependency); its outputs are pinned below. The script: benchmarks/rliable_agreement.py.
X = np.array([0.852, 0.788, 0.728, 0.83, 0.949, 0.713, 0.618, 0.691, 0.872, 0.872])
Y = np.array([0.676, 0.487, 0.912, 0.645, 0.813, 0.8, 0.51])


def test_iqm_and_probability_of_improvement_equal_rliables_on_its_score_matrices():
    assert iqm(X) == 0.7971666666666667
    assert iqm(Y) == 0.6888
    assert iqm(X[:5]) == 0.8233333333333333
    assert iqm(X[:4]) == pytest.approx(0.809, abs=1e-15)
    assert probability_of_improvement(X, Y) == pytest.approx(0.7, abs=1e-15)
    assert probability_of_improvement(Y, X) == pytest.approx(0.3, abs=1e-15)
    ties = np.concatenate([X[:5], X[:3]])
    assert probability_of_improvement(ties, X) == pytest.approx(0.55, abs=1e-15)
    assert probability_of_improvement(X[:5], Y[:5]) == pytest.approx(0.76, abs=1e-15)
    profile = performance_profile(X, np.linspace(0, 1, 11))
    assert profile.tolist() == [1.0] * 7 + [0.8, 0.5, 0.1, 0.0]


def test_the_paper_formulas_by_hand():
    # IQM: the mean of the middle half (scipy's trim_mean cuts int(0.25 n) from each end)
    assert iqm([5.0, 1.0, 3.0, 2.0, 100.0, 4.0, 0.0, 6.0]) == np.mean([2.0, 3.0, 4.0, 5.0])
    # probability of improvement: U / (m n), the Mann-Whitney U of x over y, ties half
    x, y = np.array([3.0, 1.0, 2.0]), np.array([2.0, 0.0])
    wins = sum((a > b) + 0.5 * (a == b) for a in x for b in y) / 6
    assert probability_of_improvement(x, y) == wins == 4.5 / 6
    u = stats.mannwhitneyu(x, y, alternative="greater").statistic
    assert probability_of_improvement(x, y) == u / 6


@pytest.mark.parametrize(("runs", "rliable"), [(5, (0.748, 0.9167)), (10, (0.7192, 0.862))])
def test_the_runs_bootstrap_is_rliables_stratified_bootstrap(runs, rliable):
    # at the confidence whose expanded level is 0.95, iqm_ci is the plain 95% percentile
    # interval of resampled runs: rliable's (its reps=50,000; a different generator)
    plain = 2 * stats.t(runs - 1).cdf(stats.norm.ppf(0.975)) - 1
    assert expanded_level(plain, runs) == pytest.approx(0.95)
    low, high = iqm_ci(X[:runs], confidence=plain, n_resamples=50_000)
    assert low == pytest.approx(rliable[0], abs=0.004)
    assert high == pytest.approx(rliable[1], abs=0.004)


def hanley_mcneil(t: float, m: int, n: int) -> float:
    """The variance of a Mann-Whitney estimate at ``t`` (Newcombe 2006, method 5)."""
    pairs = (m + n) / 2 - 1
    return t * (1 - t) * (1 + pairs * ((1 - t) / (2 - t) + t / (1 + t))) / (m * n)


@pytest.mark.parametrize(("x", "y"), [(X, Y), (X[:5], Y[:5]), ([1.0, 2.0, 3.0], [0.0, 0.5])])
def test_the_improvement_interval_is_newcombes_score_interval(x, y):
    point = probability_of_improvement(x, y)
    low, high = improvement_ci(x, y)
    z2 = stats.norm.ppf(0.975) ** 2
    assert low <= point <= high
    for end in (low, high):  # each end solves (t - estimate)^2 = z^2 V(t), or is 0 or 1
        if end not in (0.0, 1.0):
            assert (end - point) ** 2 == pytest.approx(z2 * hanley_mcneil(end, len(x), len(y)),
                                                       rel=1e-6, abs=1e-12)
    back = improvement_ci(y, x)  # the same statement the other way round
    assert back[0] == pytest.approx(1 - high) and back[1] == pytest.approx(1 - low)


def test_every_run_winning_is_not_certainty():
    # rliable's bootstrap would say (1.0, 1.0): every resample wins every pair
    low, high = improvement_ci([0.9, 0.95, 1.0, 0.92, 0.97], [0.5, 0.6, 0.7, 0.55, 0.65])
    assert high == 1.0 and low == pytest.approx(0.6427, abs=1e-4)
    assert (1 - low) ** 2 == pytest.approx(stats.norm.ppf(0.975) ** 2 * hanley_mcneil(low, 5, 5))


def test_run_ratios_are_each_runs_plain_ratio():
    from pytest_rlaudit.stats import ratio

    rng = np.random.default_rng(1)
    nominal = rng.normal(300, 20, (4, 6))
    perturbed = nominal * 0.8 + rng.normal(0, 10, (4, 6))
    got = run_ratios(nominal, perturbed, reference=20.0)
    assert got.tolist() == [ratio(n, p, 20.0) for n, p in zip(nominal, perturbed, strict=True)]


def test_intervals_are_reproducible_bit_for_bit_and_seeded():
    rng = np.random.default_rng(2)
    nominal = rng.normal(400, 40, (6, 8))
    perturbed = nominal * rng.uniform(0.6, 1.0, (6, 1))
    first = runs_ratio_ci(nominal, perturbed, seed=3)
    assert runs_ratio_ci(nominal, perturbed, seed=3) == first
    two = runs_ratio_ci(nominal, perturbed, seed=3, resample_episodes=True)
    assert runs_ratio_ci(nominal, perturbed, seed=3, resample_episodes=True) == two
    # (over 6 runs the 99.4% interval's ends are the extreme resamples, seed or not)
    assert runs_ratio_ci(nominal, perturbed, seed=4, resample_episodes=True) != two
    ratios = run_ratios(nominal, perturbed)
    assert iqm_ci(ratios, seed=3) == first
    low, high = improvement_ci(X, Y)
    assert low <= probability_of_improvement(X, Y) <= high


def test_resampling_episodes_too_counts_their_noise_twice_so_is_wider():
    rng = np.random.default_rng(3)
    nominal = rng.normal(400, 150, (10, 30))
    perturbed = 0.8 * nominal + rng.normal(0, 150, (10, 30))
    low, high = runs_ratio_ci(nominal, perturbed)
    low2, high2 = runs_ratio_ci(nominal, perturbed, resample_episodes=True)
    assert high2 - low2 > high - low


def test_errors_name_the_cause():
    with pytest.raises(ValueError, match="at least 2 runs"):
        iqm_ci([0.9])
    with pytest.raises(ValueError, match="at least 2 runs, got 1"):
        runs_ratio_ci([[1.0, 2.0]], [[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"same episodes; got shapes \(2, 3\) and \(2, 2\)"):
        runs_ratio_ci(np.ones((2, 3)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        iqm([1.0, math.nan])
    with pytest.raises(ValueError, match="confidence"):
        iqm_ci([0.9, 1.0], confidence=1.5)


# ------------------------------------------------------------------------------ coverage
#: Populations of training runs: a run's true ratio is drawn from a Beta distribution
#: (name: (a, b, episode noise)), its nominal mean from N(400, 40); its episodes are
#: noisy around them (nominal: mean + e, perturbed: ratio * mean + 0.7 e + e', e and e'
#: N(0, noise): the paired episodes share part of their noise). With infinitely many
#: episodes a run's ratio is its true ratio, so the estimand is the IQM of the Beta
#: distribution: the mean of its middle half.
POPULATIONS = {
    "skewed": (8.0, 2.0, 60.0),
    "noisy episodes": (8.0, 2.0, 150.0),
    "tight": (30.0, 3.0, 60.0),
    "symmetric": (5.0, 5.0, 60.0),
}


def population_iqm(a: float, b: float) -> float:
    """The IQM of Beta(a, b): E[X | q25 < X < q75]."""
    dist = stats.beta(a, b)
    q1, q3 = dist.ppf([0.25, 0.75])
    return float(dist.expect(lambda x: x, lb=q1, ub=q3) / 0.5)


def draw_runs(rng: np.random.Generator, population: str | tuple[float, float, float], runs: int,
              episodes: int = 30):
    """One simulated recipe: ``(runs, episodes)`` nominal and perturbed returns.
    ``population``: a name of :data:`POPULATIONS`, or its ``(a, b, noise)``."""
    a, b, noise = POPULATIONS[population] if isinstance(population, str) else population
    ratios = rng.beta(a, b, runs)
    means = rng.normal(400.0, 40.0, runs)
    shared = rng.normal(0.0, noise, (runs, episodes))
    nominal = means[:, None] + shared
    perturbed = (ratios * means)[:, None] + 0.7 * shared + rng.normal(0.0, noise, (runs, episodes))
    return nominal, perturbed


def coverage(population: str, runs: int, sims: int, *, seed: int = 0, n_resamples: int = 2000,
             resample_episodes: bool = False, confidence: float = 0.95) -> float:
    """The share of ``sims`` simulated recipes whose interval (the library's own,
    :func:`runs_ratio_ci`, 95% unless ``confidence`` says) holds the population's IQM."""
    truth = population_iqm(*POPULATIONS[population][:2])
    rng = np.random.default_rng(seed)
    hits = 0
    for i in range(sims):
        nominal, perturbed = draw_runs(rng, population, runs)
        low, high = runs_ratio_ci(nominal, perturbed, seed=i, n_resamples=n_resamples,
                                  resample_episodes=resample_episodes, confidence=confidence)
        hits += low <= truth <= high
    return hits / sims


#: simulated recipes per coverage test whose interval comes from runs_ratio_ci itself
TIED = 60


def _iqm_rows(ratios: np.ndarray, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """``(recipes, 2)``: ``iqm_ci``'s 95% interval of each row of per-run ratios, all rows
    at once: the runs resampled with replacement, the IQM of each resample, the percentile
    interval at :func:`expanded_level`, widened to hold the point. The rows share one draw
    of resampled run indices, so each row's interval is distributed as the library's (its
    indices are drawn independently of its ratios)."""
    runs = ratios.shape[1]
    iqms = stats.trim_mean(ratios[:, rng.integers(0, runs, size=(n_resamples, runs))], 0.25,
                           axis=2)
    level = expanded_level(0.95, runs)
    low, high = np.nanpercentile(iqms, [50 * (1 - level), 50 * (1 + level)], axis=1)
    point = stats.trim_mean(ratios, 0.25, axis=1)
    return np.stack([np.minimum(low, point), np.maximum(high, point)], axis=1)


def _coverage_of_rows(population: str, runs: int, sims: int, n_resamples: int) -> float:
    """:func:`coverage` (same recipes, same seed), computed faster: the first ``TIED``
    intervals are ``runs_ratio_ci``'s own, each also recomputed by ``_iqm_rows`` from the
    same seed (the library seeds ``SeedSequence([seed, 0x1A])``), which must agree exactly,
    so any change to the library's interval fails here; the rest come from ``_iqm_rows``,
    all in one call."""
    truth = population_iqm(*POPULATIONS[population][:2])
    rng = np.random.default_rng(0)
    recipes = [draw_runs(rng, population, runs) for _ in range(sims)]
    ratios = np.stack([run_ratios(n, p) for n, p in recipes])
    ci = np.empty((sims, 2))
    for i, (nominal, perturbed) in enumerate(recipes[:TIED]):
        ci[i] = runs_ratio_ci(nominal, perturbed, seed=i, n_resamples=n_resamples)
        seeded = np.random.default_rng(np.random.SeedSequence([i, 0x1A]))
        assert ci[i].tolist() == pytest.approx(
            _iqm_rows(ratios[i:i + 1], seeded, n_resamples)[0].tolist(), rel=1e-12), i
    ci[TIED:] = _iqm_rows(ratios[TIED:], np.random.default_rng(np.random.SeedSequence([runs, 0xB47C])),
                          n_resamples)
    return float(((ci[:, 0] <= truth) & (truth <= ci[:, 1])).mean())


@pytest.mark.parametrize("runs", [5, 10])
def test_the_iqm_interval_covers_095_at_5_and_10_runs(runs):
    # The target is 0.93-0.97 (benchmarks/bench_runs.py measures 4,000 recipes per cell,
    # in four populations). Here 600 per cell keep the suite fast: a measured share has
    # standard error sqrt(0.95 * 0.05 / 600) = 0.009, so the bounds are the target's
    # widened by three of them. Seeded: the same share every run, never flaky.
    sims = 600
    slack = 3 * math.sqrt(0.95 * 0.05 / sims)
    got = _coverage_of_rows("skewed", runs, sims, n_resamples=1000)
    print(f"\nIQM interval coverage, {runs} runs, {sims} recipes: {got:.3f}")
    assert 0.93 - slack <= got <= 0.97 + slack, got


def test_the_improvement_interval_covers_095_at_5_runs():
    # recipe X's runs from Beta(8, 2), Y's from Beta(6, 3): P(X > Y) = 0.759
    # (benchmarks/bench_runs.py: 0.949 over 1,000 pairs of recipes, three truths, 5 and 10 runs)
    truth = float(stats.beta(8, 2).expect(lambda v: stats.beta(6, 3).cdf(v)))
    rng = np.random.default_rng(0)
    sims = 600
    hits = 0
    for _ in range(sims):
        x = run_ratios(*draw_runs(rng, "skewed", 5))
        y = run_ratios(*draw_runs(rng, (6.0, 3.0, 60.0), 5))
        low, high = improvement_ci(x, y)
        hits += low <= truth <= high
    slack = 3 * math.sqrt(0.95 * 0.05 / sims)
    assert 0.93 - slack <= hits / sims <= 0.97 + slack, hits / sims
