"""Statistics: interval coverage and verdict error rates by simulation, and the edge cases.

The simulations are deterministic (fixed seeds) and print their figures (run with -s).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from pytest_rlaudit.stats import (
    Thresholds,
    adaptive_sample,
    check_threshold,
    degradation_p_value,
    holm,
    paired_ratio_ci,
    rating,
    rating_floor,
    ratio,
    verdict,
)
from pytest_rlaudit.stats.sequential import adaptive_decisions, look_bounds

EPISODES = 30


def smooth(rng: np.random.Generator, n: int, true_ratio: float = 0.8):
    """Paired returns whose true mean ratio is exactly ``true_ratio``."""
    nominal = rng.normal(100, 15, n)
    return nominal, true_ratio * nominal + rng.normal(0, 10, n)


def cartpole_like(rng: np.random.Generator, n: int):
    """Capped at 500 and skewed: nominal mostly 500, perturbed falls over at random times."""
    nominal = np.minimum(500, rng.exponential(3000, n))
    return nominal, np.minimum(nominal, rng.exponential(400, n))


def _true_ratio(generator) -> float:
    """E[perturbed] / E[nominal], exactly. smooth: 0.8 by construction. cartpole_like:
    E[min(X, c)] = m (1 - e^(-c/m)) for X exponential with mean m, and the perturbed return
    min(X, Y, 500) caps the minimum of two exponentials, itself exponential with mean
    1 / (1/3000 + 1/400). (2,000,000 draws, which this replaced, gave 0.79997 and 0.58073.)"""
    if generator is smooth:
        return 0.8

    def capped_mean(m: float) -> float:
        return -m * math.expm1(-500 / m)

    return capped_mean(1 / (1 / 3000 + 1 / 400)) / capped_mean(3000)


# ------------------------------------------------------------------ many intervals at once

#: How many simulated samples per simulation get their interval from paired_ratio_ci itself
#: (which must agree with _bootstrap_rows on each of them); the rest from _bootstrap_rows.
TIED = 100


def _bootstrap_rows(nominal: np.ndarray, perturbed: np.ndarray,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``paired_ratio_ci(row, n_resamples=999)``'s interval for every row of the
    ``(samples, episodes)`` arrays (or of one 1-D sample), from one call of the scipy bootstrap that it makes once
    per sample: paired BCa of the ratio of means at the expanded level
    ``2 Phi(sqrt(n / (n - 1)) t[n-1](0.975)) - 1``, widened to hold the point.

    The rows share one draw of resampled indices, so a row's interval is distributed just
    as the library's (its indices are drawn independently of its data): the coverage and
    error rates measured on rows are those of the library's intervals, at about 0.3 ms a
    row instead of paired_ratio_ci's 2 ms a call (scipy's overhead). ``_intervals`` ties
    this to ``paired_ratio_ci`` sample by sample."""
    size = nominal.shape[-1]
    level = 2.0 * stats.norm.cdf(
        math.sqrt(size / (size - 1)) * stats.t.ppf(0.975, size - 1)) - 1.0

    def statistic(nom, per, axis=-1):
        return per.mean(axis=axis) / nom.mean(axis=axis)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((nominal, perturbed), statistic, paired=True, vectorized=True,
                              method="BCa", confidence_level=level, n_resamples=999, rng=rng,
                              axis=-1)
    low, high = np.atleast_1d(res.confidence_interval.low), np.atleast_1d(res.confidence_interval.high)
    # these simulations never need paired_ratio_ci's fallbacks (degenerate data, BCa undefined)
    assert np.isfinite(low).all() and np.isfinite(high).all()
    point = perturbed.mean(-1) / nominal.mean(-1)
    return np.minimum(low, point), np.maximum(high, point)


def _intervals(nominal: np.ndarray, perturbed: np.ndarray, tied: int = TIED) -> np.ndarray:
    """``(samples, 2)``: sample i's 95% interval, as ``paired_ratio_ci(nominal[i],
    perturbed[i], seed=i, n_resamples=999)`` gives it. The first ``tied`` are that call's
    own, each also recomputed by ``_bootstrap_rows`` from the same seed (the library seeds
    ``SeedSequence([seed, 0x5EED])``), which must agree to 1e-9: any change to the library's
    interval (level, method, statistic, fallbacks, widening) fails here. The rest come from
    ``_bootstrap_rows``, 200 rows a call."""
    out = np.empty((len(nominal), 2))
    for i in range(min(tied, len(nominal))):
        out[i] = paired_ratio_ci(nominal[i], perturbed[i], seed=i, n_resamples=999)
        rng = np.random.default_rng(np.random.SeedSequence([i, 0x5EED]))
        again = _bootstrap_rows(nominal[i], perturbed[i], rng)  # 1-D, as the library's call
        assert tuple(out[i]) == pytest.approx((again[0][0], again[1][0]), rel=1e-9), i
    rng = np.random.default_rng(np.random.SeedSequence([len(nominal), 0xB47C]))
    for start in range(tied, len(nominal), 200):
        rows = slice(start, min(start + 200, len(nominal)))
        out[rows, 0], out[rows, 1] = _bootstrap_rows(nominal[rows], perturbed[rows], rng)
    return out


def _draws(generator, rng: np.random.Generator, sims: int, *args) -> tuple[np.ndarray, np.ndarray]:
    """``sims`` samples of ``EPISODES`` paired returns, drawn one sample after another."""
    pairs = [generator(rng, EPISODES, *args) for _ in range(sims)]
    return np.stack([n for n, _ in pairs]), np.stack([p for _, p in pairs])


@pytest.mark.parametrize("generator", [smooth, cartpole_like], ids=["smooth", "cartpole_like"])
def test_the_95_interval_covers_the_true_ratio_93_to_97_percent_of_the_time(generator):
    truth = _true_ratio(generator)
    sims = 2000
    low, high = _intervals(*_draws(generator, np.random.default_rng(2024), sims)).T
    coverage = float(((low <= truth) & (truth <= high)).mean())
    print(f"\ncoverage of the 95% interval, {generator.__name__}, {EPISODES} episodes, "
          f"{sims} simulations: {coverage:.3f}")
    assert 0.93 <= coverage <= 0.97


@functools.cache
def _simulated(true_ratio: float, sims: int, intervals: bool) -> tuple[tuple, ...]:
    """``sims`` simulated audits at ``true_ratio``: (point, interval) each, the interval
    ``None`` without ``intervals``. The same data for every mode (the seed is the ratio's),
    so the tests that ask for the same ratio share one simulation in a process."""
    nominal, perturbed = _draws(smooth, np.random.default_rng(int(true_ratio * 1000)), sims,
                                true_ratio)
    points = [ratio(n, p) for n, p in zip(nominal, perturbed, strict=True)]
    cis = [tuple(ci) for ci in _intervals(nominal, perturbed)] if intervals else [None] * sims
    return tuple(zip(points, cis, strict=True))


def _rates(true_ratio: float, mode: str, threshold: float = 0.8, sims: int = 1500):
    # point mode decides on the point alone (verdict() reads the interval only for
    # `decided`), so its simulations skip the bootstrap: the same verdicts, no intervals
    runs = _simulated(true_ratio, sims, mode != "point")
    passed = 0
    for point, ci in runs:
        passed += verdict(point, ci if ci is not None else (point, point), threshold,
                          mode).passed
    return passed / sims


def test_confident_mode_rarely_passes_an_agent_at_the_threshold_and_passes_a_good_one():
    false_pass = _rates(0.80, "confident")
    # power far above its bound (0.99 at 300 simulations vs 0.8: 25 binomial SDs)
    power = _rates(0.88, "confident", sims=300)
    print(f"\nconfident, threshold 0.8: false-pass rate at true 0.80 = {false_pass:.3f}, "
          f"pass rate (power) at true 0.88 = {power:.3f}")
    # A one-sided 2.5% error; the allowance covers the interval's coverage band (0.93-0.97
    # two-sided) and the simulation's own noise (about 0.004 here).
    assert false_pass <= 0.04
    assert power >= 0.8


def test_not_worse_mode_rarely_fails_an_agent_at_the_threshold_and_fails_a_bad_one():
    false_fail = 1 - _rates(0.80, "not_worse")
    power = 1 - _rates(0.72, "not_worse", sims=300)  # 0.99 vs 0.8, as above
    print(f"\nnot_worse, threshold 0.8: false-fail rate at true 0.80 = {false_fail:.3f}, "
          f"fail rate (power) at true 0.72 = {power:.3f}")
    assert false_fail <= 0.04
    assert power >= 0.8


def test_point_mode_is_a_coin_flip_at_the_threshold_and_sharp_away_from_it():
    at = _rates(0.80, "point")
    false_fail = 1 - _rates(0.83, "point")
    power = 1 - _rates(0.77, "point")
    print(f"\npoint, threshold 0.8: pass rate at true 0.80 = {at:.3f}, false-fail rate at 0.83 "
          f"= {false_fail:.3f}, fail rate (power) at 0.77 = {power:.3f}")
    assert 0.4 <= at <= 0.6
    assert false_fail <= 0.25 and power >= 0.75


#: agents also run through adaptive_sample itself (below)
TIED_ADAPTIVE = 40


def _adaptive_false_pass(spend: bool, sims: int = 600) -> tuple[float, float]:
    """Rate of 'confidently above 0.8' verdicts for an agent exactly at 0.8, peeking at
    10, 20, 30 and 40 episodes; and the mean number of episodes used.

    With spending, the rule runs on all simulated agents at once (``adaptive_decisions``,
    the same rule as ``adaptive_sample`` on rows); the first ``TIED_ADAPTIVE`` agents also go
    through ``adaptive_sample`` itself, which must stop each of them at the same look with
    the same interval."""
    rng = np.random.default_rng(77)
    pools = [smooth(rng, 40, 0.8) for _ in range(sims)]  # the same draws, in the same order
    if spend:
        runs = adaptive_decisions(np.stack([n for n, _ in pools]), np.stack([p for _, p in pools]),
                                  episodes=10, threshold=0.8)
        for i, (nom, per) in enumerate(pools[:TIED_ADAPTIVE]):
            out = adaptive_sample(lambda a, b, nom=nom, per=per: (nom[a:b], per[a:b]),
                                  episodes=10, max_episodes=40, threshold=0.8, seed=i,
                                  n_resamples=999)
            assert (len(out.nominal), out.stopped) == (runs.episodes[i], runs.stopped[i])
            assert out.ci == pytest.approx(tuple(runs.ci[i]), rel=1e-9)
        return float((runs.ci[:, 0] >= 0.8).mean()), float(runs.episodes.mean())
    # naive peeking: a 95% interval at every look, until one lies wholly on one side
    nominal, perturbed = np.stack([n for n, _ in pools]), np.stack([p for _, p in pools])
    low, used = np.zeros(sims), np.zeros(sims, int)
    active = np.arange(sims)
    for stop in (10, 20, 30, 40):
        ci = _intervals(nominal[active, :stop], perturbed[active, :stop], tied=25)
        low[active], used[active] = ci[:, 0], stop
        active = active[(ci[:, 0] < 0.8) & (ci[:, 1] >= 0.8)]
    return float((low >= 0.8).mean()), float(used.mean())


def test_adaptive_sampling_keeps_the_error_rate_of_repeated_looks():
    spent, used = _adaptive_false_pass(spend=True)
    # naive peeking errs 0.073 of 300 simulations, 3.2 binomial SDs above the spent rate
    naive, _ = _adaptive_false_pass(spend=False, sims=300)
    print(f"\nadaptive, agent exactly at threshold 0.8, looks at 10/20/30/40 episodes: false-pass "
          f"rate with alpha spending = {spent:.3f} (mean {used:.1f} episodes), with naive "
          f"95% peeking = {naive:.3f}")
    assert spent <= 0.03
    assert naive > spent  # peeking without the correction inflates the error


def test_adaptive_sampling_stops_early_when_decided_and_on_a_width_target():
    rng = np.random.default_rng(1)

    def more(start, stop):
        n = rng.normal(100, 5, stop - start)
        return n, 0.5 * n + rng.normal(0, 2, stop - start)

    out = adaptive_sample(more, episodes=10, max_episodes=50, threshold=0.8)
    assert (out.stopped, out.looks, len(out.nominal)) == ("decided", 1, 10)
    # the first of 5 looks: its share of alpha under Lan-DeMets spending (HSD, gamma 5) is
    # 0.05 (1 - e^-1) / (1 - e^-5) = 0.0318, so its interval's level is 1 - 0.0318
    assert out.planned_looks == 5 and out.look_confidence == pytest.approx(0.9682, abs=1e-4)
    assert out.look_confidence == pytest.approx(math.erf(look_bounds(range(10, 51, 10))[0]
                                                         / math.sqrt(2)))
    out = adaptive_sample(more, episodes=10, max_episodes=200, target_ci_width=0.02)
    assert out.stopped == "narrow" and out.ci[1] - out.ci[0] <= 0.02 and len(out.nominal) > 10
    with pytest.raises(ValueError, match="threshold or a target_ci_width"):
        adaptive_sample(more, episodes=10, max_episodes=20)


# ------------------------------------------------------------------ edge cases


def test_degenerate_data_gives_a_point_interval_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert paired_ratio_ci([500.0] * 30, [500.0] * 30) == (1.0, 1.0)
        assert paired_ratio_ci([200.0] * 30, [100.0] * 30) == (0.5, 0.5)
        # Proportional pairs: every resample has the same ratio.
        n = np.linspace(100, 500, 30)
        low, high = paired_ratio_ci(n, 0.5 * n)
        assert low == pytest.approx(0.5) and high == pytest.approx(0.5)
        # Nominal capped at 500 everywhere, one perturbed episode slightly short.
        low, high = paired_ratio_ci([500.0] * 30, [500.0] * 29 + [499.0])
        assert math.isfinite(low) and math.isfinite(high) and low <= 29.999 / 30 <= high


def test_intervals_are_reproducible_for_a_seed_and_contain_the_point_estimate():
    n, p = smooth(np.random.default_rng(5), 30)
    assert paired_ratio_ci(n, p, seed=3) == paired_ratio_ci(n, p, seed=3)
    assert paired_ratio_ci(n, p, seed=3) != paired_ratio_ci(n, p, seed=4)
    low, high = paired_ratio_ci(n, p, reference=20.0)
    assert low <= ratio(n, p, 20.0) <= high


def test_higher_confidence_gives_a_wider_interval():
    n, p = smooth(np.random.default_rng(6), 30)
    low90, high90 = paired_ratio_ci(n, p, confidence=0.90)
    low99, high99 = paired_ratio_ci(n, p, confidence=0.99)
    assert low99 < low90 and high99 > high90


@pytest.mark.parametrize(
    ("nominal", "perturbed", "match"),
    [
        ([1.0, float("nan"), 3.0], [1.0, 2.0, 3.0], r"nominal has a non-finite return \(nan\) at episode 1"),
        ([1.0, 2.0, 3.0], [1.0, float("inf"), 3.0], "perturbed has a non-finite return"),
        ([1.0], [1.0], "at least 2 episodes"),
        ([1.0, 2.0, 3.0], [1.0, 2.0], "pair episode by episode: 3 vs 2"),
        ([[1.0, 2.0]], [[1.0, 2.0]], "1-D"),
    ],
)
def test_bad_returns_are_clear_errors(nominal, perturbed, match):
    with pytest.raises(ValueError, match=match):
        paired_ratio_ci(nominal, perturbed)
    with pytest.raises(ValueError, match=match):
        degradation_p_value(nominal, perturbed)


def test_a_nominal_mean_at_or_below_the_reference_is_an_error_naming_reference():
    with pytest.raises(ValueError, match=r"does not exceed the reference.*reference='random'"):
        paired_ratio_ci([-200.0, -150.0, -180.0], [-300.0, -250.0, -280.0])
    low, high = paired_ratio_ci([-200.0, -150.0, -180.0], [-300.0, -250.0, -280.0],
                                reference=-1200.0)
    assert 0 < low <= high < 1


def test_p_value_is_exact_for_few_episodes_and_one_sided():
    # 4 episodes, all worse: only the identity of 2^4 sign flips is as extreme.
    assert degradation_p_value([10.0, 10, 10, 10], [9.0, 8, 7, 6]) == pytest.approx(1 / 16)
    assert degradation_p_value([10.0, 10, 10, 10], [11.0, 12, 13, 14]) == 1.0
    n, p = smooth(np.random.default_rng(8), 30, 0.9)
    assert degradation_p_value(n, p) < 0.01
    assert degradation_p_value(n, p, seed=1) == degradation_p_value(n, p, seed=1)


def test_holm_adjustment():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    assert adjusted == {"a": 0.04, "b": 0.09, "c": 0.09, "d": 0.5}  # c: 3 x 0.03; b: max(0.09, 2 x 0.04)
    assert holm({"only": 0.02}) == {"only": 0.02}
    assert holm({}) == {}


def test_ratings_are_strict_band_edges_and_configurable_in_one_place():
    assert [rating(r) for r in (1.2, 0.951, 0.95, 0.81, 0.80, 0.51, 0.50, -1.0)] == [
        "PASS", "PASS", "MILD", "MILD", "DEGRADED", "DEGRADED", "FAIL", "FAIL"]
    strict = Thresholds(pass_=0.99, mild=0.9, degraded=0.7)
    assert rating(0.95, strict) == "MILD" and rating(0.8, strict) == "DEGRADED"
    assert rating_floor("MILD", strict) == 0.9 and rating_floor("FAIL") == -math.inf
    with pytest.raises(ValueError, match="must decrease"):
        Thresholds(pass_=0.8, mild=0.9)
    with pytest.raises(ValueError, match=r"in \(0, 2\]"):
        Thresholds(degraded=0.0)
    with pytest.raises(ValueError, match="unknown rating 'OK'"):
        rating_floor("OK")
    with pytest.raises(ValueError, match="NaN"):
        rating(float("nan"))


@pytest.mark.parametrize("bad", [0, -0.1, 2.5, float("nan"), "0.8", None, True])
def test_thresholds_outside_0_2_are_errors(bad):
    with pytest.raises(ValueError, match=r"min_ratio must be .*\(0, 2\]"):
        check_threshold("min_ratio", bad)


def test_verdict_modes():
    assert verdict(0.9, (0.7, 1.0), 0.8, "point").passed
    assert not verdict(0.9, (0.7, 1.0), 0.8, "confident").passed
    assert verdict(0.7, (0.6, 0.85), 0.8, "not_worse").passed
    assert not verdict(0.7, (0.6, 0.79), 0.8, "not_worse").passed
    assert verdict(0.9, (0.85, 1.0), 0.8, "confident").decided
    assert not verdict(0.96, (0.9, 1.0), 0.95, "point", strict=True).decided
    assert not verdict(0.95, (0.95, 0.95), 0.95, "point", strict=True).passed
    with pytest.raises(ValueError, match="unknown verdict mode 'strict'.*point, confident, not_worse"):
        verdict(0.9, (0.8, 1.0), 0.8, "strict")
