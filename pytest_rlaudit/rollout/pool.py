"""One pool of env slots for scenarios that need no calibration, and the processes that
run it: what every executor runs (:func:`run_pool`).

In this process alone, or, with ``workers``, in several: each process runs whole
(scenario, episode) pairs of a shard of its own with its own copy of the agent, forked
(:func:`~.shards.run_forked`), as Ray's actors do (:mod:`.ray_pool`); no message passes
per step, and the policy calls are spread with the env steps. A policy that must stay in
one process (``shards_freely=False``: an agent on a GPU) makes every policy call here
(:func:`~.driver.drive`) while its env slots are spread over worker processes
(:mod:`.workers`). :func:`~.runner.run_episodes` picks the executor.

>>> _layout(128, 1, 150), _layout(128, 2, 150), _layout(128, 2, 30)
([[128]], [[30, 29], [35, 34]], [[64], [64]])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any, cast

import gymnasium as gym
import numpy as np

from .._checks import integer
from .._checks import seed as check_seed
from ..world.agents import Policy
from ..world.envs import AuditEnv
from ..world.reuse import EXACT, reset_verdict
from ..world.scenarios import Scenario
from . import progress
from .batch_pool import alone, batch_for, run_batch, split_off
from .batches import EpisodeBatch, warn_capped
from .deadline import Expired
from .driver import drive, placer
from .lockstep import BatchGroup
from .shards import Shard, plan, run_forked
from .slots import Job, SlotRows
from .workers import SPIN_SECONDS, LocalGroup, WorkerPart, WorkerProcess, usable_cores

__all__ = ["run_pool", "episode_indices", "DEFAULT_BATCH_SIZE", "LOCAL_SHARE", "PHASE_ROWS"]

#: Slots in the pool when ``batch_size`` is None (measured in benchmarks/bench_rollout.py:
#: larger batches cost little more per call, so fewer calls win until env steps dominate).
DEFAULT_BATCH_SIZE = 128

#: This process's share of the env slots relative to a worker's, by the number of phases.
#: With one phase a worker waits while this process makes the policy call, so both spend
#: it, and the shares are even; with two, this process also makes the policy calls and
#: reads the replies while a worker steps its envs of the other phase, so it takes fewer
#: (measured with benchmarks/bench_workers.py, HalfCheetah and SAC).
LOCAL_SHARE = {1: 1.0, 2: 0.85}

#: Rows of a batch the audit makes (a vector env) when ``batch_size`` is None: every job
#: of the pool at once up to this many (a vectorised step of 4,096 CartPoles costs about
#: what 64 cost; the policy call grows, but calls are fewer).
BATCH_ROWS = 4096

#: Rows a phase's group needs before two phases pay: each phase makes a policy call of its
#: own, and a call's fixed cost (0.1-0.2 ms for SB3's default net) must stay small next to
#: the envs a worker steps meanwhile.
PHASE_ROWS = 16

Spaces = tuple[gym.Space[Any], gym.Space[Any]]  # an env's observation and action spaces


def episode_indices(episodes: int | Sequence[int]) -> list[int]:
    """Episode indices: ``0 .. n-1`` for a count, else those given.

    >>> episode_indices(3), episode_indices((4, 7))
    ([0, 1, 2], [4, 7])
    """
    return list(range(episodes)) if isinstance(episodes, (int, np.integer)) else list(episodes)


def run_pool(
    policy: Policy,
    env: AuditEnv,
    scenarios: Sequence[Scenario],
    episodes: int | Sequence[int],
    *,
    seed: int,
    batch_size: int | None,
    max_steps: int,
    record: bool | Collection[str],
    workers: int = 1,
) -> dict[str, EpisodeBatch]:
    """:func:`~.runner.run_episodes` of scenarios that need no calibration: one pool of
    slots, stepped by ``workers`` processes, this one included (see the module)."""
    indices = episode_indices(episodes)
    if not indices or min(indices) < 0:
        raise ValueError(f"episodes must be a count >= 1 or non-negative indices, got {episodes!r}")
    if not scenarios:
        raise ValueError("run_episodes needs at least one scenario")
    seed = check_seed(seed, episodes=max(indices) + 1)
    chosen = batch_size
    batch_size = integer("batch_size", DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
                         minimum=1)
    integer("max_steps", max_steps, minimum=1)
    apart = split_off(env, scenarios)
    if apart:  # what the batch cannot step runs one env per slot, with the same numbers
        options: dict[str, Any] = dict(seed=seed, batch_size=chosen, max_steps=max_steps,
                                       record=record, workers=workers)
        rest = [s for s in scenarios if all(s is not a for a in apart)]
        out = run_pool(policy, env, rest, indices, **options) if rest else {}
        out.update(run_pool(policy, alone(env), apart, indices, **options))
        return {s.name: out[s.name] for s in scenarios}
    n_eps = len(indices)
    given = env.batch is not None and env.batch.given is not None
    if workers > 1 and n_eps * len(scenarios) > 1 and policy.shards_freely and not given:
        # Each process runs whole episodes with its own copy of the agent (inherited by
        # fork), as Ray's actors do: no per-step messages, and the policy calls are spread too.
        return _run_shards(policy, env, scenarios, indices, workers, seed=seed,
                           batch_size=batch_size, max_steps=max_steps, record=record)

    jobs: deque[Job] = deque((s, e) for s in range(len(scenarios)) for e in range(n_eps))
    # a batch steps its rows in one call, so more rows cost little: all jobs at once by default
    rows = min(len(jobs), BATCH_ROWS if chosen is None else batch_size)
    kind = batch_for(env, scenarios, rows=rows)
    if kind is not None:  # one lock-step batch steps every env in one call: no workers
        return run_batch(policy, env, kind, scenarios, indices, seed=seed, max_steps=max_steps,
                         record=record)
    count = max(1, min(workers, len(jobs)))
    sizes = _layout(max(batch_size, count), count, len(jobs))
    verdict = reset_verdict(env)
    slot_rows = partial(SlotRows, env, scenarios, indices, seed=seed,
                        reuse=verdict.kind == EXACT)

    def group(rows: SlotRows) -> BatchGroup:
        return BatchGroup(rows, scenarios, indices, seed=seed, max_steps=max_steps)

    # Env groups: per phase, this process's own and one in each further worker process.
    own: list[BatchGroup] = []
    processes: list[WorkerProcess] = []
    stuck = False
    try:
        mine = slot_rows(slots=sizes[0][0])  # with the first env, which sets the spaces
        own.append(group(mine))
        first, spaces = _first_env(policy, mine)
        own.extend(group(slot_rows(slots=n, spaces=spaces, policy=policy)) for n in sizes[0][1:])
        spin = SPIN_SECONDS if count <= usable_cores() else 0.0
        place = placer([s.name for s in scenarios], indices, seed)
        for parts in sizes[1:]:
            build = _builder(group, slot_rows, policy, spaces, parts)
            processes.append(WorkerProcess(build, parts, spin, place=place))
        phases: list[list[LocalGroup | WorkerPart]] = [
            [LocalGroup(own_group), *(w.part(k) for w in processes)]
            for k, own_group in enumerate(own)]
        sink = progress.current()
        if sink is not None:
            sink.planned(len(jobs), horizon=progress.horizon(first, max_steps),
                         parallel=count > 1, copies=policy.shards_freely)
        out = drive(policy, phases, jobs, scenarios, indices, seed=seed, record=record,
                    space=spaces[1])
        if verdict.error is not None:  # the env failed in the probe only: not swallowed
            raise verdict.error
    except (Expired, TimeoutError):
        stuck = True  # out of time: a worker may be stuck in a step, so do not wait for it
        raise
    finally:
        for own_group in own:
            own_group.close()
        for process in processes:
            process.close(kill=stuck)
    warn_capped(out, max_steps, stacklevel=2)  # at run_pool's caller, as run_forked's are
    return out


def _run_shards(policy: Policy, env: AuditEnv, scenarios: Sequence[Scenario], indices: list[int],
                workers: int, **options: Any) -> dict[str, EpisodeBatch]:
    """:func:`run_pool` on shards of the (scenario, episode) pairs, the first in this process
    and each other in a forked one (:func:`~.shards.run_forked`), merged."""
    shards = plan(len(scenarios), indices, workers)

    def run(shard: Shard) -> dict[str, EpisodeBatch]:
        return run_pool(policy, env, [scenarios[k] for k in shard[0]], shard[1], **options)

    mine, first = set(shards[0][0]), len(shards[0][1])
    sink = progress.current()
    if sink is not None:  # this process's shard reports as it runs, the others at the end
        sink.planned(len(indices) * len(scenarios) - len(mine) * first, parallel=True)
    # warned at run_pool's caller (run_episodes), as a local run's RolloutCapWarning is
    out = run_forked(run, shards, [s.name for s in scenarios], stacklevel=3)
    if sink is not None:
        sink.ran_elsewhere(batch.lengths[first if k in mine else 0:]
                           for k, batch in enumerate(out.values()))
    return out  # run_forked warned what the shards warned


def _first_env(policy: Policy, rows: SlotRows) -> tuple[gym.Env, Spaces]:
    """The first env, made by this process's first rows (kept for its first job), and its
    spaces: the policy learns them from it, and every other env must keep them."""
    spaces = cast(Spaces, rows.spaces)  # set by the first env it made
    policy.bind(*spaces)
    rows.bind(policy)  # its envs may attack the agent
    return rows.free[0][0][0], spaces


def _layout(slots: int, processes: int, jobs: int) -> list[list[int]]:
    """Slots per process (this one first, a worker's share 1 and this one's
    :data:`LOCAL_SHARE`) and, within each, per phase: two phases where there are worker
    processes and every group gets :data:`PHASE_ROWS` slots and jobs, else one."""
    if processes == 1:
        return [[slots]]
    phases = 2 if min(slots, jobs) >= 2 * processes * PHASE_ROWS else 1
    share = LOCAL_SHARE[phases]
    local = max(1, round(slots * share / (share + processes - 1)))
    per = [local, *(max(1, len(part)) for part in
                    np.array_split(np.arange(slots - local), processes - 1))]
    return [[len(part) for part in np.array_split(np.arange(n), phases)] for n in per]


def _builder(group: Callable[[SlotRows], BatchGroup], rows: Callable[..., SlotRows],
             policy: Policy, spaces: Spaces, sizes: list[int]) -> Callable[[], list[BatchGroup]]:
    """What a worker process runs to build its groups, one per phase (inherited by fork,
    never pickled)."""
    return lambda: [group(rows(slots=n, spaces=spaces, policy=policy)) for n in sizes]
