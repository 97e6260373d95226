"""Benchmark of the bound on one call (``call_timeout``, issue 42 point 2): its cost on the
hot path of a rollout.

What it measures. The SAME audit (a linear CartPole controller, a numpy expression per
policy call, on ``CartPole-v1``; scenarios nominal + jitter + delay; ``--episodes``
episodes each, seed 0, one process) is run with the default bound (``call_timeout=60``:
a watcher thread runs, and the runner notes every env step, reset and policy call in it)
and without it (``call_timeout=0``: no watcher, the runner's notes skipped), in rounds
that alternate which goes first, so that a shared machine's noise falls on both. Why this
workload: CartPole's env step (some 10 us) and a numpy policy are the cheapest there
are, so the per-call note weighs the most here; any real agent or env dilutes it.

Printed: the median and minimum wall time of each, their ratio (bound / none; the target
is at most 1.03, noise included), and the per-agent-step difference of the medians.

Run (from the repository root, about a minute)::

    nice -n 10 python benchmarks/bench_call_bound.py
    nice -n 10 python benchmarks/bench_call_bound.py --episodes 20 --repeats 5   # quicker
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from pytest_rlaudit import audit

W = np.array([0.02, 0.0, 1.0, 0.2])


def controller(obs: np.ndarray) -> np.ndarray:
    return (np.asarray(obs) @ W > 0).astype(np.int64)


def once(call_timeout: float, episodes: int) -> tuple[float, int]:
    began = time.perf_counter()
    result = audit(controller, "CartPole-v1", scenarios=["jitter", "delay"], episodes=episodes,
                   call_timeout=call_timeout, progress=False)
    seconds = time.perf_counter() - began
    out = result.to_dict()
    steps = sum(sum(s["lengths"]) for s in [out["nominal"], *out["scenarios"].values()])
    return seconds, steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    once(60.0, 2)  # warm-up: imports, gymnasium's registry
    times: dict[str, list[float]] = {"bound 60 s": [], "no bound": []}
    steps = 0
    for r in range(args.repeats):
        order = [("bound 60 s", 60.0), ("no bound", 0.0)]
        for name, bound in order if r % 2 == 0 else order[::-1]:
            seconds, steps = once(bound, args.episodes)
            times[name].append(seconds)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"audit of a numpy controller on CartPole-v1, nominal + jitter + delay, "
          f"{args.episodes} episodes each, {args.repeats} rounds")
    for name, values in times.items():
        print(f"{name:12s} median {med[name]:.3f} s   min {min(values):.3f} s")
    ratio = med["bound 60 s"] / med["no bound"]
    nominal_steps = max(steps, 1)  # agent steps of the audit's episodes (replay aside)
    print(f"ratio bound/none (medians) {ratio:.3f}, (minima) "
          f"{min(times['bound 60 s']) / min(times['no bound']):.3f}; target <= 1.03: "
          f"{'PASS' if ratio <= 1.03 else 'MISS'}")
    print(f"difference per agent step (medians, {nominal_steps} agent steps): "
          f"{(med['bound 60 s'] - med['no bound']) / nominal_steps * 1e6:.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
