"""The Ray backend: shards of episode indices run on Ray actors, merged by (scenario, episode).

Each actor runs the in-process pool (:func:`~.pool.run_pool`) on its shard of episode
indices with its own copy of the agent, env and scenarios (shipped once per call with
``ray.put``; cloudpickle, so lambda and closure factories travel too). A result depends
only on (agent, env, scenario, seed, episode index), never on the batch or the process
that ran it (DESIGN.md section 5), so the merged numbers are those of a local run, bit for bit.
What runs on an actor, and how its errors travel back, is :mod:`.ray_actor`; this module
is the caller's side: shipping, dispatching, waiting and keeping the actors.

Ray is imported only here and in :mod:`.ray_actor`, when a run asks for it.
``ray.init()`` runs only if Ray is not running yet: ``RAY_ADDRESS`` (Ray's own
convention) or the caller's own ``ray.init(...)`` choose the cluster. A ``RAY_ADDRESS``
that does not answer is an error naming it within seconds, where Ray itself retries for
minutes (:mod:`.ray_connect`).

Under an audit's ``timeout`` (:mod:`.deadline`) every actor runs its shard under the time
left, and says where it was stuck; the waits for actors end :data:`~.deadline.GRACE`
seconds past the deadline at the latest, naming the shards still running, whose actors
are killed.

Actors are kept between calls of one process. An audit makes several calls in a row (the
calibration pass, the random-policy reference, adaptive rounds), and a fresh actor pays
a worker start and the imports of gymnasium (0.3 s measured) and torch (seconds). Reuse
is safe because an actor keeps nothing of a call but its imports: every call ships the
agent, env and scenarios anew and the actor drops them at the end. Idle actors still
hold one CPU each, so they are released after :data:`IDLE_SECONDS` without a call (or by
:func:`release_actors`), and after a failed call the busy ones are killed rather than
left running shards nobody will read.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from .._checks import integer
from .._checks import seed as check_seed
from .._optional import require
from ..world.agents import Policy
from ..world.envs import AuditEnv
from ..world.scenarios import Scenario
from .batches import EpisodeBatch
from .deadline import GRACE, Deadline, Expired, current
from .pool import run_pool
from .ray_actor import ShardActor, raise_failures
from .ray_connect import init
from .shards import merge, rewarn, split

__all__ = ["run_pool_on_ray", "RayTiming", "last_timing", "release_actors", "IDLE_SECONDS"]

#: Seconds without a call after which the kept actors are killed (their CPUs freed). The
#: calls of one audit come milliseconds apart; the caller's own Ray tasks that want those
#: CPUs wait at most this long (or call :func:`release_actors` first).
IDLE_SECONDS = 10.0



@dataclass(frozen=True)
class RayTiming:
    """Where the time of one :func:`run_pool_on_ray` call went, in seconds.

    ``startup``: ``ray.init`` (if this call started Ray), starting new actors and shipping
    the agent, env and scenarios to them; ``run``: running the shards and merging them.
    """

    startup: float
    run: float
    actors: int
    new_actors: int
    shards: int
    started_ray: bool


#: The timing of the latest :func:`run_pool_on_ray` call in this process (None before it);
#: read it as ``ray_pool.last_timing`` (a ``from`` import would keep the old value).
last_timing: RayTiming | None = None


def run_pool_on_ray(
    policy: Policy,
    env: AuditEnv,
    scenarios: Sequence[Scenario],
    indices: Sequence[int],
    *,
    seed: int,
    batch_size: int | None,
    max_steps: int,
    record: bool | Collection[str],
    workers: int | None = None,
) -> dict[str, EpisodeBatch]:
    """``run_pool(policy, env, scenarios, indices, ...)`` with the episode indices sharded
    over Ray actors: the same batches, exceptions and warnings as the local run.

    ``workers``: the number of shards (None: the cluster's CPU count), at most one per
    episode index; one actor (1 CPU) per shard, up to the cluster's CPUs, the rest queue.
    Every actor runs ``batch_size`` env slots of its own. See :data:`last_timing`.

    >>> import numpy as np
    >>> from pytest_rlaudit import scenarios
    >>> from pytest_rlaudit.world.agents import as_policy
    >>> from pytest_rlaudit.world.envs import env_spec
    >>> out = run_pool_on_ray(as_policy(lambda obs: (obs[:, 2] > 0).astype(np.int64)),
    ...                       env_spec("CartPole-v1"), scenarios.resolve(["nominal", "jitter"]),
    ...                       [0, 1, 2, 3], seed=0, batch_size=None, max_steps=500,
    ...                       record=False, workers=2)  # doctest: +SKIP
    >>> out["jitter"].returns.shape  # doctest: +SKIP
    (4,)
    """
    global last_timing
    indices = list(indices)
    if not indices or min(indices) < 0 or not scenarios:
        # The runner owns these messages; it raises them before making any env.
        return run_pool(policy, env, scenarios, indices, seed=seed, batch_size=batch_size,
                        max_steps=max_steps, record=record)
    # Checked here so that a typo fails at once, not after Ray and the actors have started.
    check_seed(seed, episodes=max(indices) + 1)
    if batch_size is not None:
        integer("batch_size", batch_size, minimum=1)
    integer("max_steps", max_steps, minimum=1)
    if workers is not None:
        integer("workers", workers, minimum=1)
    ray = require("ray", 'backend="ray"')

    # Where a deadline that strikes before any episode ran leaves the audit: the first
    # episode waiting, named as a stuck step would be (DESIGN section 16).
    first = (scenarios[0].name, indices[0])
    waiting = (f"before any episode ran: episodes {indices[0]} to {indices[-1]} of "
               f"{', '.join(repr(s.name) for s in scenarios)} were waiting")
    with _POOL.lock:
        began = perf_counter()
        started = not ray.is_initialized()
        try:
            if started:
                init(ray)
            cpus = max(1, int(ray.cluster_resources().get("CPU", 0)))
            shards = split(indices, min(len(indices), cpus if workers is None else workers))
            actors, new = _POOL.take(ray, min(len(shards), cpus))
        except Expired as exc:
            raise exc.locate(*first, None, "while Ray started (ray.init) and its actors were "
                             f"made, {waiting} (Ray takes seconds to start: start it before "
                             "the audit, with ray.init() or RAY_ADDRESS, or allow for it in "
                             "the limit)") from None
        call = next(_CALLS)
        try:
            refs = [_put(ray, policy, "the agent"), _put(ray, env, "the env"),
                    _put(ray, tuple(scenarios), "the scenarios")]
            loads = [actor.load.remote(call, refs) for actor in actors]
            raise_failures(_get_by(ray, loads, first, waiting))
            ran = perf_counter()
            options = {"seed": seed, "batch_size": batch_size, "max_steps": max_steps,
                       "record": record}
            parts = _dispatch(ray, actors, call, shards, options, [s.name for s in scenarios])
        except (ray.exceptions.RayError, Expired) as exc:
            # An actor died, never started or did not answer by the deadline: start
            # afresh next time.
            _POOL.kill(ray, actors)
            if isinstance(exc, Expired):  # struck while shipping (ray.put) if not located
                exc.locate(*first, None, f"while the agent, env and scenarios were shipped "
                           f"to the Ray actors, {waiting}")
            raise
        finally:
            _POOL.forget(call, actors)
            _POOL.idle_timer()
        out = merge([part for part, _ in parts], [s.name for s in scenarios])
        last_timing = RayTiming(ran - began, perf_counter() - ran, len(actors), new, len(shards),
                                started)
    # attributed where a local run's are: to run_episodes (via runner._on_ray and us)
    rewarn([caught for _, caught in parts], out, stacklevel=3)
    return out


def release_actors() -> None:
    """Kill the actors kept between calls now (rather than after :data:`IDLE_SECONDS`)."""
    with _POOL.lock:
        _POOL.release()


def _put(ray: Any, obj: Any, what: str) -> Any:
    try:
        return ray.put(obj)
    except Exception:
        # Ray's own message is a page of serializability diagnostics; cloudpickle's
        # one line names the culprit.
        try:
            ray.cloudpickle.dumps(obj)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
        else:
            raise  # not a pickling problem: Ray's own error says more
        raise TypeError(
            f'backend="ray" ships {what} to every actor with cloudpickle, and {what} '
            f"cannot be pickled ({reason}). Give an importable or picklable object (a "
            "factory function rather than a live env or a handle to a resource)."
        ) from None


def _get_by(ray: Any, refs: list[Any], first: tuple[str, int], waiting: str) -> list[Any]:
    """``ray.get(refs)``, ending :data:`~.deadline.GRACE` seconds past the deadline at the
    latest (:class:`Expired`, at the ``first`` (scenario, episode) ``waiting``)."""
    bound = current()
    if bound is None:
        got: list[Any] = ray.get(refs)
        return got
    try:
        with bound.hold():
            out = ray.get(refs, timeout=max(0.0, bound.left() + GRACE))
    except ray.exceptions.GetTimeoutError:
        out = None
    if out is None or bound.passed():
        raise bound.expire().locate(*first, None, "while the Ray actors loaded the agent, env "
                                    f"and scenarios (they did not answer in time), {waiting}")
    results: list[Any] = out
    return results


def _dispatch(ray: Any, actors: list[Any], call: int, shards: list[list[int]],
              options: dict[str, Any], names: list[str]) -> list[Any]:
    """Run every shard on the next idle actor; return the results in shard order. Under a
    deadline, each actor runs under the time left and the waits are bounded (see the
    module)."""
    out: list[Any] = [None] * len(shards)
    todo = deque(enumerate(shards))
    idle = list(actors)
    running: dict[Any, tuple[int, Any]] = {}
    bound = current()
    try:
        while todo or running:
            while todo and idle:
                k, shard = todo.popleft()
                actor = idle.pop()
                if bound is not None:
                    options = {**options, "deadline": (bound.left(), bound.timeout)}
                running[actor.run.remote(call, shard, options)] = (k, actor)
            if bound is None:
                ready, _ = ray.wait(list(running), num_returns=1)
            else:
                with bound.hold():  # Ray's wait bounds itself: the alarm must not cut it
                    ready, _ = ray.wait(list(running), num_returns=1,
                                        timeout=max(0.0, bound.left() + GRACE))
            # When several shards are done, the earliest one's error is the one to raise.
            for ref in sorted(ready, key=lambda r: running[r][0]):
                result = _get(ray, ref)  # an actor that died raises here: still running, killed
                k, actor = running.pop(ref)
                out[k] = raise_failures([result])[0]
                idle.append(actor)
            if bound is not None and bound.passed():
                raise _late(bound, [shards[k] for k, _ in running.values()], names)
    except BaseException:
        # Shards still running would hold their actors until they finish; nobody reads them.
        _POOL.kill(ray, [actor for _, actor in running.values()])
        raise
    return out


def _late(bound: Deadline, running: list[list[int]], names: list[str]) -> Expired:
    """The deadline passed while Ray actors ran the shards ``running``: where they were."""
    if not running:
        return bound.expire().locate(None, None, None, "waiting for the Ray actors' results")
    spans = ", ".join(str(s[0]) if len(s) == 1 else f"{s[0]} to {s[-1]}" for s in running)
    return bound.expire().locate(
        None, running[0][0], None, f"on Ray actors, which did not answer in time: they ran "
        f"episodes {spans} of {', '.join(map(repr, names))}")


def _get(ray: Any, ref: Any) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # raised outside the actor's own try
        cause = exc.cause
        if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
            raise cause from None
        raise


_CALLS = itertools.count()


class _Pool:
    """The actors kept between calls, for the Ray session that started them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one call at a time uses the pool
        self.actors: list[Any] = []
        self.session: tuple[str, str] | None = None
        self.actor_class: Any = None
        self.timer: threading.Timer | None = None
        self.calls = 0

    def take(self, ray: Any, n: int) -> tuple[list[Any], int]:
        """``n`` actors of the current session, started as needed; and how many were new."""
        context = ray.get_runtime_context()
        session = (context.get_job_id(), context.get_node_id())
        if session != self.session:  # Ray was shut down and started again: handles are stale
            self.actors, self.session = [], session
        if self.actor_class is None:
            self.actor_class = ray.remote(num_cpus=1, max_restarts=0)(ShardActor)
        new = [self.actor_class.remote() for _ in range(n - len(self.actors))]
        self.actors.extend(new)
        return self.actors[:n], len(new)

    def forget(self, call: int, actors: list[Any]) -> None:
        for actor in actors:
            if actor in self.actors:
                actor.forget.remote(call)

    def kill(self, ray: Any, actors: list[Any]) -> None:
        for actor in actors:
            if actor in self.actors:
                self.actors.remove(actor)
            try:
                ray.kill(actor)
            except Exception:  # already dead, or Ray is shutting down: nothing to free
                pass

    def idle_timer(self) -> None:
        self.calls += 1
        if self.timer is not None:
            self.timer.cancel()
        self.timer = threading.Timer(IDLE_SECONDS, self._release_if_idle, args=(self.calls,))
        self.timer.daemon = True
        self.timer.start()

    def _release_if_idle(self, calls: int) -> None:
        if self.lock.acquire(blocking=False):  # a call running now is not idle
            try:
                if self.calls == calls:
                    self.release()
            finally:
                self.lock.release()

    def release(self) -> None:
        if not self.actors:
            return
        import ray

        context = ray.get_runtime_context() if ray.is_initialized() else None
        if context is not None and (context.get_job_id(), context.get_node_id()) == self.session:
            self.kill(ray, list(self.actors))
        self.actors = []


_POOL = _Pool()
