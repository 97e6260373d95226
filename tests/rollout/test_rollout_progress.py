"""The progress counter (pytest_rlaudit.rollout.progress): what the runner tells it on every
path (in-process, worker processes, forked shards), its throttle, its time-left estimate
and its hint of worker processes; and that it changes no number."""

from __future__ import annotations

import contextvars
import os

import numpy as np
import pytest

from pytest_rlaudit import scenarios
from pytest_rlaudit.rollout import progress as progress_module
from pytest_rlaudit.rollout.progress import Progress, Snapshot, current, describe, expect, watching
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import env_spec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lengths(out):
    return sum(int(b.lengths.sum()) for b in out.values())


@pytest.mark.parametrize("how", ["here", "workers", "forked shards"])
def test_every_episode_counts_once_on_every_path_and_no_number_changes(controller, how):
    env = env_spec("CartPole-v1")
    if how == "forked shards":  # the random policy shards freely: whole episodes per process
        policy, chosen, workers = as_policy("random", env=env), ["nominal"], 2
    else:
        policy, chosen, workers = as_policy(controller), ["nominal", "jitter", "obs_noise"], (
            2 if how == "workers" else None)
    run = lambda: run_episodes(policy, env, scenarios.resolve(chosen), episodes=4, seed=3,  # noqa: E731
                               workers=workers)
    shown: list[Snapshot] = []
    outer = current()  # the pytest plugin's, around every test
    with watching(Progress(shown.append, delay=0.0, interval=0.0)) as progress:
        out = run()
    plain = run()
    assert {k: b.returns.tolist() for k, b in out.items()} == {
        k: b.returns.tolist() for k, b in plain.items()}
    n = 4 * len(chosen)
    assert progress.total == progress.done == progress.started == n
    assert progress.steps == progress.ended_steps == lengths(out)
    assert progress.parallel == (how != "here")
    assert shown and shown[-1].done == n and [s.done for s in shown] == sorted(s.done for s in shown)
    assert current() is outer  # uninstalled after the block


def test_nothing_is_installed_by_default_and_a_forked_process_never_reports():
    assert contextvars.Context().run(current) is None  # outside the plugin's test calls
    contextvars.Context().run(expect, 5)  # nobody to tell: no error
    with watching(Progress()):
        assert current() is not None
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child inherits the context variable
            os.write(write, b"none" if current() is None else b"some")
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(read, 4) == b"none"
        os.close(read)
        os.close(write)


def test_it_shows_nothing_before_the_delay_then_at_most_every_interval():
    clock, shown = Clock(), []
    progress = Progress(shown.append, delay=2.0, interval=0.25, clock=clock)
    progress.planned(10, horizon=100)
    for _ in range(15):  # 1.875 s of steps
        clock.now += 0.125
        progress.advance(rows=10, started=0)
    assert shown == []
    for _ in range(8):  # one more second, a step every 0.125 s: an update every 0.25 s
        clock.now += 0.125
        progress.advance(rows=10)
    assert len(shown) == 4
    assert shown[0].elapsed == pytest.approx(2.0)


def test_the_time_left_runs_to_the_time_limit_and_the_total_counts_what_is_expected():
    clock, shown = Clock(), []
    progress = Progress(shown.append, delay=0.0, interval=0.0, clock=clock)
    progress.expect(30)  # as the plugin does: reference, nominal and scenario episodes
    progress.planned(10, horizon=100)
    progress.advance(started=10)
    for _ in range(50):  # half way to the time limit, 10 rows per second of decision steps
        clock.now += 0.1
        progress.advance(rows=10)
    last = shown[-1]
    assert (last.done, last.total) == (0, 30)
    # 10 running episodes with 50 steps to go, 20 more of 100 steps, at 100 steps a second
    assert last.left == pytest.approx((10 * 50 + 20 * 100) / 100)
    clock.now += 0.1
    progress.advance(rows=0, finished=[50] * 10)  # they all ended early
    progress.planned(20)  # no time limit known: the mean length of those ended before
    assert progress.remaining_steps() == 20 * 50
    assert progress.snapshot().total == 30


def test_no_estimate_without_a_time_limit_or_an_ended_episode():
    progress = Progress(delay=0.0, interval=0.0)
    progress.planned(4)
    progress.advance(rows=4, started=4)
    assert progress.snapshot().left is None
    assert describe(progress.snapshot(), words="w") == "0/4 episodes"


@pytest.mark.parametrize(("parallel", "copies", "policy_share", "suggested"),
                         [(False, False, 0.1, True), (True, False, 0.1, False),
                          (False, False, 0.9, False), (False, True, 0.9, True),
                          (True, True, 0.9, False)])
def test_a_long_audit_in_one_process_suggests_workers_where_they_help(
        monkeypatch, parallel, copies, policy_share, suggested):
    """An agent that runs in every worker is told whatever its policy costs; one kept in
    one process (copies=False) only where the env steps are most of the time."""
    monkeypatch.setattr("pytest_rlaudit.rollout.workers.usable_cores", lambda: 4)
    clock = Clock()
    progress = Progress(delay=0.0, interval=0.0, clock=clock)
    progress.planned(100, horizon=1000, parallel=parallel, copies=copies)
    progress.advance(started=100)
    for _ in range(120):  # 100 rows a second: 880 s to go once 12% of the steps ran
        clock.now += 1.0
        progress.policy_seconds += policy_share
        progress.advance(rows=100)
    assert progress.suggest_workers is suggested
    assert ("try --rl-workers auto" in describe(progress.snapshot(), words="--rl-workers auto")) \
        is suggested


def test_cheap_env_steps_are_not_worth_env_workers(monkeypatch):
    monkeypatch.setattr("pytest_rlaudit.rollout.workers.usable_cores", lambda: 4)
    clock = Clock()
    progress = Progress(delay=0.0, interval=0.0, clock=clock)
    progress.planned(100_000, horizon=500, copies=False)  # an agent kept in one process
    progress.advance(started=128)
    for _ in range(60):  # 100,000 agent steps a second: 10 us each, policy included
        clock.now += 1.0
        progress.advance(rows=100_000)
    assert progress.snapshot().left > 30 and not progress.suggest_workers


def test_a_short_audit_or_one_core_is_not_told_of_workers(monkeypatch):
    clock = Clock()
    progress = Progress(delay=0.0, interval=0.0, clock=clock)
    progress.planned(10, horizon=10)
    progress.advance(started=10)
    for _ in range(5):
        clock.now += 1.0
        progress.advance(rows=10)
    assert not progress.suggest_workers  # 5 s, and little left
    monkeypatch.setattr(progress_module, "SUGGEST_SECONDS", 0.0)
    monkeypatch.setattr("pytest_rlaudit.rollout.workers.usable_cores", lambda: 1)
    clock.now += 1.0
    progress.advance(rows=10)
    assert not progress.suggest_workers


def test_the_policy_calls_are_timed():
    clock = Clock()
    progress = Progress(clock=clock)

    def act(x):
        clock.now += 0.5
        return x

    assert progress.timed(act)(np.arange(3)).tolist() == [0, 1, 2]
    assert progress.policy_seconds == 0.5


def test_describe_fits_the_room_it_has():
    shot = Snapshot(done=3, total=120, elapsed=5.0, left=3725.0)
    assert describe(shot, words="w") == "3/120 episodes, ~1 h 2 min left"
    assert describe(shot, words="w", room=18) == "3/120, ~62:05 left"
    assert describe(shot, words="w", room=8) == "3/120"
    assert describe(shot, words="w", room=2) == ""


def test_no_time_left_is_shown_before_a_tenth_of_the_steps_ran():
    """A MuJoCo audit's first seconds (the model compiling, the first calls) are slow: an
    estimate from them read "~4 min 54 s left" for a 10 s audit. Until 10% of the steps
    have run, the line shows the count alone."""
    clock = Clock()
    progress = Progress(delay=0.0, interval=0.0, clock=clock)
    progress.planned(10, horizon=1000)
    progress.advance(started=10)
    clock.now += 5.0
    progress.advance(rows=10 * 50)  # 5% in 5 s: a slow start
    assert progress.snapshot().left is None
    assert describe(progress.snapshot(), words="w") == "0/10 episodes"
    clock.now += 0.5
    progress.advance(rows=10 * 60)  # 11%, now at speed
    assert progress.snapshot().left is not None
    assert describe(progress.snapshot(), words="w").startswith("0/10 episodes, ~")


def test_the_docs_say_when_workers_are_suggested():
    from pathlib import Path

    page = Path(__file__).parents[2] / "docs" / "tutorials" / "pytest-tests.md"
    assert f"{progress_module.SUGGEST_SECONDS:g} s or more" in page.read_text()
