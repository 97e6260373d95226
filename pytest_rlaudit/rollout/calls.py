"""The bound on one call: an env step or reset, or a policy call, that never returns (a
deadlocked simulator, a socket read with no timeout) stops the audit with
:class:`~pytest_rlaudit.errors.RolloutTimeoutError` after :data:`CALL_TIMEOUT` seconds,
even when the audit as a whole has no ``timeout``; past :data:`WAIT_MARK` seconds the
progress line says which call it is waiting on. ``call_timeout=`` (``--rl-call-timeout``,
ini ``rl_call_timeout``) changes the bound; ``0`` or ``None`` removes it.

How, at no cost per step: the runner notes the call it is about to make in
:attr:`Watch.on` (one attribute store: the slot whose env steps, the reset, the policy
call's rows), and a watcher thread looks at it every :func:`tick` seconds. When the same
call is still under way past the mark it tells the progress line; past the bound it
raises :class:`~.deadline.Expired` in the main thread through ``SIGALRM``
(``pthread_kill``: the process-wide timer of :mod:`.deadline` and pytest-timeout stays
theirs, and a genuine alarm is handed on to the handler that was in place), so the call
is interrupted where :mod:`.deadline`'s alarm would interrupt it, with the same limits: a
C call that never returns to the interpreter is not interrupted, and outside the main
thread the call is only named on the progress line. Worker processes and forked shards
run a watcher of their own (:func:`arm_in_child`) and report as for the audit's deadline.

>>> with bounded(5):
...     watch().bound
5.0
>>> watch() is None  # the watcher ends with the block
True
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..errors import RolloutTimeoutError
from . import progress
from .deadline import Deadline, Expired, _call, check_timeout

__all__ = ["CALL_TIMEOUT", "WAIT_MARK", "Watch", "Noted", "bounded", "watching_calls",
           "watch", "arm_in_child", "check_call_timeout", "FIX"]

#: Seconds one env step or reset, or one policy call, may take by default: far beyond
#: any sane one (hypothesis bounds each example by default too).
CALL_TIMEOUT = 60.0
#: Seconds a call runs before the progress line names it.
WAIT_MARK = 10.0

#: How to change the bound (one place for the words).
FIX = ("raise the bound (--rl-call-timeout SECONDS, rl_call_timeout in the ini file, "
       "call_timeout= in the call) or remove it with 0")

_LIMIT: ContextVar[float | None] = ContextVar("rlaudit_call_timeout", default=None)
_ACTIVE: Watch | None = None  # this process's watcher (one per process, see watching_calls)


def check_call_timeout(value: Any, error: type[Exception] | None = None,
                       name: str = "call_timeout", off: str | None = None) -> float | None:
    """The per-call bound in seconds (None: no bound, from ``0``, ``None`` or ``"none"``).

    >>> check_call_timeout(0), check_call_timeout("none"), check_call_timeout(5)
    (None, None, 5.0)
    """
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "0")):
        return None
    if not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0:
        return None
    kwargs: dict[str, Any] = {} if error is None else {"error": error}
    return check_timeout(value, name, per_call=True, off=off, **kwargs)


def tick(bound: float | None, mark: float) -> float:
    """Seconds between two looks of the watcher: a fifth of the shorter of the bound and
    the mark, within [0.02, 1]."""
    shortest = mark if bound is None else min(bound, mark)
    return min(1.0, max(0.02, shortest / 5))


#: What :meth:`Watch.describe` says of a call: (call, scenario, episode, agent step, where
#: in the words of every rollout error).
Said = tuple[str, "str | None", "int | None", "int | None", str]


class Noted:
    """A call the runner noted in :attr:`Watch.on` that says itself which it is (an env
    reset, a policy call; an env step is noted as its slot, which says it too)."""

    __slots__ = ("said",)

    def __init__(self, call: str, scenario: str | None, episode: int | None,
                 step: int | None, words: str) -> None:
        self.said: Said = (call, scenario, episode, step, words)

    def waiting_on(self) -> Said:
        return self.said


class CallBound(Deadline):
    """The bound as a :class:`~.deadline.Deadline`, so that the runner's ``except
    Expired`` clauses note where it struck and :func:`~.deadline.error_of` carries it
    out of a worker process as the error it means."""

    def __init__(self, watch: Watch) -> None:
        super().__init__(time.monotonic() + (watch.bound or 0.0), watch.bound or 0.0)
        self.watch = watch

    def error(self, exc: Expired) -> RolloutTimeoutError:
        call, scenario, episode, step, words = self.watch.struck or (
            "a call", exc.scenario, exc.episode, exc.step, exc.at or "where the traceback shows")
        hint = ("look at the env's step (or reset) for a call that never returns (a "
                "deadlock, a read with no timeout)" if call.startswith("env.")
                else "look at the agent for a call that never returns")
        return RolloutTimeoutError(
            f"{call} did not return within {self.timeout:g} s (the bound on one env step, "
            f"reset or policy call), {words}. If it is only slow, {FIX}; else {hint}.",
            scenario=scenario, episode=episode, step=step, timeout=self.timeout)


class Watch:
    """One process's watcher (see the module). ``on``: the call under way (None: none),
    as the runner notes it; ``describe(on)`` says which call it is: (call, scenario,
    episode, step, words)."""

    def __init__(self, bound: float | None, mark: float) -> None:
        self.on: Any = None
        self.bound = bound
        self.mark = mark
        self.pid = os.getpid()
        self.struck: Said | None = None
        self.strike = False
        self.stalled: tuple[Any, Any] = (None, None)  # the call the strike is for, its steps
        self.sink = progress.current()  # the thread has no context of its own
        self.main = threading.main_thread().ident
        self.users = 0
        self.saved: Any = None
        self.signalled = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        if self.bound is not None and hasattr(signal, "pthread_kill") and \
                threading.current_thread() is threading.main_thread():
            self.saved = signal.getsignal(signal.SIGALRM)
            signal.signal(signal.SIGALRM, self._fire)
            self.signalled = True
        self._thread = threading.Thread(target=self._run, name="rlaudit-call-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.signalled:
            self.signalled = False
            self.strike = False
            if signal.getsignal(signal.SIGALRM) == self._fire:
                signal.signal(signal.SIGALRM, signal.SIG_DFL if self.saved is None
                              else self.saved)

    # ------------------------------------------------------------------ watching
    def _run(self) -> None:
        last: Any = None
        last_steps: Any = None
        since = time.monotonic()
        named: Any = None  # the progress told of a wait
        period = tick(self.bound, self.mark)
        while not self._stop.wait(period):
            on = self.on
            steps = getattr(on, "steps", None)
            now = time.monotonic()
            sink = self.sink
            if on is None or on is not last or steps != last_steps:
                last, last_steps, since = on, steps, now
                if named is not None:
                    named.waiting(None)
                named = None
                continue
            waited = now - since
            if waited >= self.mark and sink is not None:
                sink.waiting(self.line(self.describe(on), waited))
                named = sink
            if self.bound is not None and waited >= self.bound and not self.strike:
                self.struck = self.describe(on)
                if not self.signalled:
                    continue  # outside the main thread: named on the progress line only
                self.stalled, self.strike = (on, steps), True
                signal.pthread_kill(self.main, signal.SIGALRM)  # type: ignore[arg-type]
        if named is not None:
            named.waiting(None)

    def _fire(self, signum: int, frame: Any) -> None:
        if self.strike:
            self.strike = False
            on, steps = self.stalled
            if self.on is on and on is not None and getattr(on, "steps", None) == steps:
                raise Expired(CallBound(self))
            return  # it returned meanwhile: nothing to stop
        _call(self.saved, signum, frame)  # a real alarm: the handler that was in place

    @staticmethod
    def describe(on: Any) -> Said:
        """What the noted call ``on`` is: an object with a ``waiting_on()`` method (the
        runner's slots, :class:`Noted` resets and policy calls)."""
        return on.waiting_on()  # type: ignore[no-any-return]

    @staticmethod
    def line(said: Said, waited: float) -> str:
        """The progress line's words for a call under way for ``waited`` seconds.

        >>> Watch.line(("env.step", "delay", 3, 41, ""), 12.4)
        'waiting on env.step (scenario delay, episode 3, step 41) for 12 s'
        """
        call, scenario, episode, step, _ = said
        at = "" if scenario is None else f" (scenario {scenario}, episode {episode}, step {step})"
        return f"waiting on {call}{at} for {waited:.0f} s"


def watch() -> Watch | None:
    """This process's watcher, if calls are watched (the runner notes its calls in it)."""
    active = _ACTIVE
    return active if active is not None and active.pid == os.getpid() else None


@contextmanager
def bounded(seconds: float | None) -> Iterator[None]:
    """Bound every call the block makes by ``seconds`` (None: no bound; validated), in
    this process (watched from here on: checks and replays make calls too) and in the
    processes it forks (:func:`arm_in_child`)."""
    token = _LIMIT.set(check_call_timeout(seconds))
    try:
        with watching_calls():
            yield
    finally:
        _LIMIT.reset(token)


@contextmanager
def watching_calls() -> Iterator[Watch | None]:
    """Watch the calls made in the block in this process under the bound in force (and
    name a long one on the progress line even without one). One watcher per process:
    nested blocks share it."""
    global _ACTIVE
    active = watch()
    if active is not None:  # the progress installed here, if any, is the one to tell
        saved = active.sink
        active.sink = progress.current() or saved
        try:
            yield active
        finally:
            active.sink = saved
        return
    bound = _LIMIT.get()
    if bound is None and progress.current() is None:
        yield None  # nothing to bound, nobody to tell
        return
    active = _ACTIVE = Watch(bound, WAIT_MARK)
    active.start()
    try:
        yield active
    except Expired as exc:
        if isinstance(exc.deadline, CallBound) and exc.deadline.watch is active:
            raise exc.deadline.error(exc).with_traceback(exc.__traceback__) from None
        raise
    finally:
        active.stop()
        _ACTIVE = None


@contextmanager
def paused() -> Iterator[None]:
    """The watcher thread stopped for the block (a fork: a process forked with a second
    thread running may deadlock, and Python 3.12+ warns of it), started again after."""
    active = watch()
    if active is None or active._thread is None:
        yield
        return
    active._stop.set()
    active._thread.join()
    try:
        yield
    finally:
        active._stop = threading.Event()
        active._thread = threading.Thread(target=active._run, name="rlaudit-call-watch",
                                          daemon=True)
        active._thread.start()


def arm_in_child() -> None:
    """In a forked process (a worker, a shard): watch its calls for its whole life under
    the bound in force where it was forked (threads do not survive a fork)."""
    global _ACTIVE
    _ACTIVE = None
    if _LIMIT.get() is None:
        return
    _ACTIVE = Watch(_LIMIT.get(), WAIT_MARK)
    _ACTIVE.start()


