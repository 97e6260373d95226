"""The bound on one call (issue 42, point 2): with no audit ``timeout``, an env step or a
policy call that never returns stops the audit with RolloutTimeoutError naming the call,
where it was and the option that changes the bound; ``call_timeout`` changes or removes
it; past a mark the progress line names the call it waits on. Bounds and marks are small
(0.5 s, 0.2 s) to keep the suite fast; the default's 60 s and 10 s are the same code."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest
from cartpole_agents import robust
from stuck_envs import POSIX_TIMERS, Hangs, zeros
from toy_envs import CounterEnv

from pytest_rlaudit import RolloutTimeoutError, audit
from pytest_rlaudit.auditing.settings import AuditSettings
from pytest_rlaudit.errors import InvalidArgumentError
from pytest_rlaudit.rollout import calls
from pytest_rlaudit.rollout.progress import Progress, describe, watching

pytestmark = POSIX_TIMERS


def assert_names_the_fix(message: str, bound: float) -> None:
    assert f"did not return within {bound:g} s" in message
    assert "--rl-call-timeout SECONDS" in message and "rl_call_timeout" in message
    assert "call_timeout=" in message and "remove it with 0" in message


def test_an_env_step_that_never_returns_is_stopped_with_no_audit_timeout():
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info:
        audit(zeros, Hangs, scenarios=["delay"], episodes=4, call_timeout=0.5)
    assert time.monotonic() - began < 15
    exc = info.value
    assert (exc.episode, exc.step, exc.timeout) == (2, 3, 0.5)
    message = str(exc)
    assert message.startswith("env.step did not return within 0.5 s")
    assert f"at scenario '{exc.scenario}', episode 2 (env seed 2), agent step 3" in message
    assert_names_the_fix(message, 0.5)


class Stalls:
    """A callable agent whose ``at``-th call sleeps ``seconds`` (forever by default)."""

    def __init__(self, at: int = 5, seconds: float = 10**6, agent=zeros) -> None:
        self.calls, self.at, self.seconds, self.agent = 0, at, seconds, agent

    def __call__(self, obs):
        self.calls += 1
        if self.calls == self.at:
            try:
                time.sleep(self.seconds)
            except Exception:  # an agent's own catch-all must not swallow the bound
                pass
        return self.agent(obs)


def test_a_policy_call_that_never_returns_is_stopped_naming_the_policy_call():
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info:
        audit(Stalls(), CounterEnv, scenarios=["delay"], episodes=2, call_timeout=0.5)
    assert time.monotonic() - began < 15
    message = str(info.value)
    assert message.startswith("the policy call did not return within 0.5 s")
    assert "look at the agent" in message and info.value.scenario is not None
    assert f"for scenario '{info.value.scenario}', episode {info.value.episode}" in message
    assert_names_the_fix(message, 0.5)


class SleepsOnce(gym.Wrapper):
    """CartPole whose agent step 3 of episode 1 takes a second, then goes on."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))

    def reset(self, *, seed=None, options=None):
        self.seed_, self.t = seed, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.seed_ == 1 and self.t == 3:
            time.sleep(1.0)
        self.t += 1
        return self.env.step(action)


@pytest.mark.parametrize("off", [0, None])
def test_the_bound_is_changed_and_removed_by_call_timeout(off):
    kwargs = dict(scenarios=["delay"], episodes=2)
    with pytest.raises(RolloutTimeoutError, match="^env.step did not return within 0.5 s"):
        audit(robust, SleepsOnce, call_timeout=0.5, **kwargs)
    slow = audit(robust, SleepsOnce, call_timeout=off, **kwargs).to_dict()
    quick = audit(robust, "CartPole-v1", **kwargs).to_dict()
    assert slow["scenarios"] == quick["scenarios"]  # waited for, numbers unchanged


def test_a_worker_process_stuck_in_a_step_is_stopped_by_its_own_watcher():
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info:
        audit(zeros, Hangs, scenarios=["delay"], episodes=4, workers=2, batch_size=4,
              call_timeout=0.5)
    assert time.monotonic() - began < 15
    assert (info.value.episode, info.value.step) == (2, 3)
    assert "env.step did not return within 0.5 s" in str(info.value)


def test_the_default_bound_is_sixty_seconds_and_validated_with_the_audit_timeout():
    assert AuditSettings().call_timeout == calls.CALL_TIMEOUT == 60.0
    assert AuditSettings(call_timeout=0).call_timeout is None
    with pytest.raises(InvalidArgumentError, match=r"^call_timeout must be a finite number in "
                                                   r"\(0, 3\.1536e\+07\] .*got -2: pass a "
                                                   r"number of seconds above 0, or 0 or None "
                                                   r"for no bound$"):
        audit(robust, "CartPole-v1", scenarios=["delay"], episodes=2, call_timeout=-2)


def test_the_progress_line_names_the_call_it_waits_on(monkeypatch):
    monkeypatch.setattr(calls, "WAIT_MARK", 0.2)
    shown = []
    with watching(Progress(shown.append, delay=60.0)):  # no regular update: only the wait
        audit(robust, SleepsOnce, scenarios=["delay"], episodes=2, call_timeout=None,
              progress=False)
    waits = [shot.waiting for shot in shown if shot.waiting is not None]
    assert waits, shown
    assert all(w.startswith("waiting on env.step (scenario ") for w in waits)
    assert any(", episode 1, step 3) for " in w for w in waits)
    assert shown[-1].waiting is None  # cleared once the step returned
    line = describe(shown[shown.index(next(s for s in shown if s.waiting))], words="-")
    assert "waiting on env.step" in line


def test_the_watcher_thread_ends_with_the_audit():
    audit(robust, "CartPole-v1", scenarios=["delay"], episodes=2)
    assert not [t for t in threading.enumerate() if t.name == "rlaudit-call-watch"]
    assert calls.watch() is None


def test_a_policy_stall_inside_the_bound_changes_no_number():
    fast = audit(robust, "CartPole-v1", scenarios=["delay"], episodes=2).to_dict()
    slow = audit(Stalls(seconds=0.3, agent=robust), "CartPole-v1", scenarios=["delay"],
                 episodes=2, call_timeout=5).to_dict()
    assert fast["scenarios"] == slow["scenarios"]
    assert np.isfinite(slow["scenarios"]["delay"]["ratio"])


def test_the_watcher_stops_while_a_worker_is_forked():
    # a process forked with a second thread running may deadlock (Python 3.12+ warns)
    def watchers():
        return [t for t in threading.enumerate() if t.name == "rlaudit-call-watch"]

    with calls.bounded(5):
        assert len(watchers()) == 1
        with calls.paused():
            assert watchers() == []
        assert len(watchers()) == 1
    assert watchers() == []
