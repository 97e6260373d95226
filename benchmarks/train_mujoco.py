"""Train a small MuJoCo agent on the CPU for the MuJoCo audit figures (bench_mujoco.py).

    python benchmarks/train_mujoco.py                        # PPO, InvertedPendulum-v5
    python benchmarks/train_mujoco.py --out /tmp/ip.zip --seed 1
    python benchmarks/train_mujoco.py --env Hopper-v5        # PPO + VecNormalize, a weaker agent

What is measured: the wall time of ``model.learn`` alone (env creation, saving and the
evaluation are not in it), then a plain evaluation of the saved model, loaded back from
the ``.zip``: the mean return over 10 episodes, episode i reset with seed i, actions
deterministic, on the unperturbed env (no pytest-rlaudit involved).

The agents are stable-baselines3 PPO with a [64, 64] MLP, on the CPU (``device="cpu"``)
with ``torch.set_num_threads(--threads)`` (default 1), every seed (``random``, numpy,
torch, the training envs) fixed from ``--seed``, so the same command on the same software
stack gives the same weights.

- ``InvertedPendulum-v5`` (default): 4 envs, n_steps 512, batch 64, 10 epochs, lr 3e-4,
  100,000 agent steps. It reaches the maximum return, 1000, after about 40,000 steps; the
  rest of the budget is margin. 25-55 s of wall time on a shared 2-core machine (seed 0:
  1000.0 on all 10 evaluation episodes).
- ``Hopper-v5``: SB3's PPO defaults (1 env, n_steps 2048, batch 64, 10 epochs, lr 3e-4)
  inside ``VecNormalize`` (observations and rewards), 300,000 agent steps, about 3
  minutes: a hopper that hops, far from a tuned one (rl-zoo trains 1M steps; seed 0: mean
  2344.5, half the evaluation episodes reach 1000 steps, half fall near step 500). The
  observation statistics are saved as ``vecnormalize.pkl`` next to the ``.zip``, where
  ``pytest_rlaudit.audit`` finds them (training and reward normalisation off), so give
  each Hopper agent a folder of its own (``--out /tmp/hopper/agent.zip``).

Saving leaves out SB3's wall-clock bookkeeping (``start_time``, the episode buffers),
as ``examples/train_cartpole.py`` does.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

DEFAULT_OUT = Path("/tmp/mujoco_agent.zip")
N_EVAL_EPISODES = 10
EXCLUDE_FROM_SAVE = ["start_time", "ep_info_buffer", "ep_success_buffer"]
#: Where pytest-rlaudit looks for VecNormalize statistics next to a ``.zip``.
STATS_NAME = "vecnormalize.pkl"


@dataclass(frozen=True)
class Recipe:
    """How one env is trained: PPO keyword arguments, envs, budget, normalisation."""

    timesteps: int
    n_envs: int
    normalize: bool
    ppo: dict[str, Any] = field(default_factory=dict)


RECIPES: dict[str, Recipe] = {
    "InvertedPendulum-v5": Recipe(
        timesteps=100_000, n_envs=4, normalize=False,
        ppo={"n_steps": 512, "batch_size": 64, "n_epochs": 10, "learning_rate": 3e-4,
             "gamma": 0.99, "gae_lambda": 0.95}),
    "Hopper-v5": Recipe(
        timesteps=300_000, n_envs=1, normalize=True,
        ppo={"n_steps": 2048, "batch_size": 64, "n_epochs": 10, "learning_rate": 3e-4,
             "gamma": 0.99, "gae_lambda": 0.95}),
}


def train(env_id: str, seed: int, timesteps: int, threads: int) -> tuple[PPO, VecNormalize | None, float]:
    """Train PPO on ``env_id`` with fixed seeds; returns the model, its VecNormalize (None
    without one) and the seconds ``learn`` took."""
    recipe = RECIPES[env_id]
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    venv = make_vec_env(env_id, n_envs=recipe.n_envs, seed=seed)
    norm = None
    if recipe.normalize:
        venv = norm = VecNormalize(venv, gamma=recipe.ppo["gamma"])
    model = PPO("MlpPolicy", venv, policy_kwargs={"net_arch": [64, 64]}, seed=seed,
                device="cpu", verbose=0, **recipe.ppo)
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    elapsed = time.perf_counter() - start
    venv.close()
    return model, norm, elapsed


def evaluate(path: Path, env_id: str, stats: Path | None,
             n_episodes: int = N_EVAL_EPISODES) -> list[float]:
    """The saved model's deterministic return on episodes reset with seeds 0..n-1."""
    model = PPO.load(path, device="cpu")
    norm = None
    if stats is not None:
        norm = VecNormalize.load(str(stats), make_vec_env(env_id, n_envs=1))
        norm.training = False
    env = gym.make(env_id)
    returns: list[float] = []
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=episode)
        total, done = 0.0, False
        while not done:
            seen = norm.normalize_obs(obs) if norm is not None else obs
            action, _ = model.predict(seen, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=sorted(RECIPES), default="InvertedPendulum-v5",
                        help="MuJoCo env to train on (default: InvertedPendulum-v5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--timesteps", type=int, default=None,
                        help="total agent steps (default: the env's recipe, 100000 for "
                             "InvertedPendulum-v5, 300000 for Hopper-v5)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output .zip (default: {DEFAULT_OUT})")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    recipe = RECIPES[args.env]
    timesteps = args.timesteps if args.timesteps is not None else recipe.timesteps
    out: Path = args.out
    stats = out.parent / STATS_NAME
    if not recipe.normalize and stats.exists():
        # pytest-rlaudit would apply it to this agent (statistics next to a .zip are found)
        print(f"error: {stats} exists next to {out} and would be applied to this agent, "
              "which is trained without VecNormalize; remove it or choose another --out",
              file=sys.stderr)
        return 2

    model, norm, elapsed = train(args.env, args.seed, timesteps, args.threads)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out, exclude=EXCLUDE_FROM_SAVE)
    if norm is not None:
        norm.save(str(stats))
    print(f"PPO on {args.env}: trained {timesteps} agent steps in {elapsed:.1f}s "
          f"(seed {args.seed}, {args.threads} torch thread(s), cpu); saved {out}"
          + (f" and {stats}" if norm is not None else ""))

    returns = evaluate(out, args.env, stats if norm is not None else None)
    print(f"returns (deterministic, episode i reset with seed i): "
          f"{[round(r, 1) for r in returns]}")
    print(f"mean return over {len(returns)} episodes: {np.mean(returns):.1f} "
          f"(std {np.std(returns):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
