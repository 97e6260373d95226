"""A pool of episodes run on one lock-step batch (:class:`~.lockstep.BatchGroup`): a
vector env or batched simulator the user gave, or one the audit makes where the numbers
are the scalar path's (gymnasium's CartPole vector env).

>>> import numpy as np
>>> from pytest_rlaudit import scenarios
>>> from pytest_rlaudit.world.envs import env_spec
>>> env = env_spec("CartPole-v1")
>>> batch_for(env, scenarios.resolve(["jitter"]), rows=8).num_envs
8
>>> [s.name for s in split_off(env, scenarios.resolve(["jitter", "push"]))]  # physics
['push']
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

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

__all__ = ["alone", "batch_for", "run_batch", "split_off"]


def batch_for(env: AuditEnv, scenarios: Sequence[Scenario], *, rows: int) -> BatchKind | None:
    """The batch ``scenarios`` run on, every one of which it can step (:func:`split_off`
    takes the others first): the one the user gave, or a new one of ``rows`` rows where
    the env has one that gives the scalar path's numbers; None where the env has no
    batch (one env per slot)."""
    source = env.batch
    if source is None:
        return None
    if source.given is not None:
        kind = source.given
    else:
        assert source.make is not None  # a source either gives a batch or makes one
        kind = source.make(rows)
    assert not check_batchable(scenarios, kind), "split_off takes them first"
    return kind


def split_off(env: AuditEnv, scenarios: Sequence[Scenario]) -> list[Scenario]:
    """The scenarios of ``scenarios`` that ``env``'s batch cannot step (``dynamics`` and
    ``push``: per-env physics; a perturbation acting inside the env's step), to run one
    env per slot on :func:`alone`'s envs, with the same numbers; none where ``env`` has
    no batch. One that a batch the user gave cannot run at all (it has no factory of its
    envs) is a :class:`~pytest_rlaudit.errors.PerturbationError` naming the scenario, the
    batch and the remedy.

    >>> from pytest_rlaudit import scenarios
    >>> from pytest_rlaudit.world.envs import env_spec
    >>> [s.name for s in split_off(env_spec("CartPole-v1"), scenarios.resolve(["jitter", "push"]))]
    ['push']
    """
    source = env.batch
    if source is None:
        return []
    if source.given is not None:
        return check_batchable(scenarios, source.given)
    assert source.make is not None
    probe = source.make(1)  # its spaces and label (a one-row kind costs well under 1 ms)
    try:
        return check_batchable(scenarios, probe)
    finally:
        probe.close()


def alone(env: AuditEnv) -> AuditEnv:
    """``env`` as one env per slot, for the scenarios its batch cannot step: its own
    factory, or, for a batch the user gave, the factory of the batch's envs
    (:attr:`~pytest_rlaudit.world.batches.kinds.BatchKind.per_env`)."""
    given = env.batch.given if env.batch is not None else None
    if given is None:
        return replace(env, batch=None)
    assert given.per_env is not None  # else split_off refused what needs it
    return replace(env, factory=given.per_env, batch=None)


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
        out = drive(policy, [[LocalGroup(group)]], jobs, scenarios, indices,
                    seed=seed, record=record, space=kind.action_space)
    finally:
        group.close()
    if again:
        assert rows is not None  # asked
        rows.append(out.pop(replay_row.ROW.name))
    warn_capped(out, max_steps, stacklevel=3)  # at run_pool's caller, as a slot pool's are
    return out
