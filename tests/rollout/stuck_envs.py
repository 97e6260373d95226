"""What the bounded-audit modules (tests/rollout/test_bounds_*.py) share: their POSIX-timer
skip, an agent of zeros, and an env whose step never returns (``Hangs``), with the check
of the error that names where it was stuck."""

from __future__ import annotations

import multiprocessing
import signal
import time

import numpy as np
import pytest
from toy_envs import CounterEnv

from pytest_rlaudit import RolloutError, RolloutTimeoutError

POSIX_TIMERS = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers")


def zeros(obs):
    return np.zeros(len(obs), dtype=np.int64)


class Hangs(CounterEnv):
    """Never returns from agent step 3, even for an env that catches every Exception around
    its simulator: in episode 2 (env seed 2) by default, or in every episode of the forked
    processes named ``where`` (``rlaudit-envs``: env workers; ``rlaudit-shard``: shards)."""

    def __init__(self, where: str = "", block_alarm: bool = False) -> None:
        super().__init__(horizon=20)
        self.where, self.block_alarm = where, block_alarm
        self.seed_ = None

    def reset(self, *, seed=None, options=None):
        self.seed_ = seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        here = (multiprocessing.current_process().name == self.where if self.where
                else self.seed_ == 2)
        if here and self.t == 3:
            if self.block_alarm:  # C code that never returns to the interpreter, as it were
                signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
            try:
                time.sleep(10**6)
            except Exception:  # an env's own catch-all must not swallow the deadline
                pass
        return super().step(action)


def assert_stuck_at_episode_2(exc: RolloutTimeoutError, timeout: float) -> None:
    assert isinstance(exc, RolloutError) and isinstance(exc, TimeoutError)
    assert (exc.episode, exc.step, exc.timeout) == (2, 3, timeout)
    assert exc.scenario in ("nominal", "delay")
    message = str(exc)
    assert f"scenario '{exc.scenario}', episode 2 (env seed 2), agent step 3" in message
    assert f"ran past its timeout of {timeout:g} s" in message
    assert "--rl-timeout" in message and "timeout=" in message  # the fix
