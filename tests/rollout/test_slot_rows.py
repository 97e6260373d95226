"""The scalar path's rows (one gymnasium env each) on the lock-step group every kind runs on."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from toy_envs import CounterEnv

from pytest_rlaudit import scenarios
from pytest_rlaudit.rollout.lockstep import BatchGroup
from pytest_rlaudit.rollout.pool import run_pool
from pytest_rlaudit.rollout.slots import SlotRows
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.atari import LIVES_LOST
from pytest_rlaudit.world.envs import env_spec


class _LosingLives(CounterEnv):
    """Loses a life at every 3rd env step (as :class:`~pytest_rlaudit.world.atari.WholeGame`
    says it in ``info``)."""

    def step(self, action: Any):
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {LIVES_LOST: self.t // 3}


def _group(make: Any, slots: int, max_steps: int) -> BatchGroup:
    nominal = scenarios.resolve(["nominal"])
    rows = SlotRows(env_spec(make), nominal, [0, 1], seed=0, slots=slots)
    return BatchGroup(rows, nominal, [0, 1], seed=0, max_steps=max_steps)


def test_a_life_lost_restarts_the_agent_of_a_going_episode_but_not_of_one_the_cap_ends():
    group = _group(lambda: _LosingLives(horizon=100), slots=2, max_steps=6)
    reply = group.step(None, [(0, 0), (0, 1)])
    restarts: list[tuple[int, list[Any]]] = []
    while reply.jobs:
        reply = group.step(np.zeros(len(reply.jobs), dtype=np.int64))
        restarts.append((reply.steps[0] if reply.steps else 6, reply.restarted))
    group.close()
    # lives are lost at steps 3 and 6; step 6 is the cap's, which ends both episodes
    assert [r for r in restarts if r[1]] == [(3, [(0, 0), (0, 1)])]
    assert len(restarts) == 6


class _Keeping(CounterEnv):
    """Keeps every action it is given, as given (a reference, as a wrapper holding the
    previous action does)."""

    kept: ClassVar[list[Any]] = []

    def step(self, action: Any):
        _Keeping.kept.append(action)
        return super().step(action)


def test_an_env_keeps_each_action_it_was_given_unchanged_by_later_steps():
    _Keeping.kept = []

    def policy(obs: np.ndarray) -> np.ndarray:  # [t/10, -t/10] at env step t
        return np.concatenate([obs, -obs], axis=1) / 10

    run_pool(as_policy(policy), env_spec(lambda: _Keeping(horizon=5, box_actions=True)),
             scenarios.resolve(["nominal"]), 2, seed=0, batch_size=2, max_steps=100,
             record=False)
    # (the env-reuse probe before the run steps with random actions of the space)
    ours = [np.asarray(a).tolist() for a in _Keeping.kept[-10:]]
    want = [[np.float32(t / 10), np.float32(-t / 10)] for t in range(5) for _ in range(2)]
    assert ours == want


def test_the_rows_give_their_envs_reward_traces_below_the_perturbations():
    # speed_5x holds each action for 5 env steps: one agent step, five rewards
    five = scenarios.resolve(["speed_5x"])
    rows = SlotRows(env_spec(lambda: CounterEnv(horizon=12)), five, [0], seed=0, slots=1)
    group = BatchGroup(rows, five, [0], seed=0, max_steps=100)
    reply = group.step(None, [(0, 0)])
    finished = []
    while reply.jobs:
        reply = group.step(np.zeros(1, dtype=np.int64))
        finished += reply.finished
    group.close()
    (done,) = finished
    assert done.steps == 3 and done.env_steps == 12 and done.terminated
    assert done.trace.tolist() == [float(t) for t in range(1, 13)] and done.ret == 78.0
