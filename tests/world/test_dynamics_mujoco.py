"""Dynamics on MuJoCo envs, the push scenario, and scenarios checked before any rollout."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from toy_envs import CounterEnv

from pytest_rlaudit import scenarios
from pytest_rlaudit._seeding import episode_seed_sequence
from pytest_rlaudit.errors import PerturbationError
from pytest_rlaudit.perturbations import Dynamics, Push, seed_perturbations
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import env_spec
from pytest_rlaudit.world.perturbations.dynamics import CLASSIC_CONTROL, MUJOCO_DEFAULT
from pytest_rlaudit.world.perturbations.push import _KICKS

pytest.importorskip("mujoco")

#: Model fields each MuJoCo parameter scales (the rest must not move).
FIELDS = {
    "mass": ("body_mass", "body_inertia"),
    "friction": ("geom_friction",),
    "gravity": ("opt.gravity",),
    "actuator": ("actuator_gear",),
}
#: Fields watched for changes: the scaled ones and their neighbours in the model.
WATCHED = (*(f for fields in FIELDS.values() for f in fields), "body_pos", "body_ipos",
           "geom_size", "dof_damping", "jnt_stiffness", "actuator_ctrlrange", "opt.timestep")


def _field(model, name: str) -> np.ndarray:
    obj = model
    for part in name.split("."):
        obj = getattr(obj, part)
    return np.array(obj, copy=True)


def _snapshot(env: gym.Env) -> dict[str, np.ndarray]:
    return {name: _field(env.unwrapped.model, name) for name in WATCHED}


def _qpos_after(env: gym.Env, steps: int, seed: int = 0) -> np.ndarray:
    env.reset(seed=seed)
    zero = np.zeros(env.action_space.shape, env.action_space.dtype)
    for _ in range(steps):
        env.step(zero)
    return env.unwrapped.data.qpos.copy()


def _zeros(act_dim: int):
    return as_policy(lambda obs: np.zeros((len(obs), act_dim), np.float32))


# ------------------------------------------------------------- dynamics on MuJoCo


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_each_mujoco_scale_changes_its_fields_and_only_those(name):
    nominal = _snapshot(gym.make("Hopper-v5"))
    env = Dynamics(gym.make("Hopper-v5"), scale={name: 1.7})
    shifted = _snapshot(env)
    for field in WATCHED:
        expected = nominal[field] * 1.7 if field in FIELDS[name] else nominal[field]
        np.testing.assert_allclose(shifted[field], expected, rtol=1e-12, err_msg=field)
    assert env.changes == {name: 1.7}


def test_mass_recomputes_what_mujoco_derives_from_it():
    nominal = gym.make("Hopper-v5").unwrapped.model.body_subtreemass.copy()
    model = Dynamics(gym.make("Hopper-v5"), scale={"mass": 2.0}).unwrapped.model
    np.testing.assert_allclose(model.body_subtreemass, 2.0 * nominal)


def test_unit_scales_replay_the_nominal_trajectory_bit_for_bit():
    ones = dict.fromkeys(FIELDS, 1.0)
    assert np.array_equal(_qpos_after(Dynamics(gym.make("Hopper-v5"), scale=ones), 30),
                          _qpos_after(gym.make("Hopper-v5"), 30))


def test_the_default_shift_is_a_heavier_robot_on_a_slippier_floor():
    nominal = _snapshot(gym.make("Walker2d-v5"))
    env = Dynamics(gym.make("Walker2d-v5"))
    shifted = _snapshot(env)
    assert env.changes == MUJOCO_DEFAULT == {"mass": 1.3, "friction": 0.8}
    np.testing.assert_allclose(shifted["body_mass"], 1.3 * nominal["body_mass"])
    np.testing.assert_allclose(shifted["geom_friction"], 0.8 * nominal["geom_friction"])
    for field in ("opt.gravity", "actuator_gear"):
        assert np.array_equal(shifted[field], nominal[field])
    assert not np.array_equal(_qpos_after(env, 20), _qpos_after(gym.make("Walker2d-v5"), 20))


def test_reset_keeps_the_shift():
    env = Dynamics(gym.make("Hopper-v5"), scale={"mass": 1.5, "gravity": 0.5})
    shifted = _snapshot(env)
    for seed in (0, 1, 2):
        _qpos_after(env, 5, seed=seed)
        for field, value in _snapshot(env).items():
            assert np.array_equal(value, shifted[field]), field


def test_each_env_owns_its_model_so_shifts_do_not_compound():
    spec, dynamics = env_spec("Hopper-v5"), scenarios.get("dynamics")
    nominal = spec.make().unwrapped.model.body_mass.copy()
    a, b = dynamics.wrap(spec.make()), dynamics.wrap(spec.make())
    assert a.unwrapped.model is not b.unwrapped.model
    for env in (a, b):
        np.testing.assert_allclose(env.unwrapped.model.body_mass, 1.3 * nominal)


def test_gymnasium_rebuilds_a_shifted_mujoco_env_from_its_spec():
    env = Dynamics(gym.make("InvertedPendulum-v5"), scale={"actuator": 0.5})
    rebuilt = gym.make(env.spec)
    assert rebuilt.unwrapped.model is not env.unwrapped.model
    assert np.array_equal(rebuilt.unwrapped.model.actuator_gear, env.unwrapped.model.actuator_gear)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"scale": {"masspole": 2.0}}, r"no parameter 'masspole'.*mass, friction, gravity, actuator"),
    ({"mass": 1.3}, r"as scales.*scale=\{'mass': \.\.\.\}, not mass=\.\.\."),
    ({"scale": {"mass": 0.0}}, r"scale\['mass'\] must be a finite number > 0"),
    ({"scale": {"friction": -1.0}}, r"scale\['friction'\] must be a finite number >= 0"),
])
def test_bad_mujoco_parameters_name_the_fix(kwargs, match):
    with pytest.raises(PerturbationError, match=match):
        Dynamics(gym.make("InvertedPendulum-v5"), **kwargs)


def test_an_env_dynamics_cannot_shift_names_its_class_what_it_covers_and_the_fix():
    with pytest.raises(PerturbationError) as caught:
        Dynamics(CounterEnv())
    message = str(caught.value)
    assert message.startswith("Dynamics cannot shift CounterEnv")
    for known in (*CLASSIC_CONTROL, "any MuJoCo env (gymnasium.envs.mujoco.MujocoEnv)", "Fix:"):
        assert known in message


# ------------------------------------------------------------ check_applicable


class _Probe(CounterEnv):
    """Counts what is done to it: nothing may be reset or stepped by a check."""

    made = resets = closes = 0

    def __init__(self) -> None:
        super().__init__()
        type(self).made += 1

    def reset(self, **kwargs):
        type(self).resets += 1
        return super().reset(**kwargs)

    def close(self) -> None:
        type(self).closes += 1


def test_check_applicable_names_every_scenario_that_cannot_run_before_anything_runs():
    _Probe.made = _Probe.resets = _Probe.closes = 0
    chosen = scenarios.resolve(["jitter", "dynamics", "delay", "push"])
    with pytest.raises(PerturbationError) as caught:
        scenarios.check_applicable(chosen, _Probe)
    message = str(caught.value)
    assert message.startswith("scenario 'dynamics' cannot run on this env: Dynamics cannot "
                              "shift _Probe")
    assert "; scenario 'push' cannot run on this env: Push cannot push _Probe" in message
    assert "jitter" not in message and "delay" not in message
    assert (_Probe.made, _Probe.resets, _Probe.closes) == (4, 0, 4)  # one probe each, closed


def test_check_applicable_passes_every_scenario_that_wraps_a_mujoco_env():
    names = ["nominal", *scenarios.DEFAULT, *scenarios.EXTRAS]
    scenarios.check_applicable(scenarios.resolve(names), env_spec("InvertedPendulum-v5").make)


# --------------------------------------------------------------------------- push


def _force_after_each_step(env: gym.Env, steps: int) -> list[float]:
    env.reset(seed=0)
    zero = np.zeros(env.action_space.shape, env.action_space.dtype)
    out = []
    for _ in range(steps):
        env.step(zero)
        out.append(float(np.abs(env.unwrapped.data.xfrc_applied).sum()))
    return out


def test_a_push_holds_for_its_duration_then_clears():
    env = Push(gym.make("Hopper-v5"), duration=3, interval=10)
    on = [t for t, force in enumerate(_force_after_each_step(env, 25)) if force]
    assert on == [10, 11, 20, 21]  # set before steps 10-12 and 20-22, cleared after 12 and 22
    assert [t for t, _ in env.pushes] == [10, 20]


def test_a_push_is_strength_times_the_robot_weight_along_the_axis_it_can_move():
    env = Push(gym.make("Hopper-v5"), strength=0.4, duration=1, interval=2)
    _force_after_each_step(env, 10)
    model = env.unwrapped.model
    weight = model.body_mass.sum() * 9.81
    for _, force in env.pushes:  # Hopper is planar: pushes go along x, either way
        assert force[1] == force[2] == 0.0
        assert abs(force[0]) == pytest.approx(0.4 * weight)
    free = Push(gym.make("Humanoid-v5"), duration=1, interval=2)
    _force_after_each_step(free, 10)
    assert any(abs(force[1]) > 1.0 for _, force in free.pushes)  # free-floating: any heading


def test_a_push_on_a_named_body():
    env = Push(gym.make("Hopper-v5"), duration=2, interval=2, body="thigh")
    _force_after_each_step(env, 3)  # the push of steps 2-3 is on
    pushed = np.flatnonzero(np.abs(env.unwrapped.data.xfrc_applied).sum(axis=1)).tolist()
    assert pushed == [env.unwrapped.model.body("thigh").id] == [2]


def test_reset_clears_a_push_in_progress():
    env = Push(gym.make("Hopper-v5"), duration=5, interval=5)
    assert _force_after_each_step(env, 7)[-1] > 0
    env.reset(seed=1)
    assert not env.unwrapped.data.xfrc_applied.any() and env.pushes == []


def _push_directions(episode: int, seed: int = 0) -> list[np.ndarray]:
    env = Push(gym.make("Hopper-v5"), duration=1, interval=2)
    seed_perturbations(env, episode_seed_sequence(seed, episode, "push"))
    _force_after_each_step(env, 12)
    return [np.sign(force[0]) for _, force in env.pushes]


def test_pushes_replay_for_the_same_seed_and_episode_and_differ_across_episodes():
    first = _push_directions(episode=0)
    assert len(first) == 5 and _push_directions(episode=0) == first
    assert any(_push_directions(episode=e) != first for e in (1, 2, 3))


def test_a_push_changes_the_trajectory_only_from_its_first_step():
    nominal, pushed = gym.make("Hopper-v5"), Push(gym.make("Hopper-v5"), interval=20)
    assert np.array_equal(_qpos_after(pushed, 20), _qpos_after(nominal, 20))
    assert not np.allclose(_qpos_after(pushed, 30), _qpos_after(nominal, 30))


def _state_after(env: gym.Env, steps: int) -> np.ndarray:
    env.reset(seed=3)
    space = env.action_space
    action = 0 if isinstance(space, gym.spaces.Discrete) else np.zeros(space.shape, space.dtype)
    for _ in range(steps):
        env.step(action)
    return np.asarray(env.unwrapped.state, dtype=np.float64)


#: id -> the state elements a kick changes (velocities).
KICKED = {"CartPole-v1": [1, 3], "Pendulum-v1": [1], "Acrobot-v1": [2],
          "MountainCar-v0": [1], "MountainCarContinuous-v0": [1]}


@pytest.mark.parametrize("env_id", sorted(KICKED))
def test_classic_control_pushes_are_velocity_kicks(env_id):
    def push() -> gym.Env:
        return Push(gym.make(env_id), strength=0.5, duration=1, interval=4)

    before, nominal = _state_after(push(), 4), _state_after(gym.make(env_id), 4)
    assert np.array_equal(before, nominal)  # untouched until the first push
    kicked, nominal = _state_after(push(), 5), _state_after(gym.make(env_id), 5)
    changed = np.flatnonzero(~np.isclose(kicked, nominal, rtol=0, atol=1e-9)).tolist()
    assert set(KICKED[env_id]) <= set(changed)


def test_every_classic_control_env_dynamics_knows_can_be_pushed():
    assert set(_KICKS) == set(CLASSIC_CONTROL)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Push(gym.make("Hopper-v5"), body="tail"), r"no body 'tail'; its bodies: torso, thigh"),
    (lambda: Push(gym.make("CartPole-v1"), body="torso"), "CartPoleEnv is pushed as a whole"),
    (lambda: Push(gym.make("CartPole-v1"), duration=6, interval=5), "must be at most interval"),
    (lambda: Push(gym.make("CartPole-v1"), strength=-1), "strength must be a finite number >= 0"),
    (lambda: Push(gym.make("CartPole-v1"), interval=0), "interval must be an integer >= 1"),
    (lambda: Push(CounterEnv()), r"Push cannot push CounterEnv: .*CartPoleEnv.*any MuJoCo env "
                                 r"\(gymnasium.envs.mujoco.MujocoEnv\)\. Fix:"),
])
def test_push_rejects_what_it_cannot_do_and_names_the_fix(make, match):
    with pytest.raises(PerturbationError, match=match):
        make()


def test_gymnasium_rebuilds_push_from_its_spec():
    env = Push(gym.make("InvertedPendulum-v5"), strength=0.3, duration=2, interval=7)
    assert env.spec.additional_wrappers[-1].kwargs == {
        "strength": 0.3, "duration": 2, "interval": 7, "body": None}
    assert np.array_equal(_qpos_after(gym.make(env.spec), 30), _qpos_after(env, 30))


def test_a_push_audit_is_deterministic_and_batch_invariant():
    chosen = scenarios.resolve(["nominal", "push", "dynamics"])
    run = [run_episodes(_zeros(3), env_spec("Hopper-v5"), chosen, 3, seed=0, batch_size=b)
           for b in (1, 7, 7)]
    for other in run[1:]:
        for name in ("nominal", "push", "dynamics"):
            assert np.array_equal(other[name].returns, run[0][name].returns), name
            assert np.array_equal(other[name].env_steps, run[0][name].env_steps), name
    assert not np.array_equal(run[0]["push"].returns, run[0]["nominal"].returns)


# ----------------------------------------------------------------------- registry


@pytest.mark.parametrize("name", ["push", "dynamics"])
def test_the_registry_wraps_a_mujoco_env(name):
    scenario = scenarios.get(name)
    assert scenario.category == "stress" and name in scenarios.EXTRAS
    env = scenario.wrap(gym.make("InvertedPendulum-v5"))
    env.reset(seed=0)
    obs, reward, *_ = env.step(np.zeros(1, np.float32))
    assert np.isfinite(obs).all() and reward == 1.0


def test_push_defaults():
    assert dict(scenarios.get("push").params) == {"strength": 0.5, "duration": 5, "interval": 50}
