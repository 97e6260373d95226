"""Deadlines: ``audit(..., timeout=seconds)`` and ``--rl-timeout`` stop an audit that runs
past its time with :class:`~pytest_rlaudit.errors.RolloutTimeoutError`, naming the
scenario, episode and agent step it was stuck in.

How an audit is stopped, by where it runs:

- **In the main thread** (where pytest runs tests, under xdist too): a ``SIGALRM`` timer
  (``setitimer``) raises :class:`Expired` inside whatever is running, so an env step that
  never returns (a ``time.sleep``, a socket read, a Python loop) is interrupted there; the
  runner notes where it struck and :func:`within` turns it into the error. A timer already
  running (pytest-timeout's ``signal`` method, an outer deadline) keeps working: the alarm
  fires at the earlier of the two deadlines, calls their handler when theirs comes first,
  and both are restored afterwards. C code that never returns to the interpreter cannot
  be interrupted in-process (pytest-timeout's ``thread`` method ends such a process).
- **Worker processes and forked shards** arm their own timer for the same deadline (they
  are forked, so they share the clock and the deadline) and report where they were
  stuck; the runner waits for their word up to :data:`GRACE` seconds past the deadline,
  else names the rows the worker held, and kills it.
- **Ray**: every actor arms its own deadline for the time left, and the waits for actors
  are bounded (they stop :data:`GRACE` seconds past the deadline at the latest).
- **Outside the main thread** no signal can be used: the deadline is checked between
  decision steps, and the waits for worker processes and Ray actors are bounded, but an
  env step or policy call in this process that never returns is not interrupted.

Nothing here runs per step: the runner's ``except Expired`` clauses cost nothing until the
alarm strikes (zero-cost exceptions), and no clock is read on the hot path unless the
deadline has to be polled (outside the main thread).

>>> import time
>>> with within(None):   # no limit: nothing is armed
...     current() is None
True
>>> with within(5):
...     0 < current().left() <= 5
True
"""

from __future__ import annotations

import signal
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .._checks import number
from ..errors import InvalidArgumentError, RolloutTimeoutError

__all__ = ["Deadline", "Expired", "within", "current", "arm_in_child", "error_of",
           "check_timeout", "GRACE", "MAX_TIMEOUT"]

#: Seconds past the deadline the runner waits for a worker process or Ray actor to say
#: where it was stuck (their own timers fire at the deadline) before it names what they
#: held and kills them.
GRACE = 1.0

#: Timers may fire a little early or late against ``time.monotonic``: within this many
#: seconds a deadline counts as due.
_SLACK = 1e-3

_CURRENT: ContextVar[Deadline | None] = ContextVar("rlaudit_deadline", default=None)



#: The longest timeout accepted, in seconds (a year): the system's timer takes no more
#: than some 2**31 s, and a longer one is no limit in practice.
MAX_TIMEOUT = 365 * 24 * 3600.0


def check_timeout(timeout: Any, name: str = "timeout", *, per_call: bool = False,
                  error: type[Exception] = InvalidArgumentError,
                  off: str | None = None) -> float | None:
    """``timeout`` as seconds (None: no limit), or an error naming the value, the range
    and the fix: the one check of both the whole audit's timeout and the bound on one call
    (``per_call``, where 0 also means no bound: :func:`~.calls.check_call_timeout`).
    ``off``: how to ask for no limit where it is not said with None (an option).

    >>> check_timeout(2), check_timeout(None)
    (2.0, None)
    >>> try:
    ...     check_timeout(1e10)
    ... except ValueError as exc:
    ...     print(str(exc).split(", got ")[1])
    10000000000.0: pass at most a year of seconds, or None for no limit
    """
    if timeout is None:
        return None
    what, unset = (("seconds one env step, reset or policy call may take",
                    "0 or None for no bound")
                   if per_call else ("seconds for the whole audit", "None for no limit"))
    off = unset if off is None else off
    try:
        return number(name, timeout, low=0, high=MAX_TIMEOUT, low_open=True,
                      why=f" ({what}, at most a year)", error=error)
    except error as exc:
        high = isinstance(timeout, (int, float)) and timeout > MAX_TIMEOUT
        fix = "pass at most a year of seconds" if high else "pass a number of seconds above 0"
        raise error(f"{exc}: {fix}, or {off}") from None


class Expired(BaseException):
    """Raised where an audit's deadline struck (a ``BaseException``, so that an env's or an
    agent's own ``except Exception`` does not swallow it). The runner adds where it was
    (:meth:`locate`) on its way up; :func:`within` turns it into a
    :class:`~pytest_rlaudit.errors.RolloutTimeoutError`."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__("the audit's deadline passed")
        self.deadline = deadline
        self.scenario: str | None = None
        self.episode: int | None = None
        self.step: int | None = None
        self.at: str | None = None
        self.phase: str | None = None  # the audit's phase, as the engine names it

    def locate(self, scenario: str | None, episode: int | None, step: int | None,
               at: str) -> Expired:
        """Note where it struck (the innermost place wins); ``at`` says it in words, e.g.
        ``"in the env's step at scenario 'delay', episode 3 (env seed 3), agent step 7"``."""
        if self.at is None:
            self.scenario, self.episode, self.step, self.at = scenario, episode, step, at
        return self


class Deadline:
    """One deadline: ``at`` on the ``time.monotonic`` clock, ``timeout`` the seconds the
    caller gave (for the message)."""

    def __init__(self, at: float, timeout: float) -> None:
        self.at = at
        self.timeout = timeout
        self.polled = True  # no alarm: checked between decision steps (see the module)
        self.holding = False  # a bounded wait is under way: the alarm only takes note
        self.fired = False

    def left(self) -> float:
        """Seconds until the deadline (negative once it passed)."""
        return self.at - time.monotonic()

    def passed(self) -> bool:
        """Whether the deadline has come (the alarm fired, or the clock says so)."""
        return self.fired or time.monotonic() >= self.at - _SLACK

    def expire(self) -> Expired:
        """The error for a deadline found passed by a check (not the alarm): the alarm,
        if still to come, will not fire again while the error unwinds."""
        self.fired = True
        return Expired(self)

    @contextmanager
    def hold(self) -> Iterator[None]:
        """A wait that bounds itself (``poll(left + GRACE)``, ``ray.wait(timeout=...)``):
        the alarm must not cut a message in half, so it only sets :attr:`fired`, which the
        waiter checks afterwards."""
        before, self.holding = self.holding, True
        try:
            yield
        finally:
            self.holding = before

    def error(self, exc: Expired) -> RolloutTimeoutError:
        """The error a user reads for ``exc``."""
        where = exc.at or _innermost(exc)
        return RolloutTimeoutError(
            f"the audit ran past its timeout of {self.timeout:g} s: it was stuck {where}. If "
            "the audit is only slow, raise the limit (--rl-timeout SECONDS or rl_timeout in "
            "the ini file, timeout= in the call); if that step should be quick, look at the "
            "env's step (or reset) and the agent for a call that never returns.",
            scenario=exc.scenario, episode=exc.episode, step=exc.step, timeout=self.timeout,
            phase=exc.phase,
        )


def _innermost(exc: BaseException) -> str:
    """Where ``exc`` struck, from its traceback: the innermost frame but the alarm's."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    for frame, line in reversed(frames):
        if frame.f_code.co_filename != __file__:
            return f"in {frame.f_code.co_name}() at {frame.f_code.co_filename}:{line}"
    return "where the traceback shows"


class _Alarm:
    """``SIGALRM`` for a deadline, sharing the signal with a timer already running (see
    the module). Main thread only."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.live = False
        self.saved: Any = None
        self.theirs: float | None = None  # the earlier timer's next expiry (monotonic)
        self.interval = 0.0

    def arm(self) -> None:
        now = time.monotonic()
        self.saved = signal.getsignal(signal.SIGALRM)
        delay, self.interval = signal.getitimer(signal.ITIMER_REAL)
        self.theirs = now + delay if delay > 0 else None
        self.live = True
        signal.signal(signal.SIGALRM, self._fire)
        self._set(now)
        self.deadline.polled = False

    def _set(self, now: float) -> None:
        """The timer for the next of their expiry and our deadline (if not yet fired)."""
        due = [t for t in (self.theirs, None if self.deadline.fired else self.deadline.at)
               if t is not None]
        signal.setitimer(signal.ITIMER_REAL, max(min(due) - now, 1e-4) if due else 0.0)

    def _fire(self, signum: int, frame: Any) -> None:
        now = time.monotonic()
        if self.theirs is not None and self.theirs <= now + _SLACK:
            self.theirs = now + self.interval if self.interval > 0 else None
            self._set(now)
            _call(self.saved, signum, frame)  # theirs first: pytest-timeout fails the test
        if not self.live or self.deadline.fired:
            return
        if self.deadline.at > now + _SLACK:  # early by the clocks' slack: not yet
            self._set(now)
            return
        self.deadline.fired = True
        self._set(now)
        if not self.deadline.holding:
            raise Expired(self.deadline)

    def disarm(self) -> None:
        self.live = False
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        _flush()  # a signal that tripped just now runs our handler, not the restored one
        signal.signal(signal.SIGALRM, signal.SIG_DFL if self.saved is None else self.saved)
        if self.theirs is not None:
            signal.setitimer(signal.ITIMER_REAL, max(self.theirs - time.monotonic(), 1e-4),
                             self.interval)


def _flush() -> None:
    """Entering a Python function runs the signal handlers pending in the main thread."""


def _call(handler: Any, signum: int, frame: Any) -> None:
    """Do what the handler we found in place would have done."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:  # the default action of SIGALRM ends the process
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGALRM)


def _can_signal() -> bool:
    return (hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread())


def current() -> Deadline | None:
    """The deadline in force in this thread (None: no limit)."""
    return _CURRENT.get()


@contextmanager
def within(timeout: float | None, *, said: float | None = None) -> Iterator[None]:
    """Run the block under a deadline ``timeout`` seconds from now (None: no limit); past
    it, the block stops with :class:`~pytest_rlaudit.errors.RolloutTimeoutError` (see the
    module for what can be interrupted where). ``said``: the limit the message names, if
    not ``timeout`` (a Ray actor gets the time left of the caller's limit).

    An outer deadline that comes first keeps ruling; an inner one that comes first rules
    inside its block.
    """
    timeout = check_timeout(timeout)
    if timeout is None:
        yield
        return
    at = time.monotonic() + timeout
    outer = _CURRENT.get()
    if outer is not None and outer.at <= at:
        yield
        return
    deadline = Deadline(at, timeout if said is None else said)
    token = _CURRENT.set(deadline)
    alarm = _Alarm(deadline) if _can_signal() else None
    try:
        if alarm is not None:
            alarm.arm()
        yield
    except Expired as exc:
        if exc.deadline is not deadline:
            raise  # an outer deadline's: its own block reports it
        # The traceback goes down to the line that was stuck.
        raise deadline.error(exc).with_traceback(exc.__traceback__) from None
    finally:
        if alarm is not None:
            alarm.disarm()
        _CURRENT.reset(token)


def arm_in_child() -> None:
    """In a forked process: arm the deadline in force where it was forked (children share
    the clock, so the same instant), with an alarm of its own (timers are not inherited;
    the child runs in its main thread)."""
    inherited = _CURRENT.get()
    if inherited is None:
        return
    deadline = Deadline(inherited.at, inherited.timeout)
    _CURRENT.set(deadline)
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not the parent's handler
        _Alarm(deadline).arm()


def error_of(exc: BaseException) -> BaseException:
    """``exc``, or for :class:`Expired` the error it becomes (to send to another process)."""
    if isinstance(exc, Expired):
        return exc.deadline.error(exc)
    return exc
