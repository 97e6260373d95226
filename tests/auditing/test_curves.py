"""Tolerance curves: ``tolerance()`` and its ladders.

The exact answers come from a toy env whose return under a delay is known by hand; the
ladders and the determinism are checked on CartPole with ``cartpole_agents.robust`` (the
``balance`` controller of conftest.py).
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from cartpole_agents import robust
from gymnasium import spaces

from pytest_rlaudit import Schedule, ToleranceCurve, audit, scenarios, tolerance
from pytest_rlaudit.auditing.ladders import LADDERS, ladder, tolerance_sentence
from pytest_rlaudit.errors import UnknownScenarioError
from pytest_rlaudit.perturbations import ObservationNoise

HORIZON, SLACK = 20, 2


class LagEnv(gym.Env):
    """obs = [t], the env steps since reset; the action is the agent's reading of t.

    A step pays 1 when the reading the env acts on lags the true count by at most
    ``SLACK`` steps. Under a delay of d steps (of the observation, or of the executed
    action) the lag at step t is min(t, d): every step pays while d <= SLACK, and only the
    first SLACK + 1 steps beyond. So the ratio is 1 for d <= 2 and 3/20 for d >= 3, in
    every episode alike.
    """

    observation_space = spaces.Box(0.0, float(HORIZON), (1,), dtype=np.float32)
    action_space = spaces.Discrete(HORIZON + 1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action: Any):
        reward = 1.0 if 0 <= self.t - int(action) <= SLACK else 0.0
        self.t += 1
        return np.array([self.t], dtype=np.float32), reward, self.t >= HORIZON, False, {}


def reader(obs: np.ndarray) -> np.ndarray:
    return np.asarray(obs)[:, 0].astype(np.int64)


BROKEN = (SLACK + 1) / HORIZON  # the ratio once the delay exceeds the slack


@pytest.mark.parametrize("scenario", ["delay", "action_delay"])
def test_the_curve_tolerates_the_slack_and_breaks_just_beyond_it(scenario):
    curve = tolerance(reader, LagEnv, scenario, values=[0, 1, 2, 3, 4, 6], episodes=3)
    assert isinstance(curve, ToleranceCurve) and curve.param == "steps"
    assert [v for v, _, _ in curve.curve] == [0, 1, 2, 3, 4, 6]
    assert [r for _, r, _ in curve.curve] == pytest.approx([1, 1, 1, BROKEN, BROKEN, BROKEN])
    # every episode alike: each interval is its point
    assert all(ci == pytest.approx((r, r)) for _, r, ci in curve.curve)
    assert (curve.tolerated, curve.breaks_at) == (2, 3)
    assert str(curve).splitlines()[0] == f"{scenario}: tolerates 2 steps, breaks at 3"


@pytest.mark.parametrize(("values", "min_ratio", "tolerated", "breaks_at"), [
    ([3, 4], 0.8, None, 3),          # nothing tolerated
    ([0, 1, 2], 0.8, 2, None),       # nothing breaks
    ([1, 3, 8], BROKEN, 8, None),    # at the line is tolerated (ratio >= min_ratio)
    ([1, 3, 8], 1.0, 1, 3),
])
def test_tolerated_and_breaks_at_follow_min_ratio(values, min_ratio, tolerated, breaks_at):
    curve = tolerance(reader, LagEnv, "delay", values=values, min_ratio=min_ratio, episodes=2)
    assert (curve.tolerated, curve.breaks_at) == (tolerated, breaks_at)


def test_the_values_share_one_audit_and_its_nominal_episodes():
    curve = tolerance(robust, "CartPole-v1", "delay", values=[1, 2, 4], episodes=3)
    # one audit: one nominal, each value its own scenario (a name keys its random streams)
    assert list(curve.result.scenarios) == ["delay", "delay[steps=2]", "delay[steps=4]"]
    assert curve.at(2).params["steps"] == 2 and curve.at(4).name == "delay[steps=4]"
    assert len(curve.result.nominal.returns) == 3
    with pytest.raises(KeyError, match="steps=3 was not tested; tested: 1, 2, 4"):
        curve.at(3)


def test_the_scenarios_own_value_repeats_the_single_point_audit():
    curve = tolerance(robust, "CartPole-v1", "dropped_obs", values=[0.05, 0.1, 0.3],
                      episodes=4, seed=3)
    single = audit(robust, "CartPole-v1", "dropped_obs", episodes=4, seed=3)["dropped_obs"]
    point = curve.at(0.1)
    assert point.name == "dropped_obs" and curve.default == 0.1
    np.testing.assert_array_equal(point.returns, single.returns)
    assert (point.ratio, point.ci) == (single.ratio, single.ci)


def test_default_ladders_are_used_and_the_curve_is_deterministic():
    first = tolerance(robust, "CartPole-v1", "sticky_actions", episodes=3, seed=1)
    assert first.param == "p" and first.values == LADDERS["sticky_actions"][1]
    again = tolerance(robust, "CartPole-v1", "sticky_actions", episodes=3, seed=1)
    assert again.curve == first.curve and str(again) == str(first)
    other = tolerance(robust, "CartPole-v1", "sticky_actions", episodes=3, seed=2)
    assert other.curve != first.curve  # the seed reaches the episodes


def test_other_parameters_and_custom_scenarios_can_be_varied():
    curve = tolerance(robust, "CartPole-v1", "spike", param="duration", values=[1, 5],
                      episodes=2)
    assert (curve.param, curve.default) == ("duration", 20)
    assert list(curve.result.scenarios) == ["spike[duration=1]", "spike[duration=5]"]
    custom = scenarios.Scenario("imu", "custom", ObservationNoise, {"sigma": 0.1})
    curve = tolerance(robust, "CartPole-v1", custom, param="sigma", values=[0.1, 0.5],
                      episodes=2)
    assert list(curve.result.scenarios) == ["imu", "imu[sigma=0.5]"]


def test_to_dict_is_json_and_says_what_the_reports_need():
    curve = tolerance(reader, LagEnv, "delay", values=[1, 3], episodes=2)
    d = curve.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d == {"param": "steps", "default": 1, "min_ratio": 0.8, "tolerated": 1,
                 "breaks_at": 3, "curve": [[1, 1.0, 1.0, 1.0],
                                           [3, pytest.approx(BROKEN)] + [pytest.approx(BROKEN)] * 2]}


def test_the_printed_curve_marks_each_value_and_the_scenarios_own():
    lines = str(tolerance(reader, LagEnv, "delay", values=[1, 3], episodes=2)).splitlines()
    assert lines[0] == "delay: tolerates 1 step, breaks at 3"
    assert lines[1] == "  reader on LagEnv: ratio >= 0.8 tolerated; 2 paired episodes per value, seed 0"
    assert lines[2].split() == ["steps", "ratio", "95%", "CI"]
    assert lines[3].split() == ["1", "1.000", "1.000", "to", "1.000", "tolerated", "(the",
                                "scenario's", "own", "value)"]
    assert lines[4].split() == ["3", "0.150", "0.150", "to", "0.150", "breaks"]


# ----------------------------------------------------------------------------- ladders


@pytest.mark.parametrize("name", list(LADDERS))
def test_each_default_ladder_is_increasing_typed_and_holds_the_default(name):
    param, values = LADDERS[name]
    default = scenarios.get(name).params[param]
    assert list(values) == sorted(set(values)), "strictly increasing"
    assert default in values
    assert all(type(v) is type(default) for v in values)
    assert ladder(scenarios.get(name)).values == values


def test_every_registered_perturbation_scenario_with_a_numeric_parameter_has_a_ladder():
    numeric = [n for n in scenarios.names() if n != "nominal" and any(
        isinstance(v, (int, float)) and not isinstance(v, bool)
        for v in scenarios.get(n).params.values())]
    assert sorted(numeric) == sorted(LADDERS)


def test_sentences_read_alike_everywhere():
    assert tolerance_sentence("delay", "steps", 1, 2) == "delay: tolerates 1 step, breaks at 2"
    assert tolerance_sentence("obs_noise", "sigma", 0.05, 0.1) == (
        "obs_noise: tolerates sigma 0.05, breaks at 0.1")
    assert "not monotone" in tolerance_sentence("jitter", "jitter", 3, 2)


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(("scenario", "kwargs", "match"), [
    ("delay", {"param": "sigma"},
     "scenario 'delay' sets no parameter 'sigma'; its parameters are steps"),
    ("delay", {"param": 3}, "param must be the name of a parameter of 'delay'"),
    ("obs_noise", {"param": "scale", "values": [1, 2]},
     "parameter 'scale' is 'relative', not a number: a tolerance curve varies a numeric "
     "parameter \\(sigma\\)"),
    ("delay", {"values": []}, "values is empty: give at least one value"),
    ("delay", {"values": 3}, "values must be a list of numbers, mildest first"),
    ("delay", {"values": "1, 2"}, "values must be a list of numbers"),
    ("delay", {"values": [2, 1]}, "values must increase strictly, mildest first: 1 comes after 2"),
    ("delay", {"values": [1, 1, 2]}, "must increase strictly"),
    ("delay", {"values": [1, 1.5]}, "'delay''s parameter 'steps' takes integers, got 1.5"),
    ("obs_noise", {"values": [0.1, float("nan")]}, "values must be finite numbers"),
    ("obs_noise", {"values": [0.1, True]}, "values must be finite numbers"),
    ("spike", {"param": "start"}, "no default values for 'spike''s parameter 'start': pass values="),
    ("nominal", {}, "the nominal scenario has nothing to vary"),
    (Schedule(speed=3), {}, "a Schedule has no parameter to vary"),
    ("delay", {"min_ratio": 0}, "min_ratio must be a finite number in \\(0, 2\\]"),
])
def test_bad_arguments_are_value_errors_that_name_the_fix(scenario, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tolerance(robust, "CartPole-v1", scenario, episodes=2, **kwargs)


def test_a_scenario_without_a_ladder_asks_for_param_and_values():
    custom = scenarios.Scenario("imu", "custom", ObservationNoise, {"sigma": 0.1})
    with pytest.raises(ValueError, match="scenario 'imu' has no default tolerance parameter: "
                                         "pass param= \\(one of sigma\\) and values="):
        tolerance(robust, "CartPole-v1", custom)
    with pytest.raises(ValueError, match="no default values for 'imu''s parameter 'sigma'"):
        tolerance(robust, "CartPole-v1", custom, param="sigma")


def test_an_unknown_scenario_and_out_of_range_values_say_so():
    with pytest.raises(UnknownScenarioError, match="Did you mean 'delay'"):
        tolerance(robust, "CartPole-v1", "dealy")
    with pytest.raises(ValueError, match="p must be a finite number in \\[0, 1\\)"):
        tolerance(robust, "CartPole-v1", "dropped_obs", values=[0.5, 1.0], episodes=2)


def test_the_docs_ladder_table_is_the_ladders():
    """The docs show LADDERS as a table: one source, so a changed ladder fails here."""
    import re
    from pathlib import Path

    from pytest_rlaudit.auditing.ladders import LADDERS

    page = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "tolerance-curves.md"
    readme = page.read_text(encoding="utf-8")
    table = readme[readme.index("| scenario | param | default values |"):].split("\n\n")[0]
    shown = {}
    for row in table.splitlines()[2:]:
        names, param, values = (cell.strip() for cell in row.strip("|").split("|"))
        for name in re.findall(r"`([a-z_0-9]+)`", names):
            shown[name] = (re.findall(r"`([a-z_]+)`", param)[0],
                           tuple(float(v) for v in values.split(", ")))
    assert shown == {name: (param, tuple(map(float, values)))
                     for name, (param, values) in LADDERS.items()}
