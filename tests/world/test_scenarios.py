"""The scenario registry and the env specs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import pytest_rlaudit.perturbations as P
from pytest_rlaudit import Scenario, Schedule, scenarios
from pytest_rlaudit.errors import PerturbationError, UnknownEnvError, UnknownScenarioError
from pytest_rlaudit.perturbations import ObservationNoise, Speed
from pytest_rlaudit.world import scenarios as world_scenarios
from pytest_rlaudit.world.envs import env_spec


def test_registry_has_the_six_timing_audit_names_and_the_extras():
    assert {"nominal", "speed_5x", "jitter", "delay", "spike", "obs_noise"} <= set(scenarios.names())
    assert set(scenarios.EXTRAS) <= set(scenarios.names())
    assert scenarios.DEPLOYMENT == ("jitter", "delay", "spike", "obs_noise")
    assert scenarios.STRESS == ("speed_5x",)
    for name in scenarios.DEPLOYMENT:
        assert scenarios.get(name).category == "deployment"
    assert scenarios.get("speed_5x").category == "stress"


def test_default_parameters_match_the_design():
    assert dict(scenarios.get("speed_5x").params) == {"k": 5}
    assert dict(scenarios.get("jitter").params) == {"base": 2, "jitter": 1}
    assert dict(scenarios.get("delay").params) == {"steps": 1}
    assert dict(scenarios.get("spike").params) == {"start": 20, "duration": 20, "k": 5}
    assert dict(scenarios.get("obs_noise").params) == {"sigma": 0.1, "scale": "relative"}


@pytest.mark.parametrize("name", [n for n in scenarios.names()])
def test_every_registered_scenario_wraps_cartpole_and_steps(name):
    scenario = scenarios.get(name).calibrated((0.5, 0.2, 0.01, 0.3))  # spread-sized ones
    env = scenario.wrap(gym.make("CartPole-v1"))
    if name == "adversarial_obs":  # it needs an agent to attack; without one it says so
        with pytest.warns(UserWarning, match="attach"):
            env.reset(seed=0)
            env.step(0)
    obs, _ = env.reset(seed=0)
    obs, reward, *_ = env.step(0)
    assert np.isfinite(obs).all() and reward >= 1.0


def test_unknown_scenario_lists_the_known_ones_and_suggests():
    with pytest.raises(UnknownScenarioError, match=r"'jiter'.*Did you mean 'jitter'.*speed_5x"):
        scenarios.get("jiter")
    with pytest.raises(LookupError):  # also a LookupError for generic handlers
        scenarios.resolve(["delay", "nope"])


def test_with_params_overrides_and_rejects_unknown_names():
    s = scenarios.get("jitter").with_params(jitter=2)
    assert s.params["jitter"] == 2 and s.params["base"] == 2 and s.name == "jitter"
    assert scenarios.get("jitter").params["jitter"] == 1  # the registry is untouched
    with pytest.raises(PerturbationError, match="no parameter 'sigma'.*base, jitter"):
        scenarios.get("jitter").with_params(sigma=0.3)
    with pytest.raises(PerturbationError, match="takes no parameters"):
        scenarios.get("nominal").with_params(k=2)
    with pytest.raises(PerturbationError, match="k must be an integer >= 1"):
        scenarios.get("speed_5x").with_params(k=0).wrap(gym.make("CartPole-v1"))


def test_scenarios_are_immutable_and_hashable():
    s = scenarios.get("delay")
    with pytest.raises(TypeError):
        s.params["steps"] = 3  # type: ignore[index]
    assert hash(s) == hash(scenarios.get("delay"))
    assert s == scenarios.get("delay").with_params()
    assert s != s.with_params(steps=2)


def test_register_custom_scenarios_and_guard_names(monkeypatch):
    # on a copy of the registry: a scenario left registered would change what tests that
    # read the whole registry see (test_curves' ladders), by which tests shared a worker
    monkeypatch.setattr(world_scenarios, "_REGISTRY", dict(world_scenarios._REGISTRY))
    custom = Scenario("test_noisy_imu", "custom", ObservationNoise, {"sigma": 0.3})
    scenarios.register(custom)
    assert scenarios.get("test_noisy_imu") is custom
    with pytest.raises(ValueError, match="already registered"):
        scenarios.register(Scenario("test_noisy_imu", "custom", Speed, {"k": 2}))
    with pytest.raises(ValueError, match="category must be one of"):
        Scenario("bad", "deploy", Speed)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="listed twice"):
        scenarios.resolve(["delay", "delay"])


def test_resolve_defaults_to_the_deployment_and_stress_suites():
    assert [s.name for s in scenarios.resolve(None)] == [*scenarios.DEPLOYMENT, *scenarios.STRESS]
    assert [s.name for s in scenarios.resolve("spike")] == ["spike"]


# ------------------------------------------------------------------------- envs


def test_unknown_env_id_names_it_and_suggests_close_matches():
    with pytest.raises(UnknownEnvError, match=r"'CartPol-v1'.*Did you mean 'CartPole-v1'"):
        env_spec("CartPol-v1")
    with pytest.raises(UnknownEnvError, match="'cartpole'.*CartPole-v"):
        env_spec("cartpole")


def test_env_spec_accepts_ids_specs_and_factories():
    assert env_spec("CartPole-v1").make().spec.id == "CartPole-v1"
    assert env_spec(gym.spec("Pendulum-v1")).make().spec.id == "Pendulum-v1"
    factory = env_spec(lambda: gym.make("CartPole-v1"))
    assert factory.make() is not factory.make()


def test_env_instances_and_bad_factories_are_clear_errors():
    with pytest.raises(TypeError, match="zero-argument factory"):
        env_spec(gym.make("CartPole-v1"))
    with pytest.raises(TypeError, match="not a gymnasium.Env"):
        env_spec(lambda: 42).make()
    with pytest.raises(TypeError, match="Gymnasium id"):
        env_spec(3.5)  # type: ignore[arg-type]


# --------------------------------------------- scenarios built on schedules (data first)


def test_from_schedule_builds_the_scenario_and_as_scenario_is_the_same():
    timeline = Schedule(speed=[1] * 3 + [4] * 2, obs_noise=0.1)
    s = Scenario.from_schedule(timeline, "bumpy")
    assert (s.name, s.category, s.perturbation) == ("bumpy", "custom", P.Scheduled)
    assert s.schedule == timeline and s.description == timeline.describe()
    assert timeline.as_scenario("bumpy") == s
    assert scenarios.as_scenario(timeline).name == "schedule"
    with pytest.raises(TypeError, match="from_schedule takes a Schedule"):
        Scenario.from_schedule("jitter")


def test_a_scenario_knows_its_timeline_without_attributes_on_functions():
    assert not hasattr(P.spike, "_schedule_of")  # the spike wrapper is a plain function
    spike = scenarios.get("spike")
    assert spike.schedule == Schedule.spike(at=20, duration=20, speed=5)
    assert spike.with_params(start=5, k=3).schedule == Schedule.spike(at=5, duration=20, speed=3)
    # a custom scenario on a schedule wrapper gets the wrapper's own timeline
    custom = Scenario("stutter", "custom", P.SpeedSchedule, {"speeds": [1, 4]})
    assert custom.schedule == Schedule(speed=[1, 4, 1, ...])
    # and any scenario may declare one
    declared = Scenario("mine", "custom", P.Speed, {"k": 3},
                        timeline=lambda k: Schedule.constant(speed=k))
    assert declared.schedule == Schedule.constant(speed=3)
    assert scenarios.get("jitter").schedule is None


def test_the_mild_preset_is_the_default_suite_and_harsher_levels_grow():
    from pytest_rlaudit.plugin.options import SEVERITIES as OPTION_LEVELS

    assert scenarios.SEVERITIES == OPTION_LEVELS == ("mild", "moderate", "severe")
    mild, moderate, severe = (scenarios.preset(level) for level in scenarios.SEVERITIES)
    assert [s.name for s in mild] == list(scenarios.DEFAULT)
    assert [dict(s.params) for s in mild] == [dict(s.params) for s in
                                             scenarios.resolve(scenarios.DEFAULT)]
    by = {level: {s.name: s.params for s in suite}
          for level, suite in zip(scenarios.SEVERITIES, (mild, moderate, severe), strict=True)}
    for name, key in (("delay", "steps"), ("obs_noise", "sigma"), ("spike", "duration")):
        assert by["mild"][name][key] < by["moderate"][name][key] < by["severe"][name][key]
    assert {by[level]["speed_5x"]["k"] for level in by} == {5}


def test_an_unknown_severity_names_the_levels():
    with pytest.raises(UnknownScenarioError, match="severities: mild, moderate, severe"):
        scenarios.preset("hard")


def test_a_scenario_pickles_and_copies_with_its_parameters():
    import copy
    import pickle

    for scenario in [scenarios.get("jitter"), Scenario.from_schedule(Schedule(speed=3), "slow")]:
        for twin in (pickle.loads(pickle.dumps(scenario)), copy.deepcopy(scenario)):
            assert twin == scenario
            assert dict(twin.params) == dict(scenario.params)
            with pytest.raises(TypeError):  # still read-only
                twin.params["k"] = 1
