"""The suite leaves nothing behind and passes in any order (tests/registries.py, and the
``SB3_LOGDIR`` fixture in tests/conftest.py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import gymnasium as gym
import registries

from pytest_rlaudit import Scenario, scenarios
from pytest_rlaudit.perturbations import ObservationNoise


def test_a_registration_made_inside_is_undone_after():
    before_scenarios, before_envs = scenarios.names(), set(gym.envs.registry)
    with registries.restored():
        scenarios.register(Scenario("hygiene_noise", "custom", ObservationNoise))
        gym.register("HygieneCartPole-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
        assert "hygiene_noise" in scenarios.names()
        assert "HygieneCartPole-v0" in gym.envs.registry
    assert scenarios.names() == before_scenarios
    assert set(gym.envs.registry) == before_envs


def test_a_replaced_scenario_is_put_back():
    original = scenarios.get("jitter")
    with registries.restored():
        scenarios.register(Scenario("jitter", "custom", ObservationNoise), replace=True)
    assert scenarios.get("jitter") == original


def test_sb3_logs_go_to_pytests_temporary_paths(tmp_path_factory):
    from stable_baselines3.common.logger import configure

    tmp = Path(tempfile.gettempdir())
    before = {p.name for p in tmp.glob("SB3-*")}
    logger = configure()  # what learn() calls when no tensorboard_log is given
    assert Path(logger.dir).is_relative_to(tmp_path_factory.getbasetemp())
    assert {p.name for p in tmp.glob("SB3-*")} == before
    assert os.environ["SB3_LOGDIR"] == logger.dir
