"""Which sensor a delay breaks a Walker2d agent through: ``attribute()`` on a zoo TQC.

    python benchmarks/bench_attribution.py                       # 30 episodes, seed 0, delay
    python benchmarks/bench_attribution.py --episodes 10 --repeats 3
    python benchmarks/bench_attribution.py --scenario obs_noise --method sampled
    python benchmarks/bench_attribution.py FOLDER --env Hopper-v5

The workload: the rl-baselines3-zoo's published TQC (sb3-contrib) on Walker2d, the zoo
folder ``tqc/Walker2d-v3_1`` of ``../shared/zoo-samples`` (``FOLDER`` gives another),
audited on today's ``Walker2d-v5`` (``--env``). It is a realistic case for the question
"which sensor": a trained agent of the zoo's own, a 17-element observation that the env
itself names (``observation_structure``: ``qpos``, 8 elements, and ``qvel``, 9), and a
failure that is not subtle (under a one-step observation delay it falls within about 10
steps in every episode). Nominal episodes last 1,000 steps, so they are most of the cost.

What is run (``--episodes`` paired episodes per run, default 30, ``--seed`` 0):

1. ``attribute(FOLDER, ENV, scenario, episodes=, seed=, method=)`` with the default
   groups (read from the env) and the default reference 0, ``--repeats`` times (default
   1). ``--scenario`` is the scenario's registry name (default ``delay``, one step);
   ``--method`` is ``auto`` (default), ``exact`` or ``sampled``.
2. Plain ``audit()`` calls on the same episodes, not timed (the result keeps ratios, not
   returns): the full scenario, then the scenario on each distinct part the ``only`` and
   ``all_but`` contrasts perturb (``OnPart``, the wrapper ``attribute()`` runs, with the
   full scenario's calibrated parameters; renamed, so with random draws of its own where
   the scenario draws any).
   Their returns, episode by episode against the nominal ones, give each contrast's
   effect delta (mean paired difference) and the standard deviation sigma of its paired
   differences, for the episode-count guidance below. For a scenario that draws nothing
   (``delay``) their ratios equal the attribution's.

Printed: the groups and where their names came from; the full scenario's ratio (the
scenario on the whole observation), 95% interval, p-value and rating; the ``only`` and
``all_but`` contrasts, each distinct run once (with two groups ``only qpos`` is
``all but qvel``: m = 2 runs, not 4; m = 2G from three groups on), with its interval
(Bonferroni level over the m runs) and Holm-adjusted p-value; the Shapley shares with
their bootstrap intervals (and their sum against ``1 - full ratio``, when the groups
cover the observation); the culprit groups, the culprits (refined to elements where fewer
do), the ratio with the culprits alone perturbed and whether fresh seeds confirmed them;
interactions (perturbing more was milder, or two groups' losses compound); notes (the
fresh seeds' ratio among them); the diagnosis line; the number of runs (each
``--episodes`` episodes, nominal's included); the wall time of ``attribute()``
(``time.perf_counter``, agent loading included; median of ``--repeats``). Then, per
distinct run, the plain ratio beside the attribution's, delta, sigma,
``8 (sigma/delta)^2`` (the paired episodes needed to tell delta from noise, two-sided 5%
or one-sided 2.5%, 80% power: ``(1.96 + 0.84)^2 = 7.8``) and the episodes needed at
Holm's strictest step over the m runs (one-sided ``alpha / m``), never fewer than
``log2(m / alpha)``, since the sign-flip test's p-value cannot go below ``2^-n``. Wall
times depend on the machine and its load; the numbers do not (same agent, seed and
episodes give the same returns).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from pytest_rlaudit import audit
from pytest_rlaudit.auditing.attribution import METHODS, attribute
from pytest_rlaudit.world.perturbations import OnPart
from pytest_rlaudit.world.scenarios import Scenario, get

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = ROOT.parent / "shared" / "zoo-samples" / "tqc" / "Walker2d-v3_1"


def interval(ci: tuple[float, float]) -> str:
    return f"{ci[0]:.3f} to {ci[1]:.3f}"


def contrast_line(label: str, c: Any) -> str:
    return (f"  {label:<24} ratio {c.ratio:6.3f}  ({interval(c.ci)})  p {c.p_value:<8.3g} "
            f"{c.rating}")


def episodes_needed(sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8,
                    one_sided: bool = False) -> float:
    """Paired episodes for a contrast of standard deviation ``sigma`` to detect ``delta``
    (normal approximation): ``((z_alpha + z_power) sigma / delta)^2``."""
    z = stats.norm.ppf(1 - alpha) if one_sided else stats.norm.ppf(1 - alpha / 2)
    return float(((z + stats.norm.ppf(power)) * sigma / delta) ** 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER,
                        help="a zoo experiment folder (default: ../shared/zoo-samples/"
                             "tqc/Walker2d-v3_1)")
    parser.add_argument("--env", default="Walker2d-v5", help="env id (default: Walker2d-v5)")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario", default="delay", help="scenario name (default: delay)")
    parser.add_argument("--method", choices=METHODS, default="auto")
    parser.add_argument("--repeats", type=int, default=1,
                        help="attribute() calls to time (median; default 1)")
    args = parser.parse_args()
    if not args.folder.is_dir():
        print(f"error: no zoo folder at {args.folder}", file=sys.stderr)
        return 2
    agent, env = str(args.folder.resolve()), args.env
    scenario = get(args.scenario)

    print(f"zoo folder {agent}")
    print(f"   on {env}, scenario {scenario!r}, {args.episodes} paired episodes per run, "
          f"seed {args.seed}, method {args.method!r}, reference 0")

    walls, results = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        results.append(attribute(agent, env, scenario, episodes=args.episodes, seed=args.seed,
                                 method=args.method))
        walls.append(time.perf_counter() - start)
    a = results[0]
    names = list(a.only)  # the groups the contrasts were run on
    # the distinct runs among only/all_but (two groups: only[a] is all_but[b]), as
    # attribute() counts its family; each with the labels it stands for
    family: dict[frozenset[str], list[str]] = {}
    for kind, label in (("only", "only"), ("all_but", "all but")):
        for g in names:
            family.setdefault(frozenset(getattr(a, kind)[g].groups), []).append(f"{label} {g}")
    contrasts = {c: (a.only[next(iter(c))] if len(c) == 1 else
                     a.all_but[next(g for g in names if g not in c)])
                 for c in family}
    m = a.family  # the family the intervals and p-values are adjusted over
    assert m == len(family), (m, len(family))

    print()
    print(f"groups ({a.groups.source}):")
    for g in names:
        part = a.groups.parts[g]
        print(f"  {g:<8} {a.groups.sizes[g]:2d} elements  {part[0]}..{part[-1]}")

    print()
    print(f"{a.agent} on {a.env}, {a.scenario}: {a.episodes} episodes, seed {a.seed}, "
          f"reference {a.reference:g}")
    print(f"full scenario (the whole observation; {a.confidence:.0%} interval, "
          "p unadjusted):")
    print(contrast_line(a.scenario, a.full))
    print(f"one group's perturbation only, and every group's but one ({m} distinct runs: "
          f"intervals at {1 - (1 - a.confidence) / m:.4f}, p Holm-adjusted over the {m}):")
    for c, labels in family.items():
        print(contrast_line(" = ".join(labels), contrasts[c]))
    print(f"Shapley shares of the ratio lost ({a.shapley_method}; {a.confidence:.0%} "
          "bootstrap intervals):")
    for g in names:
        s = a.shapley[g]
        print(f"  {g:<24} {s.value:6.3f}  ({interval(s.ci)})")
    total = sum(s.value for s in a.shapley.values())
    against = (f"1 - full ratio = {1 - a.full.ratio:.3f}" if a.groups.covers else
               "the groups leave elements out: they split the loss on every group, see notes")
    print(f"  {'sum':<24} {total:6.3f}  ({against})")
    print(f"culprit groups: {', '.join(a.culprit_groups) or 'none'}")
    kept = "" if a.culprits_ratio is None else f"; ratio with them alone {a.culprits_ratio:.3f}"
    fresh = f"episodes {a.episodes}-{2 * a.episodes - 1}"  # seeds seed + i
    confirmed = {True: f"confirmed on fresh seeds, {fresh}",
                 False: f"NOT confirmed on fresh seeds, {fresh}",
                 None: "nothing to confirm"}[a.confirmed]
    print(f"culprits: {', '.join(a.culprits) or 'none'}{kept} ({confirmed})")
    print("interactions:" + (" none" if not a.interactions else ""))
    for line in a.interactions:
        print(f"  {line}")
    print("notes:" + (" none" if not a.notes else ""))
    for line in a.notes:
        print(f"  {line}")
    print(f"diagnosis: {a.diagnosis}")
    print(f"runs: {a.runs} of {a.episodes} episodes each (nominal's included)")
    median = statistics.median(walls)
    print(f"wall time of attribute(): {median:.1f} s"
          + (f" (median of {args.repeats}; first call {walls[0]:.1f} s)" if args.repeats > 1
             else " (one call, agent loading and imports included)"))
    if args.repeats > 1:
        same = all(r.to_dict() == a.to_dict() for r in results)
        print(f"identical results across the {args.repeats} calls: {same}")

    # the episode-count guidance: sigma of each contrast's paired differences, from plain
    # audits of the same episodes (the result keeps ratios, not returns)
    print()
    full = audit(agent, env, scenarios=[scenario], episodes=args.episodes, seed=args.seed)
    nominal = np.asarray(full.nominal.returns, dtype=float)
    calibrated = full[scenario.name].params  # obs_noise's spread, set on these episodes
    labels = [" = ".join(v) for v in family.values()]
    on_part = [Scenario(f"{scenario.name}[{label}]", scenario.category, OnPart,
                        {"perturbation": scenario.perturbation, "params": dict(calibrated),
                         "part": a.groups.union(sorted(c))}, scenario.description)
               for label, c in zip(labels, family, strict=True)]
    split = audit(agent, env, scenarios=on_part, episodes=args.episodes, seed=args.seed)
    alpha = 1 - a.confidence
    floor = math.ceil(math.log2(m / alpha) - 1e-9)
    print(f"plain audits of the same episodes (nominal mean return {nominal.mean():.1f}; the "
          "scenario on a part renamed, so its own random draws, where it draws any):")
    print(f"  {'contrast':<26} {'ratio':>7} {'attribute':>9} {'delta':>8} {'sigma':>8}"
          f" {'8(s/d)^2':>9} {'Holm step 1':>11}")
    rows = [(scenario.name, full[scenario.name].returns, a.full.ratio)]
    for label, sc, c in zip(labels, on_part, family, strict=True):
        rows.append((label, split[sc.name].returns, contrasts[c].ratio))
    for label, returns, attributed in rows:
        diff = nominal - np.asarray(returns, dtype=float)
        delta, sigma = float(diff.mean()), float(diff.std(ddof=1))
        shown = float(np.mean(returns)) / float(nominal.mean())  # reference 0
        if delta > 0:
            rule = 8 * (sigma / delta) ** 2
            holm_n = episodes_needed(sigma, delta, alpha=alpha / m, one_sided=True)
            needs = f"{rule:9.1f} {max(math.ceil(holm_n), floor):11d}"
        else:
            needs = f"{'-':>9} {'-':>11}"
        print(f"  {label:<26} {shown:7.3f} {attributed:9.3f} {delta:8.1f} {sigma:8.1f} {needs}")
    print("  delta: mean paired difference nominal - perturbed; sigma: its standard deviation")
    print("  8(s/d)^2: episodes to tell delta from noise, 8 (sigma/delta)^2 (two-sided 5%, "
          "80% power)")
    print(f"  Holm step 1: the same at Holm's strictest step (one-sided {alpha / m:.4f} over "
          f"{m} distinct runs), and never fewer than {floor}: the sign-flip test's p-value is at "
          f"least 2^-n, so fewer episodes cannot reach {alpha / m:.4f} however large the "
          "effect")
    return 0


if __name__ == "__main__":
    sys.exit(main())
