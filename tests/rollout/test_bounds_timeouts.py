"""Bounded audits in one process (issue 23, point 4): an env step that never returns ends the
audit with RolloutTimeoutError naming where it was stuck, from every entry point; bad
timeouts are refused; an existing SIGALRM timer (pytest-timeout's signal method) keeps
working; outside the main thread the deadline is checked between decision steps. Limits
are small (0.5-1 s) to keep the suite fast; the bounds asserted are the issue's generous
ones.
"""

from __future__ import annotations

import math
import signal
import threading
import time

import pytest
from stuck_envs import POSIX_TIMERS, Hangs, assert_stuck_at_episode_2, zeros
from toy_envs import CounterEnv

from pytest_rlaudit import RolloutTimeoutError, assert_robust, audit, check_robust, tolerance
from pytest_rlaudit.errors import InvalidArgumentError
from pytest_rlaudit.rollout import deadline
from pytest_rlaudit.rollout.deadline import within

pytestmark = POSIX_TIMERS


# ---------------------------------------------------------------- timeouts, one process


def test_a_step_that_never_returns_ends_the_audit_naming_scenario_episode_and_step():
    handler = signal.getsignal(signal.SIGALRM)
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info:
        audit(zeros, Hangs, scenarios=["delay"], episodes=4, timeout=0.5)
    assert time.monotonic() - began < 15
    assert_stuck_at_episode_2(info.value, 0.5)
    assert "in the env's step at" in str(info.value)
    assert signal.getsignal(signal.SIGALRM) is handler  # restored


def test_check_robust_assert_robust_and_tolerance_take_the_same_timeout():
    for call in (lambda: check_robust(zeros, Hangs, "delay", episodes=4, timeout=0.5),
                 lambda: assert_robust(zeros, Hangs, "delay", episodes=4, timeout=0.5),
                 lambda: tolerance(zeros, Hangs, "delay", values=[1], episodes=4, timeout=0.5)):
        began = time.monotonic()
        with pytest.raises(RolloutTimeoutError) as info:
            call()
        assert time.monotonic() - began < 15
        assert info.value.episode == 2 and info.value.step == 3


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, "5", True, 1e10])
def test_bad_timeouts_are_refused_before_anything_runs(bad):
    # 1e10 was an OverflowError ("timestamp out of range") from the system's timer
    with pytest.raises(InvalidArgumentError, match=r"^timeout must be a finite number in "
                                                   r"\(0, 3\.1536e\+07\] \(seconds for the "
                                                   r"whole audit, at most a year\), got .*, "
                                                   r"or None for no limit$") as info:
        audit(zeros, Hangs, scenarios=["delay"], episodes=4, timeout=bad)
    fix = ("pass at most a year of seconds" if bad in (1e10, math.inf)
           else "pass a number of seconds above 0")
    assert fix in str(info.value) and repr(bad) in str(info.value)


def test_a_slow_audit_that_ends_in_time_gives_the_numbers_of_an_unbounded_one(controller):
    kwargs = dict(scenarios=["jitter", "obs_noise"], episodes=3)
    free = audit(controller, "CartPole-v1", **kwargs).to_dict()
    bounded = audit(controller, "CartPole-v1", timeout=60, **kwargs).to_dict()
    free.pop("seconds", None)
    bounded.pop("seconds", None)
    assert free == bounded


# --------------------------------------------------------- sharing SIGALRM with others


class TheirTimeout(BaseException):
    """As pytest-timeout's failure (pytest's outcomes are BaseExceptions)."""


def test_an_earlier_timer_of_someone_else_fires_first_and_both_are_restored():
    fired = []

    def theirs(signum, frame):
        fired.append(time.monotonic())
        raise TheirTimeout("pytest-timeout, say")

    previous = signal.signal(signal.SIGALRM, theirs)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(TheirTimeout):
            audit(zeros, Hangs, scenarios=["delay"], episodes=4, timeout=30)
        assert len(fired) == 1
        assert signal.getsignal(signal.SIGALRM) is theirs
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_later_timer_of_someone_else_survives_an_audit_that_times_out():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(RolloutTimeoutError):
            audit(zeros, Hangs, scenarios=["delay"], episodes=4, timeout=0.5)
        assert fired == []
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left < 0.75  # theirs is armed again, for what it had left
        time.sleep(left + 0.2)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_outside_the_main_thread_the_deadline_is_checked_between_decision_steps():
    class Slow(CounterEnv):
        def step(self, action):
            time.sleep(0.002)
            return super().step(action)

    caught = []

    def run():
        try:
            audit(zeros, lambda: Slow(horizon=10**6), scenarios=["delay"], episodes=2,
                  timeout=0.5, max_steps=10**6)
        except BaseException as exc:  # handed to the test thread
            caught.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(15)
    assert not thread.is_alive()
    assert isinstance(caught[0], RolloutTimeoutError), caught
    assert "between two decision steps" in str(caught[0])
    assert caught[0].scenario in ("nominal", "delay") and caught[0].step is not None


def test_the_deadline_module_arms_nothing_without_a_timeout():
    before = signal.getitimer(signal.ITIMER_REAL)
    with within(None):
        assert deadline.current() is None
        assert signal.getitimer(signal.ITIMER_REAL) == before
