"""Many training runs: the coverage of the IQM's interval, and what a runs audit costs.

    python benchmarks/bench_runs.py                       # about 7 minutes on 2 cores
    python benchmarks/bench_runs.py --sims 500 --two-stage-sims 200 --repeats 1   # a look

1. Coverage. For each population of runs of ``tests/stats/test_runs.py`` (``POPULATIONS``:
   a run's true ratio drawn from a Beta distribution, its episodes noisy around it; the
   estimand is the IQM of the run ratios' population) and 5 and 10 runs of 30 episodes,
   ``--sims`` simulated recipes, each given a 95% interval three ways:

   - ``shipped``: :func:`pytest_rlaudit.stats.runs.runs_ratio_ci` as it ships (runs
     resampled, percentile interval at Student's expanded level);
   - ``percentile``: the same resamples' plain 95% percentile interval (rliable's: its
     ``get_interval_estimates``), got from the shipped function at the confidence whose
     expanded level is 0.95;
   - ``two-stage``: runs, then each drawn run's episodes, resampled
     (``resample_episodes=True``; ``--two-stage-sims`` recipes: it is slower).

   Printed: the share of intervals that hold the estimand (target 0.93-0.97 for
   ``shipped``), with its binomial standard error. Then the same for the probability of
   improvement's interval (shipped: :func:`~pytest_rlaudit.stats.runs.improvement_ci`,
   Newcombe's score interval; bootstrap: rliable's) of the first population over itself
   and over two worse ones, against P(X > Y) of the two Beta distributions.

2. Cost. ``audit_runs`` of 5 agents against ``audit`` of each alone, on CartPole-v1, the
   default suite, ``--episodes`` episodes, ``reference=0`` and ``"random"``; medians of
   ``--repeats``. The 5 "runs" are the three bundled PPO models and copies of two of them
   (the repository has no 5 training seeds of one recipe; a copy is loaded and audited
   like any other file, so it costs what a sixth seed would). The ratio printed is the
   runs audit's time over one agent's (the mean of the five single audits); target at
   most 5.5.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

from pytest_rlaudit import audit, audit_runs
from pytest_rlaudit.stats.runs import improvement_ci, probability_of_improvement, run_ratios

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "stats"))
from test_runs import POPULATIONS, coverage, draw_runs  # noqa: E402 (the populations, defined once)

EXAMPLES = ROOT / "examples"


def plain_confidence(runs: int) -> float:
    """The confidence whose expanded level over ``runs`` runs is 0.95."""
    return float(2 * stats.t(runs - 1).cdf(stats.norm.ppf(0.975)) - 1)


def coverage_table(sims: int, two_stage_sims: int) -> None:
    print(f"IQM interval coverage (95% asked; shipped target 0.93-0.97); {sims} recipes per "
          f"cell, two-stage {two_stage_sims}; +- one binomial standard error")
    print(f"{'population':16} {'runs':>4} {'shipped':>14} {'percentile':>14} {'two-stage':>14}")
    for population in POPULATIONS:
        for runs in (5, 10):
            started = time.perf_counter()
            cells = []
            for n, kwargs in ((sims, {}), (sims, {"plain": True}),
                              (two_stage_sims, {"resample_episodes": True})):
                got = _coverage(population, runs, n, **kwargs)
                cells.append(f"{got:.3f}+-{math.sqrt(got * (1 - got) / n):.3f}")
            print(f"{population:16} {runs:>4} {cells[0]:>14} {cells[1]:>14} {cells[2]:>14}"
                  f"   ({time.perf_counter() - started:.0f} s)", flush=True)


def _coverage(population: str, runs: int, sims: int, *, plain: bool = False,
              resample_episodes: bool = False) -> float:
    # the plain percentile interval: the shipped function at a lower confidence, on the
    # same simulated recipes (the same seed)
    return coverage(population, runs, sims, resample_episodes=resample_episodes,
                    confidence=plain_confidence(runs) if plain else 0.95)


def bootstrap_improvement_ci(x: np.ndarray, y: np.ndarray, seed: int,
                              n_resamples: int = 2000) -> tuple[float, float]:
    """rliable's interval: each recipe's runs resampled independently, the plain 95%
    percentile interval of the Mann-Whitney estimates."""
    rng = np.random.default_rng(seed)
    xs = x[rng.integers(0, len(x), (n_resamples, len(x)))]
    ys = y[rng.integers(0, len(y), (n_resamples, len(y)))]
    diff = xs[:, :, None] - ys[:, None, :]
    wins = (diff > 0).mean(axis=(1, 2)) + 0.5 * (diff == 0).mean(axis=(1, 2))
    low, high = np.percentile(wins, [2.5, 97.5])
    return float(low), float(high)


def improvement_table(sims: int) -> None:
    better = POPULATIONS["skewed"]
    print(f"\nprobability of improvement of Beta(8, 2) runs over others, 95% intervals; "
          f"{sims} pairs of recipes per cell; +- one binomial standard error")
    print(f"{'over':>10} {'truth':>6} {'runs':>4} {'shipped':>14} {'bootstrap':>14} "
          f"{'shipped width':>14} {'mean estimate':>14}")
    for a, b in ((8.0, 2.0), (6.0, 3.0), (4.0, 4.0)):
        truth = float(stats.beta(8, 2).expect(lambda v, a=a, b=b: stats.beta(a, b).cdf(v)))
        for runs in (5, 10):
            rng = np.random.default_rng(1)
            hits, boot_hits, widths, points = 0, 0, [], []
            for i in range(sims):
                x = run_ratios(*draw_runs(rng, better, runs))
                y = run_ratios(*draw_runs(rng, (a, b, better[2]), runs))
                low, high = improvement_ci(x, y)
                hits += low <= truth <= high
                widths.append(high - low)
                low, high = bootstrap_improvement_ci(x, y, seed=i)
                boot_hits += low <= truth <= high
                points.append(probability_of_improvement(x, y))
            cells = [f"{h / sims:.3f}+-{math.sqrt(h / sims * (1 - h / sims) / sims):.3f}"
                     for h in (hits, boot_hits)]
            print(f"{f'Beta({a:g}, {b:g})':>10} {truth:>6.3f} {runs:>4} {cells[0]:>14} "
                  f"{cells[1]:>14} {statistics.median(widths):>14.3f} "
                  f"{statistics.mean(points):>14.3f}", flush=True)


def cost_table(episodes: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        agents = [EXAMPLES / "ppo_cartpole.zip", EXAMPLES / "robust_ppo_cartpole.zip",
                  EXAMPLES / "mix_ppo_cartpole.zip"]
        for source in agents[:2]:
            copy = Path(tmp) / f"copy_of_{source.name}"
            shutil.copy(source, copy)
            agents.append(copy)
        runs = [str(a) for a in agents]
        audit(runs[0], "CartPole-v1", episodes=2)  # imports and first loads: not timed
        print(f"\ncost: audit_runs of 5 agents vs audit of each, CartPole-v1, default suite, "
              f"{episodes} episodes, medians of {repeats}")
        print(f"{'reference':>9} {'one audit (mean of 5)':>22} {'5 audits':>9} "
              f"{'audit_runs':>11} {'ratio':>6}")
        for reference in (0, "random"):
            singles, together = [], []
            for _ in range(repeats):
                times = []
                for agent in runs:
                    started = time.perf_counter()
                    audit(agent, "CartPole-v1", episodes=episodes, reference=reference)
                    times.append(time.perf_counter() - started)
                singles.append(times)
                started = time.perf_counter()
                audit_runs(runs, "CartPole-v1", episodes=episodes, reference=reference)
                together.append(time.perf_counter() - started)
            one = statistics.median(statistics.mean(t) for t in singles)
            five = statistics.median(sum(t) for t in singles)
            both = statistics.median(together)
            print(f"{reference!s:>9} {one:>20.2f} s {five:>7.2f} s {both:>9.2f} s "
                  f"{both / one:>5.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--two-stage-sims", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip", choices=("coverage", "cost"), default=None)
    args = parser.parse_args()
    if args.skip != "coverage":
        coverage_table(args.sims, args.two_stage_sims)
        improvement_table(max(200, args.sims // 4))
    if args.skip != "cost":
        cost_table(args.episodes, args.repeats)


if __name__ == "__main__":
    main()
