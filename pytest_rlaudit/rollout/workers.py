"""Env slots stepped in worker processes, for audits whose cost is the env (MuJoCo).

With ``workers=N`` the pool's slots are split into N :class:`~.slots.SlotGroup`: one in
the runner's process and one in each of N - 1 worker processes. At every decision step
all groups step their envs at the same time, then the runner makes one policy call for
the rows of all of them, as many calls as in one process (the policy stays in one place,
batched). Only the env stepping is spread; the policy call and the messages are what
stays serial (see ``benchmarks/bench_workers.py`` for what that costs).

Workers are started with ``fork`` (the env factory, the scenarios and any closure they
hold are inherited, never pickled) and live for one pool run: a fork costs milliseconds,
far less than the envs it steps. Platforms without ``fork`` (Windows) run in-process, or
with ``backend="ray"``.

>>> resolve_workers(None), resolve_workers(2)
(1, 2)
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._checks import workers as check_workers
from ..errors import RolloutError
from .slots import Job, Reply, SlotGroup

__all__ = ["ProcessGroup", "LocalGroup", "check_workers", "resolve_workers", "usable_cores"]


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


class LocalGroup:
    """A :class:`SlotGroup` in this process, behind the same send/receive pair as a
    worker's: ``send`` stores the step, ``receive`` runs it."""

    def __init__(self, group: SlotGroup) -> None:
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


class _Failure:
    """An exception raised in a worker, carried back to the runner."""

    def __init__(self, exc: BaseException) -> None:
        try:
            self.payload = pickle.dumps(exc)
        except Exception:  # an unpicklable exception: keep its words
            self.payload = pickle.dumps(RolloutError(f"{type(exc).__name__}: {exc}"))

    def exception(self) -> BaseException:
        return pickle.loads(self.payload)


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


def _serve(conn: Any, build: Callable[[], SlotGroup], spin: float) -> None:
    group = None
    waiter = _Waiter(spin)
    try:
        group = build()
        while True:
            waiter.wait(conn)
            message = conn.recv()
            if message is None:
                break
            try:
                conn.send(group.step(*message))
            except BaseException as exc:
                conn.send(_Failure(exc))
                break
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        if group is not None:
            group.close()
        conn.close()


class ProcessGroup:
    """A :class:`SlotGroup` built and stepped in a forked worker process."""

    def __init__(self, build: Callable[[], SlotGroup], slots: int, spin: float = 0.0) -> None:
        self.slots = slots
        self.waiter = _Waiter(spin)
        if "fork" not in multiprocessing.get_all_start_methods():
            raise RolloutError(
                "workers= needs the 'fork' start method, which this platform lacks; audit "
                "with workers=None, or spread episodes with backend='ray'"
            )
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, build, spin), daemon=True,
                                       name="rlaudit-envs")
        self.process.start()
        child.close()

    def send(self, actions: Any, jobs: Sequence[Job]) -> None:
        self.conn.send((actions, list(jobs)))

    def receive(self) -> Reply:
        try:
            self.waiter.wait(self.conn)
            message = self.conn.recv()
        except EOFError:
            self.process.join(timeout=5)  # reap it, for its exit code
            raise RolloutError(
                f"an env worker process died (exit code {self.process.exitcode}); run with "
                "workers=None to see the env's own error"
            ) from None
        if isinstance(message, _Failure):
            raise message.exception()
        return message

    def close(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        self.conn.close()
