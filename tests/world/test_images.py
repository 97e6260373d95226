"""Image observations (uint8 Box, CNN policies, frame stacks) through every perturbation.

Every observation a perturbed pixel env returns keeps the space's dtype, shape and
bounds; noise on images is in units of the pixel range, rounded and clipped (the rule:
``pytest_rlaudit.world.perturbations.base.noisy_observation``); delays and drops show
whole earlier frames, even when the env renders into one reused buffer. A small CNN
trained with two stacked frames is audited through the default suite, reproducibly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import pairwise

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from pixel_envs import CentreDot, TinyCNN
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

from pytest_rlaudit import Scenario, Schedule, audit, scenarios
from pytest_rlaudit.errors import PerturbationError
from pytest_rlaudit.perturbations import (
    DroppedObservation,
    ObservationDelay,
    ObservationNoise,
    Scheduled,
)
from pytest_rlaudit.stats.ratings import RATINGS
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.perturbations.base import noisy_observation

SPACE = CentreDot().observation_space
FRAMES = 2  # frames stacked, in training (VecFrameStack) and in the audit (as_policy)
SEEDS = range(8)  # env seeds of the learning check (audit episodes 0-7 with seed 0)

#: Every registered scenario but ``dynamics`` and ``push`` (they change a simulator's
#: parameters or state, never observations, and refuse other envs), heavy noise, and a schedule
#: using every channel (its noise, delays and drops are Scheduled's own code).
IMAGE_SCENARIOS: tuple[Scenario, ...] = (
    # (an image's noise unit is its range: calibrating its spread leaves the range rule)
    *(s.calibrated(None) for s in scenarios.resolve(
        [n for n in scenarios.DEFAULT + scenarios.EXTRAS if n not in ("dynamics", "push")])),
    Scenario("heavy_obs_noise", "custom", ObservationNoise, {"sigma": 3.0}),
    Scenario.from_schedule(Schedule(speed=[1, 3], delay=[0, 1, 2], obs_noise=[0.1, 0.5],
                                    dropped=[False, True], action_noise=0.3), "every_channel"),
)


def random_episode(env: gym.Env, seed: int) -> Iterator[tuple[np.ndarray, float]]:
    """(observation, reward) of the reset (reward 0) and of each step of one episode of
    uniform random actions, seeded by the env seed."""
    obs, _ = env.reset(seed=seed)
    yield obs, 0.0
    actions, done = np.random.default_rng(seed), False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(int(actions.integers(3)))
        done = terminated or truncated
        yield obs, float(reward)


def shown(env: gym.Env, actions: list[int], seed: int) -> list[np.ndarray]:
    """The observations (copied) of a reset with ``seed`` and then ``actions``."""
    out = [env.reset(seed=seed)[0].copy()]
    out += [env.step(a)[0].copy() for a in actions]
    return out


# The dot goes right to the edge then left, so consecutive frames mostly differ.
ZIGZAG = [2] * 7 + [0] * 7 + [2] * 5


# --------------------------------------------------------- dtype, shape and bounds


@pytest.mark.parametrize("scenario", IMAGE_SCENARIOS, ids=lambda s: s.name)
def test_every_perturbation_keeps_dtype_shape_and_bounds_of_images(scenario):
    env = scenario.wrap(CentreDot())
    assert env.observation_space == SPACE
    seen = 0
    for seed in range(3):
        for obs, _ in random_episode(env, seed):
            assert obs.dtype == np.uint8 and obs.shape == SPACE.shape
            assert SPACE.contains(obs)
            seen += 1
    assert seen >= 3 * 2  # a reset and at least one step per episode


# ---------------------------------------------------------------------- noise


def test_image_noise_is_in_units_of_the_range_unbiased_rounded_and_kept_in_dtype():
    grey = np.full((128, 128, 3), 128, dtype=np.uint8)  # far from both bounds
    box = spaces.Box(0, 255, grey.shape, np.uint8)
    noisy = noisy_observation(grey, 0.1, np.random.default_rng(0), box)
    assert noisy.dtype == np.uint8
    change = noisy.astype(np.float64) - 128
    assert abs(change.mean()) < 0.3  # truncating instead of rounding would give about -0.5
    assert abs(change.std() - 0.1 * 255) < 0.5
    assert (change != 0).mean() > 0.95


def test_image_noise_of_sigma_zero_changes_nothing():
    frame, _ = CentreDot().reset(seed=0)
    assert np.array_equal(noisy_observation(frame, 0.0, np.random.default_rng(0), SPACE), frame)


def test_image_noise_at_the_default_sigma_changes_pixels_and_clips_instead_of_wrapping():
    clean = np.stack(shown(CentreDot(), ZIGZAG, seed=1)[1:]).astype(np.int64)
    noisy = np.stack(shown(ObservationNoise(CentreDot(), sigma=0.1), ZIGZAG, seed=1)[1:])
    assert noisy.dtype == np.uint8
    noisy = noisy.astype(np.int64)
    # Black pixels can only brighten and white ones darken, by a few sigma (25.5 levels)
    # at most: a wrap-around (-1 -> 255) would put white noise on black.
    black, white = clean == 0, clean == 255
    assert (noisy[black] >= 0).all() and noisy[black].max() < 150
    assert (noisy[white] <= 255).all() and noisy[white].min() > 105
    assert 0.4 < (noisy != clean).mean() < 0.6  # about half: the other half clips away


def test_noise_on_integer_observations_needs_bounds():
    env = CentreDot()
    env.observation_space = spaces.Box(-np.inf, np.inf, SPACE.shape, np.int64)
    with pytest.raises(PerturbationError, match="unbounded"):
        ObservationNoise(env, sigma=0.1)


# ----------------------------------------------------------- delays and drops

DELAYS: dict[str, Callable[[gym.Env], gym.Env]] = {
    "ObservationDelay": lambda env: ObservationDelay(env, steps=1),
    "Scheduled": lambda env: Scheduled(env, Schedule(delay=1)),
}
DROPS: dict[str, Callable[[gym.Env], gym.Env]] = {
    "DroppedObservation": lambda env: DroppedObservation(env, p=0.5),
    "Scheduled": lambda env: Scheduled(env, Schedule(dropped=[False, True, True] * 7)),
}


@pytest.mark.parametrize("reuse_buffer", [False, True], ids=["fresh-frames", "reused-buffer"])
@pytest.mark.parametrize("wrap", DELAYS.values(), ids=DELAYS.keys())
def test_a_delayed_image_is_the_whole_previous_frame(wrap, reuse_buffer):
    clean = shown(CentreDot(), ZIGZAG, seed=1)
    seen = shown(wrap(CentreDot(reuse_buffer=reuse_buffer)), ZIGZAG, seed=1)
    assert np.array_equal(seen[0], clean[0])  # reset: the fresh frame
    assert all(np.array_equal(s, c) for s, c in zip(seen[1:], clean[:-1], strict=True))
    assert sum(not np.array_equal(a, b) for a, b in pairwise(clean)) > 10  # it moved


@pytest.mark.parametrize("reuse_buffer", [False, True], ids=["fresh-frames", "reused-buffer"])
@pytest.mark.parametrize("wrap", DROPS.values(), ids=DROPS.keys())
def test_a_dropped_image_leaves_the_whole_last_frame(wrap, reuse_buffer):
    clean = shown(CentreDot(), ZIGZAG, seed=1)
    seen = shown(wrap(CentreDot(reuse_buffer=reuse_buffer)), ZIGZAG, seed=1)
    assert np.array_equal(seen[0], clean[0])
    frozen = 0
    for t in range(1, len(seen)):
        arrived = np.array_equal(seen[t], clean[t])
        assert arrived or np.array_equal(seen[t], seen[t - 1])
        frozen += not arrived
    assert frozen >= 3  # frames really were dropped (and held, not overwritten)


# ------------------------------------------------ a CNN agent with stacked frames


@pytest.fixture(scope="session")
def cnn_agent() -> PPO:
    """PPO with ``TinyCNN`` on ``CentreDot``, ``FRAMES`` frames stacked: about 1 s on an idle
    core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thread counts change float sums: one keeps training replayable
    try:
        venv = VecFrameStack(make_vec_env(CentreDot, n_envs=8, seed=0), n_stack=FRAMES)
        model = PPO("CnnPolicy", venv, n_steps=64, batch_size=64, n_epochs=4,
                    learning_rate=1e-3, gamma=0.9, seed=0, device="cpu",
                    policy_kwargs={"features_extractor_class": TinyCNN, "net_arch": []})
        return model.learn(4096)  # as good as 8192 steps here: 19.25 of 20
    finally:
        torch.set_num_threads(threads)


def sb3_returns(model: PPO, seeds: range) -> np.ndarray:
    """Returns of ``model`` as SB3 runs it (its own frame stack), one episode per env seed."""
    venv = VecFrameStack(DummyVecEnv([CentreDot]), n_stack=FRAMES)
    returns = []
    for seed in seeds:
        venv.seed(seed)
        obs, total, done = venv.reset(), 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, dones, _ = venv.step(action)
            total, done = total + float(reward[0]), bool(dones[0])
        returns.append(total)
    return np.array(returns)


def random_returns(seeds: range) -> np.ndarray:
    return np.array([sum(r for _, r in random_episode(CentreDot(), seed)) for seed in seeds])


def test_the_cnn_agent_learned_the_pixel_task(cnn_agent):
    trained, random = sb3_returns(cnn_agent, SEEDS), random_returns(SEEDS)
    assert trained.mean() > random.mean() + 8  # measured: 19.25 vs 4.25, out of at most 20


def test_a_cnn_agent_with_stacked_frames_is_audited_through_the_default_suite(cnn_agent):
    policy = as_policy(cnn_agent, frame_stack=FRAMES)
    first = audit(policy, CentreDot, episodes=4, seed=0)
    assert [r.name for r in first] == list(scenarios.DEFAULT)
    for result in first:
        assert np.isfinite(result.ratio) and result.rating in RATINGS, result.name
    # The policy-side frame stack sees what SB3's VecFrameStack showed in training.
    assert np.array_equal(first.nominal.returns, sb3_returns(cnn_agent, range(4)))
    assert first.nominal.mean_return > random_returns(range(4)).mean()
    again = audit(policy, CentreDot, episodes=4, seed=0).to_dict()
    assert {**again, "seconds": 0.0} == {**first.to_dict(), "seconds": 0.0}
