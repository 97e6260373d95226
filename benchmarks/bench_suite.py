"""The project's own test suite at two commits, run back to back, interleaved.

Why this workload. The budget for the suite is a wall time on a 2-core machine, and this
machine's speed varies by up to 2x from hour to hour (the same code took 250 s and 281 s
within one hour, and 162 s on the day the budget was set). A single timing says as much
about the hour as about the code. Running two commits in alternation, in the same hour,
gives a ratio that does not depend on the hour; multiplied by a time measured for the base
at another hour, it says what the head would have taken then.

What it does. For each commit it makes a detached ``git worktree`` in a temporary folder,
then runs the README's test command there (``python -m pytest -n auto``, with ``-q -p
no:cacheprovider``) ``--rounds`` times, alternating base and head and swapping which goes
first each round. ``PYTHONPATH`` points at the worktree, so its own ``pytest_rlaudit`` is
imported ahead of the editable install. Each run's wall time, its CPU time (user + sys of
the run and every process it waited for) and its pytest summary line are printed, then
per commit the median and spread, and the ratio head / base of the medians (and the
ratio of every round's pair). With ``--base-seconds S``, the head's expected time at the
hour the base took ``S`` seconds is printed too.

Run (from the repository root; each round is two whole suites, about 8 minutes here)::

    python benchmarks/bench_suite.py --base 89858fd --rounds 2 --base-seconds 162
    python benchmarks/bench_suite.py --base HEAD~1 --head HEAD --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = [sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite(tree: Path) -> tuple[float, float, str, int]:
    """(wall s, CPU s, pytest's summary line, exit code) of one suite in ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(COMMAND, cwd=tree, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    lines = [ln for ln in done.stdout.splitlines() if re.search(r" in [\d.]+s", ln)]
    return wall, cpu, (lines[-1].strip("= ") if lines else "no summary"), done.returncode


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):6.1f} s  (min {min(values):.1f}, max {max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the commit to compare against")
    ap.add_argument("--head", default="HEAD")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--base-seconds", type=float, default=None,
                    help="the base's time at another hour, to scale the head's by the ratio")
    args = ap.parse_args(argv)
    repo = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                               text=True, check=True).stdout.strip())
    commits = {name: subprocess.run(["git", "rev-parse", "--short", rev], cwd=repo, check=True,
                                    capture_output=True, text=True).stdout.strip()
               for name, rev in (("base", args.base), ("head", args.head))}
    walls: dict[str, list[float]] = {"base": [], "head": []}
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        trees = {name: Path(tmp) / name for name in commits}
        try:
            for name, commit in commits.items():
                subprocess.run(["git", "worktree", "add", "-q", "--detach", str(trees[name]),
                                commit], cwd=repo, check=True)
            print(f"base {commits['base']}, head {commits['head']}; command: "
                  f"{' '.join(['python', *COMMAND[1:]])}")
            for r in range(args.rounds):
                for name in (("base", "head") if r % 2 == 0 else ("head", "base")):
                    wall, cpu, summary, code = run_suite(trees[name])
                    walls[name].append(wall)
                    failed |= code != 0
                    print(f"round {r + 1} {name}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, "
                          f"exit {code}: {summary}", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo,
                               capture_output=True)
    print()
    for name in walls:
        print(f"{name} {commits[name]}: {_spread(walls[name])}")
    ratio = statistics.median(walls["head"]) / statistics.median(walls["base"])
    pairs = ", ".join(f"{h / b:.3f}" for h, b in zip(walls["head"], walls["base"], strict=True))
    print(f"head / base: {ratio:.3f} (of the medians; round by round: {pairs})")
    if args.base_seconds:
        print(f"the head at the hour the base took {args.base_seconds:.0f} s: "
              f"{ratio * args.base_seconds:.0f} s")
    if failed:
        print("WARNING: a run failed: its time is not a suite's time")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
