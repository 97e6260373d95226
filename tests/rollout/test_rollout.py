"""The batched runner: pairing, determinism, batch invariance, caps and errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from toy_envs import CounterEnv, FaultyEnv

from pytest_rlaudit import scenarios
from pytest_rlaudit.errors import RolloutCapWarning, RolloutError
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import env_spec

ALL = ["nominal", *scenarios.DEFAULT, *scenarios.EXTRAS]


def _run(agent, names=ALL, episodes=6, env="CartPole-v1", **kwargs):
    return run_episodes(as_policy(agent), env_spec(env), scenarios.resolve(names), episodes, **kwargs)


def _same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        for field in ("returns", "lengths", "env_steps", "capped", "seeds"):
            assert np.array_equal(getattr(a[name], field), getattr(b[name], field)), (name, field)


@pytest.mark.parametrize("agent", ["controller", "random"])
def test_results_are_identical_for_batch_sizes_1_7_and_64(agent, controller):
    agent = controller if agent == "controller" else "random"
    # 2 episodes of each of the 12 scenarios: 24 slots, dealt 1, 7 (with a ragged last
    # batch of 3) and 64 at a time (all at once)
    runs = [_run(agent, batch_size=b, seed=3, episodes=2) for b in (1, 7, 64)]
    _same(runs[0], runs[1])
    _same(runs[0], runs[2])


def test_two_runs_with_the_same_seed_are_identical_and_another_seed_differs(controller):
    _same(_run(controller, seed=11, episodes=3), _run(controller, seed=11, episodes=3))
    # only nominal is compared across seeds: the other scenarios need not run
    a, b = _run("random", ["nominal"], seed=11), _run("random", ["nominal"], seed=12)
    assert not np.array_equal(a["nominal"].returns, b["nominal"].returns)


def test_episode_i_resets_with_seed_plus_i_like_a_hand_written_loop(controller):
    out = _run(controller, names=["nominal", "obs_noise"], episodes=3, seed=5)
    assert out["nominal"].seeds.tolist() == [5, 6, 7]
    for i in range(3):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=5 + i)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(int(controller(obs[None])[0]))
            total, done = total + r, term or trunc
        assert out["nominal"].returns[i] == total


def test_results_do_not_depend_on_scenario_order_or_which_episodes_run_together(controller):
    full = _run("random", names=["jitter", "delay", "nominal"], episodes=5, seed=2)
    reordered = _run("random", names=["delay", "nominal", "jitter"], episodes=5, seed=2)
    _same(full, reordered)
    subset = _run("random", names=["jitter"], episodes=[3, 4], seed=2)
    assert np.array_equal(subset["jitter"].returns, full["jitter"].returns[3:])
    assert subset["jitter"].seeds.tolist() == [5, 6]


def test_env_steps_count_below_the_perturbations(controller):
    out = _run(controller, names=["nominal", "speed_5x", "jitter"], episodes=4)
    for name in out:  # CartPole: one reward per env step, capped at 500 env steps
        assert np.array_equal(out[name].returns, out[name].env_steps)
        assert out[name].env_steps.max() <= 500
    assert (out["speed_5x"].lengths * 5 >= out["speed_5x"].env_steps).all()
    assert (out["speed_5x"].lengths < out["speed_5x"].env_steps).all()


def test_the_step_cap_cuts_episodes_with_a_warning(controller):
    with pytest.warns(RolloutCapWarning, match="cap of 20 agent steps"):
        out = _run(controller, names=["nominal"], episodes=3, max_steps=20)
    assert out["nominal"].lengths.tolist() == [20, 20, 20]
    assert out["nominal"].capped.all()


def test_an_agent_exception_names_scenario_episode_and_step():
    def broken(obs):
        if obs.shape[0] and np.abs(obs[:, 0]).max() > 0.05:
            raise ValueError("bad weights")
        return np.zeros(len(obs), dtype=np.int64)

    with pytest.raises(RolloutError, match=r"ValueError: bad weights.*scenario 'nominal', episode \d+") as info:
        _run(broken, names=["nominal"], episodes=2, batch_size=1)
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.scenario == "nominal" and info.value.step > 0


@pytest.mark.parametrize(
    ("fault", "match"),
    [
        ("raise", r"env step failed \(RuntimeError: simulator exploded\) at scenario 'delay', episode 0 \(env seed 0\), agent step 2"),
        ("nan_obs", r"non-finite observation .* scenario 'delay', episode 0"),
        ("nan_reward", r"non-finite reward nan at scenario 'delay', episode 0 \(env seed 0\), agent step 3"),
    ],
)
def test_env_faults_name_where_they_happened(fault, match):
    with pytest.raises(RolloutError, match=match):
        _run(lambda o: np.zeros(len(o), dtype=np.int64), names=["delay"], episodes=2,
             env=lambda: FaultyEnv(fault, at=3), batch_size=1)


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (2, r"action 2, which is not in the action space Discrete\(2\)"),
        (0.5, "not in the action space"),
        (-1, "not in the action space"),
    ],
)
def test_discrete_actions_outside_the_space_are_errors(action, match):
    with pytest.raises(RolloutError, match=match + r".*scenario 'nominal', episode 0"):
        _run(lambda o: np.full(len(o), action), names=["nominal"], episodes=2)


def test_non_finite_box_actions_are_errors():
    def nan_agent(obs):
        return np.full((len(obs), 2), np.nan, dtype=np.float32)

    with pytest.raises(RolloutError, match=r"action \[nan, nan\], which is non-finite \(NaN or "
                       r"infinite\), on the observation \[.*agent step 0"):
        _run(nan_agent, names=["nominal"], episodes=2, env=lambda: CounterEnv(box_actions=True))


def test_wrong_action_shapes_are_errors():
    with pytest.raises(RolloutError, match=r"shape \(3,\) for 1 observations"):
        _run(lambda o: np.zeros(3, dtype=np.int64), names=["nominal"], episodes=2, batch_size=1)


def test_float_actions_with_integral_values_are_accepted(controller):
    out = _run(lambda o: controller(o).astype(np.float64), names=["nominal"], episodes=2)
    assert out["nominal"].returns.tolist() == [500.0, 500.0]


def test_a_factory_that_returns_one_env_twice_is_an_error():
    shared = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="same env object twice"):
        _run("random", names=["nominal"], episodes=4, env=lambda: shared, batch_size=2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"batch_size": 0}, "batch_size"), ({"seed": -1}, "seed"), ({"max_steps": 0}, "max_steps")],
)
def test_bad_runner_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _run("random", names=["nominal"], episodes=2, **kwargs)
    with pytest.raises(ValueError, match="episodes"):
        _run("random", names=["nominal"], episodes=0)


def test_a_scenario_that_changes_the_spaces_is_an_error():
    stacked = scenarios.Scenario("stacked", "custom", lambda e: gym.wrappers.FrameStackObservation(e, 2))
    with pytest.raises(ValueError, match="scenario 'stacked' changes the env's spaces"):
        run_episodes(as_policy("random"), env_spec("CartPole-v1"),
                     [scenarios.NOMINAL, stacked], 2)


def test_empty_or_negative_episode_indices_are_errors():
    for episodes in ([], [-1, 0]):
        with pytest.raises(ValueError, match="episodes must be"):
            _run("random", names=["nominal"], episodes=episodes)
