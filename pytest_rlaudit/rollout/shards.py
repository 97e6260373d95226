"""Shards: an audit's (scenario, episode) pairs split into parts, each run on its own by
the in-process runner with its own copy of the agent, merged by (scenario, episode).

This is how work goes to several copies of an agent rather than all of it to one: on Ray
actors (:mod:`.ray_pool`, consecutive runs of episode indices), and in forked processes
(``workers=``, :func:`run_forked`), where each process makes its own policy calls on its
own episodes and no message passes per step. A result depends only on (agent, env,
scenario, seed, episode index), never on the batch or the process that ran it (a row's
action does not depend on its batch: the torch adapters pad small batches), so merged
shards give a local run's numbers, bit for bit.

>>> split([0, 1, 2, 3, 4], 2)
[[0, 1, 2], [3, 4]]
>>> plan(4, [0, 1, 2], 2)  # 3 episodes split 2:1, 4 scenarios 2:2: the scenarios
[([0, 1], [0, 1, 2]), ([2, 3], [0, 1, 2])]
"""

from __future__ import annotations

import contextlib
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RolloutCapWarning
from . import lifeline
from .batches import EpisodeBatch
from .deadline import GRACE, Expired, current
from .workers import Failure, died, fork_context

__all__ = ["split", "plan", "merge", "rewarn", "caught_running", "run_forked", "Caught", "Shard"]

#: Warnings a shard raised, as (category, message) pairs (they travel; records do not).
Caught = list[tuple[type[Warning], str]]

#: A part of a pool: the positions of its scenarios (in the pool's list) and its episode
#: indices; it runs every pair of the two.
Shard = tuple[list[int], list[int]]


def split(items: list[int], n: int) -> list[list[int]]:
    """``items`` in ``n`` consecutive runs whose lengths differ by at most one."""
    size, extra = divmod(len(items), n)
    bounds = list(itertools.accumulate([size + (k < extra) for k in range(n)], initial=0))
    return [items[a:b] for a, b in itertools.pairwise(bounds)]


def plan(scenarios: int, indices: list[int], n: int) -> list[Shard]:
    """The pairs of ``scenarios`` x ``indices`` in at most ``n`` shards: consecutive runs of
    the episodes, each with every scenario, or, where that is more even (fewer episodes
    than shards), groups of scenarios, each with every episode. The first shard is the
    largest (the caller runs it, and counts its progress as it goes)."""
    n = max(1, min(n, scenarios * len(indices)))
    by_episode = math.ceil(len(indices) / n) / len(indices)
    by_scenario = math.ceil(scenarios / n) / scenarios
    if by_episode <= by_scenario:
        return [(list(range(scenarios)), part) for part in split(indices, min(n, len(indices)))]
    return [(part, indices) for part in split(list(range(scenarios)), min(n, scenarios))]


def merge(parts: Sequence[dict[str, EpisodeBatch]], names: Sequence[str]) -> dict[str, EpisodeBatch]:
    """The batches of shards, in order (each holding some scenarios on a consecutive run of
    episode indices), as one per scenario."""
    return {name: EpisodeBatch.concat([part[name] for part in parts if name in part])
            for name in names}


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


def caught_running(run: Callable[[Any], dict[str, EpisodeBatch]],
                   shard: Any) -> tuple[dict[str, EpisodeBatch], Caught]:
    """``run(shard)`` and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run(shard)
    return out, [(w.category, str(w.message)) for w in caught]


def _serve(conn: Any, run: Callable[[Shard], dict[str, EpisodeBatch]], shard: Shard) -> None:
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


def run_forked(run: Callable[[Shard], dict[str, EpisodeBatch]], shards: list[Shard],
               names: Sequence[str], *, stacklevel: int = 1) -> dict[str, EpisodeBatch]:
    """``run`` on every shard (:func:`plan`), the first in this process and each other
    in a forked one (which inherits ``run`` and all it holds: nothing is pickled on the
    way there), merged; the shards' warnings are warned here (:func:`rewarn`), at
    ``stacklevel`` counted from the caller (where the in-process runner's go). The forked
    processes die with this one (:mod:`.lifeline`); under a deadline they arm their own
    and say where they were stuck, and the waits for them are bounded (:mod:`.deadline`).

    >>> run_forked(lambda shard: {"x": EpisodeBatch("x", *([shard[1]] * 5))},
    ...            [([0], [0, 1]), ([0], [2])], ["x"])["x"].seeds
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
    rewarn([caught for _, caught in parts], out, stacklevel=stacklevel + 1)
    return out


def _receive_by(bound: Any, conn: Any, process: Any, shard: Shard,
                names: Sequence[str]) -> Any:
    """A shard's result, waiting at most until :data:`~.deadline.GRACE` seconds past the
    deadline (the alarm held off, so it never cuts a message in half)."""
    with bound.hold():
        ready = conn.poll(max(0.0, bound.left() + GRACE))
        message = conn.recv() if ready else None
    if isinstance(message, Failure):  # its own words (a deadline it noticed) say more
        return message
    if message is None or bound.passed():
        kinds, episodes = shard
        span = f"{episodes[0]}" if len(episodes) == 1 else f"{episodes[0]} to {episodes[-1]}"
        raise bound.expire().locate(
            None, episodes[0], None, f"in forked process {process.pid}, which did not answer "
            f"in time: it ran episodes {span} of {', '.join(repr(names[k]) for k in kinds)}")
    return message
