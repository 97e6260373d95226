"""The demo audit: the bundled PPO model and the numpy controller on CartPole-v1.

Run from the repository root::

    python examples/audit_examples.py [--episodes 30] [--seed 0]

It prints, for each agent, the mean return of the nominal env and of each scenario of
the deployment and stress suites, with the return ratio to nominal (1.0: unharmed).
The PPO model balances perfectly at its training speed but falls over when the control
period spikes or the sensor is noisy; the controller keeps its returns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from numpy_agent import cartpole_controller  # noqa: E402

from pytest_rlaudit import audit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    agents = {
        "PPO (examples/ppo_cartpole.zip)": str(HERE / "ppo_cartpole.zip"),
        "numpy controller (examples/numpy_agent.py)": cartpole_controller,
    }
    for label, agent in agents.items():
        result = audit(agent, "CartPole-v1", episodes=args.episodes, seed=args.seed)
        print(f"== {label}")
        print(result)
        print(f"({result.seconds:.2f} s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
