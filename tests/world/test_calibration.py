"""Scale-aware observation noise: ``obs_noise``'s sigma is a fraction of each observation
element's spread in the audit's own nominal episodes, calibrated deterministically and
reported with the result; ``scale="absolute"`` keeps raw units."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit import audit, check_robust, scenarios
from pytest_rlaudit.errors import PerturbationError
from pytest_rlaudit.perturbations import ObservationNoise
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.calibration import observation_spread
from pytest_rlaudit.world.envs import env_spec


def push_with_velocity(obs: np.ndarray) -> np.ndarray:
    """MountainCar: push the way the car moves (reaches the flag in ~100-120 steps)."""
    return np.where(obs[:, 1] > 0, 2, 0).astype(np.int64)


def test_the_spread_is_each_elements_std_over_the_nominal_observations(controller):
    policy, spec = as_policy(controller), env_spec("CartPole-v1")
    nominal = run_episodes(policy, spec, scenarios.resolve(["nominal"]), 3, seed=0,
                           record=True)["nominal"]
    seen = np.concatenate([np.asarray(o, dtype=np.float64) for o in nominal.observations])
    expected = seen.std(axis=0)
    result = audit(controller, "CartPole-v1", scenarios=["obs_noise"], episodes=3)
    assert result["obs_noise"].params["spread"] == pytest.approx(tuple(expected), rel=0, abs=0)
    assert result["obs_noise"].params["scale"] == "relative"
    assert expected[2] < 0.05 < expected[0]  # a balanced pole barely moves; the cart does


def test_the_calibration_does_not_depend_on_the_batch_size(controller):
    out = [run_episodes(as_policy(controller), env_spec("CartPole-v1"),
                        scenarios.resolve(["obs_noise"]), 4, seed=0, batch_size=b)["obs_noise"]
           for b in (1, 3, 64)]
    assert out[0].params == out[1].params == out[2].params
    for other in out[1:]:  # a batch of 3 splits the 4 episodes unevenly; 64 holds them all
        np.testing.assert_array_equal(out[0].returns, other.returns)


def test_relative_noise_means_the_same_on_mountaincar_velocity():
    """The issue's case: sigma 0.1 in raw units is larger than MountainCar's whole velocity
    range, so it measured the env's units; sized by the spread it is a mild disturbance."""
    absolute = scenarios.get("obs_noise").with_params(scale="absolute")
    raw = scenarios.Scenario("obs_noise_raw", "deployment", absolute.perturbation,
                             dict(absolute.params))
    result = audit(push_with_velocity, "MountainCar-v0", scenarios=["obs_noise", raw],
                   episodes=4, reference="random")
    assert result["obs_noise"].ratio > 0.9
    assert result["obs_noise_raw"].ratio < result["obs_noise"].ratio - 0.2
    assert result["obs_noise"].params["spread"][1] < 0.1  # velocity varies by less than 0.1


def test_check_robust_calibrates_on_its_cached_nominal_episodes(controller):
    cache: dict = {}
    first = check_robust(controller, "CartPole-v1", "jitter", episodes=3, cache=cache)
    noise = check_robust(controller, "CartPole-v1", "obs_noise", episodes=3, cache=cache)
    assert len([k for k in cache if k[0] == "nominal"]) == 1  # one nominal run for both
    assert noise.result.params["spread"] == audit(
        controller, "CartPole-v1", scenarios=["obs_noise"], episodes=3)["obs_noise"].params["spread"]
    np.testing.assert_array_equal(first.nominal.returns, noise.nominal.returns)


def test_relative_noise_is_sigma_times_each_spread():
    spread = (1.0, 0.5, 0.01, 2.0)
    env = ObservationNoise(gym.make("CartPole-v1"), sigma=0.2, scale="relative", spread=spread)
    env.reset(seed=0)
    clean = gym.make("CartPole-v1")
    clean.reset(seed=0)
    diffs = []
    for _ in range(8):  # pushing left: the pole falls after about 9 steps
        noisy_obs = env.step(0)[0]
        clean_obs = clean.step(0)[0]
        diffs.append(noisy_obs - clean_obs)
    std = np.std(np.asarray(diffs, dtype=np.float64), axis=0)
    np.testing.assert_allclose(std, 0.2 * np.asarray(spread), rtol=0.6)
    assert std[2] < 0.05 * std[0]  # each element by its own spread


def test_relative_noise_needs_a_spread_of_the_right_size():
    with pytest.raises(PerturbationError, match=r"scale='relative'\) needs spread=.*calibrate"):
        ObservationNoise(gym.make("CartPole-v1"), scale="relative")
    with pytest.raises(PerturbationError, match=r"spread must hold 4 finite values >= 0"):
        ObservationNoise(gym.make("CartPole-v1"), scale="relative", spread=(1.0, 2.0))
    with pytest.raises(PerturbationError, match=r"scale must be 'relative' or 'absolute'"):
        ObservationNoise(gym.make("CartPole-v1"), scale="raw")


def test_absolute_noise_keeps_the_established_semantics_and_spec():
    env = ObservationNoise(gym.make("CartPole-v1"), sigma=0.3)
    assert env.noise_std == 0.3
    assert env.spec.additional_wrappers[-1].kwargs == {"sigma": 0.3}  # recorded as before
    relative = ObservationNoise(gym.make("CartPole-v1"), scale="relative", spread=(1, 1, 1, 1))
    rebuilt = gym.make(relative.spec)  # a relative one rebuilds with its spread
    assert rebuilt.noise_std.tolist() == [0.1] * 4


def test_integer_observations_keep_the_range_as_their_unit():
    assert observation_spread([[np.zeros(3, np.uint8)]]) is None
    calibrated = scenarios.get("obs_noise").calibrated(None)
    assert calibrated.params["scale"] == "absolute" and not calibrated.needs_spread


def test_a_normalising_agent_is_not_told_to_normalise():
    from pytest_rlaudit.auditing.diagnosis import diagnose

    kwargs = dict(nominal_env_steps=np.array([500, 500]), perturbed_env_steps=np.array([90, 80]),
                  parting=40.0, parted=2, ratio=0.3, rating="FAIL")
    told = diagnose(scenarios.get("obs_noise"), **kwargs)
    normalised = diagnose(scenarios.get("obs_noise"), normalized=True, **kwargs)
    assert "VecNormalize" in told.fix and "VecNormalize" not in normalised.fix
    assert "already normalised" in normalised.fix
