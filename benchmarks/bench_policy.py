"""Benchmark of one batched policy call: SB3's ``policy.predict`` against SB3Policy's fast path.

What it measures. A SAC ``MlpPolicy`` with SB3's default net (256x256, random init, no
training) on HalfCheetah-v5's spaces (17 float64 observations, 6 actions in [-1, 1]; a
stand-in env with those spaces, so MuJoCo is not needed); with ``--model ppo``, a PPO
``MlpPolicy`` with SB3's default net (64x64) on CartPole-v1 (4 float32 observations, 2
actions), the most common SB3 agent in the zoo's and users' audits. For each batch of 16, 64 and
128 rows (HalfCheetah-like observations, seeded), three ways of getting the deterministic
actions, each timed as the median over ``--repeats`` rounds of the mean time of ``--calls``
back-to-back calls, in microseconds per call:

1. ``predict``: what ``SB3Policy.act`` did before the fast path: ``policy.predict(obs,
   deterministic=True)`` on the batch padded to ``MIN_TORCH_ROWS`` rows, with one torch
   thread. Each call sets eval mode (a recursion over the policy's 41 modules), copies and
   checks the observations, runs ``_predict`` under ``no_grad`` and unscales the actions.
2. ``fast``: ``SB3Policy.act(obs, None)`` today: eval mode set once, the observation copied
   into a tensor without predict's checks, SAC's deterministic action taken as ``tanh`` of
   the actor's mean (``_predict`` builds a torch ``Normal`` around it first), unscaled;
   PPO's as the argmax of its logits' softmax (``_predict`` builds and checks a torch
   ``Categorical`` first).
3. ``forward``: ``policy._predict`` on a tensor made beforehand, under ``no_grad``, nothing
   else (no conversion, no unscaling): the floor of any path through ``_predict``, which
   the fast path goes below for SAC.

The actions of ``predict`` and ``fast`` are asserted identical, bit for bit, for every row
count before timing. Rounds run the ways interleaved (rotating their order) to spread the
noise of a shared machine. Printed: one line per row count with the median and minimum
time per call of each way, the ratio predict/fast (of the medians, then of the minima)
and how much of the gap between predict and `_predict` the fast path closes (medians; over
100%: faster than any path through `_predict`).

Run (from the repository root; about 10 s by default)::

    python benchmarks/bench_policy.py
    python benchmarks/bench_policy.py --model ppo
    python benchmarks/bench_policy.py --quick            # smoke run, a few seconds
    python benchmarks/bench_policy.py --repeats 15 --calls 400 --torch-threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import stable_baselines3
import torch
from gymnasium import spaces
from stable_baselines3 import PPO, SAC

from pytest_rlaudit.world.agents import MIN_TORCH_ROWS, SB3Policy
from pytest_rlaudit.world.agents.torch import _pad_rows, _torch_threads

ROWS = (16, 64, 128)


class CheetahSpaces(gym.Env):
    """HalfCheetah-v5's spaces and nothing else (SAC wants an env to build its policy)."""

    observation_space = spaces.Box(-np.inf, np.inf, (17,), np.float64)
    action_space = spaces.Box(-1.0, 1.0, (6,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(17), {}

    def step(self, action):
        return np.zeros(17), 0.0, False, False, {}


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Mean seconds per call of ``fn`` over ``calls`` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--calls", type=int, default=200, help="calls per timed round")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="3 repeats of 30 calls")
    ap.add_argument("--model", choices=("sac", "ppo"), default="sac")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.calls = 3, 30

    env = CheetahSpaces() if args.model == "sac" else gym.make("CartPole-v1")
    model = (SAC("MlpPolicy", env, buffer_size=1, seed=0, device="cpu") if args.model == "sac"
             else PPO("MlpPolicy", env, seed=0, device="cpu"))
    policy = model.policy
    agent = SB3Policy(model, torch_threads=args.torch_threads)
    agent.bind(env.observation_space, env.action_space)
    obs_space = env.observation_space
    rng = np.random.default_rng(0)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"stable-baselines3 {stable_baselines3.__version__}; torch threads "
          f"{args.torch_threads}")
    print(f"{type(model).__name__} MlpPolicy net_arch {policy.net_arch}, obs {obs_space.shape[0]} "
          f"{obs_space.dtype}, actions {env.action_space}; median of {args.repeats} rounds of "
          f"{args.calls} calls, microseconds per call")
    print()
    print(f"{'':5}{'predict':>16}{'fast':>16}{'forward':>16}{'predict/fast':>16}{'gap':>6}")
    print(f"{'rows':>5}" + f"{'median':>9}{'min':>7}" * 4 + f"{'closed':>8}")
    noisy = []
    for n in ROWS:
        obs = rng.normal(0.0, 3.0, size=(n, obs_space.shape[0])).astype(obs_space.dtype)
        padded = _pad_rows(obs, MIN_TORCH_ROWS)
        tensor = torch.as_tensor(padded)

        def predict(obs=obs, padded=padded, n=n):
            with _torch_threads(args.torch_threads):
                return policy.predict(padded, deterministic=True)[0][:n]

        def fast(obs=obs):
            return agent.act(obs, None)[0]

        def forward(tensor=tensor):
            with _torch_threads(args.torch_threads), torch.no_grad():
                return policy._predict(tensor, deterministic=True)

        a, b = predict(), fast()
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), "actions differ"
        ways = {"predict": predict, "fast": fast, "forward": forward}
        times: dict[str, list[float]] = {w: [] for w in ways}
        for fn in ways.values():  # warm-up round, untimed
            per_call(fn, max(10, args.calls // 10))
        for r in range(args.repeats):
            order = list(ways)
            order = order[r % len(order):] + order[: r % len(order)]
            for w in order:
                times[w].append(per_call(ways[w], args.calls))
        med = {w: 1e6 * statistics.median(t) for w, t in times.items()}
        low = {w: 1e6 * min(t) for w, t in times.items()}
        noisy += [f"{w}@{n}" for w, t in times.items() if max(t) > 1.5 * min(t)]
        gap = med["predict"] - med["forward"]
        closed = (med["predict"] - med["fast"]) / gap if gap > 0 else float("nan")
        print(f"{n:>5}" + "".join(f"{med[w]:>9.1f}{low[w]:>7.1f}" for w in ways)
              + f"{med['predict'] / med['fast']:>8.2f}x{low['predict'] / low['fast']:>6.2f}x"
              + f"{closed:>8.0%}")
    if noisy:
        print(f"WARNING: noisy timings (max > 1.5x min) for {', '.join(noisy)}: the machine "
              "is busy; compare the minima, or rerun with more --repeats")
    print()
    print("actions of predict and fast identical, bit for bit, at every row count: OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
