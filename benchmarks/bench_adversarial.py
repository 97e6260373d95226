"""The ``adversarial_obs`` audit: the attack batched over the env slots of a decision
step against the attack one observation at a time.

    python benchmarks/bench_adversarial.py                    # InvertedPendulum-v5, 20 episodes
    python benchmarks/bench_adversarial.py --repeats 5 --episodes 30
    python benchmarks/bench_adversarial.py --agent /tmp/mujoco_agent.zip

Why this workload: the MuJoCo audit (``benchmarks/bench_mujoco.py``) spent 30 of its 34 s
in ``adversarial_obs`` on the trained InvertedPendulum agent, whose episodes all last
1000 steps (the attack never topples it at 0.1 x the nominal spread), so every run does
the same work: 20 episodes x 1000 steps x 10 PGD steps of SB3's [64, 64] MLP. The agent is
the one ``benchmarks/train_mujoco.py`` trains (PPO, seed 0, about 50 s on a shared 2-core
machine); without ``--agent`` it is trained once and cached in ``benchmarks/.cache``.

Each run is the same ``audit(agent, env, scenarios=["adversarial_obs"], episodes,
seed=0)`` (the nominal episodes, the spread calibrated from them, the attack), in two ways:

- ``per-observation``: every env slot attacks its own observation in its own step, one
  forward and backward pass of one row (padded, as every torch call is) per PGD step,
  as before the batched attack (``pytest_rlaudit.rollout.slots._BATCH_ATTACKS = False``);
- ``batched``: the runner gathers the observations of all its slots at each decision
  step and attacks them together, one forward and backward pass per PGD step.

Printed: the median wall time of ``--repeats`` runs of each (the two alternate, so a
change in the machine's load hits both), every run's time, the ratio of the medians, and
whether the two gave the same returns, episode by episode (it exits non-zero if not).
Wall times depend on the machine and its load; the returns do not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rlaudit import audit
from pytest_rlaudit.rollout import slots

HERE = Path(__file__).resolve().parent
CACHED = HERE / ".cache" / "inverted_pendulum_ppo.zip"


def agent_path(given: Path | None) -> Path:
    """``given``, or the cached InvertedPendulum agent, trained first if it is missing."""
    if given is not None:
        return given
    if not CACHED.exists():
        sys.path.insert(0, str(HERE))
        import train_mujoco

        print(f"training the InvertedPendulum agent once (cached at {CACHED}) ...")
        if train_mujoco.main(["--out", str(CACHED)]) != 0:
            raise SystemExit("training failed")
    return CACHED


def run(agent: str, env: str, episodes: int, batched: bool) -> tuple[Any, float]:
    """One audit, its attack batched or per observation, and its wall time."""
    slots._BATCH_ATTACKS = batched
    try:
        start = time.perf_counter()
        result = audit(agent, env, scenarios=["adversarial_obs"], episodes=episodes, seed=0)
        return result, time.perf_counter() - start
    finally:
        slots._BATCH_ATTACKS = True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=Path, default=None,
                        help=f"SB3 .zip to audit (default: {CACHED}, trained if missing)")
    parser.add_argument("--env", default="InvertedPendulum-v5")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    agent = str(agent_path(args.agent))
    times: dict[str, list[float]] = {"per-observation": [], "batched": []}
    returns: dict[str, list[np.ndarray]] = {"per-observation": [], "batched": []}
    for _ in range(args.repeats):
        for name in times:
            result, seconds = run(agent, args.env, args.episodes, name == "batched")
            times[name].append(seconds)
            returns[name].append(result["adversarial_obs"].returns)
            print(f"  {name:<16} {seconds:7.2f} s")
    print(f"\n{args.env}, {Path(agent).name}, adversarial_obs audit, {args.episodes} "
          f"episodes, median of {args.repeats}")
    print(f"{'attack':<16} {'median s':>9}   all runs")
    for name, values in times.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:<16} {statistics.median(values):>9.2f}   {runs}")
    ratio = statistics.median(times["per-observation"]) / statistics.median(times["batched"])
    print(f"batched is {ratio:.1f}x faster")
    first = returns["per-observation"][0]
    same = all(np.array_equal(first, r) for rs in returns.values() for r in rs)
    print(f"returns identical, episode by episode: {same} "
          f"(mean {float(np.mean(first)):.1f})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
