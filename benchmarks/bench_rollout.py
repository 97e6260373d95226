"""Benchmark of the batched rollout runner: ``audit()`` against a hand-written floor and a naive loop.

What it measures. The SAME audit (SB3 PPO from ``examples/ppo_cartpole.zip`` on
``CartPole-v1``, the default suite: nominal + jitter, delay, spike, obs_noise, speed_5x,
``--episodes`` episodes each, seed 0) is run three ways and timed with wall clock:

1. ``audit``: ``pytest_rlaudit.audit(model, "CartPole-v1", scenarios=None, episodes=N,
   seed=0, batch_size=B)``.
2. ``raw``: a hand-written batched lock-step loop, the floor (env steps plus one batched
   ``model.predict`` per decision step, nothing else). Every env is built as
   ``scenario.wrap(gym.make("CartPole-v1"))``, all up front, and the timing INCLUDES
   creating (and closing) them, since ``audit()`` creates its envs too. Two variants run:
   all jobs at once (``raw-all``) and in chunks of the batch size without refilling
   (``raw-chunk``); the faster median is the floor the ratio is taken against. Both run
   in two passes, as any loop with the audit's semantics must: ``obs_noise`` is sized by
   the spread of the nominal observations, so it starts once the nominal episodes end
   (nominal and the other scenarios first, then ``obs_noise``). ``oracle-1pass`` runs all
   at once with the spread known beforehand: not a floor, it shows what calibrating costs.
3. ``naive``: one episode at a time, ``model.predict(obs)`` on a single observation per
   step (what most users write), one env per scenario reused across its episodes (env
   creation timed too). It is slow, so it runs fewer repeats than the others (printed).

All three use the same (scenario, episode) jobs and seeding: perturbation streams are
pinned with ``seed_perturbations(env, episode_seed_sequence(seed, i, scenario.name))`` and
the env is reset with ``env.reset(seed=seed + i)``. The per-episode returns of ``raw``
and ``naive`` are asserted equal to ``audit()``'s, scenario by scenario, which proves they
run the same episodes. The model is loaded once (``PPO.load(path, device="cpu")``) and
load time is excluded everywhere. torch runs with one intra-op thread in all three ways
(``--torch-threads``, default 1), since ``audit()``'s torch adapters use one thread per
policy call by default; the floor must not be handicapped by thread-pool stalls that
audit() avoids. Each repeat round runs the ways interleaved (rotating their order) to
spread the noise of a shared machine; medians and minima are reported.

Targets: ``audit`` within 1.25x of the raw floor, and at least 10x faster than naive.
A sweep of ``audit()`` over ``batch_size`` in (16, 32, 64, 128, 256) shows the batch-size
lever (and checks that returns do not depend on the batch size).

Run (from the repository root; about 1-2 minutes by default)::

    python benchmarks/bench_rollout.py
    python benchmarks/bench_rollout.py --quick          # smoke run, a few seconds
    python benchmarks/bench_rollout.py --profile        # also cProfile one audit() call
    python benchmarks/bench_rollout.py --torch-threads 2  # raw and naive with 2 torch threads
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO

from pytest_rlaudit import audit
from pytest_rlaudit import scenarios as registry
from pytest_rlaudit._seeding import episode_seed_sequence
from pytest_rlaudit.perturbations import seed_perturbations
from pytest_rlaudit.rollout.runner import DEFAULT_BATCH_SIZE
from pytest_rlaudit.scenarios import NOMINAL
from pytest_rlaudit.world.agents import SB3Policy

ENV_ID = "CartPole-v1"
MODEL = Path(__file__).resolve().parent.parent / "examples" / "ppo_cartpole.zip"
SWEEP = (16, 32, 64, 128, 256)
TARGET_VS_RAW = 1.25
TARGET_VS_NAIVE = 10.0


def suite(result=None) -> list:
    """The scenarios audit() runs by default, in its order: nominal first. Given an audit
    result, as it ran them: obs_noise with the spread it calibrated on its nominal episodes
    (the floor and the naive loop get it for free; audit() pays for calibrating)."""
    chosen = [s for s in registry.resolve(None) if s.name != NOMINAL.name]
    if result is not None:
        chosen = [s.with_params(**result[s.name].params) for s in chosen]
    return [NOMINAL, *chosen]


# ---------------------------------------------------------------------------- the three ways


def run_audit(model, episodes: int, seed: int, batch_size: int | None):
    t0 = time.perf_counter()
    result = audit(model, ENV_ID, scenarios=None, episodes=episodes, seed=seed,
                   batch_size=batch_size)
    elapsed = time.perf_counter() - t0
    returns = {r.name: r.returns for r in (result.nominal, *result.scenarios.values())}
    return elapsed, returns, result


def run_raw(model, scenario_list, episodes: int, seed: int, chunk: int):
    """The floor: envs built up front (timed), lock-step batched predict, no refilling."""
    t0 = time.perf_counter()
    jobs = [(s, i) for s in scenario_list for i in range(episodes)]
    envs = [s.wrap(gym.make(ENV_ID)) for s, _ in jobs]
    rets = [0.0] * len(jobs)
    obs = [None] * len(jobs)
    calls = steps = 0
    for lo in range(0, len(jobs), chunk):
        active = list(range(lo, min(lo + chunk, len(jobs))))
        for j in active:
            s, i = jobs[j]
            seed_perturbations(envs[j], episode_seed_sequence(seed, i, s.name))
            obs[j], _ = envs[j].reset(seed=seed + i)
        while active:
            actions, _ = model.predict(np.stack([obs[j] for j in active]), deterministic=True)
            calls += 1
            still = []
            for j, a in zip(active, actions, strict=True):
                o, r, terminated, truncated, _ = envs[j].step(a)
                rets[j] += float(r)
                steps += 1
                if not (terminated or truncated):
                    obs[j] = o
                    still.append(j)
            active = still
    for env in envs:
        env.close()
    elapsed = time.perf_counter() - t0
    returns = {s.name: np.array(rets[k * episodes:(k + 1) * episodes])
               for k, s in enumerate(scenario_list)}
    return elapsed, returns, {"agent_steps": steps, "policy_calls": calls, "rows": steps,
                              "envs_made": len(jobs)}


def run_raw_phased(model, scenario_list, episodes: int, seed: int, chunk: int):
    """The floor of the audit's semantics: a scenario sized by the nominal observations'
    spread (obs_noise) cannot start before the nominal episodes end, so a hand-written
    loop runs the others first (nominal among them), then those."""
    later = [s for s in scenario_list if "spread" in s.params]
    first = [s for s in scenario_list if "spread" not in s.params]
    t1, returns, extra = run_raw(model, first, episodes, seed, chunk)
    if not later:
        return t1, returns, extra
    t2, more, extra2 = run_raw(model, later, episodes, seed, chunk)
    returns = {s.name: {**returns, **more}[s.name] for s in scenario_list}  # audit's order
    return t1 + t2, returns, {k: extra[k] + extra2[k] for k in extra}


def run_naive(model, scenario_list, episodes: int, seed: int):
    """One episode at a time, one observation per predict call."""
    t0 = time.perf_counter()
    returns = {}
    calls = 0
    for s in scenario_list:
        env = s.wrap(gym.make(ENV_ID))
        rets = []
        for i in range(episodes):
            seed_perturbations(env, episode_seed_sequence(seed, i, s.name))
            obs, _ = env.reset(seed=seed + i)
            ret, done = 0.0, False
            while not done:
                action, _ = model.predict(obs, deterministic=True)
                calls += 1
                obs, r, terminated, truncated, _ = env.step(action)
                ret += float(r)
                done = terminated or truncated
            rets.append(ret)
        env.close()
        returns[s.name] = np.array(rets)
    elapsed = time.perf_counter() - t0
    return elapsed, returns, {"agent_steps": calls, "policy_calls": calls, "rows": calls,
                              "envs_made": len(scenario_list)}


# ------------------------------------------------------------------------------- helpers


class _CountingPolicy(SB3Policy):
    """SB3Policy that counts calls and rows (used in one untimed run only)."""

    calls = 0
    rows = 0

    def act(self, obs, states):
        self.calls += 1
        self.rows += max(obs.shape[0], 16)
        return super().act(obs, states)


def audit_counts(model, episodes: int, seed: int, batch_size: int | None) -> dict:
    made = [0]

    def factory():
        made[0] += 1
        return gym.make(ENV_ID)

    policy = _CountingPolicy(model)
    result = audit(policy, factory, scenarios=None, episodes=episodes, seed=seed,
                   batch_size=batch_size)
    lengths = sum(int(r.lengths.sum()) for r in (result.nominal, *result.scenarios.values()))
    env_steps = sum(int(r.env_steps.sum()) for r in (result.nominal, *result.scenarios.values()))
    return {"agent_steps": lengths, "env_steps": env_steps, "policy_calls": policy.calls,
            "rows": policy.rows, "envs_made": made[0]}


def check_equal(name: str, got: dict, want: dict) -> None:
    assert list(got) == list(want), f"{name}: scenarios {list(got)} != {list(want)}"
    for scen in want:
        if not np.array_equal(got[scen], want[scen]):
            diff = np.flatnonzero(got[scen] != want[scen])
            raise AssertionError(
                f"{name}: returns of {scen!r} differ from audit() at episodes {diff.tolist()}: "
                f"{got[scen][diff].tolist()} vs {want[scen][diff].tolist()}"
            )


def fmt_s(x: float) -> str:
    return f"{x:8.3f}"


# ---------------------------------------------------------------------------------- main


def run_paths(model, episodes: int, seed: int, repeats: int, peer: bool) -> None:
    """The default suite's audit on the vector path (``"CartPole-v1"``: gymnasium's
    CartPoleVectorEnv, all jobs in one lock-step batch) beside the scalar path (a factory
    of one env: one gymnasium env per slot) and beside deltatau-audit 0.6.2 on the same
    model, scenarios and episode count (benchmarks/peer_deltatau.py), interleaved, back to
    back, each warmed up. The vector path's returns must equal the scalar path's, scenario
    by scenario and episode by episode (bit for bit)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peer_deltatau import available, run_peer

    def vector():
        return audit(model, ENV_ID, scenarios=None, episodes=episodes, seed=seed)

    def scalar():
        return audit(model, lambda: gym.make(ENV_ID), scenarios=None, episodes=episodes,
                     seed=seed)

    reason = available() if peer else "skipped (--no-peer)"
    ways = {"vector": vector, "scalar": scalar}
    if reason is None:
        ways["deltatau-audit"] = lambda: run_peer(str(MODEL), ENV_ID, episodes=episodes, seed=seed)
        run_peer(str(MODEL), ENV_ID, episodes=2, seed=seed)  # warm-up
    for way in ("vector", "scalar"):
        audit(model, ENV_ID if way == "vector" else (lambda: gym.make(ENV_ID)),
              scenarios=None, episodes=2, seed=seed)  # warm-up
    times: dict[str, list[float]] = {w: [] for w in ways}
    results = {}
    for rep in range(repeats):
        order = list(ways)
        order = order[rep % len(order):] + order[:rep % len(order)]
        for w in order:
            start = time.perf_counter()
            results[w] = ways[w]()
            elapsed = time.perf_counter() - start
            times[w].append(results[w]["seconds"] if w == "deltatau-audit" else elapsed)
    vec, sca = results["vector"], results["scalar"]
    for name in vec.scenarios:
        a, b = vec.scenarios[name].returns, sca.scenarios[name].returns
        if not np.array_equal(a, b):
            raise SystemExit(f"vector and scalar returns of {name!r} differ at episodes "
                             f"{np.flatnonzero(np.asarray(a) != np.asarray(b)).tolist()}")
    print(f"\nCartPole audit, nominal + {len(vec.scenarios)} timing scenarios "
          f"({', '.join(n for n in vec.scenarios if n != 'nominal')}), {episodes} episodes "
          f"each, seed {seed}; medians of {repeats} interleaved repeats, each way warmed up")
    print("vector returns == scalar returns, per scenario and episode (bit for bit): OK")
    med = {w: statistics.median(v) for w, v in times.items()}
    for w in ways:
        print(f"  {w:15s} {med[w]:7.3f} s  (min {min(times[w]):.3f}, max {max(times[w]):.3f})")
    print(f"  vector path: {med['scalar'] / med['vector']:.2f}x the scalar path")
    if reason is None:
        ratio = med["deltatau-audit"] / med["vector"]
        print(f"  vector path: {ratio:.1f}x deltatau-audit 0.6.2 (target >= 25x: "
              f"{'met' if ratio >= 25 else 'NOT met'}); scalar path: "
              f"{med['deltatau-audit'] / med['scalar']:.1f}x")
    else:
        print(f"  deltatau-audit: {reason}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=None,
                    help=f"audit's batch_size (default: audit's own, {DEFAULT_BATCH_SIZE})")
    ap.add_argument("--naive-repeats", type=int, default=None,
                    help="repeats of the slow naive loop (default: min(repeats, 2))")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 5 episodes, 2 repeats, 1 naive repeat, 1 sweep repeat")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch.set_num_threads(N) for the raw and naive loops (default 1, as "
                         "audit() uses); 0 leaves torch's default")
    ap.add_argument("--no-sweep", action="store_true", help="skip the batch-size sweep")
    ap.add_argument("--no-peer", action="store_true",
                    help="skip deltatau-audit in the vector/scalar/peer comparison")
    ap.add_argument("--paths-only", action="store_true",
                    help="only the vector/scalar/peer comparison")
    ap.add_argument("--profile", action="store_true",
                    help="also cProfile one audit() call and print the top functions")
    args = ap.parse_args(argv)
    if args.quick:
        args.episodes, args.repeats = min(args.episodes, 5), min(args.repeats, 2)
    naive_repeats = args.naive_repeats or min(args.repeats, 1 if args.quick else 2)
    sweep_repeats = 1 if args.quick else args.repeats
    episodes, seed = args.episodes, args.seed
    batch = args.batch_size if args.batch_size is not None else DEFAULT_BATCH_SIZE
    scen = suite()
    n_jobs = len(scen) * episodes

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    threads = "set by --torch-threads" if args.torch_threads else "left at default"
    print(f"python {sys.version.split()[0]}, torch {torch.__version__} "
          f"(torch.get_num_threads() = {torch.get_num_threads()}, {threads}), "
          f"gymnasium {gym.__version__}, numpy {np.__version__}")
    print(f"model {MODEL.name} on {ENV_ID}; scenarios: {', '.join(s.name for s in scen)}; "
          f"{episodes} episodes each = {n_jobs} episodes; seed {seed}; audit batch_size "
          f"{args.batch_size} (= {batch})")
    print(f"repeats: audit/raw {args.repeats}, naive {naive_repeats}, sweep {sweep_repeats} "
          "(wall clock, model load excluded, env creation included in every way)")

    t0 = time.perf_counter()
    model = PPO.load(MODEL, device="cpu")
    print(f"model load (excluded): {time.perf_counter() - t0:.2f} s")
    run_paths(model, episodes, seed, args.repeats, peer=not args.no_peer)
    if args.paths_only:
        return 0

    # Warm-up (untimed), the reference returns and the calibrated scenarios.
    _, ref, result = run_audit(model, episodes, seed, args.batch_size)
    scen = suite(result)
    run_raw(model, scen, episodes, seed, n_jobs)

    ways = {
        "audit": lambda: run_audit(model, episodes, seed, args.batch_size),
        "raw-all": lambda: run_raw_phased(model, scen, episodes, seed, n_jobs),
        f"raw-chunk{batch}": lambda: run_raw_phased(model, scen, episodes, seed, batch),
        # not a floor: it knows the spread before any nominal episode ran
        "oracle-1pass": lambda: run_raw(model, scen, episodes, seed, n_jobs),
    }
    times: dict[str, list[float]] = {w: [] for w in ways}
    info: dict[str, dict] = {}
    for rep in range(args.repeats):
        order = list(ways)
        order = order[rep % len(order):] + order[:rep % len(order)]
        for w in order:
            elapsed, returns, extra = ways[w]()
            times[w].append(elapsed)
            if w != "audit":
                check_equal(w, returns, ref)
                info[w] = extra
            else:
                check_equal("audit (repeat)", returns, ref)
    print(f"raw-all and raw-chunk{batch} returns == audit() returns, per scenario and episode: OK")

    times["naive"] = []
    for _ in range(naive_repeats):
        elapsed, returns, extra = run_naive(model, scen, episodes, seed)
        times["naive"].append(elapsed)
        check_equal("naive", returns, ref)
        info["naive"] = extra
    print("naive returns == audit() returns, per scenario and episode: OK")

    info["audit"] = audit_counts(model, episodes, seed, args.batch_size)
    env_steps = info["audit"]["env_steps"]
    for w in info:
        info[w]["env_steps"] = env_steps  # same episodes, so the same base-env steps

    med = {w: statistics.median(t) for w, t in times.items()}
    raw_ways = [w for w in times if w.startswith("raw")]
    floor = min(raw_ways, key=lambda w: med[w])
    ratio_raw = med["audit"] / med[floor]
    speedup = med["naive"] / med["audit"]

    print()
    print(f"{'way':<14}{'n':>3}{'median s':>10}{'min s':>9}{'vs raw':>8}{'naive/way':>11}"
          f"{'agent steps':>13}{'env steps':>11}{'policy calls':>14}{'rows':>9}{'envs':>6}")
    for w in ["audit", *raw_ways, "oracle-1pass", "naive"]:
        t = times[w]
        c = info[w]
        print(f"{w:<14}{len(t):>3}{fmt_s(med[w]):>10}{fmt_s(min(t)):>9}"
              f"{med[w] / med[floor]:>7.2f}x{med['naive'] / med[w]:>10.1f}x"
              f"{c['agent_steps']:>13}{c['env_steps']:>11}{c['policy_calls']:>14}"
              f"{c['rows']:>9}{c['envs_made']:>6}")
    print(f"(floor = {floor}, the faster raw variant by median; raw-all steps all "
          f"{n_jobs} episodes at once, raw-chunk{batch} runs chunks of {batch} without "
          "refilling; naive reuses one env per scenario; 'rows' = observations sent to torch, "
          "audit pads each call to a multiple of 16; 'envs' = envs created per run)")
    noisy = [w for w, t in times.items() if len(t) > 1 and max(t) > 1.5 * min(t)]
    if noisy:
        print(f"WARNING: noisy timings (max > 1.5x min) for {', '.join(noisy)}. On a busy "
              "machine torch's intra-op threads stall on tiny batches; compare with "
              "--torch-threads 1 (the default).")
    print()
    ok1 = ratio_raw <= TARGET_VS_RAW
    ok2 = speedup >= TARGET_VS_NAIVE
    print(f"target: audit/raw   <= {TARGET_VS_RAW:.2f}x : {ratio_raw:5.2f}x  "
          f"{'PASS' if ok1 else 'MISS'}")
    print(f"target: naive/audit >= {TARGET_VS_NAIVE:.0f}x    : {speedup:5.1f}x  "
          f"{'PASS' if ok2 else 'MISS'}")
    if args.quick:
        print(f"(--quick: only {n_jobs} episodes, so batches are small and naive/audit is low; "
              "the targets are meant for the default run)")
    print(f"per agent step: audit {1e6 * med['audit'] / info['audit']['agent_steps']:.1f} us, "
          f"{floor} {1e6 * med[floor] / info[floor]['agent_steps']:.1f} us, naive "
          f"{1e6 * med['naive'] / info['naive']['agent_steps']:.1f} us")

    if not args.no_sweep:
        print()
        print(f"audit() batch-size sweep (median/min over {sweep_repeats} repeat(s), "
              "returns asserted equal to the reference for every batch size):")
        print(f"{'batch_size':>10}{'median s':>10}{'min s':>9}{'policy calls':>14}{'vs raw':>8}")
        sweep_times: dict[int, list[float]] = {b: [] for b in SWEEP}
        for rep in range(sweep_repeats):
            for b in (SWEEP if rep % 2 == 0 else SWEEP[::-1]):
                elapsed, returns, _ = run_audit(model, episodes, seed, b)
                check_equal(f"audit(batch_size={b})", returns, ref)
                sweep_times[b].append(elapsed)
        for b in SWEEP:
            m = statistics.median(sweep_times[b])
            calls = audit_counts(model, episodes, seed, b)["policy_calls"]
            print(f"{b:>10}{fmt_s(m):>10}{fmt_s(min(sweep_times[b])):>9}{calls:>14}"
                  f"{m / med[floor]:>7.2f}x")

    if args.profile:
        print()
        print("cProfile of one audit() call (sorted by tottime, top 25):")
        prof = cProfile.Profile()
        prof.enable()
        run_audit(model, episodes, seed, args.batch_size)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue().rstrip())

    print()
    print(str(result).splitlines()[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
