"""Benchmark of adaptive sampling: the group-sequential design against the Bonferroni rule it replaced.

What it measures. For each return model (``smooth`` and ``cartpole``, the paired generators
defined once in ``tests/stats/test_sequential.py``) and true ratio (0.70, 0.75, 0.80, 0.85,
0.90), ``--sims`` simulated runs are drawn, each of 200 paired episodes, and judged against
threshold 0.8 with a first stage of 10 episodes and a cap of 200, two ways on the SAME runs:

1. ``today``: the rule this replaced, a faithful copy below (``bonferroni_adaptive_sample``,
   the library's code before the change): rounds of 10; at each of the K = 20 planned looks
   a paired BCa bootstrap interval (``paired_ratio_ci``, 9,999 resamples) at confidence
   1 - 0.05/K; stop when it lies wholly on one side of 0.8.
2. ``new``: ``pytest_rlaudit.stats.adaptive_sample`` with ``mode="point"`` and its default
   rounds of 10 (or ``--round-size``; repeated confidence intervals, Lan-DeMets spending;
   see its docstring), run through
   ``adaptive_decisions``, which applies the same rule to all runs at once
   (``tests/stats/test_sequential.py`` checks that both give identical results).

Both end with the point verdict: a run FAILs when its ratio at the stop is below 0.8 (as
``check_robust`` judges in point mode). Printed per model and ratio: the median and mean
episodes spent and the FAIL rate of each way on the same runs, the ratio of the medians
(new / today), and the new rule's FAIL rate again over ``--new-sims`` runs (cheap, so the
rates near 0 and 1 are pinned down: a rate p over N runs has standard error
sqrt(p (1 - p) / N), so 0.5% is +-0.35% over 400 runs and +-0.05% over 20,000).

Targets (the issue's): FAIL at most 1% at 0.85, at least 95% at 0.70 (judged on the
``--new-sims`` runs), and a median at most 0.6 of today's at 0.70 and 0.85 (same runs), on
both models. The summary line sums the medians over the reference set (both models at 0.70
and 0.85) for each way, against the issue's target for the sum, 306 (0.6 of the 510 it
quotes for the established rule), with the new rule's worst error rates there.
``--round-size 5`` runs the new rule with rounds of 5 after the first stage (39 looks), the
alternative ``adaptive_sample``'s docstring weighs.

Bimodal returns (issue 42, point 5). CartPole's timing failures are all or nothing: an
episode survives whole or collapses early. The ``bimodal`` model of
``tests/stats/test_sequential.py`` (nominal 500; the perturbed twin keeps it with probability
q, else falls to the fraction ``collapse`` of it; q set by the true ratio) is run for each
collapse level (0.1, 0.2, 0.3, 0.5; q printed) at true ratios 0.70 and 0.85, over
``--bimodal-sims`` runs, by the new rule as it is ("after") and with a settled FAIL allowed
the whole point-mode margin, as before issue 42 (``FAIL_MARGIN_SHARE`` = 1, "before"), on the
same runs. Printed: each one's FAIL rate with its 95% Wilson interval (the Monte Carlo error),
the share of runs that stopped early with a FAIL, the median episodes, and the FAIL rate of
the 200-episode point verdict alone on the same runs: the floor no stopping rule capped at
200 episodes goes below (short of stopping to PASS more eagerly), above 1% for collapse
levels of 0.2 and less. Why this workload: the ratio is then a binomial share, the least
normal a paired ratio gets, and its wide margin is what the whole-margin FAIL stop misused.
``--bimodal-only`` skips the slow Bonferroni comparison (about 20 s with 20,000 runs).

Run (from the repository root; the bootstrap makes ``today`` slow: about 4 minutes with 400
runs on 2 cores, spread over ``--jobs`` processes)::

    python benchmarks/bench_adaptive.py
    python benchmarks/bench_adaptive.py --sims 100 --resamples 999   # a rough look, ~30 s
    python benchmarks/bench_adaptive.py --round-size 5               # the new rule's rounds
    python benchmarks/bench_adaptive.py --engine       # what rounds of 5 cost check_robust
    python benchmarks/bench_adaptive.py --bimodal-only --bimodal-sims 20000  # bimodal, ~20 s
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from unittest import mock

import numpy as np

from pytest_rlaudit.stats import paired_ratio_ci, ratio, verdict
from pytest_rlaudit.stats.sequential import adaptive_decisions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "stats"))
from test_sequential import BIMODAL_COLLAPSES, RETURN_MODELS, bimodal  # defined once

THRESHOLD = 0.8
EPISODES, MAX_EPISODES = 10, 200
RATIOS = (0.70, 0.75, 0.80, 0.85, 0.90)
SUMMED_TARGET = 306  # the issue's: 0.6 of the 510 summed medians it measured for the old rule


# --------------------------------------------------------------------------------------
# TODAY'S RULE, a faithful copy of pytest_rlaudit.stats.sequential.adaptive_sample before
# the group-sequential design replaced it (equal Bonferroni shares of alpha over the
# planned looks, a bootstrap interval per look). Kept here only to compare against.
# --------------------------------------------------------------------------------------
def bonferroni_adaptive_sample(
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
) -> tuple[np.ndarray, np.ndarray, tuple[float, float], str]:
    """(nominal, perturbed, ci, stopped): the old rule, unchanged but for the return type
    (the old ``AdaptiveResult`` also carried the look counts and level)."""
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
    while True:
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
        return nominal, perturbed, ci, stopped
# ------------------------------------------------------------------ end of today's rule


def draw(model: str, true_ratio: float, sims: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The runs of one (model, ratio) cell: the same for both ways, and for any --jobs."""
    index = list(RETURN_MODELS).index(model)
    rng = np.random.default_rng(np.random.SeedSequence([seed, index, round(true_ratio * 100)]))
    return RETURN_MODELS[model](rng, sims, MAX_EPISODES, true_ratio)


def today_chunk(job: tuple[str, float, int, int, int, tuple[int, int]]) -> list[tuple[int, bool]]:
    """(episodes spent, FAIL) of today's rule on runs ``lo .. hi-1`` of a cell."""
    model, true_ratio, sims, seed, resamples, (lo, hi) = job
    nominal, perturbed = draw(model, true_ratio, sims, seed)
    out = []
    for i in range(lo, hi):
        nom, per, _, _ = bonferroni_adaptive_sample(
            lambda a, b, i=i: (nominal[i, a:b], perturbed[i, a:b]), episodes=EPISODES,
            max_episodes=MAX_EPISODES, threshold=THRESHOLD, seed=i, n_resamples=resamples)
        out.append((len(nom), ratio(nom, per) < THRESHOLD))
    return out


def summary(today: dict[tuple[str, float], np.ndarray], new: dict[tuple[str, float], np.ndarray],
            precise: dict[tuple[str, float], float]) -> str:
    """The one line the issue asks for: the summed medians over the reference set (both
    models at true ratios 0.70 and 0.85) today and new, against the target, with the new
    rule's worst false-fail (at 0.85) and power (at 0.70) on the ``--new-sims`` runs."""
    reference = [(m, r) for m in RETURN_MODELS for r in (0.70, 0.85)]
    sums = [sum(float(np.median(ways[cell][:, 0])) for cell in reference) for ways in (today, new)]
    false_fail = max(precise[m, 0.85] for m in RETURN_MODELS)
    power = min(precise[m, 0.70] for m in RETURN_MODELS)
    met = sums[1] <= SUMMED_TARGET and false_fail <= 0.01 and power >= 0.95
    return (f"summed median episodes (smooth, cartpole x 0.70, 0.85): today (Bonferroni) "
            f"{sums[0]:.0f}, new {sums[1]:.0f} (target <= {SUMMED_TARGET}); new false-fail at 0.85 <= "
            f"{false_fail:.2%} (target <= 1%), power at 0.70 >= {power:.2%} (target >= 95%): "
            f"{'OK' if met else 'MISSED'}")


def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a rate ``p`` over ``n`` runs: the Monte Carlo error."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def bimodal_table(sims: int, seed: int) -> None:
    """The bimodal model's figures, before (a settled FAIL may use the whole margin) and
    after (:data:`~pytest_rlaudit.stats.sequential.FAIL_MARGIN_SHARE`), on the same runs."""
    print(f"\nbimodal returns (nominal 500; perturbed keeps it with probability q, else falls "
          f"to collapse x 500), {sims} runs per cell, seed {seed}; FAIL with its 95% Wilson "
          f"interval, early = stopped before {MAX_EPISODES} with a FAIL:")
    print(f"{'collapse':>8}{'q':>7}{'ratio':>6} | {'200 only':>8} | "
          f"{'before: FAIL [95%]':>26}{'early':>7}{'median':>7} | "
          f"{'after: FAIL [95%]':>26}{'early':>7}{'median':>7}")
    worst = {"ff": 0.0, "power": 1.0}
    for collapse in BIMODAL_COLLAPSES:
        for true_ratio in (0.70, 0.85):
            rng = np.random.default_rng(np.random.SeedSequence(
                [seed, 7, round(collapse * 100), round(true_ratio * 100)]))
            nominal, perturbed = bimodal(rng, sims, MAX_EPISODES, true_ratio, collapse)
            floor = float((perturbed.mean(1) / nominal.mean(1) < THRESHOLD).mean())
            cols, rate = [], 0.0
            before: AbstractContextManager[object] = mock.patch(
                "pytest_rlaudit.stats.sequential.FAIL_MARGIN_SHARE", 1.0)
            for patch in (before, nullcontext()):  # the same runs, before and after
                with patch:
                    runs = adaptive_decisions(nominal, perturbed, episodes=EPISODES,
                                              threshold=THRESHOLD, mode="point")
                fails = runs.ratio < THRESHOLD
                rate = float(fails.mean())
                low, high = wilson(rate, sims)
                early = float((fails & (runs.episodes < MAX_EPISODES)).mean())
                cols.append(f"{rate:>8.4f} [{low:.4f}, {high:.4f}]{early:>7.4f}"
                            f"{np.median(runs.episodes):>7.0f}")
            if true_ratio == 0.85 and floor <= 0.01:  # rate: after, the last of the two
                worst["ff"] = max(worst["ff"], rate)
            if true_ratio == 0.70:
                worst["power"] = min(worst["power"], rate)
            q = (true_ratio - collapse) / (1 - collapse)
            print(f"{collapse:>8.2f}{q:>7.3f}{true_ratio:>6.2f} | {floor:>8.4f} | {cols[0]} | "
                  f"{cols[1]}")
    met = worst["ff"] <= 0.01 and worst["power"] >= 0.95
    print(f"target bimodal: FAIL at 0.85 <= 1% where the 200-episode verdict allows it (its own "
          f"rate <= 1%): {worst['ff']:.2%}; FAIL at 0.70 >= 95%: {worst['power']:.2%}: "
          f"{'OK' if met else 'MISSED'}")


def engine_times(scenarios: tuple[str, ...] = ("spike", "speed_5x"), repeats: int = 3) -> None:
    """What smaller rounds cost a real audit: ``check_robust`` of a batched numpy CartPole
    controller, a first stage of 10 up to 200 episodes, threshold 0.8, in the library's
    rounds (of the first stage) and in rounds of 5 (``adaptive_sample`` given
    ``round_size=5`` inside the engine, for this measurement only); the median of
    ``repeats`` wall times, and the episodes."""
    from functools import partial

    from pytest_rlaudit import check_robust
    from pytest_rlaudit.stats.sequential import adaptive_sample

    def controller(obs: np.ndarray) -> np.ndarray:
        return (np.asarray(obs) @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)

    print(f"\ncheck_robust on CartPole-v1, 10 up to 200 episodes, threshold 0.8 (median of "
          f"{repeats} runs):")
    for scenario in scenarios:
        for rounds in (None, 5):
            times = []
            for _ in range(repeats):
                with mock.patch("pytest_rlaudit.auditing.engine.adaptive_sample",
                                partial(adaptive_sample, round_size=rounds)):
                    t0 = time.perf_counter()
                    check = check_robust(controller, "CartPole-v1", scenario, min_ratio=0.8,
                                         episodes=10, max_episodes=200)
                    times.append(time.perf_counter() - t0)
            print(f"  {scenario:<9} rounds of {rounds or 10:>2}: {check.result.episodes:>3} "
                  f"episodes, ratio {check.result.ratio:.3f}, {float(np.median(times)):.2f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=400, help="runs per model and ratio (400)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=9999,
                    help="bootstrap resamples of today's rule (9999, the library's default)")
    ap.add_argument("--new-sims", type=int, default=20_000,
                    help="runs per cell for the new rule's precise FAIL rate (20000)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--engine", action="store_true",
                    help="only time check_robust on CartPole in rounds of 10 and of 5")
    ap.add_argument("--round-size", type=int, default=None,
                    help="episodes per round of the new rule after the first stage (its "
                         "default: the first stage, 10)")
    ap.add_argument("--bimodal-sims", type=int, default=20_000,
                    help="runs per cell of the bimodal model (20000)")
    ap.add_argument("--bimodal-only", action="store_true",
                    help="only the bimodal model's table (no Bonferroni comparison)")
    args = ap.parse_args(argv)
    if args.engine:
        engine_times()
        return 0
    if args.bimodal_only:
        bimodal_table(args.bimodal_sims, args.seed)
        return 0
    cells = [(m, r) for m in RETURN_MODELS for r in RATIOS]
    print(f"threshold {THRESHOLD}, a first stage of {EPISODES} up to {MAX_EPISODES} episodes "
          f"(today: rounds of {EPISODES}; new: rounds of {args.round_size or EPISODES}), point "
          f"verdict at the stop; "
          f"{args.sims} runs per cell, seed {args.seed}; today's bootstrap {args.resamples} "
          f"resamples, {args.jobs} processes")

    t0 = time.perf_counter()
    chunk = max(1, math.ceil(args.sims / 8))
    jobs = [(m, r, args.sims, args.seed, args.resamples, (lo, min(lo + chunk, args.sims)))
            for m, r in cells for lo in range(0, args.sims, chunk)]
    with ProcessPoolExecutor(args.jobs) as pool:
        parts = list(pool.map(today_chunk, jobs))
    today = {cell: np.array([run for job, part in zip(jobs, parts, strict=True) if job[:2] == cell
                             for run in part]) for cell in cells}
    t_today = time.perf_counter() - t0

    t0 = time.perf_counter()
    new, precise = {}, {}
    for m, r in cells:
        runs = adaptive_decisions(*draw(m, r, args.sims, args.seed), episodes=EPISODES,
                                  threshold=THRESHOLD, mode="point", round_size=args.round_size)
        new[m, r] = np.stack([runs.episodes, runs.ratio < THRESHOLD], axis=1)
        many = adaptive_decisions(*draw(m, r, args.new_sims, args.seed + 1), episodes=EPISODES,
                                  threshold=THRESHOLD, mode="point", round_size=args.round_size)
        precise[m, r] = float((many.ratio < THRESHOLD).mean())
    t_new = time.perf_counter() - t0

    print()
    print(f"{'':16}| {f'today, {args.sims} runs':^23}| {f'new, the same {args.sims}':^23}| "
          f"{f'new, {args.new_sims}':>11} |")
    print(f"{'model':<9}{'ratio':>6} | {'median':>7}{'mean':>7}{'FAIL':>8} | {'median':>7}"
          f"{'mean':>7}{'FAIL':>8} | {'FAIL':>11} | {'median new/today':>16}")
    for m, r in cells:
        a, b = today[m, r], new[m, r]
        med_a, med_b = float(np.median(a[:, 0])), float(np.median(b[:, 0]))
        print(f"{m:<9}{r:>6.2f} | {med_a:>7.0f}{a[:, 0].mean():>7.1f}{a[:, 1].mean():>8.3f} | "
              f"{med_b:>7.0f}{b[:, 0].mean():>7.1f}{b[:, 1].mean():>8.3f} | "
              f"{precise[m, r]:>11.4f} | {med_b / med_a:>16.2f}")
    print()
    for m in RETURN_MODELS:
        ff, power = precise[m, 0.85], precise[m, 0.70]
        worst = max(np.median(new[m, r][:, 0]) / np.median(today[m, r][:, 0]) for r in (0.70, 0.85))
        print(f"target {m:<9}: FAIL at 0.85 <= 1%: {ff:.2%} {'OK' if ff <= 0.01 else 'MISSED'}; "
              f"FAIL at 0.70 >= 95%: {power:.2%} {'OK' if power >= 0.95 else 'MISSED'}; "
              f"median new/today <= 0.60: {worst:.2f} {'OK' if worst <= 0.6 else 'MISSED'}")
    print(summary(today, new, precise))
    bimodal_table(args.bimodal_sims, args.seed)
    print(f"time: today {t_today:.1f} s ({args.jobs} processes), new {t_new:.1f} s (one process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
