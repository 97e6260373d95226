"""What a fresh process pays before its first action: importing the API, loading an agent.

Why this workload. Every process of an audit starts cold: ``pytest --rl-audit
--rl-agent=model.zip`` loads the agent in the controller and again in each xdist worker,
and every test file's ``from pytest_rlaudit import assert_robust`` is imported at
collection by every worker, also in runs whose audits are skipped. The agents are the ones
users bring: the bundled PPO on CartPole (a plain ``.zip``) and the rl-baselines3-zoo's
A2C on Pendulum (a zoo folder with VecNormalize statistics and the zoo's RMSpropTFLike
optimizer in its config), both loaded the default way (weights only).

What it does. Each case is a ``python -c`` subprocess whose CPU time (user + sys of the
child, from ``resource.getrusage``) is taken; the cases run round-robin, ``--runs`` times,
each once untimed first so imports come from ``.pyc`` files. With ``--base REV`` the same
cases run at that commit too (a detached ``git worktree``, ``PYTHONPATH`` pointing at it),
interleaved with the work tree's, and the ratio work tree / base of the medians is printed.
Cases:

    import      from pytest_rlaudit import assert_robust, audit
    ppo zip     as_policy(<bundled PPO>.zip, env="CartPole-v1") and one action
    a2c zoo     as_policy(<zoo A2C folder>, env="Pendulum-v1") and one action

Run (from the repository root; about 2 minutes at ``--runs 7``)::

    python benchmarks/bench_load.py --base 75d5ae0 --runs 7
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ACT = "import numpy as np\npolicy.act(np.zeros((1, {}), np.float32), None)\n"  # one observation
CASES = {
    "import": "from pytest_rlaudit import assert_robust, audit\n",
    "ppo zip": ("from pytest_rlaudit import as_policy\n"
                f"policy = as_policy({str(REPO / 'examples' / 'ppo_cartpole.zip')!r}, "
                "env='CartPole-v1')\n" + ACT.format(4)),
    "a2c zoo": ("from pytest_rlaudit import as_policy\n"
                f"policy = as_policy({str(REPO / 'tests' / 'data' / 'zoo' / 'a2c' / 'Pendulum-v1_1')!r}, "
                "env='Pendulum-v1')\n" + ACT.format(3)),
}


def cpu_seconds(code: str, tree: Path) -> float:
    """CPU seconds (user + sys) of one ``python -c code`` with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tree,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--base", help="a commit to compare the work tree with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"work tree": REPO}
        if args.base:
            trees[f"base {args.base}"] = Path(tmp) / "base"
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(trees[f"base {args.base}"]),
                            args.base], cwd=REPO, check=True)
        try:
            times: dict[tuple[str, str], list[float]] = {}
            for tree in trees.values():  # untimed: compile what the run will import
                for code in CASES.values():
                    cpu_seconds(code, tree)
            for run in range(args.runs):
                order = [(t, c) for c in CASES for t in trees]
                shift = run % len(order)
                for tree_name, case in order[shift:] + order[:shift]:
                    times.setdefault((tree_name, case), []).append(
                        cpu_seconds(CASES[case], trees[tree_name]))
        finally:
            if args.base:
                subprocess.run(["git", "worktree", "remove", "--force",
                                str(trees[f"base {args.base}"])], cwd=REPO, check=True)
    print(f"CPU seconds of a fresh process, medians of {args.runs} (min-max)")
    for case in CASES:
        cells = []
        for tree_name in trees:
            got = times[(tree_name, case)]
            cells.append(f"{tree_name}: {statistics.median(got):.2f} ({min(got):.2f}-{max(got):.2f})")
        line = f"{case:8s}  " + "   ".join(cells)
        if args.base:
            work, base = (statistics.median(times[(t, case)]) for t in trees)
            line += f"   ratio {work / base:.2f}"
        print(line)


if __name__ == "__main__":
    main()
