"""Bounded audits and nothing left behind (issue 23, points 4 and 5).

An env step that never returns ends the audit with RolloutTimeoutError naming where it
was stuck, in this process, in worker processes and in forked shards; an existing SIGALRM
timer (pytest-timeout's signal method) keeps working; forked processes die with the
process that started them, whatever kills it; a RAY_ADDRESS that does not answer is an
error naming it. Limits are small (1-2 s) to keep the suite fast; the bounds asserted are
the issue's generous ones.
"""

from __future__ import annotations

import importlib.util
import math
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from toy_envs import CounterEnv

from pytest_rlaudit import (
    RLAuditError,
    RolloutError,
    RolloutTimeoutError,
    assert_robust,
    audit,
    check_robust,
    tolerance,
)
from pytest_rlaudit.errors import InvalidArgumentError
from pytest_rlaudit.rollout import deadline, ray_connect
from pytest_rlaudit.rollout.deadline import within
from pytest_rlaudit.rollout.shards import run_forked
from pytest_rlaudit.world.agents.base import BasePolicy

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers")

TESTS = Path(__file__).resolve().parents[1]


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


def children_alive(parent: int = 0) -> list[int]:
    """Pids of the live (not zombie) children of ``parent`` (default: this process)."""
    parent = parent or os.getpid()
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent and fields[0] not in "ZX":
                alive.append(int(entry.name))
    return alive


def dead(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie (killed, not yet reaped by its new parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    except OSError:  # no /proc: ask the kernel (a zombie counts as alive here)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return state in "ZX"


def assert_stuck_at_episode_2(exc: RolloutTimeoutError, timeout: float) -> None:
    assert isinstance(exc, RolloutError) and isinstance(exc, TimeoutError)
    assert (exc.episode, exc.step, exc.timeout) == (2, 3, timeout)
    assert exc.scenario in ("nominal", "delay")
    message = str(exc)
    assert f"scenario '{exc.scenario}', episode 2 (env seed 2), agent step 3" in message
    assert f"ran past its timeout of {timeout:g} s" in message
    assert "--rl-timeout" in message and "timeout=" in message  # the fix


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


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, "5", True])
def test_bad_timeouts_are_refused_before_anything_runs(bad):
    with pytest.raises(InvalidArgumentError, match=r"^timeout must be a finite number > 0 "
                                                   r"\(seconds for the whole audit; None for "
                                                   r"no limit\), got "):
        audit(zeros, Hangs, scenarios=["delay"], episodes=4, timeout=bad)


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


# ------------------------------------------------------ timeouts, worker processes


def test_a_worker_stuck_in_a_step_ends_the_audit_naming_where_and_is_reaped():
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info:
        audit(zeros, Hangs, scenarios=["delay"], episodes=4, workers=2, batch_size=4,
              timeout=1)
    assert time.monotonic() - began < 15
    assert_stuck_at_episode_2(info.value, 1)
    assert children_alive() == []


class Pinned(BasePolicy):
    """zeros, kept in one process: the env workers step the envs (no shards)."""

    shards_freely = False

    def act(self, obs, states):
        return zeros(obs), None


def test_a_worker_stuck_where_its_own_alarm_cannot_reach_is_named_by_its_rows_and_killed():
    # One slot in the worker (batch_size=2: one here, one there), so one row it holds.
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info:
        audit(Pinned(), lambda: Hangs("rlaudit-envs", block_alarm=True), scenarios=["delay"],
              episodes=4, workers=2, batch_size=2, timeout=1)
    assert time.monotonic() - began < 15
    message = str(info.value)
    assert "stuck in env worker process" in message and "did not answer in time" in message
    assert info.value.scenario in ("nominal", "delay") and info.value.step == 3
    assert (f"for scenario '{info.value.scenario}', episode {info.value.episode} (env seed "
            f"{info.value.episode}), agent step 3") in message
    assert children_alive() == []


def test_a_shard_stuck_where_its_own_alarm_cannot_reach_is_named_by_its_episodes_and_killed():
    # workers=2 on 4 episodes: the forked process runs episodes 2 and 3 of both scenarios.
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info:
        audit(zeros, lambda: Hangs("rlaudit-shard", block_alarm=True), scenarios=["delay"],
              episodes=4, workers=2, timeout=1)
    assert time.monotonic() - began < 15
    message = str(info.value)
    assert "did not answer in time: it ran episodes 2 to 3 of 'nominal', 'delay'" in message
    assert info.value.episode == 2
    assert children_alive() == []


def test_a_forked_shard_stuck_in_a_step_ends_in_time_and_is_reaped():
    def run(shard):
        if shard[1] == [1]:
            time.sleep(10**6)
        return {"x": None}

    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info, within(1):
        run_forked(run, [([0], [0]), ([0], [1])], ["x"])
    assert time.monotonic() - began < 15
    assert "ran past its timeout of 1 s" in str(info.value)
    assert children_alive() == []


# ---------------------------------------------------------------- nothing left behind

WORKERS = """
import os, sys, time
import numpy as np
sys.path.insert(0, {tests!r})
from toy_envs import CounterEnv
from pytest_rlaudit import audit

class Slow(CounterEnv):
    def step(self, action):
        time.sleep(0.001)
        return super().step(action)

told = False

def agent(obs):
    global told
    import multiprocessing
    pids = [p.pid for p in multiprocessing.active_children()]
    if pids and not told:  # the workers step: the audit is surely running
        print("CHILDREN", *pids, flush=True)
        told = True
    return np.zeros(len(obs), dtype=np.int64)

audit(agent, lambda: Slow(horizon=10**6), scenarios=["delay"], episodes=4, workers=2,
      max_steps=10**6)
"""

SHARDS = """
import os, time
from pytest_rlaudit.rollout.shards import run_forked

def run(shard):
    if shard == [1]:
        print("CHILDREN", os.getpid(), flush=True)
    time.sleep(10**6)

run_forked(run, [[0], [1]], ["x"])
"""


@pytest.mark.parametrize(("script", "sig"), [(WORKERS, signal.SIGTERM), (WORKERS, signal.SIGKILL),
                                             (SHARDS, signal.SIGKILL)],
                         ids=["workers-SIGTERM", "workers-SIGKILL", "shards-SIGKILL"])
def test_forked_processes_die_with_their_parent(script, sig):
    process = subprocess.Popen([sys.executable, "-c", script.format(tests=str(TESTS))],
                               stdout=subprocess.PIPE, text=True)
    try:
        children: list[int] = []
        began = time.monotonic()
        for line in process.stdout:  # the audit runs, its workers forked: kill it now
            if line.startswith("CHILDREN"):
                children = [int(pid) for pid in line.split()[1:]]
                break
            assert time.monotonic() - began < 60
        assert children, "the script never reported its forked processes"
        process.send_signal(sig)
        process.wait(10)
        began = time.monotonic()
        while not all(dead(pid) for pid in children) and time.monotonic() - began < 5:
            time.sleep(0.05)
        left = [pid for pid in children if not dead(pid)]
        for pid in left:  # do not leak them into the rest of the suite
            os.kill(pid, signal.SIGKILL)
        assert left == [], f"forked processes outlived their parent by 5 s: {left}"
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


# ------------------------------------------------------------- Ray that cannot be reached


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1", "192.0.2.1:6379"])
def test_a_ray_address_that_does_not_answer_is_named(monkeypatch, address):
    monkeypatch.setenv("RAY_ADDRESS", address)
    began = time.monotonic()
    with pytest.raises(RLAuditError, match=rf"RAY_ADDRESS={address}\b.*unset it"):
        ray_connect.check_reachable()
    assert time.monotonic() - began < 30


@pytest.mark.parametrize("address", ["", "auto", "local"])
def test_a_local_ray_address_needs_no_network(monkeypatch, address):
    monkeypatch.setenv("RAY_ADDRESS", address)
    ray_connect.check_reachable()


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_an_audit_on_an_unreachable_ray_fails_within_30_s_naming_ray_address():
    code = textwrap.dedent("""
        import numpy as np
        from pytest_rlaudit import audit
        audit(lambda o: np.zeros(len(o), dtype=np.int64), "CartPole-v1", scenarios=["delay"],
              episodes=2, backend="ray")
    """)
    began = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "RAY_ADDRESS": "127.0.0.1:1"})
    assert time.monotonic() - began < 30
    assert out.returncode != 0
    assert "RLAuditError: backend=\"ray\" cannot reach the Ray cluster at RAY_ADDRESS=127.0.0.1:1" \
        in out.stderr
    assert "Failed to connect to GCS" not in out.stderr  # Ray never started retrying


@pytest.mark.parametrize("says", [b"", b"SSH-2.0-OpenSSH_9.6\r\n"], ids=["silent", "ssh"])
def test_something_other_than_ray_at_ray_address_is_named(monkeypatch, says):
    # A port that accepts connections but is no Ray head (a proxy, another service): Ray
    # would retry for minutes, blocked in its own code.
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        conn.sendall(says)
        stop.wait(10)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setattr(ray_connect, "CONNECT_SECONDS", 1.0)
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{server.getsockname()[1]}")
    try:
        with pytest.raises(RLAuditError, match=r"something answers at RAY_ADDRESS=127\.0\.0\.1:"
                                               r"\d+, but not a Ray head node"):
            ray_connect.check_reachable()
    finally:
        stop.set()
        thread.join()
        server.close()


def test_the_deadline_module_arms_nothing_without_a_timeout():
    before = signal.getitimer(signal.ITIMER_REAL)
    with within(None):
        assert deadline.current() is None
        assert signal.getitimer(signal.ITIMER_REAL) == before
