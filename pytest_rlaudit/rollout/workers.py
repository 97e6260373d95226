"""Env slots stepped in worker processes, for a policy that must stay in one process.

Most policies run in every worker process, each on whole episodes of its own
(:func:`~.shards.run_forked`). One that cannot be copied into a forked process
(``shards_freely=False``: an agent on a GPU, which CUDA does not allow after a fork) stays
here instead: with ``workers=N`` the pool's env slots are spread over N processes, the
runner's own and N - 1 forked worker processes, and the runner alone makes the policy
calls, batched. Only the env stepping is spread.

Where the groups are large (:data:`~.pool.PHASE_ROWS`), the slots of every process are
split into two *phases* (one :class:`~.lockstep.BatchGroup` each), driven in turn: while a
worker steps its envs of one phase, the runner makes the policy call for the other
phase, steps its own envs of it and reads the worker's reply. So a worker does not wait
for policy calls or round trips, as long as it holds a little more env work than the
runner, which also makes the calls (:data:`~.pool.LOCAL_SHARE`). A worker process
serves its phases in the order they are asked (:class:`WorkerProcess`); a
:class:`WorkerPart` is one phase of it behind the same ``send``/``receive`` pair as a
:class:`LocalGroup`. Small pools keep one phase: there, a second policy call per step
would cost more than the wait it saves.

Workers are started with ``fork`` (the env factory, the scenarios and any closure they
hold are inherited, never pickled) and live for one pool run: a fork costs milliseconds,
far less than the envs it steps. They die with the process that started them, however it
ends (:mod:`.lifeline`), and under an audit's ``timeout`` they arm their own deadline and
say where they were stuck (:mod:`.deadline`). Platforms without ``fork`` (Windows) run
in-process, or with ``backend="ray"``.

>>> resolve_workers(None), resolve_workers(2)
(1, 2)
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .._checks import workers as check_workers
from ..errors import RolloutError
from . import lifeline
from .deadline import GRACE, Expired, current, error_of
from .lockstep import BatchGroup
from .slots import Job, Reply
from .travel import Travelling

__all__ = ["WorkerProcess", "WorkerPart", "LocalGroup", "Failure", "died", "fork_context",
           "check_workers", "resolve_workers", "usable_cores"]


#: How long a process polls for its next message before it sleeps on it (see _Waiter);
#: only where there is a core for each env-stepping process.
SPIN_SECONDS = 0.002


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def resolve_workers(workers: int | str | None) -> int:
    """The number of processes ``workers`` asks to step envs, the runner's own included:
    ``None``, ``0`` or ``1``, the runner's alone; ``"auto"``, one per usable core; a count,
    that many (so ``workers=2`` forks one worker process).
    """
    workers = check_workers(workers)
    if workers is None:
        return 1
    if workers == "auto":
        return usable_cores()
    return max(1, workers)


def fork_context() -> Any:
    """The multiprocessing context that forks, or a RolloutError that says what to use."""
    if "fork" not in multiprocessing.get_all_start_methods():
        raise RolloutError(
            "workers= needs the 'fork' start method, which this platform lacks; audit "
            "with workers=None, or spread episodes with backend='ray'"
        )
    return multiprocessing.get_context("fork")


def died(process: Any) -> RolloutError:
    """The error for a worker ``process`` that ended without a word (reaped here, for its
    exit code): an env that crashed the interpreter, or a kill."""
    process.join(timeout=5)
    return RolloutError(
        f"a worker process died (exit code {process.exitcode}); run with "
        "workers=None to see the env's own error"
    )


class LocalGroup:
    """A :class:`BatchGroup` in this process, behind the same send/receive pair as a
    worker's: ``send`` stores the step, ``receive`` runs it."""

    def __init__(self, group: BatchGroup) -> None:
        self.group = group
        self.slots = len(group.slots)
        self._pending: tuple[Any, Sequence[Job]] = (None, ())

    def send(self, actions: Any, jobs: Sequence[Job]) -> None:
        self._pending = (actions, jobs)

    def receive(self) -> Reply:
        actions, jobs = self._pending
        return self.group.step(actions, jobs)

    def close(self) -> None:
        self.group.close()


class Failure(Travelling):
    """An exception raised in a worker process, carried back to the runner with its cause
    and its traceback there (:class:`~.travel.Travelling`)."""

    def __init__(self, exc: BaseException) -> None:
        # a deadline that struck here travels as the error it means
        super().__init__(error_of(exc), f"in worker process {os.getpid()}", pickle.dumps)


class _Waiter:
    """Waits for messages on a connection, polling for up to ``spin`` seconds before it
    sleeps: a process woken from sleep is slow to start again on a virtual machine, next
    to the fraction of a millisecond a small group's envs take per step (measured in
    benchmarks/bench_workers.py). A message that comes later than the spin means other
    processes want the core (more processes than cores, or other work), so the next
    waits sleep at once, and it tries spinning again later."""

    BACK_OFF = 64  # waits that sleep at once after a spin in vain

    def __init__(self, spin: float) -> None:
        self.spin = spin
        self.skip = 0

    def wait(self, conn: Any) -> None:
        if self.spin <= 0 or conn.poll(0):
            return
        if self.skip:
            self.skip -= 1
            return
        deadline = time.perf_counter() + self.spin
        while time.perf_counter() < deadline:
            if conn.poll(0):
                return
        self.skip = self.BACK_OFF


def _serve(conn: Any, build: Callable[[], list[BatchGroup]], spin: float) -> None:
    groups: list[BatchGroup] = []
    waiter = _Waiter(spin)
    bound = current()  # this process's own deadline (lifeline.start armed it)
    try:
        groups = build()
        while True:
            waiter.wait(conn)
            message = conn.recv()
            if message is None:
                break
            part, actions, jobs = message
            try:
                reply: Any = groups[part].step(actions, jobs)
            except BaseException as exc:
                reply = Failure(exc)
            if bound is None:
                conn.send(reply)
            else:  # only a step may be cut short: a reply cut in half would be read as one
                with bound.hold():
                    conn.send(reply)
            if isinstance(reply, Failure):
                break
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt, Expired):
        # The runner is gone (its end of the pipe closed), or the deadline struck while
        # this process waited for it (the runner says where it was itself): nobody to
        # tell, so exit quietly.
        pass
    finally:
        for group in groups:
            group.close()
        conn.close()


#: (the error so far, the rows a worker held, their agent steps, what it did) -> the error
#: located at those rows, in the runner's words (:func:`~.driver.placer`).
Placer = Callable[[Expired, Sequence[Job], Sequence[int], str], Expired]


class WorkerProcess:
    """A forked worker process holding one :class:`BatchGroup` per phase (``build``
    returns them), each with ``sizes[k]`` slots. It steps them in the order asked, and
    replies in that order: a reply is read by the part that asked first (:meth:`part`).

    Under a deadline (:func:`~.deadline.current` when it starts) the waits for its replies
    are bounded: a worker stuck in a step says so itself (its own alarm), else after
    :data:`~.deadline.GRACE` seconds ``place`` names the rows it held.
    """

    def __init__(self, build: Callable[[], list[BatchGroup]], sizes: Sequence[int],
                 spin: float = 0.0, place: Placer | None = None) -> None:
        self.sizes = list(sizes)
        self.waiter = _Waiter(spin)
        self.asked: deque[int] = deque()  # parts with a reply to come, oldest first
        self.lost = False  # the process is gone: what it said before is still to be read
        self.deadline = current()
        self.place = place
        self.rows: dict[int, tuple[Sequence[Job], Sequence[int]]] = {}  # under a deadline
        context = fork_context()
        self.conn, child = context.Pipe()
        lifeline.parent_end(self.conn)
        self.process = lifeline.start(context, _serve, (child, build, spin), name="rlaudit-envs")
        child.close()

    def part(self, k: int) -> WorkerPart:
        """Phase ``k`` of this process, as a group the runner drives."""
        return WorkerPart(self, k)

    def send(self, part: int, actions: Any, jobs: Sequence[Job]) -> None:
        self.asked.append(part)
        if self.deadline is not None and part not in self.rows:  # its first jobs: resets
            self.rows[part] = (list(jobs), [0] * len(jobs))
        if self.lost:
            return
        try:
            self.conn.send((part, actions, list(jobs)))
        except (BrokenPipeError, ConnectionResetError):
            # It failed or died on an earlier step; that reply (or its end) says why.
            self.lost = True

    def receive(self, part: int) -> Reply:
        if not self.asked or self.asked[0] != part:
            raise RuntimeError(f"part {part} read a worker's reply out of turn ({list(self.asked)})")
        self.asked.popleft()
        try:
            self.waiter.wait(self.conn)
            if self.deadline is None:
                message = self.conn.recv()
            else:
                message = self._receive_by(part)
        except (EOFError, ConnectionResetError):
            raise died(self.process) from None
        if isinstance(message, Failure):
            raise message.exception()
        reply: Reply = message
        return reply

    def _receive_by(self, part: int) -> Any:
        """The next message, waiting at most until :data:`GRACE` seconds past the deadline
        (the alarm held off, so it never cuts a message in half); past the deadline,
        :class:`Expired` naming the rows the worker held."""
        bound = self.deadline
        assert bound is not None
        with bound.hold():
            ready = self.conn.poll(max(0.0, bound.left() + GRACE))
            try:
                message = self.conn.recv() if ready else None
            except (EOFError, ConnectionResetError):
                if not bound.passed():
                    raise
                message = None  # it ended at the deadline (its own alarm in its setup)
        if isinstance(message, Failure):  # its own words (a deadline it noticed) say more
            return message
        if message is None or bound.passed():
            jobs, steps = ((message.jobs, message.steps) if message is not None
                           else self.rows.get(part, ((), ())))
            what = ("which did not answer in time" if message is None
                    else "which answered only at the deadline")
            exc = bound.expire()
            raise (self.place(exc, jobs, steps, f"in env worker process {self.process.pid} "
                                                f"({what})") if self.place else exc)
        self.rows[part] = (message.jobs, message.steps)
        return message

    def close(self, kill: bool = False) -> None:
        """Ask the process to stop and reap it; ``kill``: at once (it may be stuck in a
        step, after a timeout)."""
        try:
            self.conn.send(None)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        lifeline.stop(self.process, wait=0.0 if kill else 5.0)
        self.conn.close()


class WorkerPart:
    """Phase ``k`` of a :class:`WorkerProcess`: the send/receive pair of a group (the
    runner closes the process itself, once)."""

    def __init__(self, process: WorkerProcess, k: int) -> None:
        self.process = process
        self.k = k
        self.slots = process.sizes[k]

    def send(self, actions: Any, jobs: Sequence[Job]) -> None:
        self.process.send(self.k, actions, jobs)

    def receive(self) -> Reply:
        return self.process.receive(self.k)
