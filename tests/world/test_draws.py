"""Draws taken in blocks (world/perturbations/draws.py): the numbers of one draw per step,
and the wrappers' batch rules (observe_rows, decide_rows) equal to their one-row rules."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit.perturbations import (
    ActionNoise,
    DroppedObservation,
    ObservationDelay,
    ObservationNoise,
)
from pytest_rlaudit.world.perturbations.draws import BLOCK_ELEMENTS, Blocks


@pytest.mark.parametrize("draw, shape", [("standard_normal", (3,)), ("random", ()),
                                         ("standard_normal", (2, 5))])
def test_blocks_give_the_streams_own_numbers_across_blocks_and_reseeds(draw, shape):
    blocks = Blocks(draw)
    steps = BLOCK_ELEMENTS // max(1, int(np.prod(shape))) * 2 + 3  # past two refills
    for seed in (7, 8, 7):  # a new generator starts a new block, mid-block
        rng = np.random.default_rng(seed)
        got = [np.array(blocks.next(rng, shape)) for _ in range(steps)]
        again = np.random.default_rng(seed)
        want = [np.array(getattr(again, draw)(shape if shape else None)) for _ in range(steps)]
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_a_large_observation_is_drawn_a_step_at_a_time():
    blocks = Blocks("standard_normal")
    blocks.next(np.random.default_rng(0), (84, 84, 4))
    assert blocks.block.shape == (1, 84, 84, 4)


class Zeros(gym.Env):
    """An env that always shows zeros: what a noise wrapper on it shows is its noise."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 0.0, False, False, {}


def _noise_of(env: gym.Env, seeds: list[int | None], steps: int) -> list[np.ndarray]:
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out += [env.step(0)[0] for _ in range(steps)]
    return out


def test_the_wrapper_reseeded_repeats_its_noise_and_unseeded_continues_its_stream():
    env = ObservationNoise(Zeros(), sigma=0.1)
    first = _noise_of(env, [3], 5)
    assert all(np.array_equal(a, b) for a, b in zip(first, _noise_of(env, [3], 5), strict=True))
    # reset() without a seed continues the stream where the last episode left it, past
    # the end of a block
    env.reset(seed=3)
    rng = np.random.default_rng(env.rng.bit_generator.seed_seq)  # the stream, afresh
    got = _noise_of(env, [3, None, None], 150)
    want = [(0.0 + 0.1 * rng.standard_normal(4)).astype(np.float32) for _ in range(450)]
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def _layers(kind: str, n: int) -> list:
    if kind == "obs_noise":
        made = [ObservationNoise(gym.make("CartPole-v1"), sigma=0.2) for _ in range(n)]
    elif kind == "dropped":
        made = [DroppedObservation(gym.make("CartPole-v1"), p=0.5) for _ in range(n)]
    elif kind == "delay":
        made = [ObservationDelay(gym.make("CartPole-v1"), steps=2) for _ in range(n)]
    else:
        made = [ActionNoise(gym.make("Pendulum-v1"), sigma=0.3) for _ in range(n)]
    for i, layer in enumerate(made):
        layer.reset(seed=i)
    return made


@pytest.mark.parametrize("kind", ["obs_noise", "dropped", "delay", "action_noise"])
def test_a_batch_rule_equals_the_one_row_rule_row_by_row(kind):
    rows, alone = _layers(kind, 6), _layers(kind, 6)
    data = np.random.default_rng(1)
    for _ in range(40):  # past a block's end for the 4-element observations
        if kind == "action_noise":
            actions = data.uniform(-2, 2, (6, 1)).astype(np.float32)
            batch, holds = ActionNoise.decide_rows(rows, actions)
            one = [layer.decide(a) for layer, a in zip(alone, actions, strict=True)]
            assert list(holds) == [k for _, k in one] == [1] * 6
            assert np.array_equal(np.asarray(batch), np.stack([a for a, _ in one]))
        else:
            obs = data.normal(size=(6, 4)).astype(np.float32)
            batch = type(rows[0]).observe_rows(rows, obs)
            one = np.stack([layer.observe(o) for layer, o in zip(alone, obs, strict=True)])
            assert batch.dtype == one.dtype and np.array_equal(batch, one)
            obs[:] = np.nan  # what the rows hold is theirs: a reused buffer changes nothing
    if kind in ("dropped", "delay"):  # and the rows show held frames, not only fresh ones
        fresh = data.normal(size=(6, 4)).astype(np.float32)
        shown = type(rows[0]).observe_rows(rows, fresh)
        assert not np.isnan(shown).any() and not np.array_equal(shown, fresh)
