"""envpool's gymnasium pools as a batch: an audit runs on one, reproducibly, paired across
scenarios and independent of the pool's size (envpool seeds an env only when its pool is
made: the audit makes a pool per wave, each env seeded with its episode's seed)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

if sys.version_info < (3, 11):
    pytest.skip("envpool's wheels start at Python 3.11", allow_module_level=True)
envpool = pytest.importorskip("envpool", reason="envpool is in the dev extra (Python 3.11+)")

from pytest_rlaudit import audit, scenarios  # noqa: E402
from pytest_rlaudit.errors import PerturbationError  # noqa: E402
from pytest_rlaudit.rollout.runner import run_episodes  # noqa: E402
from pytest_rlaudit.world.agents import as_policy  # noqa: E402
from pytest_rlaudit.world.envs import env_spec  # noqa: E402

SUITE = ["nominal", "jitter", "delay", "obs_noise", "action_noise"]


@pytest.fixture
def pool():
    """A maker of HalfCheetah pools, each closed after the test (an open one's __del__
    fails at the interpreter's exit, once envpool's module globals are gone)."""
    made = []

    def make(num_envs: int):
        made.append(envpool.make_gymnasium("HalfCheetah-v4", num_envs=num_envs, seed=0,
                                           max_episode_steps=40))
        return made[-1]

    yield make
    for each in made:
        each.close()


def gait(obs):  # elementwise (a matmul's rounding would change with the batch)
    return np.tanh(np.asarray(obs)[:, 1:7] * 0.5)


def test_an_audit_on_an_envpool_pool_repeats_for_any_pool_size(pool):
    first = run_episodes(as_policy(gait), env_spec(pool(16)), scenarios.resolve(SUITE), 6, seed=3)
    again = run_episodes(as_policy(gait), env_spec(pool(16)), scenarios.resolve(SUITE), 6, seed=3)
    small = run_episodes(as_policy(gait), env_spec(pool(5)), scenarios.resolve(SUITE), 6, seed=3)
    for name in SUITE:
        assert np.array_equal(first[name].returns, again[name].returns), name
        assert np.array_equal(first[name].returns, small[name].returns), name
        assert list(first[name].env_steps) == [40] * 6  # the pool's own time limit held
    other = run_episodes(as_policy(gait), env_spec(pool(16)), scenarios.resolve(SUITE), 6, seed=4)
    assert not np.array_equal(first["nominal"].returns, other["nominal"].returns)
    assert not np.array_equal(first["action_noise"].returns, first["nominal"].returns)


def test_episode_i_starts_in_the_same_state_in_every_scenario(pool):
    out = run_episodes(as_policy(gait), env_spec(pool(7)), scenarios.resolve(SUITE), 4, seed=0,
                       record=True)
    starts = {name: np.stack([seen[0] for seen in out[name].observations]) for name in SUITE}
    for name in SUITE:
        if name != "obs_noise":  # the reset observation is clean in every scenario
            assert np.array_equal(starts[name], starts["nominal"]), name
    assert np.array_equal(starts["obs_noise"], starts["nominal"])
    assert len({row.tobytes() for row in starts["nominal"]}) == 4  # episodes differ


def test_the_audit_reads_the_pool_and_refuses_physics_with_the_remedy(pool):
    result = audit(gait, pool(8), scenarios=["delay"], episodes=3, reference=-200.0)
    assert result.env.startswith("envpool's HalfCheetah")
    with pytest.raises(PerturbationError, match="envpool's HalfCheetah pool.*one env per slot"):
        audit(gait, pool(8), scenarios=["push"], episodes=2)
