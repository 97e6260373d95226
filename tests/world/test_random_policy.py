"""The random agent (every audit's reference): its actions are each episode's own
``space.sample()`` stream, bit for bit, whether or not the fast uniform path applies."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from gymnasium import spaces

from pytest_rlaudit.world.agents import as_policy

OBS = spaces.Box(-1, 1, (2,))

FAST = [
    spaces.Box(-1, 1, (6,), np.float32),
    spaces.Box(np.array([-2.0, 0.0]), np.array([3.0, 1e-3]), dtype=np.float64),
    spaces.Box(-1, 1, (2, 3), np.float16),
    spaces.Box(-1e5, 7.5, (3,), np.float32),
]
SLOW = [
    spaces.Box(0, 255, (2,), np.uint8),
    spaces.Box(-np.inf, 1, (3,), np.float32),
    spaces.Box(np.array([-1.0, -np.inf]), np.array([1.0, np.inf]), dtype=np.float32),
    spaces.Discrete(3, start=-1),
    spaces.MultiDiscrete([2, 5]),
]


@pytest.mark.parametrize("space", FAST + SLOW, ids=str)
def test_actions_are_each_episodes_own_sample_stream(space):
    policy = as_policy("random")
    policy.bind(OBS, space)
    assert (policy._uniform is not None) == (space in FAST)
    states = [policy.initial_state(np.random.SeedSequence([7, i])) for i in range(5)]
    twins = [copy.deepcopy(space) for _ in range(5)]  # Space.sample's own stream, seeded
    for i, twin in enumerate(twins):  # as the policy seeds each episode's
        twin.seed(int(np.random.SeedSequence([7, i]).generate_state(1, dtype=np.uint32)[0]))
    for _ in range(40):
        actions, states = policy.act(np.zeros((5, 2)), states)
        expected = np.stack([np.asarray(t.sample()) for t in twins])
        assert actions.dtype == expected.dtype
        assert actions.shape == expected.shape
        np.testing.assert_array_equal(actions, expected)
        assert all(space.contains(a) for a in actions)


def test_an_episodes_actions_do_not_depend_on_its_batch():
    policy = as_policy("random")
    policy.bind(OBS, spaces.Box(-1, 1, (4,), np.float32))
    alone = [policy.initial_state(np.random.SeedSequence(3))]
    crowd = [policy.initial_state(np.random.SeedSequence(s)) for s in (1, 3, 5)]
    for _ in range(10):
        mine, alone = policy.act(np.zeros((1, 2)), alone)
        ours, crowd = policy.act(np.zeros((3, 2)), crowd)
        np.testing.assert_array_equal(mine[0], ours[1])
