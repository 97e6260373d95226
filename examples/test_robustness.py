"""The demo: robustness stated as tests, for a fragile and a robust agent side by side.

    pytest --rl-audit examples/

Each test runs once per scenario of its rl_scenario marker (test ids are the scenario
names); rl_audit() audits the conftest's rl_agent on rl_env, paired against nominal,
and fails with the rating, interval and diagnosis when the threshold is missed. After the
tests, the "rl audit" section lists every scenario's numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from pytest_rlaudit import RobustnessError, assert_robust
from pytest_rlaudit.strategies import audit_settings, schedules

HERE = Path(__file__).resolve().parent
#: The bundled PPO: perfect at its training speed, fragile when timing changes.
PPO_ZIP = HERE / "ppo_cartpole.zip"
#: The same recipe trained under a randomised control period
#: (``python examples/train_cartpole.py --robust``).
ROBUST_PPO_ZIP = HERE / "robust_ppo_cartpole.zip"


# In a repository these two usually live in conftest.py; rl_agent would otherwise come
# from --rl-agent and rl_env from --rl-env.
@pytest.fixture(scope="session")
def rl_agent() -> str:
    return str(PPO_ZIP)


@pytest.fixture(scope="session")
def rl_env() -> str:
    return "CartPole-v1"


@pytest.mark.rl_scenario("jitter", "delay")
@pytest.mark.rl_threshold(min_rating="MILD")
def test_ppo_tolerates_jitter_and_a_stale_sensor(rl_audit):
    rl_audit()


@pytest.mark.rl_scenario("spike", "speed_5x")
@pytest.mark.rl_threshold(min_rating="MILD")
@pytest.mark.xfail(strict=True, reason="the bundled PPO was trained at one control rate: a "
                   "latency spike or a 5x slower loop knocks it over (see the diagnosis in "
                   "the rl audit section)")
def test_ppo_breaks_under_spikes_and_slow_control(rl_audit):
    rl_audit()


# obs_noise is sized by each observation's spread in the nominal episodes (sigma 0.1 = a
# tenth of what it normally varies); scale="absolute" is the established timing audit's
# noise, 0.1 in raw units: 16 times the pole angle's spread under this agent.
@pytest.mark.rl_scenario("obs_noise", scale="absolute")
@pytest.mark.rl_threshold(min_rating="MILD")
@pytest.mark.xfail(strict=True, reason="the bundled PPO was trained without sensor noise: "
                   "noise of 0.1 in raw units knocks it over")
def test_ppo_breaks_under_raw_sensor_noise(rl_audit):
    rl_audit()


@pytest.mark.rl_scenario("jitter", "delay", "spike", "obs_noise", "speed_5x")
@pytest.mark.rl_threshold(min_rating="MILD")
def test_speed_randomised_ppo_passes_the_whole_suite(rl_audit):
    rl_audit(agent=str(ROBUST_PPO_ZIP))


# Property tests: hypothesis draws disturbance timelines (Schedules) and, when one breaks
# the agent, shrinks it to the smallest that still does, reported in plain words
# ("breaks when speed goes 1 -> 5 for 4 steps at step 0") in the failure, the rl audit
# section, JUnit and --rl-report. derandomize=True draws the same examples on every run,
# as a CI gate should; drop it to explore new ones each run (hypothesis then keeps
# failures in .hypothesis/ and replays them first).
@pytest.mark.rl_audit
@pytest.mark.xfail(strict=True, raises=RobustnessError,
                   reason="the bundled PPO falls over under short slowdowns and dropped "
                          "frames; hypothesis reports the smallest such schedule")
@audit_settings(max_examples=30, derandomize=True, database=None)
@given(schedule=schedules(max_steps=100))
def test_ppo_survives_any_short_disturbance(rl_agent, rl_env, schedule):
    assert_robust(rl_agent, rl_env, schedule, min_ratio=0.8, episodes=10)


@pytest.mark.rl_audit
@audit_settings(max_examples=12, derandomize=True, database=None)
@given(schedule=schedules(max_steps=100, speeds=(2,), max_delay=1, max_noise=0.1,
                          kinds=("speed", "delay", "obs_noise")))
def test_speed_randomised_ppo_survives_mild_disturbances(rl_env, schedule):
    assert_robust(str(ROBUST_PPO_ZIP), rl_env, schedule, min_ratio=0.8, episodes=10)
