"""Compare two PPO recipes for CartPole over their training runs.

Train a few seeds of each recipe first (``examples/train_cartpole.py --seeds``)::

    python examples/train_cartpole.py --seeds 0,1,2
    python examples/train_cartpole.py --seeds 0,1,2 --robust
    python examples/compare_recipes.py

Each recipe's runs (a glob of their zips; defaults ``runs/fragile/seed_*.zip`` and
``runs/robust/seed_*.zip``) are audited together with ``audit_runs`` on the default
suite, 30 paired episodes per run and scenario, seed 0: the same episodes for every run
of both recipes. The script prints both tables, then the probability that a robust run
keeps more of its return than a fragile one under ``spike`` and ``speed_5x``, the two
scenarios the fragile recipe was built to fail. docs/tutorials/training-runs.md reads
its output.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_rlaudit import audit_runs, probability_of_improvement

ENV_ID = "CartPole-v1"
EPISODES = 30
SEED = 0
COMPARED = ("spike", "speed_5x")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragile", default="runs/fragile/seed_*.zip",
                        help="glob of the fragile recipe's runs (default: %(default)s)")
    parser.add_argument("--robust", default="runs/robust/seed_*.zip",
                        help="glob of the robust recipe's runs (default: %(default)s)")
    args = parser.parse_args(argv)

    fragile = audit_runs(args.fragile, ENV_ID, episodes=EPISODES, seed=SEED, name="fragile")
    robust = audit_runs(args.robust, ENV_ID, episodes=EPISODES, seed=SEED, name="robust")
    print(fragile)
    print()
    print(robust)
    print()
    for scenario in COMPARED:
        print(probability_of_improvement(robust, fragile, scenario))
    return 0


if __name__ == "__main__":
    sys.exit(main())
