"""Shards: episode indices split into consecutive runs, each run on its own by the
in-process runner with its own copy of the agent, merged by (scenario, episode).

This is how work goes to several copies of an agent rather than all of it to one: on Ray
actors (:mod:`.ray_pool`), and in forked processes for a policy that costs nothing to
copy and gains nothing from large batches (``shards_freely``: the random reference), for
which a per-step message to one process would cost more than the policy
(:func:`run_forked`). A result depends only on (agent, env, scenario, seed, episode
index), never on the process that ran it, so merged shards give a local run's numbers.

>>> split([0, 1, 2, 3, 4], 2)
[[0, 1, 2], [3, 4]]
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RolloutCapWarning
from . import lifeline
from .batches import EpisodeBatch
from .deadline import GRACE, Expired, current
from .workers import Failure, died, fork_context

__all__ = ["split", "merge", "rewarn", "caught_running", "run_forked", "Caught"]

#: Warnings a shard raised, as (category, message) pairs (they travel; records do not).
Caught = list[tuple[type[Warning], str]]


def split(items: list[int], n: int) -> list[list[int]]:
    """``items`` in ``n`` consecutive runs whose lengths differ by at most one."""
    size, extra = divmod(len(items), n)
    bounds = list(itertools.accumulate([size + (k < extra) for k in range(n)], initial=0))
    return [items[a:b] for a, b in itertools.pairwise(bounds)]


def merge(parts: Sequence[dict[str, EpisodeBatch]], names: Sequence[str]) -> dict[str, EpisodeBatch]:
    """The batches of shards run on consecutive runs of indices, in order, as one."""
    return {name: EpisodeBatch.concat([part[name] for part in parts]) for name in names}


def rewarn(caught: Sequence[Caught], out: dict[str, EpisodeBatch], stacklevel: int) -> None:
    """Warn on the caller's side what the shards warned: each message once, and one
    RolloutCapWarning counting the capped episodes of all shards, as a local run does.
    ``stacklevel`` counts from the caller: warnings go where the local runner's go
    (:func:`~.runner.run_episodes`)."""
    seen: set[tuple[type[Warning], str]] = set()
    cap = None
    for category, message in itertools.chain.from_iterable(caught):
        if issubclass(category, RolloutCapWarning):
            cap = message
        elif (category, message) not in seen:
            seen.add((category, message))
            warnings.warn(message, category, stacklevel=stacklevel + 1)
    if cap is not None:
        total = sum(int(batch.capped.sum()) for batch in out.values())
        # The runner's message starts with its own shard's count: put the total there.
        warnings.warn(f"{total} {cap.partition(' ')[2]}", RolloutCapWarning,
                      stacklevel=stacklevel + 1)


def caught_running(run: Callable[[list[int]], dict[str, EpisodeBatch]],
                   shard: list[int]) -> tuple[dict[str, EpisodeBatch], Caught]:
    """``run(shard)`` and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run(shard)
    return out, [(w.category, str(w.message)) for w in caught]


def _serve(conn: Any, run: Callable[[list[int]], dict[str, EpisodeBatch]],
           shard: list[int]) -> None:
    bound = current()
    try:
        try:
            out: Any = caught_running(run, shard)
        except BaseException as exc:
            out = Failure(exc)
        # Past its deadline a message must not be cut in half: the runner reads it whole.
        with bound.hold() if bound is not None else contextlib.nullcontext():
            conn.send(out)
    except (BrokenPipeError, ConnectionResetError, Expired):
        pass  # the runner is gone, or out of time already: nobody to tell
    finally:
        conn.close()


def run_forked(run: Callable[[list[int]], dict[str, EpisodeBatch]], shards: list[list[int]],
               names: Sequence[str]) -> dict[str, EpisodeBatch]:
    """``run`` on every shard of episode indices, the first in this process and each other
    in a forked one (which inherits ``run`` and all it holds: nothing is pickled on the
    way there), merged; the shards' warnings are warned here (:func:`rewarn`), from the
    runner's pool function on behalf of :func:`~.runner.run_episodes`. The forked
    processes die with this one (:mod:`.lifeline`); under a deadline they arm their own
    and say where they were stuck, and the waits for them are bounded (:mod:`.deadline`).

    >>> run_forked(lambda shard: {"x": EpisodeBatch("x", *([shard] * 5))}, [[0, 1], [2]],
    ...            ["x"])["x"].seeds
    array([0, 1, 2])
    """
    context = fork_context()
    children = []
    bound = current()
    stuck = False
    try:
        for shard in shards[1:]:
            conn, child = context.Pipe(duplex=False)
            lifeline.parent_end(conn)
            process = lifeline.start(context, _serve, (child, run, shard), name="rlaudit-shard")
            child.close()
            children.append((conn, process))
        parts = [caught_running(run, shards[0])]
        for (conn, process), shard in zip(children, shards[1:], strict=True):
            try:
                message = conn.recv() if bound is None else _receive_by(bound, conn, process,
                                                                        shard, names)
            except EOFError:
                raise died(process) from None
            if isinstance(message, Failure):
                raise message.exception()
            parts.append(message)
    except (Expired, TimeoutError):
        stuck = True  # the others may be stuck in a step too: do not wait for them
        raise
    finally:
        for conn, process in children:
            conn.close()
            lifeline.stop(process, wait=0.0 if stuck else 5.0)
    out = merge([part for part, _ in parts], names)
    rewarn([caught for _, caught in parts], out, stacklevel=3)
    return out


def _receive_by(bound: Any, conn: Any, process: Any, shard: list[int],
                names: Sequence[str]) -> Any:
    """A shard's result, waiting at most until :data:`~.deadline.GRACE` seconds past the
    deadline (the alarm held off, so it never cuts a message in half)."""
    with bound.hold():
        ready = conn.poll(max(0.0, bound.left() + GRACE))
        message = conn.recv() if ready else None
    if isinstance(message, Failure):  # its own words (a deadline it noticed) say more
        return message
    if message is None or bound.passed():
        episodes = f"{shard[0]}" if len(shard) == 1 else f"{shard[0]} to {shard[-1]}"
        raise bound.expire().locate(
            None, shard[0], None, f"in forked process {process.pid}, which did not answer in "
            f"time: it ran episodes {episodes} of {', '.join(map(repr, names))}")
    return message
