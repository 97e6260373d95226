"""ScenarioMix: one scenario per episode, drawn by weight, each run as its own wrapper."""

from __future__ import annotations

import pickle
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation
from toy_envs import counter, drive

import pytest_rlaudit.perturbations as P
from pytest_rlaudit import Scenario, Schedule, scenarios
from pytest_rlaudit.errors import PerturbationError, UnknownScenarioError
from pytest_rlaudit.perturbations import ScenarioMix

CARTPOLE = "CartPole-v1"
# A fixed, state-blind action sequence: long enough to cross the spike (agent steps 20-39).
ACTIONS = [0, 1, 1, 0] * 15


def episodes(env: gym.Env, seeds: list[int | None]) -> list[tuple[str, list]]:
    """(scenario, trajectory) of one episode per entry of ``seeds`` (None: unseeded reset)."""
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append((env.current, drive(env, list(ACTIONS), seed=None)))
    return out


def test_is_public_in_the_perturbations_facade():
    assert "ScenarioMix" in P.__all__ and P.ScenarioMix is ScenarioMix


def test_draws_follow_the_weights():
    env = ScenarioMix(counter(), ["nominal", "speed_5x", "jitter"], weights=[1, 2, 7])
    env.reset(seed=0)
    counts = Counter()
    for _ in range(2000):
        _, info = env.reset()
        counts[info["scenario"]] += 1
    shares = np.array([counts[n] for n in ("nominal", "speed_5x", "jitter")]) / 2000
    # Binomial std at n=2000 is at most 0.011; 0.04 is over 3.5 of them.
    np.testing.assert_allclose(shares, [0.1, 0.2, 0.7], atol=0.04)
    assert env.probabilities.tolist() == pytest.approx([0.1, 0.2, 0.7])


def test_a_zero_weight_scenario_is_never_drawn():
    env = ScenarioMix(counter(), ["nominal", "speed_5x"], weights=[0, 1])
    assert {env.reset(seed=s)[1]["scenario"] for s in range(50)} == {"speed_5x"}


def test_info_and_current_name_the_episode_scenario_and_every_scenario_comes_up():
    env = ScenarioMix(gym.make(CARTPOLE), ["nominal", "spike", "speed_5x"])
    seen = set()
    for seed in range(30):
        _, info = env.reset(seed=seed)
        assert info["scenario"] == env.current
        seen.add(env.current)
    assert seen == {"nominal", "spike", "speed_5x"}


def test_each_episode_is_its_scenarios_own_wrapper():
    mix = ScenarioMix(gym.make(CARTPOLE), ["nominal", "spike", "speed_5x", "delay"])
    drawn = set()
    for seed in range(12):
        mix.reset(seed=seed)
        name = mix.current
        drawn.add(name)
        own = scenarios.get(name).wrap(gym.make(CARTPOLE))
        assert drive(mix, ACTIONS, seed=seed) == drive(own, ACTIONS, seed=seed), name
    assert len(drawn) >= 3  # the check covered most scenarios, not only one


def test_a_one_scenario_mix_replays_the_scenario_itself():
    mix = ScenarioMix(gym.make(CARTPOLE), ["speed_5x"])
    own = P.Speed(gym.make(CARTPOLE), k=5)
    assert drive(mix, ACTIONS, seed=3) == drive(own, ACTIONS, seed=3)
    assert drive(mix, ACTIONS, seed=3)[-1][2] is True  # terminated: speed 5 drops the pole


def test_a_seeded_run_is_reproducible_including_later_unseeded_episodes():
    def run(seed: int) -> list:
        env = ScenarioMix(counter(), ["nominal", "jitter", "speed_5x"])
        return episodes(env, [seed] + [None] * 15)

    assert run(7) == run(7)
    assert [name for name, _ in run(7)] != [name for name, _ in run(8)]
    # jitter's own draws replay too, not only the choice of scenario
    assert any(name == "jitter" for name, _ in run(7))


def test_reset_with_a_seed_replays_that_episode_whatever_ran_before():
    env = ScenarioMix(counter(), ["nominal", "jitter", "sticky_actions"])
    first = episodes(env, [5])
    episodes(env, [1, None, None, 2, None])
    assert episodes(env, [5]) == first


def test_the_inner_env_is_shared_not_rebuilt():
    inner = counter()
    env = ScenarioMix(inner, ["nominal", "speed_5x", "jitter"])
    for name in env.names:
        assert env.chain(name).unwrapped is inner
    for seed in range(5):
        env.reset(seed=seed)
        env.step(0)
        assert inner.t >= 1  # every episode stepped the one inner env


def test_outside_timelimit_an_episode_still_ends_at_the_limit_in_env_steps():
    env = ScenarioMix(counter(limit=12), ["speed_5x"])
    assert drive(env, [0] * 5) == [(5.0, 15.0, False, False), (10.0, 40.0, False, False),
                                   (12.0, 23.0, False, True)]


def test_scenario_objects_and_schedules_mix_with_names():
    noise = scenarios.get("obs_noise").with_params(scale="absolute")
    env = ScenarioMix(gym.make(CARTPOLE), ["nominal", noise, Schedule(speed=2)])
    assert env.names == ("nominal", "obs_noise", "schedule")
    assert isinstance(env.chain("schedule"), P.Scheduled)
    assert gym.make(env.spec).names == env.names  # rebuilt from its spec, as wrappers are


def test_pickles_and_runs_in_sb3_vector_envs():
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    for chosen in (["nominal", "spike"], [scenarios.get("nominal"), scenarios.get("spike")]):
        env = ScenarioMix(gym.make(CARTPOLE), chosen)
        env.reset(seed=0)
        copy = pickle.loads(pickle.dumps(env))
        assert drive(copy, ACTIONS, seed=4) == drive(env, ACTIONS, seed=4)

    kwargs = {"scenarios": ["nominal", "speed_5x"], "weights": [1, 3]}
    for vec_cls, extra in ((None, {}), (SubprocVecEnv, {"start_method": "fork"})):
        vec = make_vec_env(CARTPOLE, n_envs=2, seed=0, wrapper_class=ScenarioMix,
                           wrapper_kwargs=kwargs, vec_env_cls=vec_cls, vec_env_kwargs=extra)
        try:
            obs = vec.reset()
            assert obs.shape == (2, 4)
            assert set(vec.get_attr("current")) <= {"nominal", "speed_5x"}
            _, rewards, _, _ = vec.step(np.zeros(2, dtype=np.int64))
            assert set(rewards) <= {1.0, 5.0}
        finally:
            vec.close()


# ----------------------------------------------------------------------- errors


def test_an_unknown_name_is_the_registry_error():
    with pytest.raises(UnknownScenarioError, match="unknown scenario 'spkie'. Did you mean 'spike'"):
        ScenarioMix(counter(), ["nominal", "spkie"])


@pytest.mark.parametrize("given", [[], None])
def test_no_scenarios_is_an_error(given):
    with pytest.raises(PerturbationError, match="give the scenarios to mix|list of scenarios is empty"):
        ScenarioMix(counter(), given)


@pytest.mark.parametrize(("weights", "message"), [
    ([1], r"1 weights for 2 scenarios \(nominal, jitter\)"),
    ([0, 0], "the weights are all zero"),
    ([1, -1], "the weight of scenario 'jitter' must be a finite number >= 0, got -1"),
    ([1, float("nan")], "the weight of scenario 'jitter' must be a finite number"),
    ("ab", "weights must be a sequence of numbers"),
])
def test_bad_weights_are_named(weights, message):
    with pytest.raises(PerturbationError, match=message):
        ScenarioMix(counter(), ["nominal", "jitter"], weights=weights)


def test_a_scenario_that_changes_the_spaces_is_named():
    stack = Scenario("stack2", "custom", FrameStackObservation, {"stack_size": 2})
    with pytest.raises(PerturbationError, match=r"scenario 'stack2' changes the observation "
                                                r"space \(shape \(4,\) under 'nominal', shape \(2, 4\)"):
        ScenarioMix(gym.make(CARTPOLE), ["nominal", stack])


def test_relative_noise_needs_its_spread_or_raw_units():
    with pytest.raises(PerturbationError, match=r"scenario 'obs_noise'.*with_params\(scale='absolute'\)"):
        ScenarioMix(gym.make(CARTPOLE), ["nominal", "obs_noise"])


def test_dynamics_is_refused_before_it_shifts_the_shared_env():
    inner = gym.make(CARTPOLE)
    with pytest.raises(PerturbationError, match=r"'dynamics' shifts the env's physics in place"):
        ScenarioMix(inner, ["nominal", "dynamics"])
    assert inner.unwrapped.length == 0.5  # untouched


def test_a_scenario_that_cannot_wrap_the_env_is_named():
    with pytest.raises(PerturbationError, match="ScenarioMix: scenario 'push' cannot wrap this env"):
        ScenarioMix(gym.make("FrozenLake-v1"), ["nominal", "push"])
