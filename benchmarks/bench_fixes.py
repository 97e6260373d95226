"""Do the fixes an audit prints raise the failing ratios? Train under them and audit again.

    nice -n 10 python benchmarks/bench_fixes.py [--timesteps 500000] [--seed 0]
        [--episodes 30] [--wrapper]

Why this workload: the bundled fragile agent (``examples/ppo_cartpole.zip``) is the
one every failing example audit shows, and ``examples/train_cartpole.py`` is the recipe
that made it, so retraining that recipe under what its audit prints is the closest test
of the advice a user gets. The steps:

1. audit the fragile agent (``episodes`` paired episodes, seed 0, the default suite) and
   build the line the reports print from its numbers: the scenarios rated FAIL or
   DEGRADED that a name reproduces, weighted by
   :func:`pytest_rlaudit.auditing.fixes.mix_weights` (the nominal mean episode
   length over each scenario's, in env steps);
2. train the recipe (same PPO settings, seed, ``timesteps``) under (a) that line,
   (b) the same ScenarioMix with uniform weights (what the reports printed before) and,
   with ``--wrapper``, (c) the plain wrapper both diagnoses name, a randomised control
   period (``Jitter(env, base=3, jitter=3)``, the recipe's ``--robust``);
3. audit each trained agent the same way and print, per failing scenario, the ratio
   before and after, its interval and rating, with the training seconds.

One seed of one recipe: a training run's outcome varies with its seed, so a rise seen
here is evidence for that rule on that recipe, not a guarantee elsewhere (the reports
mark lines for other envs or scenarios as untested suggestions). Single-threaded torch;
run it under ``nice`` on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import train_cartpole as recipe  # noqa: E402  (the bundled recipe: its PPO settings)

from pytest_rlaudit import audit  # noqa: E402
from pytest_rlaudit.auditing.fixes import mix_line, mix_mark, mix_weights  # noqa: E402
from pytest_rlaudit.world.mix import mixable_by_name  # noqa: E402

FRAGILE = ROOT / "examples" / "ppo_cartpole.zip"
BROKE = ("FAIL", "DEGRADED")


def audited(path: Path, episodes: int) -> object:
    """The default audit of ``path`` on CartPole-v1, seed 0."""
    return audit(str(path), recipe.ENV_ID, episodes=episodes, seed=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=recipe.MIX_TIMESTEPS,
                        help=f"agent steps per training run (default {recipe.MIX_TIMESTEPS})")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument("--episodes", type=int, default=30,
                        help="paired episodes per scenario in each audit (default 30)")
    parser.add_argument("--wrapper", action="store_true",
                        help="also train under the plain wrapper, Jitter(base=3, jitter=3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("command: nice -n 10 python benchmarks/bench_fixes.py " + " ".join(
        sys.argv[1:] if argv is None else argv), flush=True)

    before = audited(FRAGILE, args.episodes)
    nominal_steps = float(np.mean(before.nominal.env_steps))
    failing = [r for r in before.scenarios.values()
               if r.rating in BROKE and mixable_by_name(r.name, r.params)]
    if not failing:
        print("nothing broke the fragile agent: no fix to test")
        return 1
    names = [r.name for r in failing]
    weights = mix_weights(nominal_steps, [float(np.mean(r.env_steps)) for r in failing])
    print(f"fragile agent: nominal mean {nominal_steps:.1f} env steps; "
          + ", ".join(f"{r.name} ratio {r.ratio:.3f} ({r.rating}), mean "
                      f"{np.mean(r.env_steps):.1f} env steps" for r in failing))
    print(f"printed line: {mix_line(recipe.ENV_ID, names, weights)} "
          f"({mix_mark(recipe.ENV_ID, names, weights)})", flush=True)

    arms: list[tuple[str, dict[str, object]]] = [
        (f"(a) ScenarioMix weights={weights}",
         {"mix": True, "scenarios": ["nominal", *names], "weights": weights}),
        ("(b) ScenarioMix uniform",
         {"mix": True, "scenarios": ["nominal", *names], "weights": None}),
    ]
    if args.wrapper:
        arms.append(("(c) Jitter(base=3, jitter=3)", {"robust": True}))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, how in arms:
            start = time.perf_counter()
            model = recipe.train(args.seed, args.timesteps, **how)  # type: ignore[arg-type]
            seconds = time.perf_counter() - start
            out = Path(tmp) / "agent.zip"
            model.save(out, exclude=recipe.EXCLUDE_FROM_SAVE)
            after = audited(out, args.episodes)
            results.append((label, seconds, after))
            print(f"{label}: trained {args.timesteps} steps, seed {args.seed}, in "
                  f"{seconds:.0f}s; nominal mean return {after.nominal.mean_return:.1f}; "
                  + ", ".join(f"{n} {after[n].ratio:.3f} ({after[n].rating})" for n in names),
                  flush=True)

    print()
    print(f"before/after ratios ({args.episodes} paired episodes, audit seed 0; training "
          f"seed {args.seed}, {args.timesteps} agent steps):")
    header = ["scenario", "fragile"] + [label for label, _, _ in results]
    rows = [header, ["nominal return", f"{before.nominal.mean_return:.1f}"]
            + [f"{a.nominal.mean_return:.1f}" for _, _, a in results]]
    for n in names:
        rows.append([n, f"{before[n].ratio:.3f} {before[n].rating}"]
                    + [f"{a[n].ratio:.3f} ({a[n].ci[0]:.3f} to {a[n].ci[1]:.3f}) {a[n].rating}"
                       for _, _, a in results])
    rows.append(["training s", "-"] + [f"{s:.0f}" for _, s, _ in results])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    # raised: out of its failing rating, with the interval's low end above the ratio
    # before (a point estimate a little higher is noise: uniform weights do that). A ratio
    # is of the agent's own nominal return, so the nominal return must stay within 5%.
    order = ("FAIL", "DEGRADED", "MILD", "PASS")
    for label, _, a in results:
        raised = [n for n in names if a[n].ci[0] > before[n].ratio
                  and order.index(a[n].rating) > order.index(before[n].rating)]
        kept = a.nominal.mean_return >= 0.95 * before.nominal.mean_return
        verdict = "raised every failing ratio" if len(raised) == len(names) and kept else (
            f"did not raise them (raised: {', '.join(raised) or 'none'}; nominal return "
            f"{'kept' if kept else 'not kept'})")
        print(f"{label}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
