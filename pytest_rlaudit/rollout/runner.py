"""The batched lock-step episode runner.

All (scenario, episode) pairs of an audit share one pool of ``batch_size`` env slots.
At every decision step the runner makes one policy call for all active slots; a slot
whose episode ends takes the next pair from the queue, so policy calls stay as large as
possible until the queue drains. Episode ``i`` of every scenario is reset with env seed
``seed + i``, and each perturbation draws from a stream keyed on (seed, i, scenario).
Results are stored by (scenario, episode): they never depend on the batch size, the
order of the queue or the process that ran them.

:func:`run_episodes` is the entry point: it calibrates what needs calibrating and picks
where each pool of episodes runs. The executors sit beside it: :func:`~.pool.run_pool`
(this process, shards in forked processes: :mod:`.shards`, or its env slots spread over
worker processes: :mod:`.workers`) and
:func:`~.ray_pool.run_pool_on_ray` (shards on Ray actors, each running
:func:`~.pool.run_pool`). The runner's half of a pool, the queue and every policy call,
is :func:`~.driver.drive`.

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

from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..world.agents import Policy
from ..world.calibration import observation_spread
from ..world.envs import AuditEnv
from ..world.scenarios import NOMINAL, Scenario
from . import progress
from .batches import EpisodeBatch
from .budget import check_budget
from .pool import DEFAULT_BATCH_SIZE, episode_indices, run_pool
from .ray_pool import run_pool_on_ray
from .workers import check_workers, resolve_workers

__all__ = ["EpisodeBatch", "run_episodes", "check_backend", "check_workers", "BACKENDS", "DEFAULT_MAX_STEPS",
           "DEFAULT_BATCH_SIZE"]

#: Where pools of episodes run: this machine (in-process or worker processes), or Ray.
BACKENDS = ("local", "ray")

#: Cap on agent steps per episode; longer episodes are cut with a RolloutCapWarning.
DEFAULT_MAX_STEPS = 10_000


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
    alone; a count, or ``"auto"``: one per core) runs the episodes in that many
    processes, this one and ``workers - 1`` forked ones, each on a shard of its own with
    its own copy of the agent (:func:`~.shards.run_forked`); a policy that must stay in
    one process (``shards_freely=False``: on a GPU) makes every batched policy call here
    while the others step env slots (:mod:`.workers`). ``backend="ray"`` runs shards of
    the episodes on Ray actors instead, each with its own copy of the agent (``workers``
    actors; default: the cluster's CPUs; :mod:`.ray_pool`).

    Scenarios sized by the observations' spread (``needs_spread``, such as ``obs_noise``)
    are calibrated on the nominal episodes of the same indices: those run first (with the
    other scenarios, in one pool; added if not asked for), then the calibrated ones.
    Each batch's ``params`` say what its scenario ran with. A count too large for this
    machine's memory is refused before anything runs (:func:`~.budget.check_budget`).
    """
    if isinstance(episodes, (int, np.integer)) and not isinstance(episodes, bool):
        check_budget(int(episodes), len(scenarios))
    elif isinstance(episodes, range):  # the engine's rounds: sized without a list
        check_budget(len(episodes), len(scenarios))
    given = env.batch.given if env.batch is not None else None
    if given is not None and backend == "ray":
        raise InvalidArgumentError(
            f"{given.label} is a batch made in this process: it steps all its envs in one "
            "call here, and cannot travel to Ray's actors. Run it with backend='local' (the "
            "default), or pass a factory of one env for Ray to make envs on each actor")
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
    seen = out[NOMINAL.name].observations
    # each scenario measured on the keys of a Dict observation it acts on (its keys=)
    out.update(pool(policy, env, [s.calibrated(observation_spread(seen, s.params.get("keys")))
                                  for s in later], episodes,
                    seed=seed, batch_size=batch_size, max_steps=max_steps, record=recorded))
    return {s.name: out[s.name] for s in scenarios}


def _pool(workers: int | str | None, backend: str) -> Callable[..., dict[str, EpisodeBatch]]:
    """The function that runs one pool of slots, for ``backend`` and ``workers``."""
    check_backend(backend)
    if backend == "ray":
        actors = None if workers in (None, "auto") else resolve_workers(workers)
        return partial(_on_ray, actors)
    return partial(run_pool, workers=resolve_workers(workers))


def _on_ray(actors: int | None, policy: Policy, env: AuditEnv, scenarios: Sequence[Scenario],
            episodes: int | Sequence[int], **kwargs: Any) -> dict[str, EpisodeBatch]:
    """:func:`~.ray_pool.run_pool_on_ray` on ``actors``, counted by the progress shown."""
    indices = episode_indices(episodes)
    sink = progress.current()
    if sink is not None:  # the shards' episodes count when they come back
        sink.planned(len(indices) * len(scenarios), parallel=True)
    out = run_pool_on_ray(policy, env, scenarios, indices, workers=actors, **kwargs)
    if sink is not None:
        sink.ran_elsewhere(batch.lengths for batch in out.values())
    return out


def check_backend(backend: Any) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else a ValueError naming them.

    >>> check_backend("ray")
    'ray'
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    return str(backend)
