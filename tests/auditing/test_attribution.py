"""attribute(): which observation group an observation scenario breaks an agent through,
checked on agents whose ground truth is known (a controller that reads only the pole, a
Dict agent that ignores a key, a pair of sensors that must agree)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit import Scenario, Schedule, attribute
from pytest_rlaudit.auditing.attribution import observation_only
from pytest_rlaudit.auditing.records import valid_attribution
from pytest_rlaudit.auditing.results import audit
from pytest_rlaudit.errors import PerturbationError
from pytest_rlaudit.world.observation_groups import observation_groups
from pytest_rlaudit.world.scenarios import get


def pole(obs: np.ndarray) -> np.ndarray:
    """Balances CartPole from the pole's angle and angular velocity alone."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(int)


NOISE = get("obs_noise").with_params(sigma=3.0)


def test_a_controller_reading_the_pole_is_attributed_to_the_pole():
    a = attribute(pole, "CartPole-v1", NOISE, episodes=8)
    assert a.groups.names == ["dim_0", "dim_1", "dim_2", "dim_3"]
    # noise on the cart's elements alone: the same episodes as nominal, exactly
    assert a.only["dim_0"].ratio == a.only["dim_1"].ratio == 1.0
    assert a.shapley["dim_0"].value == a.shapley["dim_1"].value == 0.0
    assert a.full.rating == "FAIL" and a.culprits == a.culprit_groups == ("dim_2", "dim_3")
    assert a.diagnosis.startswith("obs_noise breaks it through dim_2 and dim_3 together: ")
    # the shares split the ratio lost, and the full scenario is the audit's own, bit for bit
    assert sum(s.value for s in a.shapley.values()) == pytest.approx(1 - a.full.ratio)
    audited = audit(pole, "CartPole-v1", [NOISE], episodes=8).scenarios["obs_noise"]
    assert a.full.ratio == audited.ratio
    assert a.to_dict() == attribute(pole, "CartPole-v1", NOISE, episodes=8).to_dict()


def test_named_groups_give_one_contrast_each_with_family_intervals():
    a = attribute(pole, "CartPole-v1", NOISE, episodes=8,
                  groups={"cart": slice(0, 2), "pole": [2, 3]})
    assert a.groups.source == "groups= as given" and a.culprit_groups == ("pole",)
    assert a.only["cart"].ratio == 1.0 and a.all_but["pole"].ratio == 1.0
    assert a.all_but["cart"].ratio == a.only["pole"].ratio == a.full.ratio
    low, high = a.only["pole"].ci
    assert low <= a.only["pole"].ratio <= high < 1.0
    # only[cart] is all_but[pole]: a family of 2 runs, over which Holm's p-values (at least
    # the raw ones) and the intervals (at 97.5%, wider than the full scenario's) hold
    assert a.family == 2 and a.only["pole"].p_value >= a.full.p_value
    assert a.only["pole"].ci[0] <= a.full.ci[0] and a.only["pole"].ratio == a.full.ratio
    assert a.diagnosis.startswith("obs_noise breaks it through pole: pole alone keeps ")
    assert valid_attribution(json.loads(json.dumps(a.to_dict())))


def test_the_culprit_group_is_refined_to_the_element_that_breaks_it():
    a = attribute(pole, "CartPole-v1", get("delay").with_params(steps=3), episodes=8,
                  groups={"cart": slice(0, 2), "pole": [2, 3]})
    # a stale angular velocity (element 3, pole[1]) breaks it; a stale angle alone does not
    assert a.culprit_groups == ("pole",) and a.culprits == ("pole[1]",)
    assert a.culprits_ratio is not None and a.culprits_ratio < 0.8
    assert a.diagnosis.endswith(f"within them, pole[1] alone keeps {a.culprits_ratio:.0%}")
    assert a.confirmed in (True, False) and a.runs >= 5
    # the same delay as a schedule (its observation channel only): the same episodes
    late = Scenario.from_schedule(Schedule(delay=3), "late")
    b = attribute(pole, "CartPole-v1", late, episodes=8,
                  groups={"cart": slice(0, 2), "pole": [2, 3]})
    assert (b.only["pole"].ratio, b.culprits) == (a.only["pole"].ratio, a.culprits)

class Sensors(gym.ObservationWrapper):
    """CartPole seen as a Dict: the cart, the pole, and a second pole sensor."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        box = env.observation_space
        self.observation_space = gym.spaces.Dict({
            "cart": gym.spaces.Box(box.low[:2], box.high[:2]),
            "pole": gym.spaces.Box(box.low[2:], box.high[2:]),
            "pole_copy": gym.spaces.Box(box.low[2:], box.high[2:])})

    def observation(self, obs):
        return {"cart": obs[:2], "pole": obs[2:], "pole_copy": obs[2:].copy()}


def sensors() -> gym.Env:
    return Sensors(gym.make("CartPole-v1"))


def test_a_dict_agent_that_ignores_a_key_is_not_hurt_through_it():
    def agent(obs):
        return (obs["pole"][:, 0] + 0.5 * obs["pole"][:, 1] > 0).astype(int)

    a = attribute(agent, sensors, NOISE.with_params(scale="absolute", sigma=0.3), episodes=8)
    assert a.groups.source == "the Dict observation's keys"
    assert a.groups.names == ["cart", "pole", "pole_copy"]
    assert a.only["cart"].ratio == a.only["pole_copy"].ratio == 1.0
    assert a.culprits == ("pole",)


def test_two_sensors_that_must_agree_break_it_alone_and_not_together():
    def agent(obs):
        # a consistency check: sensors that disagree make it push left, blindly
        agree = np.abs(obs["pole"][:, 0] - obs["pole_copy"][:, 0]) < 1e-9
        return np.where(agree, (obs["pole"][:, 0] + 0.5 * obs["pole"][:, 1] > 0), 0).astype(int)

    a = attribute(agent, sensors, get("delay"), episodes=8,
                  groups={"pole": ["pole"], "pole_copy": ["pole_copy"]})
    assert a.only["pole"].rating == a.only["pole_copy"].rating == "FAIL"
    assert a.full.ratio > 0.8  # both delayed: they agree again
    assert a.interactions and "more than" in a.interactions[0]
    # the whole scenario does not fail, so there is nothing to find the culprits of
    assert a.culprits == () and "interaction(s) between groups" in a.diagnosis
    assert any(n.startswith("the groups leave out 1 of the observation's 3 elements (cart)")
               for n in a.notes)


def test_groups_that_leave_out_what_breaks_it_say_so_rather_than_blame_themselves():
    a = attribute(pole, "CartPole-v1", NOISE, episodes=8, groups={"x": [0], "v": [1]})
    assert a.full.rating == "FAIL"  # the scenario itself, on the whole observation
    assert a.only["x"].ratio == a.only["v"].ratio == 1.0
    assert a.shapley["x"].value == a.shapley["v"].value == 0.0  # they split no loss
    assert a.culprits == () and a.confirmed is None
    assert any("the elements the groups leave out carry it" in n for n in a.notes)
    assert a.diagnosis == (f"obs_noise breaks it (keeps {a.full.ratio:.0%}), but not through "
                           "the groups given: on all of them it keeps 100%; the elements they "
                           "leave out carry it")


def test_what_cannot_be_attributed_is_refused_with_the_reason():
    with pytest.raises(PerturbationError, match="does not act on observations only"):
        attribute(pole, "CartPole-v1", "speed_5x", episodes=2)
    with pytest.raises(PerturbationError, match="'a' and 'b' share element 1"):
        attribute(pole, "CartPole-v1", "delay", episodes=2, groups={"a": [0, 1], "b": [1]})
    with pytest.raises(PerturbationError, match="indices of the observation's 4 elements"):
        attribute(pole, "CartPole-v1", "delay", episodes=2, groups={"a": [0], "b": [7]})
    with pytest.raises(ValueError, match="method must be one of auto, exact, sampled"):
        attribute(pole, "CartPole-v1", "delay", episodes=2, method="fast")
    assert observation_only(get("delay")) and not observation_only(get("spike"))
    assert observation_only(get("obs_noise")) and not observation_only(get("jitter"))


def test_groups_come_from_the_mujoco_structure_and_a_flattened_dict():
    walker = gym.make("Walker2d-v5") if _has_mujoco() else None
    if walker is not None:
        g = observation_groups(walker)
        assert g.source == "the MuJoCo env's observation_structure"
        assert g.parts["qpos"] == tuple(range(8)) and g.parts["qvel"] == tuple(range(8, 17))
    exported = SimpleNamespace(metadata={"observation_names": "angle,angle,cart,rate"})
    g = observation_groups(gym.make("CartPole-v1"), policy=exported)
    assert g.source == "the ONNX file's observation_names" and g.covers
    assert g.parts == {"angle": (0, 1), "cart": (2,), "rate": (3,)}
    # mjlab names its terms, not their sizes: no mapping to elements, one group per element
    exported.metadata["observation_names"] = "base_lin_vel,joint_pos"
    assert observation_groups(gym.make("CartPole-v1"), policy=exported).names[0] == "dim_0"
    flat = gym.wrappers.FlattenObservation(sensors())
    g = observation_groups(flat)
    assert g.source == "the flattened Dict observation's keys"
    assert g.parts == {"cart": (0, 1), "pole": (2, 3), "pole_copy": (4, 5)}


def _has_mujoco() -> bool:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return False
    return True


def test_sampled_shapley_and_delta_debugging_agree_with_the_exact_search():
    exact = attribute(pole, "CartPole-v1", NOISE, episodes=8, method="exact")
    sampled = attribute(pole, "CartPole-v1", NOISE, episodes=8, method="sampled")
    assert sampled.shapley_method == "sampled" and exact.shapley_method == "exact"
    assert set(sampled.culprits) == set(exact.culprits)
    for g in ("dim_0", "dim_1"):
        assert sampled.shapley[g].value == 0.0
    assert sampled.shapley["dim_3"].ci[0] <= exact.shapley["dim_3"].value \
        <= sampled.shapley["dim_3"].ci[1]


def test_a_lerobot_dataset_names_the_groups_by_its_state_names(tmp_path):
    meta = tmp_path / "robot" / "meta"
    meta.mkdir(parents=True)
    state = {"dtype": "float32", "shape": [4],
             "names": {"motors": ["cart", "cart", "pole", "pole"]}}  # LeRobot's dict form
    info = {"codebase_version": "v3.0", "features": {"observation.state": state}}
    (meta / "info.json").write_text(json.dumps(info))
    a = attribute(pole, "CartPole-v1", NOISE, episodes=8, groups=str(tmp_path / "robot"))
    assert a.groups.source == "the LeRobot dataset's feature names"
    assert a.groups.parts == {"cart": (0, 1), "pole": (2, 3)} and a.culprit_groups == ("pole",)
    state["names"] = ["x", "theta"]
    (meta / "info.json").write_text(json.dumps(info))
    with pytest.raises(PerturbationError, match="names 2 elements of its 'observation.state' "
                                                "feature, and the observation has 4"):
        observation_groups(gym.make("CartPole-v1"), tmp_path / "robot")
