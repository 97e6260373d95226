"""Custom perturbations: ``Scenario(name, category, perturbation, params)`` calls
``perturbation(env, **params)``, which must return the env wrapped. One that returns
anything else (None: a forgotten ``return``) is a :class:`PerturbationError` naming the
scenario and what it must return, not an ``AttributeError`` from deep in the runner."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit import Scenario, audit
from pytest_rlaudit.errors import PerturbationError
from pytest_rlaudit.world.scenarios import check_applicable


class Louder(gym.ObservationWrapper):
    def observation(self, observation: Any) -> Any:
        return observation * 1.01


def forgot_to_return(env: gym.Env, gain: float = 2.0) -> gym.Env | None:
    Louder(env)  # built, never returned
    return None


def returns_a_tuple(env: gym.Env) -> Any:
    return Louder(env), {"gain": 1.01}


def balance(obs: np.ndarray) -> np.ndarray:
    return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)


@pytest.mark.parametrize("perturbation, got", [(forgot_to_return, "None"),
                                               (returns_a_tuple, "tuple")],
                         ids=["none", "tuple"])
def test_a_perturbation_that_returns_no_env_names_the_scenario_and_what_it_must_return(
        perturbation, got):
    scenario = Scenario("louder", "custom", perturbation)
    with pytest.raises(PerturbationError) as info:
        audit(balance, "CartPole-v1", [scenario], episodes=2)
    message = str(info.value)
    assert message.startswith(f"scenario 'louder': its perturbation {perturbation.__name__} "
                              f"returned {got} where a wrapped env is expected.")
    assert "perturbation(env, **params)" in message and "`return MyWrapper(env)`" in message
    assert "cannot run on this env" not in message  # named once, not twice


def test_wrap_itself_refuses_it_and_the_probe_env_is_closed():
    closed = []

    class Tracked(gym.Wrapper):
        def close(self) -> None:
            closed.append(True)
            super().close()

    scenario = Scenario("louder", "custom", forgot_to_return, {"gain": 3.0})
    with pytest.raises(PerturbationError, match="returned None where a wrapped env"):
        scenario.wrap(gym.make("CartPole-v1"))
    with pytest.raises(PerturbationError, match="scenario 'louder'"):
        check_applicable([scenario], lambda: Tracked(gym.make("CartPole-v1")))
    assert closed == [True]


def test_a_perturbation_that_returns_the_env_itself_or_a_wrapper_is_fine():
    for perturbation in (lambda env: env, Louder):
        scenario = Scenario("louder", "custom", perturbation)
        assert isinstance(scenario.wrap(gym.make("CartPole-v1")), gym.Env)
