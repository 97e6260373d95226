"""audit(): paired per-scenario returns, ratios, references, serialisation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_rlaudit import AuditResult, audit, scenarios
from pytest_rlaudit.errors import UnknownScenarioError


@pytest.fixture(scope="module")
def result():
    from conftest import balance

    return audit(balance, "CartPole-v1", episodes=4, seed=1)


def test_default_scenarios_are_the_deployment_and_stress_suites(result):
    assert isinstance(result, AuditResult)
    assert list(result.scenarios) == [*scenarios.DEPLOYMENT, *scenarios.STRESS]
    assert result.nominal.returns.shape == (4,)
    assert result["jitter"].seeds.tolist() == [1, 2, 3, 4] == result.nominal.seeds.tolist()


def test_ratio_is_the_mean_return_ratio(result):
    for r in result:
        assert r.ratio == pytest.approx(np.mean(r.returns) / np.mean(result.nominal.returns))


def test_to_dict_is_versioned_json_with_plain_types(result):
    data = result.to_dict()
    assert data["schema"] == 1
    text = json.dumps(data)  # raises on numpy scalars
    back = json.loads(text)
    assert back["scenarios"]["delay"]["returns"] == result["delay"].returns.tolist()
    assert back["scenarios"]["spike"]["params"] == {"start": 20, "duration": 20, "k": 5}

    def plain(x):
        if isinstance(x, dict):
            return all(isinstance(k, str) and plain(v) for k, v in x.items())
        if isinstance(x, list):
            return all(plain(v) for v in x)
        return x is None or type(x) in (str, int, float, bool)

    assert plain(data)


def test_str_is_a_readable_table(result):
    text = str(result)
    for name in ("nominal", *scenarios.DEFAULT):
        assert name in text
    assert "balance on CartPole-v1" in text and "ratio" in text


def test_same_seed_same_numbers_and_unknown_names_are_errors(controller):
    a = audit(controller, "CartPole-v1", scenarios=["obs_noise"], episodes=3, seed=4).to_dict()
    b = audit(controller, "CartPole-v1", scenarios=["obs_noise"], episodes=3, seed=4).to_dict()
    a.pop("seconds"), b.pop("seconds")
    assert a == b
    with pytest.raises(UnknownScenarioError, match="Known scenarios"):
        audit(controller, "CartPole-v1", scenarios=["lag"], episodes=2)
    with pytest.raises(KeyError, match="was not audited"):
        audit(controller, "CartPole-v1", scenarios=["delay"], episodes=2)["spike"]


@pytest.mark.parametrize("episodes", [1, 0, 2.5, True])
def test_fewer_than_two_episodes_is_an_error(controller, episodes):
    with pytest.raises(ValueError, match="episodes must be an integer >= 2"):
        audit(controller, "CartPole-v1", episodes=episodes)


def test_pendulum_needs_a_reference_and_random_gives_a_finite_ratio():
    def pendulum_controller(obs):  # energy-agnostic PD swing-down-avoiding controller
        cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
        return np.clip(-(6.0 * np.arctan2(sin, cos) + 1.0 * vel), -2, 2)[:, None]

    with pytest.raises(ValueError, match=r"reference='random'"):
        audit(pendulum_controller, "Pendulum-v1", scenarios=["obs_noise"], episodes=3)
    r = audit(pendulum_controller, "Pendulum-v1", scenarios=["obs_noise"], episodes=3,
              reference="random")
    assert r.reference < r.nominal.mean_return < 0
    assert np.isfinite(r["obs_noise"].ratio)
    expected = (r["obs_noise"].mean_return - r.reference) / (r.nominal.mean_return - r.reference)
    assert r["obs_noise"].ratio == pytest.approx(expected)


@pytest.mark.parametrize("reference", ["randm", float("nan"), None])
def test_bad_references_are_errors(controller, reference):
    with pytest.raises(ValueError, match="reference must be"):
        audit(controller, "CartPole-v1", episodes=2, reference=reference)


def test_numeric_reference(controller):
    r = audit(controller, "CartPole-v1", scenarios=["speed_5x"], episodes=3, reference=100)
    expected = (r["speed_5x"].mean_return - 100) / (r.nominal.mean_return - 100)
    assert r["speed_5x"].ratio == pytest.approx(expected)
