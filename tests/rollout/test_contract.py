"""The env contract, checked: observations of the declared shape (always) and near the
declared Box bounds (at reset and on the first steps), a batchable observation space, and
Gymnasium's API. Each break is an :class:`EnvContractError` naming the env, the space,
what was seen and the fix, before anything is rated; envs that stray a little past their
bounds keep passing."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import pytest_rlaudit
from pytest_rlaudit import audit
from pytest_rlaudit.errors import EnvContractError, RLAuditError
from pytest_rlaudit.rollout.checks import BOUNDS_SLACK, CHECKED_STEPS


class Line(gym.Env):
    """obs [x] in a Box(-1, 1): x starts near 0 (seeded) and moves 0.02 per step toward
    the action's side; 40 steps, reward 1 - |x - 0.4|. Subclasses break the contract."""

    observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.x, self.t = float(self.np_random.uniform(-0.1, 0.1)), 0
        return self.obs(), {}

    def obs(self) -> Any:
        return np.array([self.x], np.float32)

    def step(self, action: Any):
        self.x += 0.02 if action else -0.02
        self.t += 1
        return self.obs(), 1.0 - abs(self.x - 0.4), False, self.t >= 40, {}


def center(obs: np.ndarray) -> np.ndarray:
    """Toward 0.4: better than random actions, which stay near 0."""
    return (obs[:, 0] < 0.4).astype(np.int64)


class TwoWide(Line):
    def obs(self) -> Any:
        return np.array([self.x, 0.0], np.float32)


class HundredFold(Line):
    """Observations 100x the box: raw units where normalised ones are declared."""

    def obs(self) -> Any:
        return np.array([100.0 * (self.x + 1.0)], np.float32)


class Straying(Line):
    """Observations a little past the box (2.5 where it says 1): real envs do that."""

    def obs(self) -> Any:
        return np.array([self.x + 2.5], np.float32)


class LateOutlier(Line):
    """Far outside only after the first steps: bounds are held on the first steps only."""

    def obs(self) -> Any:
        return np.array([self.x + (1000.0 if self.t > 10 else 0.0)], np.float32)

    def step(self, action: Any):  # rewards action 1, whatever the agent sees
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(action), terminated, truncated, info


class LateReshape(Line):
    """A second element from agent step 20 on, in every episode but the first (env seed
    0), which the seed-replay check runs whole: found by the runner."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.late = seed != 0
        return super().reset(seed=seed, options=options)

    def obs(self) -> Any:
        late = getattr(self, "late", False) and self.t >= 20
        return np.array([self.x, 0.0] if late else [self.x], np.float32)


class LateText(Line):
    """Observations turn into text from agent step 20 on (a simulator's status string where
    the reading was): past the replay and the checked first steps."""

    def obs(self) -> Any:
        return np.array([f"{self.x:.2f}"]) if self.t >= 20 else np.array([self.x], np.float32)


class TextFromReset(Line):
    def obs(self) -> Any:
        return np.array([f"{self.x:.2f}"])


class TupleObs(Line):
    observation_space = spaces.Tuple((spaces.Box(-1.0, 1.0, (1,), np.float32), spaces.Discrete(3)))

    def obs(self) -> Any:
        return (np.array([self.x], np.float32), 1)


class DictWithTuple(Line):
    observation_space = spaces.Dict({"x": spaces.Box(-1.0, 1.0, (1,), np.float32),
                                     "tags": spaces.Tuple((spaces.Discrete(2),))})

    def obs(self) -> Any:
        return {"x": np.array([self.x], np.float32), "tags": (0,)}


class OldReset(Line):
    """gym < 0.26: reset returns the observation alone (and step 4 values)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return super().reset(seed=seed)[0]

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class OldStep(Line):
    """Half ported: a Gymnasium reset, but step returns (obs, reward, done, info)."""

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


def _refused(env: Any, scenarios: Any = ("jitter",), **kwargs: Any) -> str:
    with pytest.raises(EnvContractError) as info:
        audit(center, env, list(scenarios), episodes=3, **kwargs)
    return str(info.value)


# -------------------------------------------------------------------------- observations


def test_observations_of_another_shape_are_refused_naming_env_space_and_fix():
    message = _refused(TwoWide)
    assert message.startswith("env 'TwoWide' returned an observation of shape (2,) at the "
                              "reset of episode 0 (env seed 0) of scenario 'nominal', but its "
                              "observation space Box(-1.0, 1.0, (1,), float32) declares shape "
                              "(1,).")
    assert "make the env's observations and its observation_space agree" in message


def test_under_obs_noise_the_shape_is_blamed_not_the_noise_spread():
    message = _refused(TwoWide, ["obs_noise"])
    assert "declares shape (1,)" in message and "spread" not in message


def test_a_shape_that_changes_mid_episode_is_found_on_any_step():
    message = _refused(LateReshape, workers=2)  # in a worker process, where it is stepped
    assert "env 'LateReshape' returned an observation of shape (2,) at scenario" in message
    assert "as the agent sees it, after the scenario's perturbation" in message


@pytest.mark.parametrize("workers", [None, 2])
def test_observations_that_turn_into_text_mid_episode_are_the_envs_fault_not_the_agents(workers):
    # Issue 42, point 10: it read "the agent failed (UFuncTypeError: ...)".
    message = _refused(LateText, ["delay"], workers=workers)
    assert message.startswith("env 'LateText' returned an observation of text (dtype <U")
    assert "at scenario 'nominal', episode 0 (env seed 0), agent step 20 (as the agent sees it" \
        in message
    assert ("but its observation space Box(-1.0, 1.0, (1,), float32) declares numbers (dtype "
            "float32)") in message
    assert "make the env return numbers of the declared dtype at every step" in message


def test_text_observations_on_the_first_steps_are_refused_in_the_contract_checks_words():
    message = _refused(TextFromReset)
    assert message.startswith("env 'TextFromReset' returned an observation of text (dtype <U")
    assert "at the reset of episode 0 (env seed 0) of scenario 'nominal'" in message


@pytest.mark.parametrize("scenarios", [["jitter"], ["obs_noise"]], ids=["jitter", "obs_noise"])
def test_observations_far_outside_the_box_are_refused_before_anything_is_rated(scenarios):
    message = _refused(HundredFold, scenarios)
    assert message.startswith("env 'HundredFold' returned an observation far outside its "
                              "observation space at the reset of episode 0")
    assert "element 0 is 1" in message and "the space's bounds there are [-1, 1]" in message
    assert "Box(-1.0, 1.0, (1,), float32)" in message
    assert "their units or normalisation" in message and "np.inf" in message
    assert "spread" not in message.split("the space is")[0]


def test_observations_a_little_past_the_box_still_audit():
    assert 1.0 + BOUNDS_SLACK * 2.0 > 2.6  # Straying's 2.5 is within one box width
    def shifted(obs: np.ndarray) -> np.ndarray:
        return center(obs - 2.5)

    result = audit(shifted, Straying, ["jitter", "obs_noise"], episodes=3)
    assert result.nominal.returns.shape == (3,)


def test_bounds_are_held_on_the_first_steps_only():
    assert 10 > CHECKED_STEPS  # LateOutlier leaves the box at step 11: not looked at
    audit(lambda obs: np.ones(len(obs), np.int64), LateOutlier, ["jitter"], episodes=3)


# -------------------------------------------------------------------------- spaces and API


def test_a_tuple_observation_space_is_refused_naming_the_space_and_the_fix():
    message = _refused(TupleObs)
    assert message.startswith("env 'TupleObs' has the observation space Tuple(Box(-1.0, 1.0, "
                              "(1,), float32), Discrete(3)), which the audit cannot batch")
    assert "Supported: Box, Discrete, MultiDiscrete, MultiBinary, and a Dict of these" in message
    assert "gymnasium.wrappers.FlattenObservation" in message


def test_the_fix_the_tuple_message_gives_works():
    def flat_center(obs: np.ndarray) -> np.ndarray:  # [x, one-hot of the Discrete(3)]
        return (obs[:, 0] < 0.4).astype(np.int64)

    env = lambda: gym.wrappers.FlattenObservation(TupleObs())  # noqa: E731
    result = audit(flat_center, env, ["jitter"], episodes=3)
    assert result.nominal.returns.shape == (3,)


def test_a_tuple_inside_a_dict_space_is_refused_too():
    message = _refused(DictWithTuple)
    assert "has the observation space Tuple(Discrete(2)) (in its Dict observation space" in message


OLD_RESET = ("reset() returned a ndarray instead of the pair (observation, info), at the reset of "
             "episode 0")
OLD_STEP = ("step() returned a tuple of 4 instead of Gymnasium's five values (observation, "
            "reward, terminated, truncated, info), at env step 1 of episode 0")


@pytest.mark.parametrize("cls, what", [(OldReset, OLD_RESET), (OldStep, OLD_STEP)],
                         ids=["reset", "step"])
def test_the_old_gym_api_is_blamed_on_the_env_not_the_agent(cls, what):
    message = _refused(cls)
    assert message.startswith(f"env {cls.__name__!r} does not follow Gymnasium's API: {what}")
    assert "the old gym API" in message and "the agent" not in message
    assert "super().reset(seed=seed)" in message and "migration_guide" in message
    assert "shimmy.GymV21CompatibilityV0(env=your_env)" in message


def test_the_old_gym_api_of_a_registered_id_too():
    # gymnasium.make's passive checker only warns of the old API; the audit refuses it
    gym.register("RLAuditOldApi-v0", entry_point=OldStep, max_episode_steps=40)
    try:
        with pytest.warns(Warning, match="old step API"):
            message = _refused("RLAuditOldApi-v0")
    finally:
        del gym.registry["RLAuditOldApi-v0"]
    # its TimeLimit unpacks the step below the runner's checks: told by that failure
    assert message.startswith("env 'RLAuditOldApi-v0' does not follow Gymnasium's API: a step "
                              "failed unpacking what the env's step() returned (not enough "
                              "values to unpack (expected 5, got 4)) at scenario 'nominal'")
    assert "shimmy.GymV21CompatibilityV0(env=your_env)" in message


def test_the_contract_error_is_exported_an_rlaudit_error_and_a_value_error():
    assert pytest_rlaudit.EnvContractError is EnvContractError
    assert issubclass(EnvContractError, RLAuditError) and issubclass(EnvContractError, ValueError)
