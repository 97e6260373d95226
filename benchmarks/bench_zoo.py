"""An rl-baselines3-zoo experiment folder audited end to end, beside the zoo's own evaluations.

    python benchmarks/bench_zoo.py [FOLDER] [--env ENV_ID] [--episodes 20] [--seed 0]
                                   [--scenarios delay,spike] [--reference random] [--runs 1]

``FOLDER`` (default ``tests/data/zoo/ppo/CartPole-v1_1``) is a zoo experiment folder
(``<algo>/<Env>_<n>/`` holding ``<Env>.zip``, ``<Env>/args.yml``, ``<Env>/config.yml``,
maybe ``<Env>/vecnormalize.pkl``, and ``evaluations.npz``). ``--env`` is today's Gymnasium
id, by default the ``env`` key of ``<Env>/args.yml`` (give it when the id has changed since
training, e.g. ``--env LunarLander-v3`` for a ``LunarLander-v2`` folder).

1. ``audit(FOLDER, ENV, scenarios, episodes, seed, reference)``: the folder as the agent, so
   the library applies its VecNormalize statistics, frame stack, env wrappers and env_kwargs.
   Printed: its table, the wall time of the whole call (model loading included; median of
   ``--runs`` calls, which must all give the same returns) and ``result.seconds`` (the
   rollouts alone). ``--reference`` defaults to ``random`` (the uniform random policy's mean
   return on the same seeds), not audit()'s default 0, since a ratio measured from 0 means
   nothing when returns are negative (Pendulum); a number can be given instead.
2. The audit's nominal returns (episode i reset with seed + i) against ``evaluations.npz``,
   the zoo's periodic evaluations during training: the last evaluation's mean +- std and the
   best evaluation's mean, beside the audit's nominal mean +- std and a 95% interval of that
   mean (Student t, and a percentile bootstrap); and whether the audit's nominal mean lies
   within the last evaluation's mean +- std. Stds are population stds (``np.std``), as the
   zoo prints them. The zoo evaluated with other seeds and, for a VecNormalize agent, with
   the statistics of that moment, so agreement is a matter of spread, not of digits.
3. An independent plain loop, no pytest_rlaudit rollout code: the model loaded with
   ``load_sb3(<Env>.zip)``, the statistics with ``load_vec_normalize`` if the folder has
   ``<Env>/vecnormalize.pkl``; for episode i ``gym.make(ENV, **env_kwargs).reset(seed=seed + i)``
   then ``model.predict(obs[None], deterministic=True)`` (observations normalised first) until
   terminated or truncated. The absolute difference per episode from the audit's nominal
   returns is printed; it should be float rounding: the network runs in float32, and
   audit() calls it on at least 16 rows (``MIN_TORCH_ROWS``, padded for batch invariance)
   while the loop calls it on one, so continuous actions can differ in the last bit (about
   1e-7, returns by a few 1e-6), and a discrete argmax can flip where two Q-values tie to
   float32 precision. An episode off by more than 1e-4 is replayed with the observation
   repeated to 16 rows: if that reproduces the audit's return, the difference is such a
   rounding flip (the step where it happens is printed). The loop does not apply a frame
   stack or env wrappers; a folder that uses them is flagged.

Exit code 0 whatever the figures, 1 if an episode differs by more than 1e-4 and the 16-row
replay does not reproduce the audit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from scipy import stats

from pytest_rlaudit import audit
from pytest_rlaudit.world.agents.preprocess import load_vec_normalize
from pytest_rlaudit.world.agents.sb3_load import load_sb3
from pytest_rlaudit.world.agents.torch import MIN_TORCH_ROWS
from pytest_rlaudit.world.agents.zoo import read_yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = ROOT / "tests" / "data" / "zoo" / "ppo" / "CartPole-v1_1"
TOLERANCE = 1e-4  # float32 policy, batched vs one-row calls


def zoo_layout(folder: Path) -> tuple[Path, Path]:
    """The model zip and the ``<Env>/`` config folder of a zoo experiment folder."""
    configs = [d for d in folder.iterdir()
               if d.is_dir() and (folder / f"{d.name}.zip").is_file()]
    if len(configs) != 1:
        raise SystemExit(f"{folder} is not a zoo experiment folder (want one <Env>/ folder "
                         f"with <Env>.zip beside it, found {[d.name for d in configs]})")
    return folder / f"{configs[0].name}.zip", configs[0]


def parse_scenarios(text: str | None) -> list[str] | None:
    if text is None:
        return None  # the default suite
    names = [s.strip() for s in text.split(",") if s.strip()]
    return [s for s in names if s != "nominal"]


def parse_reference(text: str) -> float | str:
    return text if text == "random" else float(text)


def t_interval(x: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    mean = float(np.mean(x))
    sem = float(np.std(x, ddof=1)) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1)) * sem
    return mean - half, mean + half


def bootstrap_interval(x: np.ndarray, seed: int, level: float = 0.95) -> tuple[float, float]:
    if np.ptp(x) == 0:  # every episode alike: the interval is the point
        return float(x[0]), float(x[0])
    res = stats.bootstrap((x,), np.mean, confidence_level=level, method="percentile",
                          n_resamples=9999, random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


class PlainLoop:
    """The model and statistics loaded once; episodes run one at a time with ``gym.make``."""

    def __init__(self, model_zip: Path, stats_file: Path | None, env_id: str,
                 env_kwargs: dict[str, Any]) -> None:
        probe = gym.make(env_id, **env_kwargs)
        spaces = (probe.observation_space, probe.action_space)
        probe.close()
        self.model = load_sb3(model_zip, spaces_of_env=lambda: spaces)
        self.vn = load_vec_normalize(stats_file) if stats_file is not None else None
        self.env_id, self.env_kwargs = env_id, env_kwargs

    def action(self, obs: np.ndarray, rows: int = 1) -> Any:
        """``predict`` on the observation repeated to ``rows`` rows (1: the plain call)."""
        batch = np.repeat(obs[None], rows, axis=0)
        if self.vn is not None:
            batch = self.vn.normalize_obs(batch)
        action, _ = self.model.predict(batch, deterministic=True)
        return action[0]

    def episode(self, reset_seed: int, rows: int = 1) -> tuple[float, int | None]:
        """The return of one episode and, with ``rows`` > 1, the first step whose action on
        ``rows`` rows differs from the one-row action (None if none does)."""
        env = gym.make(self.env_id, **self.env_kwargs)
        obs, _ = env.reset(seed=reset_seed)
        total, done, step, first = 0.0, False, 0, None
        while not done:
            action = self.action(obs, rows)
            if rows > 1 and first is None and not np.array_equal(action, self.action(obs)):
                first = step
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
            step += 1
        env.close()
        return total, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--env", default=None,
                        help="today's Gymnasium id (default: args.yml's env)")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenarios", default=None,
                        help="comma-separated names (default: the full default suite; "
                             "'nominal' for none)")
    parser.add_argument("--reference", type=parse_reference, default="random",
                        help="'random' (default) or a number")
    parser.add_argument("--runs", type=int, default=1, help="audit() calls to time (median)")
    args = parser.parse_args()

    folder = args.folder.resolve()
    model_zip, config_dir = zoo_layout(folder)
    run_args = read_yaml(config_dir / "args.yml") if (config_dir / "args.yml").is_file() else {}
    hyper = read_yaml(config_dir / "config.yml") if (config_dir / "config.yml").is_file() else {}
    env_id = args.env or run_args.get("env")
    if not env_id:
        raise SystemExit(f"no env in {config_dir / 'args.yml'}; pass --env")
    env_kwargs = dict(run_args.get("env_kwargs") or {})
    stats_file = config_dir / "vecnormalize.pkl"
    stats_file = stats_file if stats_file.is_file() else None
    scenarios = parse_scenarios(args.scenarios)

    print(f"zoo folder {folder}")
    print(f"   algo {run_args.get('algo')}, trained on {run_args.get('env')}, audited on "
          f"{env_id}; normalize {hyper.get('normalize', False)!r}, frame_stack "
          f"{hyper.get('frame_stack', 0)!r}, env_wrapper {hyper.get('env_wrapper')!r}, "
          f"env_kwargs {env_kwargs or None!r}")
    print(f"   {args.episodes} episodes, seed {args.seed}, scenarios "
          f"{'default suite' if scenarios is None else scenarios or 'nominal only'}, "
          f"reference {args.reference!r}")

    # 1. the audit
    walls, results = [], []
    for _ in range(args.runs):
        start = time.perf_counter()
        results.append(audit(str(folder), env_id, scenarios=scenarios, episodes=args.episodes,
                             seed=args.seed, reference=args.reference))
        walls.append(time.perf_counter() - start)
    result = results[0]
    nominal = np.asarray(result.nominal.returns, dtype=float)
    print()
    print("1. audit")
    print("   " + str(result).replace("\n", "\n   "))
    print(f"   agent {result.agent!r}; reference score {result.reference:.2f}")
    if result.scenarios:
        print("   ratios: " + ", ".join(
            f"{r.name} {r.ratio:.3f} [{r.ci[0]:.3f}, {r.ci[1]:.3f}] {r.rating}" for r in result))
    print(f"   wall time of audit(): {statistics.median(walls):.2f} s"
          + (f" (median of {args.runs}; first call, which imports torch and SB3, "
             f"{walls[0]:.2f} s)" if args.runs > 1 else " (one call, torch and SB3 imports included)")
          + f"; rollouts alone (result.seconds) {statistics.median(r.seconds for r in results):.2f} s")
    if args.runs > 1:
        same = all(np.array_equal(r.nominal.returns, result.nominal.returns) for r in results)
        print(f"   nominal returns identical across the {args.runs} calls: {same}")

    # 2. against the zoo's evaluations
    print()
    print(f"2. nominal returns against the zoo's evaluations.npz ({args.episodes} audit episodes)")
    lo_t, hi_t = t_interval(nominal)
    lo_b, hi_b = bootstrap_interval(nominal, args.seed)
    mean, std = float(np.mean(nominal)), float(np.std(nominal))
    print(f"   audit nominal         mean {mean:9.2f} +- {std:7.2f}   95% CI of the mean: "
          f"t [{lo_t:.2f}, {hi_t:.2f}], bootstrap [{lo_b:.2f}, {hi_b:.2f}]")
    print(f"                         min {nominal.min():.2f}, median {np.median(nominal):.2f}, "
          f"max {nominal.max():.2f}")
    evals_file = folder / "evaluations.npz"
    if not evals_file.is_file():
        print(f"   no {evals_file.name} in the folder")
    else:
        with np.load(evals_file) as data:
            steps, returns = data["timesteps"], data["results"]
        means = returns.mean(axis=1)
        best = int(np.argmax(means))
        last_mean, last_std = float(means[-1]), float(returns[-1].std())
        print(f"   zoo last evaluation   mean {last_mean:9.2f} +- {last_std:7.2f}   "
              f"({returns.shape[1]} episodes at {int(steps[-1])} steps; "
              f"{len(steps)} evaluations)")
        print(f"   zoo best evaluation   mean {float(means[best]):9.2f} +- "
              f"{float(returns[best].std()):7.2f}   (at {int(steps[best])} steps)")
        gap = mean - last_mean
        inside = abs(gap) <= last_std + 1e-9 * max(1.0, abs(last_mean))
        in_stds = f" ({gap / last_std:+.2f} zoo stds)" if last_std > 0 else ""
        print(f"   audit mean - zoo last mean = {gap:+.2f}{in_stds}")
        print(f"   audit nominal mean within the zoo's last evaluation mean +- std "
              f"[{last_mean - last_std:.2f}, {last_mean + last_std:.2f}]: "
              f"{'yes' if inside else 'NO'}; zoo last mean inside the audit's t CI: "
              f"{'yes' if lo_t <= last_mean <= hi_t else 'no'}")

    # 3. the plain loop
    print()
    print("3. independent plain loop (load_sb3 + load_vec_normalize + gym.make + model.predict)")
    if hyper.get("frame_stack") or hyper.get("env_wrapper"):
        print("   NOTE: the folder uses a frame stack or env wrappers, which the plain loop "
              "does not apply; differences are expected")
    start = time.perf_counter()
    loop = PlainLoop(model_zip, stats_file, env_id, env_kwargs)
    plain = np.asarray([loop.episode(args.seed + i)[0] for i in range(args.episodes)])
    plain_seconds = time.perf_counter() - start
    diff = np.abs(plain - nominal)
    worst = int(np.argmax(diff))
    print(f"   vecnormalize: {stats_file.relative_to(folder) if stats_file else 'none'}")
    print(f"   plain mean {plain.mean():.4f}, audit nominal mean {nominal.mean():.4f}; "
          f"plain loop {plain_seconds:.2f} s")
    print(f"   max |plain - audit| per episode: {diff.max():.3g}, relative "
          f"{diff.max() / max(abs(nominal[worst]), 1e-12):.2g} (episode {worst}, seed "
          f"{args.seed + worst}: plain {plain[worst]:.6f}, audit {nominal[worst]:.6f}); "
          f"{int(np.sum(diff > TOLERANCE))} of {len(diff)} episodes differ by > {TOLERANCE:g}")
    print("   |plain - audit| by episode: " + " ".join(f"{d:.1e}" if d else "0" for d in diff))
    if diff.max() <= TOLERANCE:
        print(f"   agree (within {TOLERANCE:g}; {int(np.sum(diff == 0))} of {len(diff)} "
              "episodes exactly equal)")
        return 0
    # audit() pads every policy call to a multiple of MIN_TORCH_ROWS rows (batch invariance);
    # float32 kernels round differently on 1 and 16 rows, which can flip an argmax near-tie.
    # Replay each disagreeing episode with the observation repeated to that many rows.
    explained = True
    for i in np.flatnonzero(diff > TOLERANCE):
        padded, first = loop.episode(args.seed + int(i), rows=MIN_TORCH_ROWS)
        same = abs(padded - nominal[i]) <= TOLERANCE
        explained &= same
        where = (f"the {MIN_TORCH_ROWS}-row action first differs from the 1-row one at step "
                 f"{first}" if first is not None else "no action differs")
        print(f"      episode {i}: plain {plain[i]:.6f}, audit {nominal[i]:.6f}, "
              f"diff {plain[i] - nominal[i]:+.6f}; replayed with predict on {MIN_TORCH_ROWS} "
              f"rows: {padded:.6f} ({'matches' if same else 'does NOT match'} the audit; "
              f"{where})")
    if explained:
        print(f"   agree up to float32 rounding: the differing episodes are reproduced exactly "
              f"by predicting on {MIN_TORCH_ROWS} rows, as audit() does")
        return 0
    print("   DISAGREE")
    return 1

if __name__ == "__main__":
    sys.exit(main())
