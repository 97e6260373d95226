"""Where an env-bound audit runs: one process, worker processes, Ray actors.

    python benchmarks/bench_workers.py                        # HalfCheetah-v5, 10 episodes
    python benchmarks/bench_workers.py --env Hopper-v5 --episodes 20 --repeats 5
    python benchmarks/bench_workers.py --no-ray               # without the [ray] extra

The agent is a SAC MlpPolicy (SB3's default 256x256 net) at its seeded initial weights:
untrained, which changes nothing about the cost of an audit, and lets the benchmark run
anywhere without a trained model. HalfCheetah episodes always last 1000 steps, so every
configuration does the same work. Each configuration runs the same ``audit`` call (the
default suite, ``--episodes`` paired episodes, ``reference="random"``):

- ``local``: envs and policy in this process (``workers=None``);
- ``workers=1`` / ``workers=2``: envs in worker processes, policy calls here;
- ``2 halves``: not a configuration but the ceiling: two forked processes each run the
  audit on half the episodes side by side, sharing nothing (this VM's parallel throughput
  varies from hour to hour; this says what two processes get from it at the moment);
- ``ray``: ``backend="ray"`` with ``workers=2`` actors on a local ``ray.init(num_cpus=2)``,
  run after the others (Ray's own processes would share the cores with them). Ray's
  start-up (``ray.init``, and the first audit, which starts the actors and ships the
  agent) is timed apart and printed on its own line; the timed runs reuse the actors.

Printed: the median wall time of ``--repeats`` runs per configuration, the speed-up over
``local``, the ratio of Ray to the local workers, and a check that every configuration
gave the same returns, episode by episode, for every scenario (it exits non-zero if not).
Wall times depend on the machine and its load (run it on an idle machine); the returns
do not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
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

    context = multiprocessing.get_context("fork")
    start = time.perf_counter()
    procs = [context.Process(target=run, kwargs={"episodes": episodes // 2}) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise SystemExit("a half-audit process failed")
    return time.perf_counter() - start


def returns_of(result: Any) -> dict[str, np.ndarray]:
    out = {"nominal": result.nominal.returns}
    out.update({r.name: r.returns for r in result})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray configuration")
    args = parser.parse_args()

    import gymnasium as gym
    from stable_baselines3 import SAC

    model = SAC("MlpPolicy", gym.make(args.env), seed=0, device="cpu")

    def run(episodes: int = args.episodes, **where: Any) -> Any:
        return audit(model, args.env, episodes=episodes, seed=0, reference="random", **where)

    configs: dict[str, dict[str, Any]] = {
        "local": {}, "workers=1": {"workers": 1}, "workers=2": {"workers": 2}}
    run()  # warm: imports, first env compilation
    times: dict[str, list[float]] = {name: [] for name in configs}
    times["2 halves"] = []
    results: dict[str, Any] = {}
    for _ in range(args.repeats):
        for name, where in configs.items():  # interleaved: load drifts hit all alike
            results[name], seconds = timed(lambda where=where: run(**where))
            times[name].append(seconds)
        times["2 halves"].append(halves(run, args.episodes))
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
        _, first = timed(lambda: run(backend="ray", workers=2))
        print(f"ray start-up: ray.init {init:.2f} s; first audit (starts 2 actors, ships the "
              f"agent) {first:.2f} s")
        times["ray"] = []
        for _ in range(args.repeats):
            results["ray"], seconds = timed(lambda: run(backend="ray", workers=2))
            times["ray"].append(seconds)
        ray.shutdown()

    base = statistics.median(times["local"])
    scenarios = len(list(results["local"])) + 1
    print(f"\n{args.env}, SAC MlpPolicy, default suite: {scenarios} scenarios x "
          f"{args.episodes} episodes (+ the random reference), median of {args.repeats}")
    print(f"{'configuration':<14} {'median s':>9} {'speed-up':>9}   all runs")
    for name, values in times.items():
        median = statistics.median(values)
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{name:<14} {median:>9.2f} {base / median:>8.2f}x   {runs}")
    if "ray" in times:
        ratio = statistics.median(times["ray"]) / statistics.median(times["workers=2"])
        print(f"ray / workers=2: {ratio:.2f}x the time (start-up apart, above)")
    share = statistics.median(times["2 halves"]) / statistics.median(times["workers=2"])
    print(f"workers=2 reaches {share:.0%} of the speed-up of 2 halves (two processes each "
          "auditing half the episodes, no messages: this machine's two-process ceiling now)")

    expected = returns_of(results["local"])
    same = True
    for name, result in results.items():
        got = returns_of(result)
        for scenario, values in expected.items():
            if not np.array_equal(values, got[scenario]):
                print(f"MISMATCH: {name} {scenario}: {got[scenario]} != {values}")
                same = False
    print("returns identical in every configuration, episode by episode: "
          f"{'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
