"""Env reuse: ``reset(seed=s)`` on a used env replays a fresh env's episode exactly.

The allow-list of :mod:`pytest_rlaudit.world.reuse` is checked here family by family on
real envs: each used env runs a few whole episodes (so that episode ends have happened,
which is when kept state tends to show), then it and a fresh env are reset with the same
seed and stepped with the same actions, and must agree on every observation, reward and
end, over two episodes. The same check shows why BipedalWalker is on the other list.
Custom envs are decided by the probe: one that carries state across resets is caught,
one that does not passes.
"""

from __future__ import annotations

import copy
import types
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from toy_envs import CounterEnv

from pytest_rlaudit.errors import RolloutError
from pytest_rlaudit.world import reuse
from pytest_rlaudit.world.agents import EnvNeeds
from pytest_rlaudit.world.envs import AuditEnv, env_spec
from pytest_rlaudit.world.reuse import probe_reset, reset_is_exact

#: One or two envs per family of the allow-list (FrozenLake is slippery: its transitions
#: draw from the env's generator, so the reseeding is checked too).
ALLOWED = ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "FrozenLake-v1", "Blackjack-v1",
           "LunarLander-v3", "InvertedPendulum-v5", "HalfCheetah-v5")


def _first_difference(env_id: str, used_episodes: int = 3, seed: int = 7,
                      max_steps: int = 300) -> int | None:
    """Run ``used_episodes`` whole episodes on one env, then replay two episodes (seeds
    ``seed`` and ``seed + 1``) on it and on a fresh env with the same actions: the first
    step (counted over both) where they differ, or None."""
    # made as the audit makes them: MuJoCo warns through Python, not into MUJOCO_LOG.TXT
    used, fresh = env_spec(env_id).make(), env_spec(env_id).make()
    try:
        actions = copy.deepcopy(used.action_space)
        actions.seed(seed)
        for k in range(used_episodes):
            used.reset(seed=1000 + k)
            done = False
            while not done:
                _, _, terminated, truncated, _ = used.step(actions.sample())
                done = terminated or truncated
        step = 0
        for episode_seed in (seed, seed + 1):
            a, _ = used.reset(seed=episode_seed)
            b, _ = fresh.reset(seed=episode_seed)
            if not np.array_equal(a, b):
                return step
            for _ in range(max_steps):
                action = actions.sample()
                x, y = used.step(copy.deepcopy(action)), fresh.step(action)
                step += 1
                if not (np.array_equal(x[0], y[0]) and x[1:4] == y[1:4]):
                    return step
                if x[2] or x[3]:
                    break
        return None
    finally:
        used.close()
        fresh.close()


@pytest.mark.parametrize("env_id", ALLOWED)
def test_a_used_env_of_an_allowed_family_replays_a_fresh_envs_episodes(env_id):
    assert _first_difference(env_id) is None
    assert reset_is_exact(env_spec(env_id))


def test_a_used_bipedal_walker_leaves_a_fresh_ones_episode_so_it_is_never_reused():
    # Its Box2D world outlives reset: after two whole episodes the third differs at once.
    assert _first_difference("BipedalWalker-v3", used_episodes=2) is not None
    assert not reset_is_exact(env_spec("BipedalWalker-v3"))
    assert not reset_is_exact(env_spec(lambda: gym.make("BipedalWalker-v3")))  # not probed


def test_the_allow_list_goes_by_entry_point_and_needs_no_env():
    made = []
    spec = gym.spec("CartPole-v1")
    env = AuditEnv("CartPole-v1", lambda: made.append(1) or gym.make(spec), source=spec)
    assert reset_is_exact(env) and made == []


# ------------------------------------------------------------------ custom envs: the probe


class EpisodeCounter(CounterEnv):
    """CounterEnv that also shows how many episodes it has started: state across resets."""

    def __init__(self) -> None:
        super().__init__(horizon=10)
        self.observation_space = spaces.Box(0.0, 1e6, (2,), dtype=np.float32)
        self.episodes = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.episodes += 1
        return np.array([0.0, self.episodes], dtype=np.float32), {}

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return np.append(obs, self.episodes), reward, terminated, truncated, info


class Drifting(CounterEnv):
    """Exact at reset, but rewards drift with the total steps ever taken (a stateful
    simulator clock): only stepping after the reset shows it."""

    def __init__(self) -> None:
        super().__init__(horizon=100)
        self.clock = 0

    def step(self, action: Any):
        self.clock += 1
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward + 1e-9 * self.clock, terminated, truncated, info


class Scarred(CounterEnv):
    """Marked for good by its first episode's end (40 steps: past the probe's first 30)."""

    def __init__(self) -> None:
        super().__init__(horizon=40)
        self.scar = 0.0

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        if terminated:
            self.scar = 1.0
        return obs + self.scar, reward, terminated, truncated, info


class Unseeded(CounterEnv):
    """Ignores the reset seed: draws its start from numpy's global generator."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return np.array([np.random.random()], dtype=np.float32), {}


class DictCounter(gym.Env):
    """Exact, with Dict observations drawn from the seeded generator."""

    observation_space = spaces.Dict({"t": spaces.Box(0, 100, (1,)), "noise": spaces.Box(-1, 1, (2,))})
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any):
        self.t += 1
        return self._obs(), float(action), False, self.t >= 7, {}

    def _obs(self) -> dict[str, np.ndarray]:
        return {"t": np.array([self.t], dtype=np.float32),
                "noise": self.np_random.uniform(-1, 1, 2).astype(np.float32)}


class Exploding(CounterEnv):
    def step(self, action: Any):
        if self.t >= 3:
            raise RuntimeError("simulator exploded")
        return super().step(action)


@pytest.mark.parametrize("factory, exact", [
    (lambda: CounterEnv(horizon=10), True),
    (lambda: gym.wrappers.TimeLimit(CounterEnv(), max_episode_steps=12), True),
    (DictCounter, True),
    (EpisodeCounter, False),
    (Drifting, False),
    (Scarred, False),
    (Unseeded, False),
    (Exploding, False),
], ids=["counter", "time-limit", "dict-obs", "episode-counter", "drifting", "scarred",
        "unseeded", "exploding"])
def test_the_probe_tells_envs_that_keep_state_across_resets(factory, exact):
    assert probe_reset(AuditEnv("probed", factory)) is exact


class GlobalDraws(CounterEnv):
    """Seeded at reset, but its steps draw from numpy's global generator."""

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward + np.random.random(), terminated, truncated, info


@pytest.mark.parametrize("factory, kind", [
    (lambda: CounterEnv(horizon=10), reuse.EXACT),
    (DictCounter, reuse.EXACT),
    (EpisodeCounter, reuse.KEEPS_STATE),
    (Drifting, reuse.KEEPS_STATE),
    (Scarred, reuse.KEEPS_STATE),
    (Unseeded, reuse.UNSEEDED),
    (GlobalDraws, reuse.UNSEEDED),
], ids=["counter", "dict-obs", "episode-counter", "drifting", "scarred", "unseeded",
        "global-draws"])
def test_the_probe_tells_state_kept_across_resets_from_a_seed_ignored(factory, kind):
    verdict = reuse.probe(AuditEnv("probed", factory))
    assert verdict.kind == kind
    assert bool(verdict.detail) is (kind == reuse.UNSEEDED)
    assert verdict.error is None


def test_an_env_that_raises_in_the_probe_gets_a_verdict_carrying_the_error():
    # Issue 42, point 1: the verdict "unknown" said nothing of why, and the audit went on.
    verdict = reuse.probe(AuditEnv("probed", Exploding))
    assert (verdict.kind, verdict.detail) == (reuse.UNKNOWN, "at env step 4 of the first env")
    assert isinstance(verdict.error, RolloutError)
    assert isinstance(verdict.error.__cause__, RuntimeError)
    assert str(verdict.error).startswith(
        "env 'probed' failed (RuntimeError: simulator exploded) in the probe that tells "
        "whether it honours its reset seed")
    assert str(verdict.error).endswith("at env step 4 of the first env")
    assert verdict.error.scenario == "nominal"


class FailsToClose(CounterEnv):
    def close(self):
        raise OSError("the simulator's socket is gone")


def test_an_env_that_raises_when_the_probe_closes_it_is_not_swallowed_either():
    verdict = reuse.probe(AuditEnv("probed", lambda: FailsToClose(horizon=10)))
    assert (verdict.kind, verdict.detail) == (reuse.UNKNOWN, "closing its envs")
    assert isinstance(verdict.error.__cause__, OSError)
    assert str(verdict.error).endswith("before any episode of the audit), closing its envs")


def test_an_unseeded_verdict_says_where_two_fresh_envs_differed():
    detail = reuse.probe(AuditEnv("probed", Unseeded)).detail
    assert detail.startswith("the observations after the first reset differ: [0.")
    detail = reuse.probe(AuditEnv("probed", GlobalDraws)).detail
    assert detail.startswith("the rewards at step 1 differ: 1.")


def test_gymnasiums_own_envs_honour_their_seed_without_a_probe():
    assert reuse.reset_verdict(env_spec("BipedalWalker-v3")).kind == reuse.KEEPS_STATE
    assert reuse.reset_verdict(env_spec("CartPole-v1")).kind == reuse.EXACT


def test_a_probe_runs_once_per_name_and_factory(monkeypatch):
    monkeypatch.setattr(reuse, "_verdicts", {})
    made = []

    def factory():
        made.append(1)
        return EpisodeCounter()

    env = env_spec(factory)
    # used, fresh, and a second fresh env that tells state kept across resets (it replays
    # the first fresh one) from a seed ignored (it does not)
    assert not reset_is_exact(env) and len(made) == 3
    assert not reset_is_exact(env_spec(factory)) and len(made) == 3  # cached
    other = AuditEnv(env.name, lambda: CounterEnv(horizon=10))  # same name, other factory
    assert reset_is_exact(other)


def test_a_probe_runs_once_per_recipe_however_often_the_env_is_named(monkeypatch):
    """Every env_spec call (each agent load, each audit) makes a new factory: the verdict
    is kept by what the factory makes (an id, its keyword arguments, the agent's
    wrappers), so an id outside gymnasium's families is probed once per process."""
    monkeypatch.setattr(reuse, "_verdicts", {})
    probed, real = [], reuse.probe
    monkeypatch.setattr(reuse, "probe", lambda env, **kw: probed.append(env.name) or real(env, **kw))
    if "RlauditCounter-v0" not in gym.registry:
        gym.register("RlauditCounter-v0", entry_point="toy_envs:CounterEnv",
                     disable_env_checker=True)  # a toy: float64 counts in a float32 box
    assert all(reset_is_exact(env_spec("RlauditCounter-v0", horizon=10)) for _ in range(3))
    assert len(probed) == 1
    assert reset_is_exact(env_spec("RlauditCounter-v0", horizon=12)) and len(probed) == 2
    clipped = EnvNeeds(wrappers=(("gymnasium.wrappers.ClipReward", {"max_reward": 1.0}),))
    assert all(reset_is_exact(clipped.apply("RlauditCounter-v0")) for _ in range(3))
    assert len(probed) == 3  # inside the agent's wrappers: another env, probed once
    wider = EnvNeeds(wrappers=(("gymnasium.wrappers.ClipReward", {"max_reward": 2.0}),))
    assert reset_is_exact(wider.apply("RlauditCounter-v0")) and len(probed) == 4
    # keyword arguments that cannot be hashed give no recipe: probed every time, as a
    # factory is
    for _ in range(2):
        assert env_spec("RlauditCounter-v0", horizon=10, box_actions=[0]).recipe is None
    # the id registered again, another entry point: another env, probed again
    assert reset_is_exact(env_spec("RlauditCounter-v0")) and len(probed) == 5
    monkeypatch.setitem(gym.registry, "RlauditCounter-v0", gym.envs.registration.EnvSpec(
        "RlauditCounter-v0", entry_point=EpisodeCounter, disable_env_checker=True))
    assert not reset_is_exact(env_spec("RlauditCounter-v0")) and len(probed) == 6


def test_an_allowed_id_inside_the_agents_wrappers_is_probed():
    class Curriculum(gym.Wrapper):  # harder with every episode: state across resets
        level = 0

        def reset(self, **kwargs):
            self.level += 1
            obs, info = self.env.reset(**kwargs)
            return obs * self.level, info

    needs = types.SimpleNamespace(wrappers=(("Curriculum", {}),))
    env = AuditEnv("CartPole-v1", lambda: Curriculum(gym.make("CartPole-v1")),
                   source="CartPole-v1", needs=needs)
    assert not reset_is_exact(env)
