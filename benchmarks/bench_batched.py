"""Benchmark of an audit on a batched simulator (the BatchedEnv protocol) against its raw
batched loop.

Why this workload. GPU simulators (Isaac Lab, mjlab, MuJoCo Playground) step thousands of
envs per call; a user audits a policy on one with as many episodes as fill the batch a
few times. ``examples/batched_cartpole.py`` is such a simulator on the CPU: 1,024
cart-poles in torch tensors, observations in ``obs["policy"]``, envs that end reset
inside ``step`` (Isaac Lab's way), with a seed per env at ``reset(env_ids, seeds)``. The
agent is a torch MLP (the bundled PPO's actor network, which is what an exported robot
policy is: an MLP on a batch), run on the batch in one call.

What is timed (wall clock, medians over interleaved repeats):

1. ``audit``: ``audit(policy, BatchedCartPole(1024), scenarios=["nominal"], episodes=E)``,
   E = 4 x 1,024 episodes by default: every check the audit makes, the rows, the
   statistics. The seed-replay check runs episode 0's first 16 steps twice before (row 0
   of the batch, one policy call per step) and the whole of it again in a row of the
   audit's batch; here every row is busy and every episode lasts 500 steps, so that row
   runs one episode past the loop's last: with E = 4 x 1,024 that is a fifth wave of one
   row, the worst case for it (``--episodes 8192`` shows it at eight waves). The random
   policy's check runs 256 episodes.
2. ``raw``: the hand-written batched loop a user would write for the same episodes: reset
   all 1,024 envs with seeds ``seed + i``, then per step one policy call on the whole batch
   and one ``step``; an env whose episode ends starts the next episode (its seed) at once.
   Its per-episode returns are asserted equal to the audit's, so both ran the same
   episodes.
3. ``raw+1``: the same loop with one episode more, as many as the audit runs with the
   check's: ``raw+1 / raw`` is what the check's extra episode costs (a fifth wave when E
   fills the rows exactly), ``audit / raw+1`` the audit's own cost over the loop.

The target is ``audit`` within 1.3x of ``raw``. Also printed: the audit of the default
suite (nominal + speed_5x, jitter, delay, spike, obs_noise) at the same episodes per
scenario, and its returns for batch sizes 1,024 and 256 (asserted equal); and what each
of six observation, action and timing scenarios adds to an audit of nominal alone when
both fit one wave of the batch (:func:`per_scenario`): the cost of the perturbation hooks
a batch runs for its rows at every step.

Run (from the repository root)::

    python benchmarks/bench_batched.py              # 1,024 envs, 4,096 episodes, 3 repeats
    python benchmarks/bench_batched.py --quick      # smoke run
    python benchmarks/bench_batched.py --ratio-only --episodes 8192   # the ratio at 8 waves
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from batched_cartpole import BatchedCartPole  # noqa: E402

from pytest_rlaudit import audit  # noqa: E402
from pytest_rlaudit.world.agents import as_policy  # noqa: E402


def actor() -> torch.nn.Module:
    """The bundled PPO's actor (its MLP and action head) as a plain torch module."""
    from stable_baselines3 import PPO

    model = PPO.load(ROOT / "examples" / "ppo_cartpole.zip", device="cpu")
    return torch.nn.Sequential(model.policy.mlp_extractor.policy_net, model.policy.action_net)


def make_policy(net: torch.nn.Module):
    """Greedy actions of ``net`` on a batch of observations (numpy in, numpy out)."""

    @torch.no_grad()
    def policy(obs: np.ndarray) -> np.ndarray:
        return net(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()

    return policy


def run_raw(policy, envs: int, episodes: int, seed: int) -> tuple[float, np.ndarray]:
    """The hand-written loop (see the module); returns (seconds, returns by episode)."""
    start = time.perf_counter()
    env = BatchedCartPole(envs)
    rows = np.arange(min(envs, episodes))
    obs = env.reset(rows, [seed + int(i) for i in rows])["policy"].numpy()
    episode_of = rows.copy()  # which episode each row runs; -1: none
    if envs > episodes:
        episode_of = np.concatenate([episode_of, -np.ones(envs - episodes, int)])
        obs = np.concatenate([obs, np.zeros((envs - episodes, 4), np.float32)])
    returns = np.zeros(episodes)
    following = len(rows)
    while (episode_of >= 0).any():
        actions = policy(obs)
        out, rewards, terminated, truncated, _ = env.step(actions)
        obs = out["policy"].numpy()
        live = episode_of >= 0
        returns[episode_of[live]] += rewards.numpy()[live]
        done = np.flatnonzero(live & (terminated | truncated).numpy())
        if len(done):
            start_now = done[: max(0, episodes - following)]
            episode_of[done] = -1
            if len(start_now):
                new = np.arange(following, following + len(start_now))
                following += len(start_now)
                episode_of[start_now] = new
                obs[start_now] = env.reset(start_now, [seed + int(e) for e in new])["policy"].numpy()
    return time.perf_counter() - start, returns


def run_audit(policy, envs: int, episodes: int, seed: int, scenarios) -> tuple[float, object]:
    start = time.perf_counter()
    result = audit(policy, BatchedCartPole(envs), scenarios=scenarios, episodes=episodes,
                   seed=seed)
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=1024)
    parser.add_argument("--episodes", type=int, default=None, help="default: 4 x envs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ratio-only", action="store_true",
                        help="time audit against raw only (no default suite, no per-scenario costs)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    envs = 64 if args.quick else args.envs
    episodes = args.episodes or 4 * envs
    repeats = 1 if args.quick else args.repeats
    policy = as_policy(make_policy(actor()))
    seed = 0
    run_audit(policy, envs, 8, seed, ["nominal"])  # warm up both
    run_raw(policy.act_fn if hasattr(policy, "act_fn") else make_policy(actor()), envs, 8, seed)
    raw_policy = make_policy(actor())
    times: dict[str, list[float]] = {"audit": [], "raw": [], "raw+1": []}
    for r in range(repeats):
        order = ("audit", "raw", "raw+1") if r % 2 == 0 else ("raw+1", "raw", "audit")
        for way in order:
            if way == "audit":
                elapsed, result = run_audit(policy, envs, episodes, seed, ["nominal"])
                got = np.asarray(result.nominal.returns)
            elif way == "raw":
                elapsed, want = run_raw(raw_policy, envs, episodes, seed)
            else:
                elapsed, _ = run_raw(raw_policy, envs, episodes + 1, seed)
            times[way].append(elapsed)
    if not np.array_equal(got, want):
        raise SystemExit(f"the audit's returns differ from the raw loop's at episodes "
                         f"{np.flatnonzero(got != want)[:5].tolist()}")
    print(f"BatchedCartPole, {envs} envs, {episodes} episodes of the bundled PPO's actor, "
          f"seed {seed}; medians of {repeats} interleaved repeat(s)")
    print("audit returns == raw loop returns, episode by episode: OK")
    med = {k: statistics.median(v) for k, v in times.items()}
    for way in ("raw", "raw+1", "audit"):
        print(f"  {way:6s} {med[way]:7.3f} s   (min {min(times[way]):.3f})")
    ratio = med["audit"] / med["raw"]
    print(f"  audit / raw = {ratio:.2f}  (target <= 1.30: {'met' if ratio <= 1.3 else 'NOT met'})")
    # the audit runs one episode more than the loop: the seed-replay check's second run
    # of episode 0 (DESIGN section 16); where every row is busy it takes a wave of its own
    print(f"  of which the check's extra episode: raw+1 / raw = {med['raw+1'] / med['raw']:.2f}; "
          f"the audit on the episodes it runs: audit / raw+1 = {med['audit'] / med['raw+1']:.2f}")
    if args.ratio_only:
        return 0
    suite = [None, 1024 if envs >= 1024 else envs, 256 if envs >= 1024 else max(1, envs // 4)]
    elapsed, full = run_audit(policy, suite[1], episodes, seed, None)
    _, other = run_audit(policy, suite[2], episodes, seed, None)
    same = all(np.array_equal(full.scenarios[n].returns, other.scenarios[n].returns)
               for n in full.scenarios)
    print(f"default suite (nominal + 5 timing scenarios), {episodes} episodes each on "
          f"{suite[1]} envs: {elapsed:.3f} s; returns equal on {suite[2]} envs: "
          f"{'OK' if same else 'DIFFER'}")
    per_scenario(policy, envs, seed, repeats)
    return 0 if same else 1


#: The scenarios whose cost on a batch :func:`per_scenario` prints: the perturbation
#: hooks a batch runs for every row at every step.
SCENARIOS = ("obs_noise", "dropped_obs", "delay", "action_noise", "jitter", "sticky_actions")


def per_scenario(policy, envs: int, seed: int, repeats: int) -> None:
    """What one scenario adds to an audit on a batch: the audit of nominal and the
    scenario, against the audit of nominal alone, each with (envs - 1) // 2 episodes, so
    that both fit one wave of the batch with the seed-replay row (the simulator steps every
    env at every tick, busy or not). The difference is the scenario's hooks, run on its
    rows at every step, and its statistics (a bootstrap interval; nominal has none);
    obs_noise runs a wave of its own after nominal's, calibrated on nominal's
    observations."""
    episodes = max(1, (envs - 1) // 2)
    times: dict[str, list[float]] = {name: [] for name in ("nominal", *SCENARIOS)}
    for _ in range(repeats):
        for name in times:
            times[name].append(run_audit(policy, envs, episodes, seed, [name])[0])
    base = statistics.median(times["nominal"])
    print(f"what one scenario adds on the batch ({envs} envs, {episodes} episodes each, one "
          f"wave; medians of {repeats}): nominal alone {base:.3f} s")
    for name in SCENARIOS:
        median = statistics.median(times[name])
        print(f"  {name:15s} {median:7.3f} s   +{(median - base) / base:.0%} over nominal alone")


if __name__ == "__main__":
    raise SystemExit(main())
