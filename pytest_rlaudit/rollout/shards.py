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

import itertools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RolloutCapWarning
from .batches import EpisodeBatch
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
    try:
        conn.send(caught_running(run, shard))
    except BaseException as exc:
        conn.send(Failure(exc))
    finally:
        conn.close()


def run_forked(run: Callable[[list[int]], dict[str, EpisodeBatch]], shards: list[list[int]],
               names: Sequence[str]) -> dict[str, EpisodeBatch]:
    """``run`` on every shard of episode indices, the first in this process and each other
    in a forked one (which inherits ``run`` and all it holds: nothing is pickled on the
    way there), merged; the shards' warnings are warned here (:func:`rewarn`), from the
    runner's pool function on behalf of :func:`~.runner.run_episodes`.

    >>> run_forked(lambda shard: {"x": EpisodeBatch("x", *([shard] * 5))}, [[0, 1], [2]],
    ...            ["x"])["x"].seeds
    array([0, 1, 2])
    """
    context = fork_context()
    children = []
    try:
        for shard in shards[1:]:
            conn, child = context.Pipe(duplex=False)
            process = context.Process(target=_serve, args=(child, run, shard), daemon=True,
                                      name="rlaudit-shard")
            process.start()
            child.close()
            children.append((conn, process))
        parts = [caught_running(run, shards[0])]
        for conn, process in children:
            try:
                message = conn.recv()
            except EOFError:
                raise died(process) from None
            if isinstance(message, Failure):
                raise message.exception()
            parts.append(message)
    finally:
        for conn, process in children:
            conn.close()
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
    out = merge([part for part, _ in parts], names)
    rewarn([caught for _, caught in parts], out, stacklevel=3)
    return out
