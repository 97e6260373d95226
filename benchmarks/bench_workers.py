"""Where an env-bound audit runs: one process, worker processes, Ray actors.

    python benchmarks/bench_workers.py                      # both workloads, 30 episodes, 3 repeats
    python benchmarks/bench_workers.py --workload realistic --repeats 5
    python benchmarks/bench_workers.py --no-ray              # without the [ray] extra

Two workloads, each the same ``audit`` call in every configuration:

- ``realistic`` (the one the target is set on): a *trained* SAC (SB3's default 256x256
  MlpPolicy) on HalfCheetah-v5, the scenarios a robotics team audits for deployment,
  ``obs_noise``, ``delay`` and ``jitter``, 30 episodes, the random reference.
  Here every env step needs a policy call, as it does in most audits of a real agent, so
  the policy is half the cost: the work that moving policy calls into the workers
  spreads. The agent is a zoo folder (the layout of ``../shared/zoo-samples``):
  ``--agent FOLDER`` audits one of yours (a zoo download, say); without it a SAC is
  trained once, 20,000 steps with seed 0 (5-10 minutes on 2 cores; see
  :func:`trained_sac`), and kept in ``--cache``. That SAC barely runs (nominal mean
  return about -60 over 1000 steps, against about -290 for random actions), but
  HalfCheetah episodes never end early, so its audit costs what a tuned SAC's does: the
  same net, the same 1000 steps per episode.
- ``suite``: the same net at its seeded initial weights on the default suite (``speed_5x``
  and ``spike`` share one policy call among up to 5 env steps, so the env dominates),
  with ``reference="random"``: the workload of the earlier, env-stepping workers.

HalfCheetah episodes always last 1000 steps, so every configuration does the same work.
Configurations:

- ``local``: envs and policy in this process (``workers=None``);
- ``workers=2``: two processes, this one and a forked one, each running whole episodes
  with its own copy of the agent;
- ``env workers``: ``workers=2`` for a policy that must stay in one process
  (``shards_freely=False``, as for an agent on a GPU): the forked process steps envs,
  this one makes every policy call (the design before issue 29);
- ``2 halves``: not a configuration but the ceiling: two forked processes each run the
  audit on half the episodes side by side, sharing nothing (this VM's parallel throughput
  varies from hour to hour; this says what two processes get from it at the moment);
- ``ray``: ``backend="ray"`` with ``workers=2`` actors on a local ``ray.init(num_cpus=2)``,
  run after the others (Ray's own processes would share the cores with them). Ray's
  start-up (``ray.init``, and the first audit, which starts the actors and ships the
  agent) is timed apart and printed on its own line; the timed runs reuse the actors.

Printed per workload: the median wall time of ``--repeats`` runs per configuration with
every run (the spread), the speed-up over ``local``, the ratio of Ray to the local
workers, and a check that every configuration gave the same returns, episode by episode,
for every scenario (it exits non-zero if not). Targets (issue 29): ``workers=2`` at least
1.8x on ``realistic``, Ray within 1.2x of ``workers=2``. Wall times depend on the machine
and its load (run it on an idle machine); the returns do not.
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


def timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def halves(run: Any, episodes: int) -> float:
    """Wall time of two forked processes each running the audit on half the episodes,
    side by side, with no message between them: what two processes get out of this
    machine at this moment, the ceiling ``workers=2`` is measured against."""
    import multiprocessing

    from pytest_rlaudit.world.agents.torch import after_fork

    def half() -> None:
        after_fork()  # as the audit's own workers do: torch's thread pool hangs after a fork
        run(episodes=episodes // 2)

    context = multiprocessing.get_context("fork")
    start = time.perf_counter()
    procs = [context.Process(target=half) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise SystemExit("a half-audit process failed")
    return time.perf_counter() - start


def trained_sac(env_id: str, steps: int, cache: Path) -> Path:
    """A zoo folder (``sac/<env>_1/<env>.zip`` with ``<env>/config.yml``, the layout of
    ``../shared/zoo-samples``) of a SAC trained ``steps`` steps on ``env_id`` with seed 0,
    trained once and kept in ``cache``. The zoo's SAC hyperparameters for MuJoCo, but
    ``learning_starts`` 1,000 (not 10,000) so that a short run learns: a runner, not a
    tuned one, whose audit costs what any SAC MlpPolicy's does."""
    folder = cache / "sac" / f"{env_id}_1"
    model_path = folder / f"{env_id}.zip"
    if model_path.exists():
        return folder
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC

    torch.set_num_threads(1)
    start = time.perf_counter()
    model = SAC("MlpPolicy", gym.make(env_id), seed=0, device="cpu", learning_starts=1000)
    model.learn(steps)
    (folder / env_id).mkdir(parents=True, exist_ok=True)
    (folder / env_id / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - learning_starts\n    - 1000\n"
        f"  - - n_timesteps\n    - {steps}\n  - - policy\n    - MlpPolicy\n")
    model.save(model_path)
    print(f"trained SAC on {env_id} for {steps} steps in {time.perf_counter() - start:.0f} s: "
          f"{model_path}")
    return folder


def returns_of(result: Any) -> dict[str, np.ndarray]:
    out = {"nominal": result.nominal.returns}
    out.update({r.name: r.returns for r in result})
    return out


def local_runs(run: Any, episodes: int, repeats: int) -> tuple[dict[str, list[float]],
                                                                dict[str, Any]]:
    """Wall times and results of every local configuration of one workload, interleaved
    (load drifts hit all alike)."""
    from pytest_rlaudit.world.agents import as_policy

    def env_workers() -> Any:  # the same agent, kept in one process
        policy = as_policy(run.agent)
        policy.shards_freely = False
        return run(agent=policy, workers=2)

    configs: dict[str, Any] = {"local": run, "workers=2": lambda: run(workers=2),
                               "env workers": env_workers}
    run()  # warm: imports, first env compilation
    times: dict[str, list[float]] = {name: [] for name in [*configs, "2 halves"]}
    results: dict[str, Any] = {}
    for _ in range(repeats):
        for config, call in configs.items():
            results[config], seconds = timed(call)
            times[config].append(seconds)
        times["2 halves"].append(halves(run, episodes))
    return times, results


def report(name: str, times: dict[str, list[float]], results: dict[str, Any]) -> bool:
    """Print one workload's table; whether every configuration gave the same returns."""
    base = statistics.median(times["local"])
    print(f"\n{name}, median of {len(times['local'])}")
    print(f"{'configuration':<14} {'median s':>9} {'speed-up':>9}   all runs")
    for config, values in times.items():
        median = statistics.median(values)
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{config:<14} {median:>9.2f} {base / median:>8.2f}x   {runs}")
    if "ray" in times:
        ratio = statistics.median(times["ray"]) / statistics.median(times["workers=2"])
        print(f"ray / workers=2: {ratio:.2f}x the time (start-up apart)")
    share = statistics.median(times["2 halves"]) / statistics.median(times["workers=2"])
    print(f"workers=2 reaches {share:.0%} of the speed-up of 2 halves (two processes each "
          "auditing half the episodes, no messages: this machine's two-process ceiling now)")
    expected = returns_of(results["local"])
    same = True
    for config, result in results.items():
        got = returns_of(result)
        for scenario, values in expected.items():
            if not np.array_equal(values, got[scenario]):
                print(f"MISMATCH: {config} {scenario}: {got[scenario]} != {values}")
                same = False
    print("returns identical in every configuration, episode by episode: "
          f"{'yes' if same else 'NO'}")
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--workload", choices=["realistic", "suite", "both"], default="both")
    parser.add_argument("--agent", help="a zoo folder of a trained agent (realistic workload)")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "pytest-rlaudit-bench"),
                        help="where the trained SAC is kept")
    parser.add_argument("--train-steps", type=int, default=20_000)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray configuration")
    args = parser.parse_args()

    import gymnasium as gym
    from stable_baselines3 import SAC

    workloads: dict[str, Any] = {}
    if args.workload in ("realistic", "both"):
        folder = Path(args.agent) if args.agent else trained_sac(args.env, args.train_steps,
                                                                 Path(args.cache))

        def realistic(episodes: int = args.episodes, agent: Any = str(folder),
                      **where: Any) -> Any:
            return audit(agent, args.env, scenarios=["obs_noise", "delay", "jitter"],
                         episodes=episodes, seed=0, reference="random", **where)

        realistic.agent = str(folder)  # type: ignore[attr-defined]
        workloads[f"realistic: trained SAC {folder.name} on {args.env}, obs_noise, delay, "
                  f"jitter x {args.episodes} episodes"] = realistic
    if args.workload in ("suite", "both"):
        model = SAC("MlpPolicy", gym.make(args.env), seed=0, device="cpu")

        def suite(episodes: int = args.episodes, agent: Any = model, **where: Any) -> Any:
            return audit(agent, args.env, episodes=episodes, seed=0, reference="random", **where)

        suite.agent = model  # type: ignore[attr-defined]
        workloads[f"suite: untrained SAC on {args.env}, default suite x {args.episodes} "
                  "episodes, random reference"] = suite

    measured = {name: local_runs(run, args.episodes, args.repeats)
                for name, run in workloads.items()}
    if not args.no_ray:
        # After the local runs: Ray's own processes (its raylet, the kept actors) would
        # otherwise share the cores with them.
        import ray

        from pytest_rlaudit.rollout import ray_pool

        # Kept actors are released after 10 s idle; keep them for the timed runs: their
        # start-up is timed apart, once, here.
        ray_pool.IDLE_SECONDS = 3600.0
        _, init = timed(lambda: ray.init(num_cpus=2, include_dashboard=False,
                                         log_to_driver=False))
        first_run = next(iter(workloads.values()))
        _, first = timed(lambda: first_run(episodes=2, backend="ray", workers=2))
        print(f"ray start-up: ray.init {init:.2f} s; first audit (starts 2 actors, ships the "
              f"agent) {first:.2f} s")
        for name, run in workloads.items():
            times, results = measured[name]
            times["ray"] = []
            for _ in range(args.repeats):
                results["ray"], seconds = timed(lambda run=run: run(backend="ray", workers=2))
                times["ray"].append(seconds)
        ray.shutdown()
    same = all([report(name, *measured[name]) for name in workloads])
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
