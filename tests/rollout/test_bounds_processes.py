"""Bounded audits across processes, and nothing left behind (issue 23, points 4 and 5): an
env step that never returns in an env worker process or a forked shard ends the audit with
RolloutTimeoutError naming where it was stuck, and the process is reaped; forked processes
die with the process that started them, whatever kills it. Limits are small (1 s) to keep
the suite fast; the bounds asserted are the issue's generous ones.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stuck_envs import POSIX_TIMERS, Hangs, assert_stuck_at_episode_2, zeros

from pytest_rlaudit import RolloutTimeoutError, audit
from pytest_rlaudit.rollout.deadline import within
from pytest_rlaudit.rollout.shards import run_forked
from pytest_rlaudit.world.agents.base import BasePolicy

pytestmark = POSIX_TIMERS

TESTS = Path(__file__).resolve().parents[1]


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

# long enough to be killed mid-audit, short enough for the seed-replay check (nominal
# episode 0, whole, in this process) to end first: 3 s of it, then the workers step
audit(agent, lambda: Slow(horizon=3000), scenarios=["delay"], episodes=4, workers=2,
      max_steps=3000)
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
