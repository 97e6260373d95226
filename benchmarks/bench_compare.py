"""What saving and comparing baselines cost, and what the trust checks cost.

    python benchmarks/bench_compare.py [--runs 3] [--episodes 30]

1. The zero-config audit of ``examples/ppo_cartpole.zip`` (default suite) as a fresh
   pytest process: plain, with ``--rl-save``, and with ``--rl-compare`` plus two
   ``--rl-compare-fail`` tolerances; medians of ``--runs``; the baseline's size.
2. In-process: ``compare_records`` alone (that baseline against its returns x 0.9), and
   ``assert_deterministic`` / ``assert_no_policy_collapse`` / ``assert_no_regression`` on
   the bundled PPO.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PPO = ROOT / "examples" / "ppo_cartpole.zip"
ROBUST = ROOT / "examples" / "robust_ppo_cartpole.zip"


def pytest_run(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                   cwd=cwd, capture_output=True, check=False)
    return time.perf_counter() - start


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        base = ["--rl-audit", "--rl-agent", str(PPO), "--rl-env", "CartPole-v1",
                "--rl-episodes", str(args.episodes)]
        saved = cwd / "baseline.json"
        pytest_run([*base, f"--rl-save={saved}"], cwd)
        variants = {
            "plain": base,
            "--rl-save": [*base, f"--rl-save={cwd / 'again.json'}"],
            "--rl-compare": [*base, f"--rl-compare={saved}", "--rl-compare-fail", "return:5%",
                             "--rl-compare-fail", "ratio:0.05"],
        }
        medians = {name: statistics.median(pytest_run(v, cwd) for _ in range(args.runs))
                   for name, v in variants.items()}
        print(f"1. zero-config audit of the bundled PPO, {args.episodes} episodes, "
              f"medians of {args.runs} pytest processes")
        for name, seconds in medians.items():
            print(f"   {name:13} {seconds:6.2f} s  ({seconds - medians['plain']:+.2f} s)")
        print(f"   baseline size: {saved.stat().st_size / 1024:.1f} KiB for "
              f"{len(json.loads(saved.read_text())['results'])} results")

        from pytest_rlaudit import (
            as_policy,
            assert_deterministic,
            assert_no_policy_collapse,
            assert_no_regression,
        )
        from pytest_rlaudit.auditing.baselines import load_baseline
        from pytest_rlaudit.auditing.comparison import compare_records

        doc = load_baseline(saved)
        # a changed run, so that every test and bootstrap really runs
        changed = [{**r, "returns": [x * 0.9 for x in r["returns"]]} for r in doc["results"]]
        print("2. in-process, medians")
        print(f"   compare_records, that baseline against returns x 0.9: "
              f"{timed(lambda: compare_records(doc['results'], changed), args.runs):.3f} s")
        ppo = as_policy(str(PPO))
        print(f"   assert_deterministic(PPO, episodes=5): "
              f"{timed(lambda: assert_deterministic(ppo, 'CartPole-v1'), args.runs):.2f} s")
        print(f"   assert_no_policy_collapse(PPO, episodes=5): "
              f"{timed(lambda: assert_no_policy_collapse(ppo, 'CartPole-v1'), args.runs):.2f} s")
        robust = as_policy(str(ROBUST))
        print(f"   assert_no_regression(robust PPO, PPO, default suite, 30 episodes): "
              f"{timed(lambda: assert_no_regression(robust, ppo, 'CartPole-v1'), args.runs):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
