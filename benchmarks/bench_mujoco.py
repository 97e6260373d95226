"""Audit a MuJoCo agent: what the default suite, the MuJoCo stress scenarios and the
severity presets say about it, and (when ``pytest_rlaudit.tolerance`` exists) its
tolerance curves and those of the bundled CartPole agents.

    python benchmarks/train_mujoco.py                 # writes /tmp/mujoco_agent.zip
    python benchmarks/bench_mujoco.py                 # audits it on InvertedPendulum-v5
    python benchmarks/bench_mujoco.py --agent /tmp/hopper/agent.zip --env Hopper-v5
    python benchmarks/bench_mujoco.py --no-tolerance  # the audits only

What is run (``--episodes`` paired episodes per scenario, default 20, ``--seed`` 0,
``reference="random"``; each an ordinary ``pytest_rlaudit.audit`` call):

1. the main audit: the default suite (jitter, delay, spike, obs_noise, speed_5x), plus
   ``dynamics`` (the MuJoCo default shift: body masses and inertias x1.3, friction x0.8),
   ``push`` (half the robot's weight for 5 env steps every 50), ``adversarial_obs``
   (PGD within 0.1 x each element's nominal spread) and ``obs_noise_raw`` (obs_noise in
   raw units, ``scale="absolute"``, sigma 0.1, for comparison with the calibrated one);
2. ``scenarios.preset("moderate")`` and ``scenarios.preset("severe")``, one audit each
   ("mild" is the default suite of 1);
3. tolerance curves (default ladders): obs_noise sigma and push strength on this agent;
   obs_noise sigma, delay steps and jitter on ``examples/ppo_cartpole.zip`` and
   ``examples/robust_ppo_cartpole.zip`` (``--cartpole-episodes``, default 30, reference 0
   as in the README's CartPole figures).

Printed: each audit's table (``str(result)``), the per-element spread obs_noise was
calibrated with, wall times (``time.perf_counter`` around each call, agent loading
included), and Markdown tables for the README (scenario, ratio, 95% CI, rating; the
presets side by side). Wall times depend on the machine and its load; the numbers do not
(same agent, seed and episodes give the same returns).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import pytest_rlaudit
from pytest_rlaudit import audit, scenarios

ROOT = Path(__file__).resolve().parent.parent
CARTPOLE_AGENTS = (ROOT / "examples" / "ppo_cartpole.zip",
                   ROOT / "examples" / "robust_ppo_cartpole.zip")
EXTRA = ("dynamics", "push", "adversarial_obs")


def obs_noise_raw() -> scenarios.Scenario:
    """obs_noise in raw units (sigma 0.1), under another name so it runs next to the
    calibrated one in one audit."""
    s = scenarios.get("obs_noise")
    return scenarios.Scenario("obs_noise_raw", "deployment", s.perturbation,
                              dict(s.with_params(scale="absolute").params))


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def spread_text(result: Any) -> str:
    spread = result["obs_noise"].params.get("spread")
    if spread is None:
        return "obs_noise spread: not reported"
    values = np.asarray(spread, dtype=float)
    return ("obs_noise calibrated spread (std of each observation element over the nominal "
            f"episodes): {np.array2string(values, precision=4, max_line_width=88)}")


def markdown(result: Any) -> str:
    lines = ["| scenario | ratio | 95% CI | rating |", "|---|---|---|---|"]
    for r in result:
        lines.append(f"| `{r.name}` | {r.ratio:.3f} | {r.ci[0]:.3f} to {r.ci[1]:.3f} "
                     f"| {r.rating} |")
    return "\n".join(lines)


def preset_markdown(levels: dict[str, Any]) -> str:
    names = list(levels)
    lines = ["| scenario | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for scenario in scenarios.DEFAULT:
        cells = []
        for level in names:
            r = levels[level][scenario]
            cells.append(f"{r.ratio:.3f} ({r.ci[0]:.2f} to {r.ci[1]:.2f}) {r.rating}")
        lines.append(f"| `{scenario}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(title: str) -> None:
    print()
    print(f"== {title}")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=Path, default=Path("/tmp/mujoco_agent.zip"),
                        help="SB3 .zip to audit (default: /tmp/mujoco_agent.zip)")
    parser.add_argument("--env", default="InvertedPendulum-v5",
                        help="env id (default: InvertedPendulum-v5)")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cartpole-episodes", type=int, default=30)
    parser.add_argument("--no-tolerance", action="store_true",
                        help="skip the tolerance curves")
    parser.add_argument("--no-cartpole", action="store_true",
                        help="skip the CartPole agents' tolerance curves")
    args = parser.parse_args()
    if not args.agent.exists():
        print(f"error: no agent at {args.agent}; train one with "
              "python benchmarks/train_mujoco.py", file=sys.stderr)
        return 2
    agent, env = str(args.agent), args.env
    common = {"episodes": args.episodes, "seed": args.seed, "reference": "random"}
    walls: list[tuple[str, float]] = []

    section(f"1. default suite + {', '.join(EXTRA)}, obs_noise_raw")
    main_suite = [*scenarios.DEFAULT, *EXTRA, obs_noise_raw()]
    result, seconds = timed(audit, agent, env, scenarios=main_suite, **common)
    walls.append(("main audit (10 scenarios + nominal + random reference)", seconds))
    print(result)
    print()
    print(spread_text(result))
    print(f"wall time: {seconds:.1f} s")

    levels: dict[str, Any] = {"mild": result}
    for level in ("moderate", "severe"):
        section(f"2. preset {level!r}")
        levels[level], seconds = timed(audit, agent, env, scenarios=scenarios.preset(level),
                                       **common)
        walls.append((f"preset {level}", seconds))
        print(levels[level])
        print()
        print(spread_text(levels[level]))
        print(f"wall time: {seconds:.1f} s")

    section("Markdown: main audit")
    print(f"{result.agent} on {env}, {args.episodes} paired episodes per scenario, seed "
          f"{args.seed}, reference random ({result.reference:.1f}); nominal mean return "
          f"{result.nominal.mean_return:.1f}")
    print()
    print(markdown(result))
    section("Markdown: severity presets (ratio, 95% CI, rating)")
    print(preset_markdown(levels))

    tolerance = getattr(pytest_rlaudit, "tolerance", None)
    if args.no_tolerance:
        pass
    elif tolerance is None:
        section("3. tolerance curves: skipped, pytest_rlaudit.tolerance does not exist here")
    else:
        section("3. tolerance curves")
        runs = [(agent, env, name, common) for name in ("obs_noise", "push")]
        if not args.no_cartpole:
            cartpole = {"episodes": args.cartpole_episodes, "seed": args.seed}
            runs += [(str(path), "CartPole-v1", name, cartpole)
                     for path in CARTPOLE_AGENTS for name in ("obs_noise", "delay", "jitter")]
        for who, where, name, kwargs in runs:
            curve, seconds = timed(tolerance, who, where, name, **kwargs)
            walls.append((f"tolerance {name} {Path(who).name} on {where}", seconds))
            print(curve)
            print(f"  wall time: {seconds:.1f} s")
            print()

    section("wall times")
    for label, seconds in walls:
        print(f"{seconds:7.1f} s  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
