"""Train the small PPO CartPole agent used by the pytest-rlaudit examples.

This script trains a stable-baselines3 PPO agent (a [64, 64] MLP) on
gymnasium's ``CartPole-v1`` and saves it to ``examples/ppo_cartpole.zip``.
Hyperparameters follow rl-baselines3-zoo's tuned CartPole PPO settings.
Training is seeded and single-threaded on the CPU, so re-running the script
with the same seed on the same software stack reproduces the same weights.

The output zip is committed to the repository, so you only need to run this
if you want to regenerate it::

    python examples/train_cartpole.py
    python examples/train_cartpole.py --seed 1 --out /tmp/other.zip

At the end the script evaluates the deterministic policy on 20 episodes
(``reset(seed=i)`` for ``i`` in 0..19) and prints the returns.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.utils import LinearSchedule

ENV_ID = "CartPole-v1"
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "ppo_cartpole.zip"
N_EVAL_EPISODES = 20


# Saved-run bookkeeping that holds wall-clock times, left out of the zip so
# that re-running the script changes as little of it as possible.
EXCLUDE_FROM_SAVE = ["start_time", "ep_info_buffer", "ep_success_buffer"]


def linear(initial: float) -> LinearSchedule:
    """Schedule decaying linearly from ``initial`` to 0 over training.

    SB3's own class (rather than a local closure) pickles by reference, so
    the saved zip does not embed bytecode from this script.
    """
    return LinearSchedule(start=initial, end=0.0, end_fraction=1.0)


def train(seed: int, timesteps: int) -> PPO:
    """Train a PPO agent on CartPole-v1 with fixed seeds."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    env = make_vec_env(ENV_ID, n_envs=8, seed=seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        policy_kwargs={"net_arch": [64, 64]},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=timesteps)
    env.close()
    return model


def evaluate(model: PPO, n_episodes: int = N_EVAL_EPISODES) -> list[float]:
    """Return the deterministic policy's return on episodes seeded 0..n-1."""
    env = gym.make(ENV_ID)
    returns: list[float] = []
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=episode)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--timesteps",
        type=int,
        default=100_000,
        help="total environment steps (default: 100000)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output zip (default: ppo_cartpole.zip next to this script)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out

    start = time.perf_counter()
    model = train(args.seed, args.timesteps)
    elapsed = time.perf_counter() - start
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out, exclude=EXCLUDE_FROM_SAVE)
    print(f"trained {args.timesteps} steps in {elapsed:.1f}s; saved {out}")

    returns = evaluate(PPO.load(out, device="cpu"))
    print(f"returns: {returns}")
    print(f"mean return over {len(returns)} episodes: {np.mean(returns):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
