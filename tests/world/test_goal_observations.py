"""What every sensing scenario does to a Dict observation (a goal-conditioned agent's):
the observed state (observation, achieved_goal) is noised, delayed or frozen, the command
(desired_goal) is the current one, unless keys= says otherwise. Seen as the agent sees it:
the runner's records of a constant-action policy on a moving-target ReachEnv, so every
scenario's episode follows the nominal one's states step for step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from goal_envs import ReachEnv, TupleEnv

from pytest_rlaudit import Schedule, audit, scenarios
from pytest_rlaudit.errors import EnvContractError, PerturbationError
from pytest_rlaudit.perturbations import ObservationDelay, ObservationNoise
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.calibration import observation_spread
from pytest_rlaudit.world.envs import env_spec
from pytest_rlaudit.world.scenarios import NOMINAL

STATE = ("observation", "achieved_goal")


def _steady(obs):
    """The same action whatever it sees: the states do not depend on the scenario."""
    return np.full((len(obs["observation"]), 2), 0.5, np.float32)


def _moving_target() -> gym.Env:
    return gym.wrappers.TimeLimit(ReachEnv(drift=0.03), 12)


def _seen(*chosen, seed=0):
    """What the agent saw in episode 0 under nominal and each scenario: a dict of arrays,
    one row per agent step, per scenario name."""
    out = run_episodes(as_policy(_steady), env_spec(_moving_target), [NOMINAL, *chosen], 2,
                       seed=seed, record=True)
    return {name: batch.observations[0] for name, batch in out.items()}


def test_delay_shows_the_earlier_state_with_the_current_goal():
    seen = _seen(scenarios.get("delay"))
    nominal, delayed = seen["nominal"], seen["delay"]
    for key in STATE:
        np.testing.assert_array_equal(delayed[key][1:], nominal[key][:-1])
    np.testing.assert_array_equal(delayed["desired_goal"], nominal["desired_goal"])
    assert not np.array_equal(nominal["desired_goal"][1], nominal["desired_goal"][0])  # it moves


def test_dropped_frames_freeze_the_state_not_the_goal():
    seen = _seen(scenarios.get("dropped_obs").with_params(p=0.6))
    nominal, dropped = seen["nominal"], seen["dropped_obs"]
    np.testing.assert_array_equal(dropped["desired_goal"], nominal["desired_goal"])
    frozen = [t for t in range(1, len(nominal["observation"]))
              if not np.array_equal(dropped["observation"][t], nominal["observation"][t])]
    assert frozen  # some frames were dropped...
    for t in frozen:  # ...and the agent then saw an earlier state, whole
        earlier = [s for s in range(t) if np.array_equal(dropped["observation"][t],
                                                         nominal["observation"][s])]
        assert earlier and np.array_equal(dropped["achieved_goal"][t],
                                          nominal["achieved_goal"][earlier[-1]])


def test_noise_is_on_the_measured_state_and_leaves_the_goal_exact():
    seen = _seen(scenarios.get("obs_noise"))
    nominal, noisy = seen["nominal"], seen["obs_noise"]
    np.testing.assert_array_equal(noisy["desired_goal"], nominal["desired_goal"])
    for key in STATE:
        np.testing.assert_array_equal(noisy[key][0], nominal[key][0])  # the reset is clean
        assert np.all(noisy[key][1:] != nominal[key][1:])


def test_keys_choose_what_a_scenario_acts_on():
    seen = _seen(scenarios.get("obs_noise").with_params(keys=["desired_goal"]),
                 scenarios.get("delay").with_params(keys="observation"))
    nominal, noisy, delayed = seen["nominal"], seen["obs_noise"], seen["delay"]
    for key in STATE:
        np.testing.assert_array_equal(noisy[key], nominal[key])
    assert np.all(noisy["desired_goal"][1:] != nominal["desired_goal"][1:])
    np.testing.assert_array_equal(delayed["observation"][1:], nominal["observation"][:-1])
    np.testing.assert_array_equal(delayed["achieved_goal"], nominal["achieved_goal"])


def test_a_schedule_delays_and_noises_the_state_only():
    scenario = Schedule(delay=1, obs_noise=0.2).as_scenario("late_and_noisy")
    seen = _seen(scenario)
    nominal, scheduled = seen["nominal"], seen["late_and_noisy"]
    np.testing.assert_array_equal(scheduled["desired_goal"], nominal["desired_goal"])
    assert np.all(scheduled["observation"][2:] != nominal["observation"][1:-1])
    assert np.abs(scheduled["observation"][2:] - nominal["observation"][1:-1]).max() < 2.0


def test_the_same_seed_gives_the_same_observations():
    first, again = _seen(scenarios.get("obs_noise")), _seen(scenarios.get("obs_noise"))
    for key in first["obs_noise"]:
        np.testing.assert_array_equal(first["obs_noise"][key], again["obs_noise"][key])


def test_the_noise_is_calibrated_on_the_keys_it_acts_on():
    nominal = _seen()["nominal"]
    spread = observation_spread([nominal])
    assert spread is not None and len(spread) == 2 + 4  # achieved_goal, then observation
    np.testing.assert_allclose(spread[:2], nominal["achieved_goal"].std(axis=0))
    assert len(observation_spread([nominal], ["desired_goal"]) or ()) == 2
    env = ObservationNoise(ReachEnv(), sigma=0.1, scale="relative", spread=spread)
    assert set(env.noise_std) == {"achieved_goal", "observation"}
    with pytest.raises(PerturbationError, match="spread must hold 6 finite values"):
        ObservationNoise(ReachEnv(), sigma=0.1, scale="relative", spread=spread[:4])


def test_keys_that_cannot_apply_are_clear_errors():
    with pytest.raises(PerturbationError, match="'goal', not a key of the Dict observation"):
        ObservationDelay(ReachEnv(), keys=["goal"])
    with pytest.raises(PerturbationError, match="keys= chooses keys of a Dict observation"):
        ObservationDelay(gym.make("CartPole-v1"), keys=["observation"])
    binary = gym.make("CartPole-v1")
    binary.observation_space = gym.spaces.Dict({"observation": gym.spaces.MultiBinary(3),
                                                "desired_goal": gym.spaces.MultiBinary(3)})
    with pytest.raises(PerturbationError, match="key 'observation' is MultiBinary.*keys="):
        ObservationNoise(binary, sigma=0.1)


def test_a_box_only_attack_refuses_a_dict_naming_it():
    with pytest.raises(PerturbationError, match="adversarial_obs.*is a Dict.*goal-conditioned"):
        scenarios.check_applicable(scenarios.resolve(["adversarial_obs"]), ReachEnv)


def test_tuple_observations_are_refused_with_the_fix():
    with pytest.raises(EnvContractError, match="Tuple.*FlattenObservation"):
        audit(lambda obs: np.zeros((len(obs), 2), np.float32), TupleEnv, scenarios=["delay"],
              episodes=2)
