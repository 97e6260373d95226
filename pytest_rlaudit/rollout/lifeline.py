"""Forked processes that die with the process that started them.

A worker process or shard that outlives its parent (SIGTERM, SIGKILL, the OOM killer, a
cancelled CI job, pytest-timeout's ``thread`` method, which ends pytest with
``os._exit``) would block forever on its pipe, holding a core and whatever the parent had
open (pytest's output, xdist's channel: the run never ends). Three things prevent it:

1. A forked child closes its copies of the parent's pipe ends (:func:`parent_end` records
   them). Before this, a worker kept the parent's end of its own pipe open, so it never
   saw the end of the pipe when the parent died; now its read ends with EOF and its
   write with a broken pipe, and it exits.
2. On Linux the child asks the kernel for SIGKILL when its parent dies
   (``prctl(PR_SET_PDEATHSIG)``): it ends even in the middle of a long env step. The
   parent may die before the request is made, so the child checks that its parent is
   still the one that forked it right after.
3. The runner stops its children itself on every way out (:func:`stop`): asked, then
   SIGTERM, then SIGKILL, and always reaped.

A child also puts torch on one thread (:func:`~..world.agents.torch.after_fork`): torch's
OpenMP pool does not survive a fork, and a child that used it would hang.

>>> import multiprocessing
>>> process = start(multiprocessing.get_context("fork"), sum, ([1, 2],))
>>> stop(process, wait=5)
>>> process.exitcode
0
"""

from __future__ import annotations

import ctypes
import os
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..world.agents.torch import after_fork
from . import calls, deadline

__all__ = ["start", "stop", "parent_end", "die_with_parent"]

#: The parent's ends of the pipes to every child it has running: a child forked later
#: inherits them too, and must close them.
_PARENT_ENDS: weakref.WeakSet[Any] = weakref.WeakSet()

_PR_SET_PDEATHSIG = 1
_prctl: Any = None  # looked up once, in the parent: the child should not load libraries


def parent_end(conn: Any) -> Any:
    """Record ``conn`` as a parent's end of a pipe to a child (see the module); return it."""
    _PARENT_ENDS.add(conn)
    return conn


def start(context: Any, target: Callable[..., Any], args: Sequence[Any] = (), *,
          name: str = "rlaudit") -> Any:
    """A started ``context.Process`` (``fork``) running ``target(*args)`` that dies with
    this process (see the module), under this thread's deadline if there is one
    (:func:`~.deadline.arm_in_child`)."""
    _load_prctl()
    process = context.Process(target=_child, args=(os.getpid(), target, tuple(args)),
                              daemon=True, name=name)
    with calls.paused():  # forked with one thread: this process's watcher stops meanwhile
        process.start()
    return process


def _child(parent: int, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    for conn in list(_PARENT_ENDS):
        conn.close()  # this process's copies only: the parent's stay open
    die_with_parent(parent)
    after_fork()
    deadline.arm_in_child()
    calls.arm_in_child()
    target(*args)


def _load_prctl() -> None:
    global _prctl
    if _prctl is None and sys.platform.startswith("linux"):
        try:
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):  # a libc without prctl: rely on EOF alone
            _prctl = False


def die_with_parent(parent: int) -> None:
    """In a forked child: be killed when the parent dies (Linux), and exit now if the
    parent ``parent`` (its pid before the fork) is already gone."""
    if _prctl:
        import signal

        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(1)


def stop(process: Any, wait: float = 5.0) -> None:
    """End ``process`` and reap it: up to ``wait`` seconds for it to exit by itself (it
    was asked to), then SIGTERM, then SIGKILL."""
    process.join(timeout=wait)
    if process.is_alive():
        process.terminate()
        process.join(timeout=1)
    if process.is_alive():
        process.kill()
        process.join()
