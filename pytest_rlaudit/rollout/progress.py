"""How far the audit running in this context has come: episodes done of total, time left.

The runner tells the :class:`Progress` installed with :func:`watching` (a context variable:
no verb passes it on) how many episodes it plans and how they advance; a display shows it
(the pytest plugin's terminal line, :func:`~pytest_rlaudit.audit`'s tqdm bar). Nothing is
installed by default, and then the runner pays one context-variable lookup per pool of
episodes. Processes forked from this one inherit the variable but never report: their
episodes count where their results arrive. This module knows neither pytest nor tqdm.

The time left is an estimate from the rate of agent steps: a running episode is assumed
to run to the env's time limit (so the estimate is high rather than low, and falls when
episodes end early), one not yet started to the mean length of those already ended in its
pool of episodes. The display waits :data:`DELAY` seconds (short audits show nothing) and
updates at most every :data:`INTERVAL` seconds.

An audit is told of worker processes (``workers``, ``--rl-workers``) when it is projected
to run :data:`SUGGEST_SECONDS` or more in one process on a machine with several cores,
and its agent can run in every worker (``shards_freely``: each process then runs
episodes of its own, policy calls included). An agent that must stay in one process
(on a GPU) leaves the workers only the env steps, so it is told only when its policy
calls take less than :data:`POLICY_SHARE` of its rollout time and the rest costs
:data:`ENV_STEP_SECONDS` or more per agent step.

>>> shown = []
>>> with watching(Progress(shown.append, delay=0.0, interval=0.0)) as progress:
...     progress.planned(4, horizon=10)
...     progress.advance(rows=4, started=4)
...     progress.advance(rows=4, finished=[2, 2])
>>> shown[-1].done, shown[-1].total
(2, 4)
>>> describe(Snapshot(done=37, total=300, elapsed=12.0, left=80.0), words="--rl-workers auto")
'37/300 episodes, ~1 min 20 s left'
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["Progress", "Snapshot", "watching", "current", "expect", "describe", "duration",
           "horizon", "DELAY", "INTERVAL", "SUGGEST_SECONDS", "ESTIMATE_SHARE"]

#: Seconds an audit runs before its progress shows (shorter audits show nothing).
DELAY = 2.0
#: Seconds between two updates of the display, at least.
INTERVAL = 0.25
#: An audit projected to run this many seconds or longer in one process on a machine
#: with several cores is told of ``workers`` (for an agent kept in one process: if ...)
SUGGEST_SECONDS = 30.0
#: ... when the agent's policy calls took less than this share of its rollout time
POLICY_SHARE = 0.5
#: ... and the rest, per agent step, at least this many seconds: the env work a worker
#: process can take over is worth its round trips (CartPole costs ~11 us here, MuJoCo's
#: HalfCheetah ~70 us; see README, "Every core").
ENV_STEP_SECONDS = 25e-6
#: A time left is shown (and workers suggested) only once this share of the audit's agent
#: steps has run: before, the rate is the start's (first calls, imports, a MuJoCo model
#: compiling), and a 10 s audit read "~4 min 54 s left".
ESTIMATE_SHARE = 0.1


@dataclass(frozen=True)
class Snapshot:
    """What a display shows: ``done`` of ``total`` episodes planned (or expected),
    ``elapsed`` seconds, ``left`` (an estimate, None while there is none) and whether
    stepping the envs in worker processes would likely be faster (``suggest_workers``)."""

    done: int
    total: int
    elapsed: float
    left: float | None = None
    suggest_workers: bool = False
    #: the call the audit has been waiting on past :data:`~.calls.WAIT_MARK` seconds, in
    #: words (:meth:`Progress.waiting`), else None
    waiting: str | None = None


class Progress:
    """One audit's episodes, counted as the runner plans and runs them.

    ``display(snapshot)`` is called once the audit has run ``delay`` seconds (default
    :data:`DELAY`), then at most every ``interval`` seconds (:data:`INTERVAL`), and its
    ``close(snapshot)``, if it has one, at the end, when it showed anything.
    """

    def __init__(self, display: Callable[[Snapshot], Any] | None = None, *,
                 delay: float | None = None, interval: float | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.display = display
        self.delay = DELAY if delay is None else delay
        self.interval = INTERVAL if interval is None else interval
        self.clock = clock
        self.pid = os.getpid()  # a forked process inherits the context: it must not report
        self.began = clock()
        self.total = 0  # episodes planned
        self.expected = 0  # episodes announced before they are planned (see expect)
        self.done = 0
        self.started = 0
        self.steps = 0  # agent steps of all episodes, ended or running
        self.ended_steps = 0
        self.horizon: int | None = None  # the current pool's time limit (agent steps)
        self.pool_done = 0
        self.pool_steps = 0
        self.last_mean: float | None = None  # the mean length of the pools before
        self.parallel = False  # a pool ran in several processes
        self.copies = True  # the agent can run in every worker process (shards_freely)
        self.policy_seconds = 0.0
        self.rollout_began: float | None = None
        self.shown = 0
        self.suggest_workers = False
        self._next = self.began + self.delay
        self._rate: float | None = None
        self._rate_at = 0.0
        self._rate_steps = 0
        self.waiting_on: str | None = None

    # ------------------------------------------------------------ told by the runner

    def planned(self, episodes: int, *, horizon: int | None = None, parallel: bool = False,
                copies: bool = True) -> None:
        """``episodes`` more episodes, a new pool; ``horizon``: their time limit in agent
        steps, if known; ``parallel``: they run in several processes; ``copies``: the agent
        can run in worker processes of its own (``shards_freely``)."""
        if self.rollout_began is None:
            self.rollout_began = self.clock()
        self.total += int(episodes)
        self.horizon = horizon
        if self.pool_done:
            self.last_mean = self.pool_steps / self.pool_done
        self.pool_done = self.pool_steps = 0
        self.parallel = self.parallel or parallel
        self.copies = copies

    def advance(self, rows: int = 0, started: int = 0, finished: Iterable[int] = ()) -> None:
        """``rows`` agent steps taken, ``started`` episodes begun, and the lengths (agent
        steps) of those ``finished``."""
        self.steps += rows
        self.started += started
        for length in finished:
            self.done += 1
            self.ended_steps += length
            self.pool_done += 1
            self.pool_steps += length
        now = self.clock()
        if now >= self._next:
            self._tick(now)

    def waiting(self, words: str | None) -> None:
        """The runner has been waiting on one call for long (``words`` say which and for
        how long: :mod:`.calls`, from its watcher thread), or no longer (None): shown at
        once, whatever the delay."""
        if words == self.waiting_on:
            return
        self.waiting_on = words
        if self.display is not None and (words is not None or self.shown):
            self.display(self.snapshot())
            self.shown += 1

    def ran_elsewhere(self, lengths: Iterable[Iterable[int]]) -> None:
        """Episodes that ran in other processes ended: their lengths in agent steps, per
        scenario (an :class:`~.batches.EpisodeBatch`'s ``lengths``, or part of them)."""
        ended = [int(n) for part in lengths for n in part]
        self.advance(rows=sum(ended), started=len(ended), finished=ended)

    def timed(self, act: Callable[..., Any]) -> Callable[..., Any]:
        """``act`` (the runner's policy call), adding the seconds it takes to
        :attr:`policy_seconds`."""
        clock = self.clock

        def timed_act(*args: Any) -> Any:
            began = clock()
            try:
                return act(*args)
            finally:
                self.policy_seconds += clock() - began

        return timed_act

    # -------------------------------------------------------------------- estimates

    def expect(self, episodes: int) -> None:
        """``episodes`` more episodes will be planned (the total shown before they are)."""
        self.expected = self.total + int(episodes)

    def remaining_steps(self) -> float | None:
        """Agent steps still to run (an estimate; None while there is none)."""
        running = self.started - self.done
        mean = self.pool_steps / self.pool_done if self.pool_done else self.last_mean
        longest = self.horizon or mean  # for a running episode: the time limit
        fresh = mean or self.horizon  # one not started: the pool's mean length so far
        later = self.horizon or mean  # one not planned yet
        left = 0.0
        if running > 0:
            if longest is None:
                return None
            left += max(running * longest - (self.steps - self.ended_steps), running)
        for count, length in ((self.total - self.started, fresh),
                              (self.expected - self.total, later)):
            if count > 0:
                if length is None:
                    return None
                left += count * length
        return left

    def snapshot(self, now: float | None = None) -> Snapshot:
        now = self.clock() if now is None else now
        left = self.remaining_steps()
        if left is not None and self.steps < ESTIMATE_SHARE * (self.steps + left):
            left = None  # too early to mean anything: the count alone
        seconds = None if left is None or not self._rate else left / self._rate
        return Snapshot(self.done, max(self.total, self.expected), now - self.began,
                        seconds, self.suggest_workers, self.waiting_on)

    def _tick(self, now: float) -> None:
        ran = now - (self.rollout_began if self.rollout_began is not None else self.began)
        if self._rate is None:
            self._rate = self.steps / ran if ran > 0 and self.steps else None
        elif now > self._rate_at:  # recent steps weigh more: pools differ in speed
            recent = (self.steps - self._rate_steps) / (now - self._rate_at)
            self._rate = 0.5 * self._rate + 0.5 * recent
        self._rate_at, self._rate_steps = now, self.steps
        shot = self.snapshot(now)
        if (not self.suggest_workers and not self.parallel and shot.left is not None
                and shot.elapsed + shot.left >= SUGGEST_SECONDS
                and (self.copies or (self.policy_seconds < POLICY_SHARE * ran
                                     and ran - self.policy_seconds >= ENV_STEP_SECONDS * self.steps))):
            from .workers import usable_cores

            self.suggest_workers = usable_cores() > 1
            shot = self.snapshot(now)
        if self.display is not None:
            self.display(shot)
            self.shown += 1
        self._next = now + self.interval

    def close(self) -> None:
        """The audit ended: a display that showed anything closes."""
        close = getattr(self.display, "close", None)
        if self.shown and close is not None:
            close(self.snapshot())


_CURRENT: ContextVar[Progress | None] = ContextVar("pytest_rlaudit_progress", default=None)


def current() -> Progress | None:
    """The :class:`Progress` installed in this context (None: none, or a forked process).

    >>> with watching(Progress()) as progress:
    ...     current() is progress
    True
    """
    progress = _CURRENT.get()
    if progress is None or progress.pid != os.getpid():
        return None
    return progress


@contextmanager
def watching(progress: Progress) -> Iterator[Progress]:
    """Install ``progress`` for the block: the runner reports to it; closed at the end.

    >>> import numpy as np
    >>> from pytest_rlaudit import scenarios
    >>> from pytest_rlaudit.rollout.runner import run_episodes
    >>> from pytest_rlaudit.world.agents import as_policy
    >>> from pytest_rlaudit.world.envs import env_spec
    >>> policy = as_policy(lambda obs: (obs[:, 2] > 0).astype(np.int64))
    >>> with watching(Progress()) as progress:
    ...     _ = run_episodes(policy, env_spec("CartPole-v1"), scenarios.resolve(["jitter"]), 3)
    >>> progress.done, progress.total
    (3, 3)
    """
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)
        progress.close()


def expect(episodes: int) -> None:
    """Tell the installed :class:`Progress`, if any, that ``episodes`` more will be planned.

    >>> with watching(Progress()) as progress:
    ...     expect(10)
    ...     progress.planned(4)
    >>> progress.snapshot().total  # 4 planned of the 10 expected
    10
    """
    progress = current()
    if progress is not None:
        progress.expect(episodes)


def horizon(env: Any, max_steps: int) -> int | None:
    """The most agent steps an episode of ``env`` (a made env) may take, if its time limit
    says (else None).

    >>> import gymnasium as gym
    >>> horizon(gym.make("CartPole-v1"), 10_000), horizon(gym.make("CartPole-v1"), 100)
    (500, 100)
    """
    limit = getattr(getattr(env, "spec", None), "max_episode_steps", None)
    return min(int(limit), max_steps) if limit else None


def duration(seconds: float) -> str:
    """``seconds`` in words, rounded to what matters.

    >>> duration(4.2), duration(80), duration(3725)
    ('4 s', '1 min 20 s', '1 h 2 min')
    """
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def describe(snapshot: Snapshot, *, words: str, room: int | None = None) -> str:
    """``snapshot`` in one line of at most ``room`` characters (the longest form that fits;
    "" if none does). ``words``: how the caller asks for worker processes
    (``--rl-workers auto``, ``workers="auto"``), suggested when they would likely help.

    >>> shot = Snapshot(done=37, total=300, elapsed=40.0, left=80.0, suggest_workers=True)
    >>> describe(shot, words="--rl-workers auto")
    '37/300 episodes, ~1 min 20 s left (one process: try --rl-workers auto)'
    >>> describe(shot, words="--rl-workers auto", room=20)
    '37/300, ~1:20 left'
    """
    count = f"{snapshot.done}/{snapshot.total}"
    left = snapshot.left
    forms = []
    if snapshot.waiting is not None:  # a call that does not return says more than the rest
        forms += [f"{count} episodes, {snapshot.waiting}", snapshot.waiting]
    if left is not None:
        long = f"{count} episodes, ~{duration(left)} left"
        if snapshot.suggest_workers:
            forms.append(f"{long} (one process: try {words})")
        minutes, secs = divmod(max(0, round(left)), 60)
        forms += [long, f"{count}, ~{minutes}:{secs:02d} left"]
    else:
        forms.append(f"{count} episodes")
    forms.append(count)
    return next((form for form in forms if room is None or len(form) <= room), "")
