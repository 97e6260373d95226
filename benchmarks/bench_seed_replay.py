"""What the seed-replay check costs an audit: nominal episode 0 run whole, a row a step.

Why this workload. The check (``pytest_rlaudit.rollout.replay``) runs before every audit of
a new agent, env and seed: nominal episode 0 whole (up to ``max_steps``), one policy call of
one row per step, and its first ``PREFIX_STEPS`` steps again; the audit's own run of that
episode is then compared with it step by step. One-row calls cost more per step than the
audit's batched ones, so its share of an audit is larger than one episode in the audit's
few hundred. The bundled SB3 PPO on CartPole-v1 is the common case at its worst: an agent
that balances all 500 steps (the longest episode the env has) and a torch forward pass per
call; the audit is the default suite at 30 episodes, as ``audit()`` and ``--rl-audit`` run.

What it does. Loads the agent once, warms the env probe and torch with a 16-step replay,
then times ``check_replay`` at 16 steps (the check before issue 42) and at the audit's
``max_steps`` (now), each ``--runs`` times (median), and ``audit(...)`` once per run (its
time includes its own replay). Prints the medians and the replay's share of an audit.

Run (from the repository root; about 1 minute at ``--runs 3``)::

    python benchmarks/bench_seed_replay.py --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gymnasium as gym

from pytest_rlaudit import audit
from pytest_rlaudit.rollout.replay import PREFIX_STEPS, check_replay
from pytest_rlaudit.rollout.runner import DEFAULT_MAX_STEPS
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import AuditEnv

PPO = Path(__file__).resolve().parents[1] / "examples" / "ppo_cartpole.zip"


def _timed(call: object) -> float:
    start = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=30)
    args = parser.parse_args()
    policy = as_policy(PPO)
    env = AuditEnv("CartPole-v1", lambda: gym.make("CartPole-v1"))
    check_replay(policy, env, seed=0, steps=PREFIX_STEPS)  # warm: env probe, torch
    prefix, whole, audits = [], [], []
    for _ in range(args.runs):
        prefix.append(_timed(lambda: check_replay(policy, env, seed=0, steps=PREFIX_STEPS)))
        whole.append(_timed(lambda: check_replay(policy, env, seed=0, steps=DEFAULT_MAX_STEPS)))
        audits.append(_timed(lambda: audit(PPO, "CartPole-v1", episodes=args.episodes)))
    p, w, a = (statistics.median(x) for x in (prefix, whole, audits))
    print(f"replay, first {PREFIX_STEPS} steps only (before): {p:.3f} s ({p / a:.1%} of an audit)")
    print(f"replay, whole episode 0 (now):           {w:.3f} s ({w / a:.1%} of an audit)")
    print(f"audit(ppo_cartpole.zip, CartPole-v1, episodes={args.episodes}), default suite, "
          f"replay included: {a:.2f} s  (medians of {args.runs})")


if __name__ == "__main__":
    main()
