"""The pool and its executors (pytest_rlaudit.rollout.pool): a capped run warns at the
same place whichever executor ran it, and its env seeds are those of _seeding."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from toy_envs import CounterEnv

from pytest_rlaudit import scenarios
from pytest_rlaudit._seeding import episode_seeds
from pytest_rlaudit.errors import RolloutCapWarning
from pytest_rlaudit.rollout import runner
from pytest_rlaudit.rollout.pool import run_pool
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import env_spec

NAMES = scenarios.resolve(["nominal", "jitter"])


def _zeros(obs):
    return np.zeros(len(obs), dtype=np.int64)


def _capped(call):
    """What ``call()`` returns, and where its one RolloutCapWarning points."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    caps = [w for w in caught if issubclass(w.category, RolloutCapWarning)]
    assert len(caps) == 1, [str(w.message) for w in caps]
    assert str(caps[0].message).startswith("8 episode(s) reached the cap of 3")
    return out, (caps[0].filename, caps[0].lineno)


# in-process; env slots in a worker process; whole shards in forked processes
@pytest.mark.parametrize("agent, workers", [(_zeros, None), (_zeros, 2), ("random", 2)])
def test_a_capped_run_warns_at_run_episodes_whichever_executor_ran_it(agent, workers):
    out, at = _capped(lambda: runner.run_episodes(
        as_policy(agent), env_spec(lambda: CounterEnv(horizon=10)), NAMES, 4, seed=5,
        max_steps=3, workers=workers))
    _, local = _capped(lambda: runner.run_episodes(
        as_policy(_zeros), env_spec(lambda: CounterEnv(horizon=10)), NAMES, 4, seed=5,
        max_steps=3))
    assert at == local and at[0] == runner.__file__
    assert out["jitter"].capped.all()


def test_the_pool_warns_at_its_caller_and_seeds_episodes_as_seeding_says():
    out, at = _capped(lambda: run_pool(
        as_policy(_zeros), env_spec(lambda: CounterEnv(horizon=10)), NAMES, [2, 5, 6, 9],
        seed=7, batch_size=3, max_steps=3, record=False))
    assert at[0] == __file__
    for batch in out.values():
        np.testing.assert_array_equal(batch.seeds, episode_seeds(7, [2, 5, 6, 9]))
        assert batch.seeds.dtype == np.int64
