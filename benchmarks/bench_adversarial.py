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
seed=0)`` (the nominal episodes, the spread calibrated from them, the attack), in three
ways:

- ``before``: the attack as it was before it was batched (commit 89858fd), copied here
  (:func:`legacy_pgd`): every env slot attacks its own observation in its own step, one
  forward and backward pass of one unpadded row per PGD step;
- ``per-observation``: the same loop through today's code
  (``pytest_rlaudit.rollout.slots._BATCH_ATTACKS = False``): each row alone, padded to
  16 rows as every torch call is (the padding makes a row's result independent of its
  batch, and costs a single row about half again);
- ``batched``: the runner gathers the observations of all its slots at each decision
  step and attacks them together, one forward and backward pass per PGD step.

Printed: the median wall time of ``--repeats`` runs of each (the three alternate, so a
change in the machine's load hits all), every run's time, the ratios of the medians, and
whether all gave the same returns, episode by episode. The returns say little here
(every episode scores 1000), so ``--check-episodes`` episodes (default 3) of the attack,
with the audit's calibrated spread, are also run each way with every observation the
agent saw recorded, and compared bit for bit. It exits non-zero if anything differs.
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
from pytest_rlaudit.world.perturbations import adversarial
from pytest_rlaudit.world.perturbations.pgd import Pending, attack_all

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


def legacy_pgd(scores: Any, clean: np.ndarray, start: np.ndarray, low: np.ndarray,
               high: np.ndarray, *, steps: int, step: np.ndarray) -> np.ndarray:
    """The attack of one observation as it was before it was batched (``_pgd`` of
    pytest_rlaudit/world/perturbations/adversarial.py at commit 89858fd), verbatim."""
    if steps == 0:
        return start
    import torch

    def batch(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a, dtype=np.float32)[None])

    lo, hi, size = batch(low), batch(high), batch(step)
    x = batch(start)
    with scores.session():
        with torch.no_grad():
            nominal = scores(batch(clean))
        target = nominal.argmax(dim=1) if scores.discrete else None
        for _ in range(steps):
            x.requires_grad_(True)
            out = scores(x)
            if target is not None:
                if bool((out.argmax(dim=1) != target).all()):
                    break  # the action changed: more steps cannot change it further
                loss = torch.nn.functional.cross_entropy(out, target)
            else:
                loss = (out - nominal).square().sum()
            (grad,) = torch.autograd.grad(loss, x)
            x = torch.minimum(torch.maximum(x.detach() + size * grad.sign(), lo), hi)
    worst: np.ndarray = x.detach().numpy()[0].astype(np.float64)
    return worst


def legacy_attack_all(pending: list[Pending]) -> list[np.ndarray]:
    """What the wrapper's own step called before: :func:`legacy_pgd`, one row at a time."""
    return [p.finish(legacy_pgd(p.scores, p.clean, p.start, p.low, p.high, steps=p.steps,
                                step=p.step)) for p in pending]


WAYS = ("before", "per-observation", "batched")


def way(name: str) -> None:
    """Switch the attack to ``name`` (one of :data:`WAYS`)."""
    slots._BATCH_ATTACKS = name == "batched"
    adversarial.attack_all = legacy_attack_all if name == "before" else attack_all  # type: ignore[assignment]


def run(agent: str, env: str, episodes: int, name: str) -> tuple[Any, float]:
    """One audit, its attack run the way ``name``, and its wall time."""
    way(name)
    try:
        start = time.perf_counter()
        result = audit(agent, env, scenarios=["adversarial_obs"], episodes=episodes, seed=0)
        return result, time.perf_counter() - start
    finally:
        way("batched")


def same_observations(agent: str, env: str, params: dict[str, Any], episodes: int) -> bool:
    """Whether ``episodes`` episodes of the attack (with ``params``: the audit's calibrated
    spread) show the agent the same observations, bit for bit, each way."""
    from pytest_rlaudit import scenarios
    from pytest_rlaudit.rollout.runner import run_episodes
    from pytest_rlaudit.world.agents import as_policy
    from pytest_rlaudit.world.envs import env_spec

    attack = scenarios.get("adversarial_obs").with_params(**params)
    policy = as_policy(agent)
    seen = []
    for name in WAYS:
        way(name)
        try:
            batch = run_episodes(policy, env_spec(env), [attack], episodes, seed=0, record=True)
        finally:
            way("batched")
        seen.append(batch["adversarial_obs"].observations)
    return all(np.array_equal(a, b) for other in seen[1:] for a, b in zip(seen[0], other,
                                                                          strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=Path, default=None,
                        help=f"SB3 .zip to audit (default: {CACHED}, trained if missing)")
    parser.add_argument("--env", default="InvertedPendulum-v5")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check-episodes", type=int, default=3)
    args = parser.parse_args()
    agent = str(agent_path(args.agent))
    times: dict[str, list[float]] = {name: [] for name in WAYS}
    returns: dict[str, list[np.ndarray]] = {name: [] for name in WAYS}
    for _ in range(args.repeats):
        for name in WAYS:
            result, seconds = run(agent, args.env, args.episodes, name)
            params = result["adversarial_obs"].params
            times[name].append(seconds)
            returns[name].append(result["adversarial_obs"].returns)
            print(f"  {name:<16} {seconds:7.2f} s", flush=True)
    print(f"\n{args.env}, {Path(agent).name}, adversarial_obs audit, {args.episodes} "
          f"episodes, median of {args.repeats}")
    print(f"{'attack':<16} {'median s':>9}   all runs")
    for name, values in times.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:<16} {statistics.median(values):>9.2f}   {runs}")
    batched = statistics.median(times["batched"])
    for name in WAYS[:2]:
        print(f"batched is {statistics.median(times[name]) / batched:.1f}x faster than {name}")
    first = returns["before"][0]
    same = all(np.array_equal(first, r) for rs in returns.values() for r in rs)
    print(f"returns identical, episode by episode: {same} "
          f"(mean {float(np.mean(first)):.1f})")
    seen = same_observations(agent, args.env, params, args.check_episodes)
    print(f"observations identical, bit for bit, over {args.check_episodes} episodes: {seen}")
    return 0 if same and seen else 1


if __name__ == "__main__":
    sys.exit(main())
