"""The batched lock-step episode runner.

All (scenario, episode) pairs of an audit share one pool of ``batch_size`` env slots.
At every decision step the runner makes one policy call for all active slots; a slot
whose episode ends takes the next pair from the queue, so policy calls stay as large as
possible until the queue drains. Episode ``i`` of every scenario is reset with env seed
``seed + i``, and each perturbation draws from a stream keyed on (seed, i, scenario).
Results are stored by (scenario, episode): they never depend on the batch size, the
order of the queue or the process that ran them.

>>> import numpy as np
>>> from pytest_rlaudit import scenarios
>>> from pytest_rlaudit.world.envs import env_spec
>>> from pytest_rlaudit.world.agents import as_policy
>>> policy = as_policy(lambda obs: (obs[:, 2] + obs[:, 3] > 0).astype(np.int64))
>>> out = run_episodes(policy, env_spec("CartPole-v1"), scenarios.resolve(["nominal", "jitter"]),
...                    episodes=3, seed=0)
>>> out["nominal"].returns.shape
(3,)
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Collection, Sequence
from functools import partial
from typing import Any

import numpy as np

from .._checks import integer
from .._checks import seed as check_seed
from .._seeding import POLICY_STREAM, episode_seed_sequence
from ..errors import RolloutCapWarning, RolloutError
from ..world.agents import Policy
from ..world.calibration import observation_spread
from ..world.envs import AuditEnv
from ..world.reuse import reset_is_exact
from ..world.scenarios import NOMINAL, Scenario
from . import progress
from .batches import EpisodeBatch
from .budget import check_budget
from .checks import ActionChecker, all_finite, check_obs, show
from .deadline import Expired, current
from .shards import run_forked, split
from .slots import Finished, Job, Reply, SlotGroup, attach_policy, stack, where
from .workers import (
    SPIN_SECONDS,
    LocalGroup,
    WorkerProcess,
    check_workers,
    resolve_workers,
    usable_cores,
)

__all__ = ["EpisodeBatch", "run_episodes", "check_backend", "check_workers", "BACKENDS", "DEFAULT_MAX_STEPS",
           "DEFAULT_BATCH_SIZE"]

#: Where pools of episodes run: this machine (in-process or worker processes), or Ray.
BACKENDS = ("local", "ray")

#: Cap on agent steps per episode; longer episodes are cut with a RolloutCapWarning.
DEFAULT_MAX_STEPS = 10_000
#: Slots in the pool when ``batch_size`` is None (measured in benchmarks/bench_rollout.py:
#: larger batches cost little more per call, so fewer calls win until env steps dominate).
DEFAULT_BATCH_SIZE = 128


def run_episodes(
    policy: Policy,
    env: AuditEnv,
    scenarios: Sequence[Scenario],
    episodes: int | Sequence[int],
    *,
    seed: int = 0,
    batch_size: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    record: bool | Collection[str] = False,
    workers: int | str | None = None,
    backend: str = "local",
) -> dict[str, EpisodeBatch]:
    """Run ``episodes`` of every scenario with ``policy``, batched, and return them by name.

    ``episodes`` is a count (episode indices ``0 .. n-1``) or explicit episode indices;
    episode ``i`` resets with env seed ``seed + i``. ``batch_size`` (default
    :data:`DEFAULT_BATCH_SIZE`) is the number of env slots. ``record`` keeps every
    observation the agent saw and action it chose: for every scenario (True), or for the
    scenarios named. Exceptions from the agent or the env are re-raised as
    :class:`RolloutError` naming scenario, episode and step.

    Where the work runs never changes a number. ``workers`` (``None``: this process
    alone; a count, or ``"auto"``: one per core) steps the env slots in that many
    processes, this one and ``workers - 1`` forked ones, while this process makes the
    batched policy calls (:mod:`.workers`; for envs that cost more than the policy, such
    as MuJoCo). ``backend="ray"`` runs shards of the episodes on
    Ray actors instead, each with its own copy of the agent (``workers`` actors; default:
    the cluster's CPUs; :mod:`.ray_pool`).

    Scenarios sized by the observations' spread (``needs_spread``, such as ``obs_noise``)
    are calibrated on the nominal episodes of the same indices: those run first (with the
    other scenarios, in one pool; added if not asked for), then the calibrated ones.
    Each batch's ``params`` say what its scenario ran with. A count too large for this
    machine's memory is refused before anything runs (:func:`~.budget.check_budget`).
    """
    if isinstance(episodes, (int, np.integer)) and not isinstance(episodes, bool):
        check_budget(int(episodes), len(scenarios))
    pool = _pool(workers, backend)
    later = [s for s in scenarios if s.needs_spread]
    if not later:
        return pool(policy, env, scenarios, episodes, seed=seed, batch_size=batch_size,
                    max_steps=max_steps, record=record)
    first = [s for s in scenarios if not s.needs_spread]
    if not any(s.name == NOMINAL.name for s in first):
        first.insert(0, NOMINAL)
    recorded = set(s.name for s in scenarios) if record is True else set(record or ())
    out = pool(policy, env, first, episodes, seed=seed, batch_size=batch_size,
               max_steps=max_steps, record=recorded | {NOMINAL.name})
    spread = observation_spread(out[NOMINAL.name].observations)
    out.update(pool(policy, env, [s.calibrated(spread) for s in later], episodes,
                    seed=seed, batch_size=batch_size, max_steps=max_steps, record=recorded))
    return {s.name: out[s.name] for s in scenarios}


def _pool(workers: int | str | None, backend: str) -> Any:
    """The function that runs one pool of slots, for ``backend`` and ``workers``."""
    check_backend(backend)
    if backend == "ray":
        from .ray_pool import run_pool_on_ray

        actors = None if workers in (None, "auto") else resolve_workers(workers)
        return partial(_on_ray, run_pool_on_ray, actors)
    return partial(_run_pool, workers=resolve_workers(workers))


def _on_ray(run: Any, actors: int | None, policy: Policy, env: AuditEnv,
            scenarios: Sequence[Scenario], episodes: int | Sequence[int], **kwargs: Any) -> Any:
    indices = _indices(episodes)
    sink = progress.current()
    if sink is not None:  # the shards' episodes count when they come back
        sink.planned(len(indices) * len(scenarios), parallel=True)
    out = run(policy, env, scenarios, indices, workers=actors, **kwargs)
    if sink is not None:
        sink.ran_elsewhere(out.values())
    return out


def _indices(episodes: int | Sequence[int]) -> list[int]:
    """Episode indices: ``0 .. n-1`` for a count, else those given."""
    return list(range(episodes)) if isinstance(episodes, (int, np.integer)) else list(episodes)


def check_backend(backend: Any) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else a ValueError naming them.

    >>> check_backend("ray")
    'ray'
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    return backend


def _run_pool(
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
    """:func:`run_episodes` of scenarios that need no calibration: one pool of slots,
    stepped by ``workers`` processes, this one included (:mod:`.workers`)."""
    indices = _indices(episodes)
    if not indices or min(indices) < 0:
        raise ValueError(f"episodes must be a count >= 1 or non-negative indices, got {episodes!r}")
    if not scenarios:
        raise ValueError("run_episodes needs at least one scenario")
    seed = check_seed(seed, episodes=max(indices) + 1)
    batch_size = integer("batch_size", DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
                         minimum=1)
    integer("max_steps", max_steps, minimum=1)
    n_eps = len(indices)
    jobs: deque[Job] = deque((s, e) for s in range(len(scenarios)) for e in range(n_eps))
    if workers > 1 and n_eps > 1 and getattr(policy, "shards_freely", False):
        # No per-step messages for a policy that costs nothing to copy: each process runs
        # whole episodes of its own (the random reference).
        run = partial(_run_pool, policy, env, scenarios, seed=seed, batch_size=batch_size,
                      max_steps=max_steps, record=record)
        shards = split(indices, min(workers, n_eps))
        sink = progress.current()
        if sink is not None:  # this process's shard reports as it runs, the others at the end
            sink.planned((n_eps - len(shards[0])) * len(scenarios), parallel=True)
        out = run_forked(run, shards, [s.name for s in scenarios])
        if sink is not None:
            sink.ran_elsewhere(out.values(), skip=len(shards[0]))
        return out
    reuse = reset_is_exact(env)

    # Env groups: per phase, this process's own and one in each further worker process.
    # The policy learns the env's spaces from the first env made here; the others must
    # keep them.
    count = max(1, min(workers, len(jobs)))
    sizes = _layout(max(batch_size, count), count, len(jobs))
    settings = dict(seed=seed, max_steps=max_steps, reuse=reuse)
    own = [SlotGroup(env, scenarios, indices, slots=n, **settings) for n in sizes[0]]
    processes: list[WorkerProcess] = []
    stuck = False
    try:
        first = own[0].make(0)
        if hasattr(policy, "bind"):
            policy.bind(first[0].observation_space, first[0].action_space)
        attach_policy(first[0], policy)
        own[0].free[0] = [first]
        for group in own:
            group.policy, group.spaces = policy, own[0].spaces
        spin = SPIN_SECONDS if count <= usable_cores() else 0.0
        for parts in sizes[1:]:
            build = _builder(policy, env, scenarios, indices, own[0].spaces, parts, **settings)
            processes.append(WorkerProcess(build, parts, spin,
                                           place=_placer([s.name for s in scenarios], indices, seed)))
        phases = [[LocalGroup(group), *(w.part(k) for w in processes)]
                  for k, group in enumerate(own)]
        sink = progress.current()
        if sink is not None:
            sink.planned(len(jobs), horizon=progress.horizon(first[0], max_steps),
                         parallel=count > 1)
        return _drive(policy, phases, jobs, scenarios, indices, seed=seed,
                      max_steps=max_steps, record=record, space=own[0].spaces[1])
    except (Expired, TimeoutError):
        stuck = True  # out of time: a worker may be stuck in a step, so do not wait for it
        raise
    finally:
        for group in own:
            group.close()
        for process in processes:
            process.close(kill=stuck)


#: This process's share of the env slots relative to a worker's, by the number of phases.
#: With one phase a worker waits while this process makes the policy call, so both spend
#: it, and the shares are even; with two, this process also makes the policy calls and
#: reads the replies while a worker steps its envs of the other phase, so it takes fewer
#: (measured with benchmarks/bench_workers.py, HalfCheetah and SAC).
LOCAL_SHARE = {1: 1.0, 2: 0.85}

#: Rows a phase's group needs before two phases pay: each phase makes a policy call of its
#: own, and a call's fixed cost (0.1-0.2 ms for SB3's default net) must stay small next to
#: the envs a worker steps meanwhile.
PHASE_ROWS = 16


def _layout(slots: int, processes: int, jobs: int) -> list[list[int]]:
    """Slots per process (this one first, a worker's share 1 and this one's
    :data:`LOCAL_SHARE`) and, within each, per phase: two phases where there are worker
    processes and every group gets :data:`PHASE_ROWS` slots and jobs, else one.

    >>> _layout(128, 1, 150), _layout(128, 2, 150), _layout(128, 2, 30)
    ([[128]], [[30, 29], [35, 34]], [[64], [64]])
    """
    if processes == 1:
        return [[slots]]
    phases = 2 if min(slots, jobs) >= 2 * processes * PHASE_ROWS else 1
    share = LOCAL_SHARE[phases]
    local = max(1, round(slots * share / (share + processes - 1)))
    per = [local, *(max(1, len(part)) for part in
                    np.array_split(np.arange(slots - local), processes - 1))]
    return [[len(part) for part in np.array_split(np.arange(n), phases)] for n in per]


def _placer(names: Sequence[str], indices: list[int], seed: int) -> Any:
    """Where a deadline struck, given the rows of a batch (``jobs`` and their agent
    ``steps``): the first row, in the words of every rollout error, and how many more."""

    def place(exc: Expired, jobs: Sequence[Job], steps: Sequence[int], what: str) -> Expired:
        if not jobs:
            return exc.locate(None, None, None, what)
        (s, e), step = jobs[0], steps[0]
        more = f" (and {len(jobs) - 1} more rows)" if len(jobs) > 1 else ""
        return exc.locate(names[s], indices[e], step,
                          f"{what}, for {where(names[s], indices[e], seed, step)}{more}")

    return place


def _builder(policy: Policy, env: AuditEnv, scenarios: Sequence[Scenario], indices: list[int],
             spaces: Any, sizes: list[int], **settings: Any) -> Any:
    """What a worker process runs to build its groups, one per phase (inherited by fork,
    never pickled)."""
    return lambda: [SlotGroup(env, scenarios, indices, spaces=spaces, policy=policy, slots=n,
                              **settings) for n in sizes]


def _drive(policy: Policy, phases: list[list[Any]], jobs: deque[Job], scenarios: Sequence[Scenario],
           indices: list[int], *, seed: int, max_steps: int, record: bool | Collection[str],
           space: Any) -> dict[str, EpisodeBatch]:
    """The runner's half of the pool: hand out jobs, make every policy call, gather results.

    ``phases``: the groups of each phase, this process's own first (:mod:`.workers`).
    The phases take turns: for phase ``p`` this process takes in its groups' replies,
    makes one batched policy call for the rows of all of them, sends the worker
    processes their actions and steps its own group, then reads the workers' replies of
    the other phase, which they stepped meanwhile.
    """
    # One function on purpose: the per-episode arrays, the policy states and the records
    # are the state every phase shares; the helpers close over them rather than pass a
    # dozen arguments per decision step on the hot path (bench_rollout.py holds it at the
    # floor).
    names = [s.name for s in scenarios]
    recorded = [record is True or (not isinstance(record, bool) and name in record)
                for name in names]
    shape = (len(scenarios), len(indices))
    returns = np.zeros(shape, dtype=np.float64)
    lengths = np.zeros(shape, dtype=np.int64)
    env_steps = np.zeros(shape, dtype=np.int64)
    capped = np.zeros(shape, dtype=bool)
    traces: list[list[np.ndarray]] = [[np.empty(0)] * shape[1] for _ in scenarios]
    seen: list[list[Any]] = [[()] * shape[1] for _ in scenarios]
    chosen: list[list[Any]] = [[()] * shape[1] for _ in scenarios]
    rows_seen: dict[Job, list[Any]] = {}
    rows_chosen: dict[Job, list[Any]] = {}
    state_of: dict[Job, Any] = {}
    check_actions = ActionChecker(space)
    stateful = bool(getattr(policy, "stateful", False))
    policy.reset()
    # With several groups each holds a few queued jobs beyond its slots, so a slot that
    # frees up starts its next episode at once; a few, so no group hoards the queue's tail.
    groups = [group for phase in phases for group in phase]
    backlog = 0 if len(groups) == 1 else 2
    place = _placer(names, indices, seed)
    # Outside the main thread no alarm interrupts a step: the deadline is checked between
    # decision steps (see .deadline); in it, the alarm needs no check here.
    bound = current()
    polled = bound if bound is not None and bound.polled else None
    sink = progress.current()  # None unless someone shows the audit's progress

    def hand_out(wanted: int) -> list[Job]:
        return [jobs.popleft() for _ in range(min(wanted, len(jobs)))]

    def finish(done: Finished) -> None:
        s, e = done.job
        returns[s, e] = done.ret
        lengths[s, e] = done.steps
        env_steps[s, e] = done.env_steps
        capped[s, e] = done.capped
        traces[s][e] = done.trace
        state_of.pop(done.job, None)
        if recorded[s]:
            seen[s][e] = _gather(rows_seen.pop(done.job))
            chosen[s][e] = _gather(rows_chosen.pop(done.job))

    def act(reply: Reply) -> Any:
        obs_batch = reply.obs
        if not all_finite(obs_batch):
            for i, (s, e) in enumerate(reply.jobs):  # rare: find the culprit for the message
                check_obs(_row(obs_batch, i), names[s], indices[e], seed, reply.steps[i])
        states = [state_of[job] for job in reply.jobs] if stateful else None
        try:
            actions, new_states = policy.act(obs_batch, states)
            actions, bad = check_actions(actions, len(reply.jobs))
        except Exception as exc:
            at = "; ".join(where(names[s], indices[e], seed, reply.steps[i])
                           for i, (s, e) in enumerate(reply.jobs[:3]))
            more = f" and {len(reply.jobs) - 3} more" if len(reply.jobs) > 3 else ""
            s, e = reply.jobs[0]
            raise RolloutError(
                f"the agent failed ({type(exc).__name__}: {exc}) in a batched call for {at}{more}",
                scenario=names[s], episode=indices[e], step=reply.steps[0],
            ) from exc
        except Expired as exc:  # the deadline struck in the policy call
            raise place(exc, reply.jobs, reply.steps, "in the agent's policy call") from None
        if bad is not None:
            s, e = reply.jobs[bad]
            raise RolloutError(
                f"the agent returned action {show(actions[bad])}, which is not in the action "
                f"space {check_actions.space} (non-finite, out of bounds or of the wrong type), "
                f"at {where(names[s], indices[e], seed, reply.steps[bad])}. Fix the policy's "
                "output, or clip it (gymnasium.wrappers.ClipAction) if that is what deployment "
                "does.",
                scenario=names[s], episode=indices[e], step=reply.steps[bad],
            )
        for i, job in enumerate(reply.jobs):
            if stateful:
                state_of[job] = new_states[i]
            if recorded[job[0]]:
                rows_seen[job].append(_row(obs_batch, i))
                rows_chosen[job].append(actions[i])
        return actions

    def take_in(reply: Reply) -> None:
        for done in reply.finished:
            finish(done)
        for job in reply.started:
            if stateful:
                state_of[job] = policy.initial_state(
                    episode_seed_sequence(seed, indices[job[1]], POLICY_STREAM))
            if recorded[job[0]]:
                rows_seen[job], rows_chosen[job] = [], []
        if sink is not None:
            sink.advance(len(reply.jobs), len(reply.started), [d.steps for d in reply.finished])

    if sink is not None:
        act = sink.timed(act)

    # Every group's first jobs: the workers' sent first so they start stepping, each
    # worker's phases in turn (a worker replies in the order it was asked).
    hands = (_deal(jobs, [g.slots + backlog for g in groups]) if backlog
             else [[jobs.popleft() for _ in range(len(jobs))]])
    for group, first in sorted(zip(groups, hands, strict=True),
                               key=lambda pair: isinstance(pair[0], LocalGroup)):
        group.send(None, first)
    replies: dict[int, Reply] = {}
    ready: list[list[Any]] = [[] for _ in phases]  # groups with their reply in hand
    asked: list[list[Any]] = [[] for _ in phases]  # worker groups with a reply to come
    for k, phase in enumerate(phases):  # this process's own steps first
        ready[k] = [group for group in phase if isinstance(group, LocalGroup)]
        asked[k] = [group for group in phase if not isinstance(group, LocalGroup)]
    for group in [*(g for phase in ready for g in phase), *asked[0]]:
        replies[id(group)] = group.receive()
    ready[0] += asked[0]
    asked[0] = []

    # One decision step of phase p: take in its replies, make ONE policy call for the rows
    # of all of them, send the worker processes their actions and step this process's own
    # group while they step theirs, then read the other phase's replies (with one phase,
    # this phase's).
    p = 0
    while any(ready) or any(asked):
        if polled is not None and polled.passed():
            held = [replies[id(g)] for g in ready[p] if id(g) in replies]
            raise place(polled.expire(), held[0].jobs if held else (),
                        held[0].steps if held else (), "between two decision steps (checked "
                        "only there outside the main thread)")
        due = []
        for group in ready[p]:
            reply = replies.pop(id(group))
            take_in(reply)
            more = hand_out(backlog - reply.backlog) if backlog else []
            if reply.jobs or more:
                due.append((group, reply, more))
        acting = [reply for _, reply, _ in due if reply.jobs]
        actions = act(_joined(acting)) if acting else None
        given, at = {}, 0
        for reply in acting:
            given[id(reply)] = actions[at:at + len(reply.jobs)]
            at += len(reply.jobs)
        due.sort(key=lambda d: isinstance(d[0], LocalGroup))  # workers first
        ready[p] = []
        for group, reply, more in due:
            group.send(given.get(id(reply)), more)
            if isinstance(group, LocalGroup):  # steps here and now
                replies[id(group)] = group.receive()
                ready[p].append(group)
            else:
                asked[p].append(group)
        p = (p + 1) % len(phases)
        for group in asked[p]:
            replies[id(group)] = group.receive()
        ready[p] += asked[p]
        asked[p] = []

    n_capped = int(capped.sum())
    if n_capped:
        warnings.warn(
            f"{n_capped} episode(s) reached the cap of {max_steps} agent steps and were cut "
            "there; their returns are partial. Raise max_steps, or give the env a TimeLimit.",
            RolloutCapWarning, stacklevel=3,
        )
    seeds = np.asarray([seed + i for i in indices], dtype=np.int64)
    return {
        name: EpisodeBatch(name, seeds, returns[s], lengths[s], env_steps[s], capped[s],
                           tuple(traces[s]), tuple(seen[s]), tuple(chosen[s]),
                           dict(scenarios[s].params))
        for s, name in enumerate(names)
    }


def _deal(jobs: deque[Job], room: list[int]) -> list[list[Job]]:
    """The first jobs of the queue dealt to groups with ``room`` places each, in proportion
    to their room and in turn, so that every group starts with a mix of scenarios (their
    episodes differ in decisions per env step, and so in cost)."""
    hands: list[list[Job]] = [[] for _ in room]
    total = sum(room)
    while jobs and any(len(h) < r for h, r in zip(hands, room, strict=True)):
        # the group furthest behind its proportional share takes the next job
        g = min((i for i, r in enumerate(room) if len(hands[i]) < r),
                key=lambda i: ((len(hands[i]) + 1) * total / room[i], i))
        hands[g].append(jobs.popleft())
    return hands


def _joined(replies: list[Reply]) -> Reply:
    """The active rows of several groups' replies as one (rows in the replies' order)."""
    if len(replies) == 1:
        return replies[0]
    first = replies[0].obs
    obs = ({k: np.concatenate([r.obs[k] for r in replies]) for k in first}
           if isinstance(first, dict) else np.concatenate([r.obs for r in replies]))
    return Reply([job for r in replies for job in r.jobs], obs,
                 [step for r in replies for step in r.steps])


def _row(batch: Any, i: int) -> Any:
    return {k: v[i] for k, v in batch.items()} if isinstance(batch, dict) else batch[i]


def _gather(items: list[Any]) -> Any:
    """Per-step observations or actions as one array when they stack, else a tuple."""
    if not items:
        return np.empty(0)
    try:
        return stack(items)
    except (ValueError, TypeError):
        return tuple(items)
