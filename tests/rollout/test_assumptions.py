"""The method's assumption, checked: episode i replays exactly under env seed seed + i.

An env that ignores ``reset(seed=...)`` or an agent drawing randomness outside the seeds
is refused with :class:`NonReproducibleError` before any rollout of the audit, naming
which and how to seed it; agents that sample from their seeded per-episode stream pass.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from cartpole_agents import robust
from gymnasium import spaces
from toy_envs import CounterEnv

import pytest_rlaudit
from pytest_rlaudit import audit, check_robust
from pytest_rlaudit.errors import NonReproducibleError, RLAuditError
from pytest_rlaudit.rollout import replay, replay_row
from pytest_rlaudit.rollout.replay import PREFIX_STEPS, check_replay
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import BasePolicy, as_policy
from pytest_rlaudit.world.envs import AuditEnv
from pytest_rlaudit.world.reuse import EXACT, Verdict
from pytest_rlaudit.world.scenarios import NOMINAL

PPO_ZIP = Path(__file__).resolve().parents[2] / "examples" / "ppo_cartpole.zip"


class Drift(gym.Env):
    """A walk on a line drawn from the env's seeded generator: obs [x], 20 steps,
    reward -|x|. Subclasses draw from elsewhere."""

    observation_space = spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.x, self.t = float(self.draw()), 0
        return np.array([self.x], np.float32), {}

    def draw(self) -> float:
        return self.np_random.uniform(-1, 1)

    def step(self, action: Any):
        self.x = float(np.clip(self.x + (0.3 if action else -0.3) + 0.05 * self.draw(), -9, 9))
        self.t += 1
        return np.array([self.x], np.float32), -abs(self.x), False, self.t >= 20, {}


class GlobalDraws(Drift):
    """Ignores its seed: draws from numpy's global generator."""

    def draw(self) -> float:
        return np.random.uniform(-1, 1)


class OwnUnseededGenerator(Drift):
    """Ignores its seed: draws from a generator made without one."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng()

    def draw(self) -> float:
        return self.rng.uniform(-1, 1)


def steer(obs: np.ndarray) -> np.ndarray:
    """Back toward 0: a good deterministic agent for Drift."""
    return (obs[:, 0] < 0).astype(np.int64)


def coin(obs: np.ndarray) -> np.ndarray:
    """Random actions from numpy's global generator: outside the audit's seeds."""
    return np.random.randint(0, 2, size=len(obs))


def stdlib_coin(obs: np.ndarray) -> np.ndarray:
    return np.array([random.random() < 0.5 for _ in range(len(obs))], dtype=np.int64)


class SeededSampler(BasePolicy):
    """Samples like an SB3 agent with deterministic=False: each episode from its own
    generator, made by ``initial_state`` from the episode's seed."""

    stateful = True
    name = "seeded-sampler"

    def initial_state(self, seed: np.random.SeedSequence) -> np.random.Generator:
        return np.random.default_rng(seed)

    def act(self, obs: np.ndarray, states: list[Any] | None):
        assert states is not None
        greedy = steer(obs)
        flips = np.array([rng.random() < 0.2 for rng in states])
        return np.where(flips, 1 - greedy, greedy), states


@pytest.fixture(autouse=True)
def seeded_global_generators():
    """The global generators the bad envs and agents draw from, seeded (so that each test
    sees the same draws) and put back afterwards."""
    numpy_state, stdlib_state = np.random.get_state(), random.getstate()
    np.random.seed(1234)
    random.seed(1234)
    yield
    np.random.set_state(numpy_state)
    random.setstate(stdlib_state)


class Counting:
    """A factory that counts the envs it makes."""

    def __init__(self, cls: type[gym.Env]) -> None:
        self.cls, self.made = cls, 0
        self.__qualname__ = cls.__name__  # the env's name in messages

    def __call__(self) -> gym.Env:
        self.made += 1
        return self.cls()


# ------------------------------------------------------------------------ the env's seed


@pytest.mark.parametrize("cls", [GlobalDraws, OwnUnseededGenerator])
def test_an_env_that_ignores_its_seed_is_refused_before_any_rollout(cls):
    factory = Counting(cls)
    with pytest.raises(NonReproducibleError) as info:
        audit(steer, factory, ["jitter"], episodes=4, reference=-100)
    message = str(info.value)
    assert f"env {cls.__name__!r} ignores reset(seed=...)" in message
    assert "the observations after the first reset differ" in message
    assert "two identical audits would give different ratios" in message
    assert "super().reset(seed=seed)" in message and "self.np_random" in message
    assert "cannot be audited with paired episodes" in message
    # jitter's applicability probe and the seed probe's three: no episode of the audit ran
    assert factory.made == 1 + 3


def test_assert_robust_refuses_it_too():
    with pytest.raises(NonReproducibleError, match="ignores reset"):
        check_robust(steer, GlobalDraws, "jitter", episodes=4, reference=-100)


def test_an_env_difference_the_probe_missed_is_still_blamed_on_the_env(monkeypatch):
    # the replay tells the two apart by itself: observations differ after equal actions
    monkeypatch.setattr(replay, "reset_verdict", lambda env: Verdict(EXACT))
    with pytest.raises(NonReproducibleError) as info:
        check_replay(as_policy(steer), AuditEnv("GlobalDraws", GlobalDraws), seed=0)
    message = str(info.value)
    assert "env 'GlobalDraws' does not replay under its seed" in message
    assert "different observations after the reset" in message and "self.np_random" in message


# ------------------------------------------------------------------------ the agent's draws


@pytest.mark.parametrize("agent", [coin, stdlib_coin])
def test_an_agent_drawing_outside_the_seeds_is_refused_naming_the_agent(agent):
    factory = Counting(Drift)
    with pytest.raises(NonReproducibleError) as info:
        audit(agent, factory, ["jitter"], episodes=4, reference=-100)
    message = str(info.value)
    assert message.startswith(f"agent {agent.__name__} does not replay its own episode: on "
                              "episode 0 of env 'Drift' (env seed 0), run twice, it chose")
    assert "for the same observation at agent step" in message
    assert "np.random.*, random.*" in message and "initial_state(seed)" in message
    assert "env 'Drift' ignores" not in message
    # jitter's applicability probe, the seed probe's two (they agree) and the replay's two:
    # no episode of the audit ran
    assert factory.made == 1 + 2 + 2


def test_actions_that_differ_by_rounding_only_say_so():
    def jittery(obs: np.ndarray) -> np.ndarray:  # as a GPU's nondeterministic kernels do
        return 0.5 * (1 + np.random.normal(0, 1e-6, (len(obs), 2)))

    env = AuditEnv("counter", lambda: CounterEnv(horizon=30, box_actions=True))
    with pytest.raises(NonReproducibleError, match="float rounding only") as info:
        check_replay(as_policy(jittery), env, seed=0)
    assert "torch.use_deterministic_algorithms(True)" in str(info.value)


def test_the_errors_are_exported_rlaudit_errors_and_value_errors():
    assert pytest_rlaudit.NonReproducibleError is NonReproducibleError
    assert issubclass(NonReproducibleError, RLAuditError)
    assert issubclass(NonReproducibleError, ValueError)


# ----------------------------------------------------------------- what must keep passing


def test_a_stochastic_agent_sampling_from_its_seeded_stream_audits_and_replays():
    a = audit(SeededSampler(), Drift, ["jitter", "obs_noise"], episodes=6, reference=-100)
    b = audit(SeededSampler(), Drift, ["jitter", "obs_noise"], episodes=6, reference=-100)
    assert np.array_equal(a.nominal.returns, b.nominal.returns)
    assert {n: s.ratio for n, s in a.scenarios.items()} == {
        n: s.ratio for n, s in b.scenarios.items()}


def test_an_sb3_agent_sampling_with_deterministic_false_passes():
    sb3 = pytest.importorskip("stable_baselines3")
    model = sb3.PPO.load(PPO_ZIP, device="cpu")
    policy = as_policy(model, deterministic=False)  # what --rl-stochastic audits
    assert policy.stateful
    check_replay(policy, AuditEnv("CartPole-v1", lambda: gym.make("CartPole-v1")), seed=0)


def test_the_replay_costs_one_episode_and_its_first_steps_of_policy_calls_of_one_row():
    calls = []

    def counted(obs: np.ndarray) -> np.ndarray:
        calls.append(len(obs))
        return steer(obs)

    replayed = check_replay(as_policy(counted), AuditEnv("Drift", Drift), seed=0)
    # Drift's whole episode once, its first PREFIX_STEPS again
    assert len(calls) == 20 + PREFIX_STEPS and set(calls) == {1}
    assert replayed is not None and replayed.steps == 20 and len(replayed.trace) == 20


def _torch_agents():
    torch = pytest.importorskip("torch")
    from torch import nn
    from torch.distributions import Categorical

    class Sampling(nn.Module):
        """cleanrl/ppo.py's shape: get_action_and_value samples."""

        def __init__(self) -> None:
            super().__init__()
            self.pi, self.v = nn.Linear(4, 2), nn.Linear(4, 1)

        def get_action_and_value(self, x, action=None):
            probs = Categorical(logits=self.pi(x))
            action = probs.sample() if action is None else action
            return action, probs.log_prob(action), probs.entropy(), self.v(x)

    class NoisyQ(nn.Module):
        """Q-values plus noise from torch's global generator: outside the seeds."""

        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(4, 2)

        def forward(self, x):
            return self.q(x) + torch.randn(x.shape[0], 2)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Sampling(), NoisyQ()


def test_a_torch_agent_sampling_through_its_seeded_stream_passes_and_global_noise_does_not():
    import torch

    sampling, noisy = _torch_agents()
    cartpole = AuditEnv("CartPole-v1", lambda: gym.make("CartPole-v1"))
    check_replay(as_policy(sampling, deterministic=False), cartpole, seed=0)
    with torch.random.fork_rng(devices=[]), pytest.raises(
            NonReproducibleError, match="^agent NoisyQ does not replay"):
        torch.manual_seed(1234)
        check_replay(as_policy(noisy), cartpole, seed=0)


class LateCoin(BasePolicy):
    """Balances CartPole, and from agent step 20 of each episode on sometimes flips its
    action on the stdlib's unseeded ``random``: its first steps replay, its episodes do
    not (two audits of it gave nominal 41.0 and 41.7)."""

    stateful = True
    name = "late-coin"

    def initial_state(self, seed: np.random.SeedSequence) -> list[int]:
        return [0]  # agent steps so far in this episode

    def act(self, obs: np.ndarray, states: list[Any] | None):
        assert states is not None
        actions = robust(obs)
        for i, state in enumerate(states):
            state[0] += 1
            if state[0] > 20 and random.random() < 0.1:
                actions[i] = 1 - actions[i]
        return actions, states


@pytest.mark.parametrize("env, scenario, row, how", [
    # one env per slot: the check ran the whole episode before the audit
    (lambda: gym.make("CartPole-v1"), "jitter", True,
     "run by the seed-replay check and then by the audit"),
    # CartPole's vector env: its first steps before, the whole of it in a row of the batch
    ("CartPole-v1", "jitter", True, "run in two rows of the audit's batch"),
    # push needs the physics, so it runs one env per slot; nominal still runs batched
    ("CartPole-v1", "push", True, "run in two rows of the audit's batch"),
    # an env that can batch, whose batch hands back no replay row (as on Ray's actors):
    # the check runs the whole episode after all
    ("CartPole-v1", "jitter", False, "run by the seed-replay check and then by the audit"),
], ids=["slots", "batch", "batch-and-slots", "batch-without-row"])
def test_an_agent_drawing_outside_the_seeds_only_late_in_the_episode_is_refused(
        env, scenario, row, how, monkeypatch):
    if not row:
        monkeypatch.setattr(replay_row, "wanted", lambda: None)
    # the draws start past the 16 steps the replay once compared
    with pytest.raises(NonReproducibleError) as info:
        audit(LateCoin(), env, [scenario], episodes=4)
    message = str(info.value)
    name = "CartPole-v1" if isinstance(env, str) else "<lambda>"
    assert message.startswith("agent late-coin does not replay its own episode: on episode 0 "
                              f"of env {name!r} (env seed 0), {how}, it chose"), message
    step = int(message.split("for the same observation at agent step ")[1].split(".")[0])
    assert step >= 20  # past the first PREFIX_STEPS, which replayed alike
    assert "random.*" in message and "initial_state(seed)" in message



class LateGlobalDraws(Drift):
    """Honours its seed for 17 steps, then draws from numpy's global generator."""

    def draw(self) -> float:
        return np.random.uniform(-1, 1) if getattr(self, "t", 0) >= 17 else super().draw()


def test_an_env_drawing_outside_its_seed_only_late_in_the_episode_is_refused():
    with pytest.raises(NonReproducibleError) as info:
        audit(steer, LateGlobalDraws, ["jitter"], episodes=4, reference=-100)
    message = str(info.value)
    assert "env 'LateGlobalDraws'" in message and "self.np_random" in message


def test_without_recorded_steps_the_audits_episode_is_held_to_the_replays_rewards_and_length():
    from dataclasses import replace

    env = AuditEnv("Drift", Drift)
    policy = as_policy(steer)
    replayed = check_replay(policy, env, seed=0)
    batch = run_episodes(policy, env, [NOMINAL], 2, seed=0)["nominal"]
    assert not len(batch.observations[0])  # not recorded: rewards and length only
    replay.check_replayed(replayed, policy, env, batch)  # the same episode: silent
    other = replace(batch, returns=batch.returns + 1.0,
                    traces=(batch.traces[0] + 0.5, *batch.traces[1:]))
    with pytest.raises(NonReproducibleError, match="their rewards part at env step 0"):
        replay.check_replayed(replayed, policy, env, other)


def test_on_a_batch_the_check_runs_the_first_steps_and_a_row_of_the_batch_the_rest(monkeypatch):
    # what each run of the replay was asked for, and what came back from the batch
    runs: list[tuple[int, bool]] = []
    real = replay.check_replay

    def noted(*args, **kwargs):
        out = real(*args, **kwargs)
        runs.append((out.steps, out.whole))
        return out

    monkeypatch.setattr("pytest_rlaudit.auditing.engine.check_replay", noted)
    rows: list[Any] = []
    real_asked = replay_row.asked

    @contextlib.contextmanager
    def kept():
        with real_asked() as got:
            yield got
        rows.extend(got)

    monkeypatch.setattr(replay_row, "asked", kept)
    result = audit(as_policy(robust), "CartPole-v1", ["delay"], episodes=3)
    assert runs == [(PREFIX_STEPS, False)]  # no whole episode of one-row calls before
    assert len(rows) == 1 and rows[0].lengths[0] == result.nominal.lengths[0] == 500
    assert rows[0].observations[0].shape == (500, 4)  # recorded, step by step
