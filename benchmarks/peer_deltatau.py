"""The peer's time on our workload: deltatau-audit 0.6.2, the established timing audit.

    pip install deltatau-audit==0.6.2            # once (its deps: torch, gymnasium, numpy,
                                                 # matplotlib, tqdm; SB3 for SB3 models)
    python benchmarks/peer_deltatau.py           # warm-up, then 3 timed runs back to back
    python benchmarks/peer_deltatau.py --model examples/robust_ppo_cartpole.zip --repeats 5

Other benchmarks import :func:`run_peer` and :func:`available` to print our speed as a
multiple of the peer's::

    from peer_deltatau import available, run_peer
    reason = available()
    if reason is None:
        peer = run_peer("examples/ppo_cartpole.zip")   # {"seconds": ..., "returns": ...}
    else:
        print(reason)                                  # "peer not installed: pip install ..."

The workload is the one the comparison is stated on: "nominal + 5 timing scenarios, 30
episodes, both warmed up, back to back". That is our bundled PPO
(``examples/ppo_cartpole.zip``) on CartPole-v1, the peer's six robustness scenarios
(``nominal``, ``speed_5x``, ``jitter``, ``delay``, ``spike``, ``obs_noise``; ours carry the
same names), 30 episodes each, seed 0. The peer is driven as its own ``audit-sb3``
command drives it, minus the model loading and the HTML report: an ``SB3Adapter`` around
the loaded model and ``run_full_audit(adapter, lambda: gym.make(env_id), ...)`` with
``sensitivity_episodes=0``. For an SB3 model the reliance axis and the sensitivity are
N/A (no internal time to intervene on) and return at once, so the time is that of the
robustness axis, nominal first then the five scenarios, each episode in a fresh
``gym.make`` env. ``seconds`` is the wall time of that call alone; loading is not in it.

Settings, the same for the peer as for our audit in the comparison:

- torch on one intra-op thread (``torch.set_num_threads(1)``, restored afterwards), as
  our benchmarks and our audit's policy calls run;
- one worker: the peer's default ``n_workers=1`` (serial; its ``--workers N`` would run
  episodes on N threads of a ThreadPoolExecutor), our default ``workers=None`` (this
  process);
- ``verbose=False`` (no tqdm bars or prints inside the timed call).

What the peer does per step, and what is not deterministic in it:

- each agent step calls ``model.predict(obs, deterministic=False)`` (a *sampled* action;
  ours defaults to the deterministic one for an SB3 model) and, separately,
  ``model.policy.predict_values`` (for its value-error metrics), on a batch of one;
- ``seed`` reaches only ``env.reset`` (see below). The
  sampled actions draw from torch's global generator, which :func:`run_peer` seeds with
  ``torch.manual_seed(seed)`` before the call; but ``jitter`` (``np.random.RandomState()``)
  and ``obs_noise`` (``np.random.default_rng()``) are seeded from OS entropy, and no
  argument reaches them, so the peer's returns vary from run to run: ``obs_noise``'s,
  and those of every scenario after ``jitter`` (``spike`` too: jitter's draws change how
  many sampled actions, so torch draws, come before it). Its time varies less (CartPole
  episodes end early, so the work follows the returns a little).
- its scenarios are not paired with nominal: scenario ``k`` (0 = nominal) resets
  episode ``i`` with seed ``seed + 1000 * k + i``; ours use ``seed + i`` in every
  scenario.
- ``obs_noise`` is Gaussian noise of std 0.1 in raw observation units (absolute); our
  ``obs_noise`` scenario is 0.1 x each element's nominal spread (``scale="relative"``;
  ``scenarios.get("obs_noise").with_params(scale="absolute")`` is the peer's). The other
  four keep its parameters: speed 5; jitter 2 +- 1; delay 1 step (reset observation
  repeated first); spike speed 5 for agent steps 20-39.

The peer's public result holds means (``total_reward_mean`` per scenario), not
per-episode returns, so ``returns`` maps each scenario to its mean return. The
per-episode returns are also kept, in ``episode_returns``, by wrapping the peer's
``aggregate_episode_metrics`` (called once per scenario with that scenario's episodes)
for the duration of the call; the wrapper only reads its argument.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

PEER = "deltatau-audit"
PEER_VERSION = "0.6.2"
INSTALL = f"pip install {PEER}=={PEER_VERSION}"
#: The peer's six robustness scenarios (deltatau_audit.auditor.ROBUSTNESS_SCENARIOS), in
#: its order; ours have the same names.
SCENARIOS = ("nominal", "speed_5x", "jitter", "delay", "spike", "obs_noise")
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "examples" / "ppo_cartpole.zip"


def available() -> str | None:
    """None when deltatau-audit (with its SB3 adapter) imports; else why not, with the fix."""
    try:
        import deltatau_audit  # noqa: F401
        from deltatau_audit.adapters.sb3 import SB3Adapter  # noqa: F401
        from deltatau_audit.auditor import run_full_audit  # noqa: F401
    except ImportError as exc:
        return f"peer not installed ({exc}): {INSTALL}"
    return None


def peer_version() -> str | None:
    """The installed deltatau-audit's version, or None when it is not installed."""
    try:
        import deltatau_audit
    except ImportError:
        return None
    return str(getattr(deltatau_audit, "__version__", "unknown"))


def run_peer(model_path: str, env_id: str = "CartPole-v1", episodes: int = 30,
             seed: int = 0, *, algo: str = "ppo", workers: int = 1,
             torch_threads: int | None = 1) -> dict[str, Any]:
    """Run deltatau-audit's audit of the SB3 zip ``model_path`` on ``env_id``.

    Nominal and the five timing scenarios, ``episodes`` episodes each, as ``deltatau-audit
    audit-sb3`` runs them (see the module docstring). Returns ``{"seconds": wall time of
    the audit call alone, "returns": {scenario: mean return}, "episode_returns":
    {scenario: [return of each episode]}, "version": the peer's version, ...}``.
    """
    reason = available()
    if reason is not None:
        raise RuntimeError(reason)
    import deltatau_audit
    import gymnasium as gym
    import stable_baselines3
    import torch
    from deltatau_audit import auditor
    from deltatau_audit.adapters.sb3 import SB3Adapter

    old_threads = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    try:
        model = getattr(stable_baselines3, algo.upper()).load(str(model_path), device="cpu")
        adapter = SB3Adapter(model, device="cpu")

        def env_factory() -> Any:
            return gym.make(env_id)

        # Per-episode returns: the peer computes them but returns only their mean; its
        # robustness axis aggregates each scenario's episodes with one call, in order.
        recorded: list[list[float]] = []
        aggregate = auditor.aggregate_episode_metrics

        def recording_aggregate(episode_results: list[dict]) -> dict:
            recorded.append([float(ep["total_reward"]) for ep in episode_results])
            return aggregate(episode_results)

        torch.manual_seed(seed)  # the sampled actions (predict(deterministic=False))
        auditor.aggregate_episode_metrics = recording_aggregate
        try:
            start = time.perf_counter()
            result = auditor.run_full_audit(
                adapter, env_factory,
                n_episodes=episodes,
                robustness_scenarios=list(SCENARIOS),
                sensitivity_episodes=0,
                device="cpu",
                verbose=False,
                seed=seed,
                n_workers=workers,
            )
            seconds = time.perf_counter() - start
        finally:
            auditor.aggregate_episode_metrics = aggregate
    finally:
        torch.set_num_threads(old_threads)

    per_scenario = result["robustness"]["scenarios"]
    order = list(per_scenario)  # the peer's order: nominal first, then as asked
    returns = {name: float(per_scenario[name]["total_reward_mean"]) for name in order}
    # Trust the recording only if it lines up with the scenarios and their means.
    episode_returns: dict[str, list[float]] | None = None
    if len(recorded) == len(order) and all(
            len(eps) == episodes and abs(sum(eps) / len(eps) - returns[name]) < 1e-6
            for name, eps in zip(order, recorded, strict=True)):
        episode_returns = dict(zip(order, recorded, strict=True))
    return {
        "seconds": seconds,
        "returns": returns,
        "episode_returns": episode_returns,
        "version": str(getattr(deltatau_audit, "__version__", "unknown")),
        "episodes": episodes,
        "seed": seed,
        "workers": workers,
        "torch_threads": torch_threads,
        "summary": {k: result["summary"].get(k) for k in (
            "deployment_score", "deployment_rating", "stress_score", "stress_rating")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL),
                        help="SB3 zip (default: examples/ppo_cartpole.zip)")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1,
                        help="the peer's n_workers (threads; default 1, its default)")
    args = parser.parse_args(argv)

    reason = available()
    if reason is not None:
        print(reason)
        return 1
    version = peer_version()
    note = "" if version == PEER_VERSION else f" (not {PEER_VERSION}: figures may differ)"
    print(f"{PEER} {version}{note}: {Path(args.model).name} on {args.env}, "
          f"{len(SCENARIOS)} scenarios x {args.episodes} episodes, seed {args.seed}, "
          f"workers {args.workers}, torch threads 1")

    warm = run_peer(args.model, args.env, episodes=2, seed=args.seed, workers=args.workers)
    print(f"warm-up (2 episodes): {warm['seconds']:.3f} s")
    runs = [run_peer(args.model, args.env, episodes=args.episodes, seed=args.seed,
                     workers=args.workers) for _ in range(args.repeats)]
    times = [r["seconds"] for r in runs]
    print(f"runs: {', '.join(f'{t:.3f}' for t in times)} s")
    print(f"median: {statistics.median(times):.3f} s")
    print("mean return per scenario (each run):")
    for name in SCENARIOS:
        means = [r["returns"][name] for r in runs]
        print(f"  {name:<10} " + "  ".join(f"{m:8.2f}" for m in means))
    return 0


if __name__ == "__main__":
    sys.exit(main())
