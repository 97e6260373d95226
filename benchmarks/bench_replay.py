"""What open-loop replay costs: a checkpoint against a 100,000-step recording, batched,
beside the per-step ``model.predict`` loop other tools run.

    python benchmarks/bench_replay.py [--runs 3] [--episodes 200] [--loop-steps N]
        [--dataset DIR]

Why this workload. ``replay()`` (DESIGN.md section 22) calls the candidate on every
observation of a recording; a stateless policy sees the recording in a few large batches.
The bundled SB3 PPO on CartPole-v1 balances all 500 steps, so 200 recorded episodes are
100,000 steps, each one a torch forward pass when a tool calls ``predict`` one observation
at a time (what a per-step replay script does). Target: replay at least 50x the steps/s of
that loop.

What it does. Records 200 nominal episodes of ``examples/ppo_cartpole.zip`` with
``record()`` into a temporary folder (or uses ``--dataset``, made once by an earlier run
with ``--keep``), then times, ``--runs`` times each (median, with min and max):

1. ``replay(zip, folder)``: end to end, loading the policy and the dataset each time;
2. ``replay(policy, folder)``: the policy loaded once with ``as_policy`` (dataset loaded);
3. ``replay(policy, recording)``: both loaded once, the replay alone;
4. the per-step loop ``model.predict(obs, deterministic=True)`` over the same
   observations (the first ``--loop-steps`` of them, scaled to steps/s, if fewer than all);
5. ``replay`` of a second candidate, ``examples/robust_ppo_cartpole.zip`` (policy loaded
   once), whose actions differ from the recording's, so its divergence is positive.

Needs the ``[replay]`` extra (Minari). About 2 minutes at ``--runs 3`` on a laptop CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PPO = ROOT / "examples" / "ppo_cartpole.zip"
ROBUST = ROOT / "examples" / "robust_ppo_cartpole.zip"


def timed(fn, runs: int) -> tuple[float, float, float, object]:
    """Median, min and max seconds of ``runs`` calls of ``fn``, and its last result."""
    times, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times), out


def line(label: str, steps: int, t: tuple[float, float, float, object], note: str = "") -> float:
    med, lo, hi, _ = t
    rate = steps / med
    print(f"  {label:<44} {med:8.3f} s  [{lo:.3f}, {hi:.3f}]  {rate:>12,.0f} steps/s{note}")
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--loop-steps", type=int, default=None,
                        help="time the per-step loop on the first N steps only (default: all)")
    parser.add_argument("--dataset", default=None,
                        help="a recording made by an earlier run (--keep), reused as is")
    parser.add_argument("--keep", default=None, help="record into this folder and keep it")
    args = parser.parse_args()

    from stable_baselines3 import PPO as SB3PPO

    from pytest_rlaudit import as_policy, record, replay
    from pytest_rlaudit.world.recordings import load_recording

    tmp = tempfile.TemporaryDirectory()
    if args.dataset:
        folder = Path(args.dataset)
        made = "reused"
    else:
        folder = Path(args.keep) if args.keep else Path(tmp.name) / "ppo_cartpole"
        start = time.perf_counter()
        record(PPO, "CartPole-v1", folder, episodes=args.episodes, seed=0)
        made = f"recorded in {time.perf_counter() - start:.1f} s"
    recording = load_recording(folder)
    steps = recording.steps
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"recording: {folder} ({made}): {recording.episodes} episodes, {steps:,} steps, "
          f"{size / 1e6:.1f} MB on disk")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; medians of {args.runs} "
          "runs [min, max]")

    policy = as_policy(PPO)
    robust = as_policy(ROBUST)
    replay(policy, recording)  # warm: torch, the first batched forward pass
    print("open-loop replay (batched):")
    end_to_end = line("replay(zip, folder)  [loads policy + dataset]", steps,
                      timed(lambda: replay(PPO, folder), args.runs))
    line("replay(policy, folder)  [loads dataset]", steps,
         timed(lambda: replay(policy, folder), args.runs))
    t_alone = timed(lambda: replay(policy, recording), args.runs)
    alone = line("replay(policy, recording)  [replay alone]", steps, t_alone)
    t_robust = timed(lambda: replay(robust, recording), args.runs)
    line("replay(robust policy, recording)", steps, t_robust)

    model = SB3PPO.load(PPO, device="cpu")
    obs = recording.observations
    n = min(args.loop_steps or steps, steps)

    def loop() -> None:
        for i in range(n):
            model.predict(obs[i], deterministic=True)

    loop_t = timed(loop, args.runs)
    print("per-step loop, model.predict(obs, deterministic=True) one observation a call:")
    scaled = f"  (timed on the first {n:,} steps, scaled)" if n < steps else ""
    per_step = line(f"{n:,} predict calls", n, loop_t, scaled)
    if n < steps:
        print(f"  {'estimated for all ' + f'{steps:,} steps':<44} {loop_t[0] * steps / n:8.3f} s")

    print("ratios (steps/s of replay over the per-step loop):")
    print(f"  replay alone       {alone / per_step:8.1f}x   (target >= 50x)")
    print(f"  replay end to end  {end_to_end / per_step:8.1f}x")

    same, other = t_alone[3], t_robust[3]
    print("what was measured:")
    print(f"  ppo_cartpole.zip (the recorded agent): divergence {same.divergence.value:.4f}, "
          f"disagreement {same.disagreement.value:.2%}")
    print(f"  robust_ppo_cartpole.zip: divergence {other.divergence.value:.4f} "
          f"[{other.divergence.low:.4f}, {other.divergence.high:.4f}], disagreement "
          f"{other.disagreement.value:.2%}")
    print(f"  ReplayResult.seconds of the replay alone: {same.seconds:.3f} s")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
