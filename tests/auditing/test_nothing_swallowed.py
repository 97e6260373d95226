"""Nothing swallowed (issue 42, point 1): an exception of the agent or the env, in any
phase of an audit, reaches the user naming the phase, scenario, episode and step, with the
original exception as ``__cause__``, even when it is raised only once.

Each case arms an agent or an env to raise ``ZeroDivisionError`` once, on its next call of
one kind, then runs one phase of the engine (:mod:`pytest_rlaudit.auditing.engine`).
"""

from __future__ import annotations

import multiprocessing
import signal
import time

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit import audit
from pytest_rlaudit.auditing import engine as phases
from pytest_rlaudit.auditing.engine import Engine
from pytest_rlaudit.auditing.settings import AuditSettings
from pytest_rlaudit.errors import RolloutError, RolloutTimeoutError
from pytest_rlaudit.rollout.travel import RemoteTraceback
from pytest_rlaudit.world import scenarios
from pytest_rlaudit.world.agents import BasePolicy
from pytest_rlaudit.world.envs import AuditEnv
from pytest_rlaudit.world.reuse import reset_verdict

DELAY, OBS_NOISE = scenarios.get("delay"), scenarios.get("obs_noise")


class Agent:
    """Balances CartPole; raises once, on its ``n``-th call after :meth:`arm`."""

    def __init__(self) -> None:
        self.left = 0

    def arm(self, n: int = 1) -> None:
        self.left = n

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if self.left:
            self.left -= 1
            if not self.left:
                raise ZeroDivisionError("the agent divided by zero")
        return (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)


class Fault:
    """Makes the env raise once: on the ``n``-th call of ``kind`` (``"make"``, ``"reset"``
    or ``"step"``) after :meth:`arm`, in the processes ``where`` says (all: None)."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.left = 0
        self.where: str | None = None

    def arm(self, kind: str, n: int = 1, where: str | None = None) -> None:
        self.kind, self.left, self.where = kind, n, where

    def hit(self, kind: str) -> None:
        here = self.where is None or multiprocessing.current_process().name == self.where
        if kind == self.kind and here:
            self.left -= 1
            if not self.left:
                self.kind = None
                raise ZeroDivisionError(f"the env's {kind} divided by zero")


class Flaky(gym.Wrapper):
    def __init__(self, env: gym.Env, fault: Fault) -> None:
        super().__init__(env)
        self.fault = fault

    def reset(self, **kwargs):
        self.fault.hit("reset")
        return self.env.reset(**kwargs)

    def step(self, action):
        self.fault.hit("step")
        return self.env.step(action)


def flaky_env(fault: Fault) -> AuditEnv:
    def factory() -> gym.Env:
        fault.hit("make")
        return Flaky(gym.make("CartPole-v1"), fault)

    return AuditEnv("flaky", factory)


@pytest.fixture
def setup():
    """An engine on an agent and an env that are fine until armed; the env's seed probe
    already run (else the first phase would meet an armed env there)."""
    agent, fault = Agent(), Fault()
    engine = Engine(agent, flaky_env(fault), AuditSettings(episodes=2, max_steps=40))
    reset_verdict(engine.env)
    return engine, agent, fault


def caught(run) -> RolloutError:
    with pytest.raises(RolloutError) as info:
        run()
    return info.value


def assert_named(exc: RolloutError, phase: str, scenario: str, episode: int | None,
                 step: int | None) -> None:
    assert (exc.phase, exc.scenario, exc.episode, exc.step) == (phase, scenario, episode, step)
    message = str(exc)
    assert message.startswith(f"during {phase}: ")
    if episode is not None:
        assert f"scenario {scenario!r}, episode {episode} (env seed {episode}), agent step {step}" \
            in message
    assert type(exc.__cause__) is ZeroDivisionError
    assert "divided by zero" in message


def test_an_agent_that_raises_on_its_third_call_is_not_audited_with_numbers():
    # The case: the replay took it as "the replay failed"; later calls never
    # raised again, and the audit printed numbers without a word.
    agent = Agent()
    agent.arm(3)
    exc = caught(lambda: audit(agent, "CartPole-v1", scenarios=["delay"], episodes=2))
    assert_named(exc, phases.REPLAY, "nominal", 0, 2)
    assert "the agent failed (ZeroDivisionError: the agent divided by zero)" in str(exc)


def test_the_replay_names_an_action_outside_the_space_as_the_runner_does():
    engine = Engine(lambda obs: np.full(len(obs), 7), "CartPole-v1", AuditSettings(episodes=2))
    exc = caught(lambda: engine.check([DELAY]))
    assert (exc.phase, exc.scenario, exc.episode, exc.step) == (phases.REPLAY, "nominal", 0, 0)
    assert "the agent returned action 7, which is not in the action space Discrete(2)" in str(exc)


# (phase, who is armed and how, the engine's call, scenario, episode, agent step)
CASES = [
    (phases.CONTRACT, ("env", "make", 1), lambda e: e.check([DELAY]), "delay", None, None),
    (phases.REPLAY, ("agent", 3), lambda e: e.check([DELAY]), "nominal", 0, 2),
    (phases.REPLAY, ("env", "step", 3), lambda e: e.check([DELAY]), "nominal", 0, 2),
    (phases.REPLAY, ("env", "reset", 1), lambda e: e.check([DELAY]), "nominal", 0, 0),
    (phases.NOMINAL_EPISODES, ("agent", 5), lambda e: e.nominal(range(2)), "nominal", 0, 4),
    (phases.NOMINAL_EPISODES, ("env", "step", 5), lambda e: e.nominal(range(2)), "nominal",
     0, 2),
    (phases.CALIBRATION, ("agent", 1), lambda e: e.calibrated(OBS_NOISE), "nominal", 0, 0),
    (phases.CALIBRATION, ("env", "reset", 2), lambda e: e.calibrated(OBS_NOISE), "nominal",
     1, 0),
    (phases.SCENARIO_EPISODES, ("agent", 1),
     lambda e: e.paired([DELAY], range(2), separate=True), "delay", 0, 0),
    (phases.SCENARIO_EPISODES, ("env", "step", 1),
     lambda e: e.paired([DELAY], range(2), separate=True), "delay", 0, 0),
    (phases.PAIRED_EPISODES, ("agent", 1), lambda e: e.paired([DELAY], range(2)), "nominal",
     0, 0),
    (phases.PAIRED_EPISODES, ("env", "reset", 3), lambda e: e.paired([DELAY], range(2)),
     "delay", 0, 0),
    (phases.REFERENCE, ("env", "step", 3), lambda e: e.random(2), "nominal", 0, 1),
    (phases.REFERENCE, ("env", "reset", 2), lambda e: e.random(2), "nominal", 1, 0),
]


@pytest.mark.parametrize("phase, armed, run, scenario, episode, step", CASES,
                         ids=[f"{c[0].split(' (')[0]}-{'-'.join(map(str, c[1]))}" for c in CASES])
def test_a_fault_raised_once_in_any_phase_reaches_the_user_naming_where(
        setup, phase, armed, run, scenario, episode, step):
    engine, agent, fault = setup
    if armed[0] == "agent":
        agent.arm(armed[1])
    else:
        fault.arm(*armed[1:])
    assert_named(caught(lambda: run(engine)), phase, scenario, episode, step)


def test_an_env_that_raises_once_in_the_seed_probe_is_named_after_the_replay():
    # The probe (two fresh envs under one seed) took any exception as "unknown": not
    # reused, and nothing said.
    fault = Fault()
    fault.arm("step", 10)
    engine = Engine(Agent(), flaky_env(fault), AuditSettings(episodes=2, max_steps=40))
    exc = caught(lambda: engine.check([DELAY]))
    assert (exc.phase, exc.scenario) == (phases.REPLAY, "nominal")
    assert type(exc.__cause__) is ZeroDivisionError
    assert str(exc).startswith(
        f"during {phases.REPLAY}: env 'flaky' failed (ZeroDivisionError: the env's step "
        "divided by zero) in the probe that tells whether it honours its reset seed")
    assert str(exc).endswith("at env step 10 of the first env")


@pytest.mark.parametrize("process", ["rlaudit-shard", "rlaudit-envs"])
def test_a_fault_in_a_worker_process_arrives_with_its_type_and_traceback(setup, process):
    engine, _, fault = setup
    engine.policy.shards_freely = process == "rlaudit-shard"
    engine.settings = engine.settings.but(workers=2, episodes=4)
    fault.arm("step", 3, where=process)
    exc = caught(lambda: engine.nominal(range(4)))
    assert exc.phase == phases.NOMINAL_EPISODES and exc.scenario == "nominal"
    assert exc.episode in range(4) and exc.step in (1, 2)  # 2 episodes a process, in turn
    assert str(exc).startswith(f"during {phases.NOMINAL_EPISODES}: env step failed "
                               "(ZeroDivisionError: the env's step divided by zero) at "
                               "scenario 'nominal', episode ")
    assert type(exc.__cause__) is ZeroDivisionError
    remote = exc.__cause__.__cause__
    assert isinstance(remote, RemoteTraceback)
    assert remote.text.startswith("in worker process ")
    assert "test_nothing_swallowed.py" in remote.text and "in hit" in remote.text


class Stateful(BasePolicy):
    """Keeps a state per episode; its ``initial_state`` raises once, on its ``n``-th call."""

    stateful = True
    name = "stateful"

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def initial_state(self, seed: np.random.SeedSequence) -> int:
        self.left -= 1
        if not self.left:
            raise ZeroDivisionError("the agent's initial state divided by zero")
        return 0

    def act(self, obs, states):
        return (obs[:, 2] + obs[:, 3] > 0).astype(np.int64), states


@pytest.mark.parametrize("n, phase, episode", [(1, phases.REPLAY, 0),
                                               (4, phases.PAIRED_EPISODES, 0),
                                               (5, phases.PAIRED_EPISODES, 1)])
def test_an_agents_initial_state_that_raises_once_is_named(n, phase, episode):
    # replay: twice episode 0's first steps; then the batch: nominal episode 0, the replay
    # row (episode 0 again, named as what it runs), nominal episode 1
    exc = caught(lambda: audit(Stateful(n), "CartPole-v1", scenarios=["delay"], episodes=2))
    assert (exc.phase, exc.scenario, exc.episode, exc.step) == (phase, "nominal", episode, 0)
    assert type(exc.__cause__) is ZeroDivisionError
    assert str(exc).startswith(f"during {phase}: the agent failed (ZeroDivisionError: the "
                               "agent's initial state divided by zero) in its initial_state for "
                               f"scenario 'nominal', episode {episode}")


class Hangs(gym.Wrapper):
    """Never returns from agent step 3 of episode 2 (env seed 2)."""

    def reset(self, *, seed=None, options=None):
        self.seed_, self.t = seed, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.seed_ == 2 and self.t == 3:
            time.sleep(10**6)
        self.t += 1
        return self.env.step(action)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers")
def test_a_timeout_names_the_phase_it_struck_in():
    env = AuditEnv("hangs", lambda: Hangs(gym.make("CartPole-v1")))
    with pytest.raises(RolloutTimeoutError) as info:
        audit(Agent(), env, scenarios=["delay"], episodes=3, timeout=1)
    exc = info.value
    assert (exc.phase, exc.episode, exc.step) == (phases.PAIRED_EPISODES, 2, 3)
    assert str(exc).startswith(f"during {phases.PAIRED_EPISODES}: the audit ran past its "
                               f"timeout of 1 s: it was stuck in the env's step at scenario "
                               f"{exc.scenario!r}, episode 2 (env seed 2), agent step 3")
