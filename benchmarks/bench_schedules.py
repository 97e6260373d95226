"""How long a schedule property test takes to break the bundled PPO, and what it reports.

    python benchmarks/bench_schedules.py [--seeds 5]

Runs, each as a fresh ``pytest`` process from a cold start (imports, model load, nominal
episodes included), a property test over ``schedules()`` with ``min_ratio=0.8`` and 10
episodes on the bundled ``examples/ppo_cartpole.zip``:

1. with hypothesis seeds 0..N-1 (``--hypothesis-seed``, no example database): the wall
   time until pytest reports the failure, and the minimal falsifying schedule (target:
   under 60 s on a 2-core machine);
2. the same test under plain ``settings(deadline=None)``, whose *explain* phase traces
   shrinking with ``sys.settrace``, against ``audit_settings()`` (one seed);

then ``find_breaking_schedule`` in-process (its answer and time).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PPO = ROOT / "examples" / "ppo_cartpole.zip"

TEST = '''
from hypothesis import given, settings
from pytest_rlaudit import assert_robust
from pytest_rlaudit.strategies import audit_settings, schedules

SETTINGS = {settings}


@SETTINGS
@given(schedule=schedules(max_steps=100))
def test_ppo(schedule):
    assert_robust({ppo!r}, "CartPole-v1", schedule, min_ratio=0.8, episodes=10)
'''


def run(settings: str, seed: int) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_bench_schedule.py"
        path.write_text(TEST.format(settings=settings, ppo=str(PPO)))
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
             f"--hypothesis-seed={seed}", str(path)],
            cwd=tmp, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
    found = re.search(r"smallest failing schedule: (.*?) \(ratio [^)]*\): (Schedule\(.*\))$",
                      out.stdout, re.M)
    if out.returncode != 1 or not found:
        return seconds, f"(no failure found; exit {out.returncode})"
    return seconds, f"{found.group(2)}  [{found.group(1)}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()

    print("1. property test over schedules(), min_ratio=0.8, 10 episodes, audit_settings(max_examples=100)")
    times = []
    for seed in range(args.seeds):
        seconds, found = run("audit_settings(max_examples=100, database=None)", seed)
        times.append(seconds)
        print(f"   seed {seed}: {seconds:5.1f} s  {found}")
    print(f"   median {statistics.median(times):.1f} s, max {max(times):.1f} s (target < 60 s)")

    print("2. explain phase (plain settings(deadline=None)) against audit_settings(), seed 0")
    plain, found_plain = run("settings(deadline=None, max_examples=100, database=None)", 0)
    tuned, found_tuned = run("audit_settings(max_examples=100, database=None)", 0)
    print(f"   settings(deadline=None): {plain:5.1f} s  {found_plain}")
    print(f"   audit_settings():        {tuned:5.1f} s  {found_tuned}")
    print(f"   ratio {plain / tuned:.1f}x")

    print("3. find_breaking_schedule(PPO, 'CartPole-v1', schedules(), min_ratio=0.8, max_examples=100)")
    from pytest_rlaudit import as_policy, find_breaking_schedule
    from pytest_rlaudit.strategies import schedules

    agent = as_policy(str(PPO))
    start = time.perf_counter()
    worst = find_breaking_schedule(agent, "CartPole-v1", schedules(), min_ratio=0.8,
                                   max_examples=100)
    print(f"   {time.perf_counter() - start:.1f} s: {worst!r} - "
          f"{worst.describe() if worst else 'nothing breaks it'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
