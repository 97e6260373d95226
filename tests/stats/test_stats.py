"""Statistics: interval coverage and verdict error rates by simulation, and the edge cases.

The simulations are deterministic (fixed seeds) and print their figures (run with -s).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest

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
from pytest_rlaudit.stats.sequential import look_bounds

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
    nominal, perturbed = generator(np.random.default_rng(123), 2_000_000)
    return float(perturbed.mean() / nominal.mean())


@pytest.mark.parametrize("generator", [smooth, cartpole_like], ids=["smooth", "cartpole_like"])
def test_the_95_interval_covers_the_true_ratio_93_to_97_percent_of_the_time(generator):
    truth = _true_ratio(generator)
    rng = np.random.default_rng(2024)
    sims = 2000
    hits = 0
    for i in range(sims):
        nominal, perturbed = generator(rng, EPISODES)
        low, high = paired_ratio_ci(nominal, perturbed, seed=i, n_resamples=999)
        hits += low <= truth <= high
    coverage = hits / sims
    print(f"\ncoverage of the 95% interval, {generator.__name__}, {EPISODES} episodes, "
          f"{sims} simulations: {coverage:.3f}")
    assert 0.93 <= coverage <= 0.97


@functools.cache
def _simulated(true_ratio: float, sims: int, intervals: bool) -> tuple[tuple, ...]:
    """``sims`` simulated audits at ``true_ratio``: (point, interval) each, the interval
    ``None`` without ``intervals``. The same data for every mode (the seed is the ratio's),
    so the tests that ask for the same ratio share one simulation in a process."""
    rng = np.random.default_rng(int(true_ratio * 1000))
    out = []
    for i in range(sims):
        nominal, perturbed = smooth(rng, EPISODES, true_ratio)
        point = ratio(nominal, perturbed)
        out.append((point, paired_ratio_ci(nominal, perturbed, seed=i, n_resamples=999)
                    if intervals else None))
    return tuple(out)


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


def _adaptive_false_pass(spend: bool, sims: int = 600) -> tuple[float, float]:
    """Rate of 'confidently above 0.8' verdicts for an agent exactly at 0.8, peeking at
    10, 20, 30 and 40 episodes; and the mean number of episodes used."""
    rng = np.random.default_rng(77)
    wrong, used = 0, 0
    for i in range(sims):
        pool = smooth(rng, 40, 0.8)

        def more(start, stop, pool=pool):
            return pool[0][start:stop], pool[1][start:stop]

        if spend:
            out = adaptive_sample(more, episodes=10, max_episodes=40, threshold=0.8, seed=i,
                                  n_resamples=999)
            wrong += out.ci[0] >= 0.8
            used += len(out.nominal)
        else:  # naive peeking: a 95% interval at every look
            for stop in (10, 20, 30, 40):
                n, p = more(0, stop)
                low, high = paired_ratio_ci(n, p, seed=i, n_resamples=999)
                if low >= 0.8 or high < 0.8:
                    break
            wrong += low >= 0.8
            used += stop
    return wrong / sims, used / sims


def test_adaptive_sampling_keeps_the_error_rate_of_repeated_looks():
    spent, used = _adaptive_false_pass(spend=True)
    # naive peeking errs 0.063 of 300 simulations, 2.7 binomial SDs above the spent rate
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
