"""Audits of the example agents, as ordinary unit tests.

The PPO model is perfect at its training speed and fragile when timing changes; the
numpy controller keeps balancing. ``pytest examples/`` runs these.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from numpy_agent import cartpole_controller

from pytest_rlaudit import (
    RobustnessError,
    assert_deterministic,
    assert_no_policy_collapse,
    assert_no_regression,
    assert_robust,
    audit,
)

PPO_ZIP = Path(__file__).parent / "ppo_cartpole.zip"
ROBUST_PPO_ZIP = Path(__file__).parent / "robust_ppo_cartpole.zip"


@pytest.fixture(scope="module")
def ppo_result():
    return audit(str(PPO_ZIP), "CartPole-v1", episodes=10, seed=0)


def test_ppo_balances_at_its_training_speed(ppo_result):
    assert ppo_result.nominal.mean_return == 500.0


def test_ppo_tolerates_jitter_and_delay(ppo_result):
    assert ppo_result["jitter"].ratio > 0.95
    assert ppo_result["delay"].ratio > 0.95


def test_ppo_falls_over_in_a_latency_spike_and_at_5x(ppo_result):
    assert ppo_result["spike"].ratio < 0.5
    assert ppo_result["speed_5x"].ratio < 0.5


def test_ppo_spike_failure_says_what_to_train_with():
    with pytest.raises(RobustnessError, match=r"fix: train with SpeedSchedule\.spike"):
        assert_robust(str(PPO_ZIP), "CartPole-v1", "spike", min_ratio=0.8, episodes=10)


def test_numpy_controller_is_robust_across_the_deployment_suite():
    result = audit(cartpole_controller, "CartPole-v1", episodes=10, seed=0)
    assert result.nominal.mean_return == 500.0
    assert result.deployment.rating in ("PASS", "MILD")


@pytest.mark.parametrize("scenario", ["jitter", "delay", "spike", "obs_noise"])
def test_numpy_controller_keeps_80_percent_not_worse(scenario):
    # not_worse: fail only when the whole interval is below the threshold (no flaky reds)
    assert_robust(cartpole_controller, "CartPole-v1", scenario, min_ratio=0.8,
                  mode="not_worse", episodes=10)


def test_ppo_replays_bit_for_bit_at_any_batch_size():
    # the audit numbers are only as reproducible as the agent: same seeds, same episodes
    assert_deterministic(str(PPO_ZIP), "CartPole-v1", episodes=3, scenarios=["jitter"])


def test_ppo_still_uses_both_actions():
    stats = assert_no_policy_collapse(str(PPO_ZIP), "CartPole-v1", episodes=3, min_entropy=0.5)
    assert stats.distinct == 2


def test_speed_randomised_ppo_ships_against_the_bundled_one():
    comparison = assert_no_regression(str(ROBUST_PPO_ZIP), str(PPO_ZIP), "CartPole-v1",
                                      scenarios=["spike", "delay"], episodes=10)
    assert comparison.decision == "ship"
    assert ("spike", "return") in {(c.scenario, c.metric) for c in comparison.improvements}
