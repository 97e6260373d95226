"""A pool of episodes run on one lock-step batch (:class:`~.lockstep.BatchGroup`): a
vector env or batched simulator the user gave, or one the audit makes where the numbers
are the scalar path's (gymnasium's CartPole vector env).

>>> import numpy as np
>>> from pytest_rlaudit import scenarios
>>> from pytest_rlaudit.world.envs import env_spec
>>> env = env_spec("CartPole-v1")
>>> batch_for(env, scenarios.resolve(["jitter"]), rows=8).num_envs
8
>>> batch_for(env, scenarios.resolve(["push"]), rows=8) is None  # needs the physics
True
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence

from ..errors import PerturbationError
from ..world.agents import Policy
from ..world.batches.chains import check_batchable
from ..world.batches.kinds import BatchKind
from ..world.envs import AuditEnv
from ..world.scenarios import NOMINAL, Scenario
from . import progress, replay_row
from .batches import EpisodeBatch, warn_capped
from .driver import drive
from .lockstep import BatchGroup
from .slots import Job
from .workers import LocalGroup

__all__ = ["batch_for", "run_batch"]


def batch_for(env: AuditEnv, scenarios: Sequence[Scenario], *, rows: int) -> BatchKind | None:
    """The batch ``scenarios`` run on: the one the user gave (a scenario it cannot take
    is a :class:`~pytest_rlaudit.errors.PerturbationError`), a new one of ``rows`` rows
    where the env has one that gives the scalar path's numbers and every scenario runs on
    it, else None (one env per slot)."""
    source = env.batch
    if source is None:
        return None
    if source.given is not None:
        kind = source.given
        check_batchable(scenarios, (kind.observation_space, kind.action_space), kind.label)
        return kind
    assert source.make is not None  # a source either gives a batch or makes one
    kind = source.make(rows)
    try:
        check_batchable(scenarios, (kind.observation_space, kind.action_space), kind.label)
    except PerturbationError:  # the scalar path runs them, with the same numbers
        kind.close()
        return None
    return kind


def run_batch(policy: Policy, env: AuditEnv, kind: BatchKind, scenarios: Sequence[Scenario],
              indices: list[int], *, seed: int, max_steps: int,
              record: bool | Collection[str]) -> dict[str, EpisodeBatch]:
    """Every (scenario, episode) job of ``scenarios`` x ``indices`` on ``kind``'s rows, in
    this process (a batch steps its envs in one call: there is nothing to spread).

    Asked for a seed-replay row (:mod:`.replay_row`), with nominal episode 0 the first
    job: that episode runs a second time in the row next to it, recorded, and its batch
    goes to the list that asked."""
    jobs: deque[Job] = deque((s, e) for s in range(len(scenarios)) for e in range(len(indices)))
    rows = replay_row.wanted()
    names = [s.name for s in scenarios]
    again = rows is not None and NOMINAL.name in names and indices[0] == 0
    if again:
        first = (names.index(NOMINAL.name), 0)
        # next to the first run, so both run at once: a row at the queue's end could start
        # a wave of its own, one episode long
        jobs.insert(jobs.index(first) + 1, (len(scenarios), first[1]))
        scenarios = [*scenarios, replay_row.ROW]
        if isinstance(record, Mapping):
            record = {**record, replay_row.ROW.name: None}
        elif not isinstance(record, bool):
            record = {*record, replay_row.ROW.name}
        elif not record:
            record = {replay_row.ROW.name}
    owned = env.batch is None or env.batch.given is not kind
    group = BatchGroup(kind, scenarios, indices, seed=seed, max_steps=max_steps, owned=owned)
    try:
        policy.bind(kind.observation_space, kind.action_space)
        sink = progress.current()
        if sink is not None:
            sink.planned(len(jobs) - again, horizon=None, parallel=False, copies=policy.shards_freely)
        out = drive(policy, [[LocalGroup(group)]], jobs, scenarios, indices,  # type: ignore[arg-type]
                    seed=seed, record=record, space=kind.action_space)
    finally:
        group.close()
    if again:
        assert rows is not None  # asked
        rows.append(out.pop(replay_row.ROW.name))
    warn_capped(out, max_steps, stacklevel=3)  # at run_pool's caller, as a slot pool's are
    return out
