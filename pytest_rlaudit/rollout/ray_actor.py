"""What runs on a Ray actor of the Ray backend (:mod:`.ray_pool`), and how its errors
travel back.

A :class:`ShardActor` loads a call's agent, env and scenarios once, then runs
:func:`~.pool.run_pool` on each shard of episode indices it is given, under the caller's
deadline. An exception raised there comes back as a :class:`RemoteFailure` (the exception
itself and its cause when they pickle, and its traceback as text: :mod:`.travel`), which
:func:`raise_failures` raises on the caller's side.

Ray is imported only when an actor or a failure needs it, never by importing this module.
"""

from __future__ import annotations

import os
import socket
from functools import partial
from typing import Any

from ..world.agents import Policy
from ..world.envs import AuditEnv
from ..world.scenarios import Scenario
from .deadline import within
from .pool import run_pool
from .shards import caught_running
from .travel import RemoteTraceback, Travelling

__all__ = ["ShardActor", "RemoteFailure", "RemoteTraceback", "raise_failures"]


class ShardActor:
    """A Ray actor: loads a call's agent, env and scenarios once, then runs its shards."""

    def __init__(self) -> None:
        self.loaded: dict[int, tuple[Policy, AuditEnv, tuple[Scenario, ...]]] = {}

    def load(self, call: int, refs: list[Any]) -> RemoteFailure | None:
        import ray

        # The refs arrive nested in a list, so that a failure to unpickle them (a module
        # missing on this node) happens here and travels back like any other error.
        try:
            policy, env, scenarios = ray.get(refs)
        except Exception as exc:
            return RemoteFailure(exc)
        self.loaded[call] = (policy, env, scenarios)
        return None

    def run(self, call: int, indices: list[int], options: dict[str, Any]) -> Any:
        policy, env, scenarios = self.loaded[call]
        options = dict(options)
        left, timeout = options.pop("deadline", (None, None))
        try:
            # The caller's deadline, for the time it had left: a step stuck here says where.
            with within(None if left is None else max(left, 1e-3), said=timeout):
                return caught_running(partial(run_pool, policy, env, scenarios, **options),
                                      indices)
        except Exception as exc:
            return RemoteFailure(exc)

    def forget(self, call: int) -> None:
        self.loaded.pop(call, None)


def raise_failures(results: list[Any]) -> list[Any]:
    """``results`` unchanged, unless one is a :class:`RemoteFailure`: raise its exception."""
    for result in results:
        if isinstance(result, RemoteFailure):
            result.reraise()
    return results


class RemoteFailure(Travelling):
    """An exception raised on an actor, made to travel (:class:`~.travel.Travelling`,
    pickled with cloudpickle, as Ray pickles a return value)."""

    def __init__(self, exc: BaseException) -> None:
        import ray

        super().__init__(exc, f"on Ray actor pid {os.getpid()} at {socket.gethostname()}",
                         ray.cloudpickle.dumps)

    def reraise(self) -> None:
        raise self.exception()
