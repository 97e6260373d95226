"""Zero-config audit under pytest-xdist: ``-n 0`` against ``-n 2`` (and more).

Runs, in an empty directory, the zero-config audit of the bundled PPO (the default suite,
``--episodes`` episodes) as a user would::

    pytest --rl-audit --rl-agent examples/ppo_cartpole.zip --rl-env CartPole-v1 -n N

for each N, ``--repeats`` times, alternating, and prints median wall times of the whole
pytest run (start-up included) and the speed-up over ``-n 0``. Target on a 2-core
machine: at least 1.7x at ``-n 2``.

    python benchmarks/bench_xdist.py [--episodes 30] [--repeats 3] [--workers 0 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.7


def _run(workers: int, episodes: int, cwd: Path) -> float:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
           "--rl-audit", "--rl-agent", str(ROOT / "examples" / "ppo_cartpole.zip"),
           "--rl-env", "CartPole-v1", "--rl-episodes", str(episodes), "-n", str(workers)]
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if " passed" not in out.stdout and " failed" not in out.stdout:
        raise SystemExit(f"unexpected pytest output:\n{out.stdout}\n{out.stderr}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = parser.parse_args(argv)
    times: dict[int, list[float]] = {n: [] for n in args.workers}
    with tempfile.TemporaryDirectory() as tmp:  # no test files: zero-config items only
        for i in range(args.repeats):
            order = args.workers if i % 2 == 0 else args.workers[::-1]
            for n in order:
                times[n].append(_run(n, args.episodes, Path(tmp)))
    base = statistics.median(times[args.workers[0]])
    print(f"zero-config audit of examples/ppo_cartpole.zip on CartPole-v1, default suite, "
          f"{args.episodes} episodes, {args.repeats} runs each (wall time of the whole pytest "
          "run, start-up included)")
    for n, t in times.items():
        med = statistics.median(t)
        print(f"-n {n:<3} median {med:6.2f} s   min {min(t):6.2f} s   speed-up {base / med:5.2f}x")
    if 2 in times and args.workers[0] == 0:
        speedup = base / statistics.median(times[2])
        print(f"target: -n 2 at least {TARGET}x faster than -n 0: {speedup:.2f}x "
              f"{'PASS' if speedup >= TARGET else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
