"""audit(): paired per-scenario returns, ratios, references, serialisation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_rlaudit import AuditResult, audit, scenarios
from pytest_rlaudit.errors import UnknownScenarioError


@pytest.fixture(scope="module")
def result(controller):
    return audit(controller, "CartPole-v1", episodes=4, seed=1)


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


# ------------------------------------------------------------------- statistics


def test_each_scenario_has_interval_p_value_rating_and_diagnosis(result):
    from pytest_rlaudit.stats import degradation_p_value, rating

    for r in result:
        low, high = r.ci
        assert low <= r.ratio <= high
        assert 0.0 < r.p_value <= 1.0
        assert r.rating == rating(r.ratio)
        assert (r.diagnosis is None) == (r.rating == "PASS")
        raw = degradation_p_value(result.nominal.returns, r.returns)
        assert r.p_value >= raw - 1e-12 or r.p_value == 1.0  # Holm only raises p-values


def test_aggregates_are_the_min_ratio_of_each_category(result):
    from pytest_rlaudit.stats import rating

    deployment = [result[n].ratio for n in scenarios.DEPLOYMENT]
    score, rated = result.deployment
    assert score == min(deployment)
    assert rated == rating(score)
    assert result.deployment.scenario == scenarios.DEPLOYMENT[int(np.argmin(deployment))]
    assert result.stress.score == result["speed_5x"].ratio
    only_stress = audit(lambda o: (o @ np.array([0.02, 0, 1, 0.2]) > 0).astype(np.int64), "CartPole-v1",
                        scenarios=["speed_5x"], episodes=2)
    assert only_stress.deployment is None


def test_to_dict_carries_the_statistics(result):
    data = json.loads(json.dumps(result.to_dict()))
    jitter = data["scenarios"]["jitter"]
    assert {"ratio", "ci_low", "ci_high", "p_value", "rating", "diagnosis"} <= set(jitter)
    assert data["thresholds"] == {"pass": 0.95, "mild": 0.8, "degraded": 0.5}
    assert data["deployment"]["rating"] == result.deployment.rating
    assert data["confidence"] == 0.95 and data["nominal"]["p_value"] is None


def test_thresholds_change_every_rating_alike(controller):
    from pytest_rlaudit.stats import Thresholds

    lenient = Thresholds(pass_=0.5, mild=0.3, degraded=0.1)
    r = audit(controller, "CartPole-v1", scenarios=["spike", "speed_5x"], episodes=4,
              thresholds=lenient)
    assert all(s.rating == "PASS" and s.diagnosis is None for s in r)
    assert r.stress.rating == "PASS"


def test_statistics_do_not_depend_on_the_batch_size(controller):
    a = audit(controller, "CartPole-v1", episodes=5, seed=2, batch_size=1).to_dict()
    b = audit(controller, "CartPole-v1", episodes=5, seed=2, batch_size=64).to_dict()
    a.pop("seconds"), b.pop("seconds")
    assert a == b


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.2])
def test_confidence_outside_0_1_is_an_error(controller, confidence):
    with pytest.raises(ValueError, match=r"confidence must be a finite number in \(0, 1\)"):
        audit(controller, "CartPole-v1", episodes=2, confidence=confidence)


def test_str_shows_interval_rating_aggregates_and_diagnoses():
    fragile = audit(lambda o: (o[:, 2] + 0.5 * o[:, 3] > 0).astype(np.int64), "CartPole-v1",
                    scenarios=["spike", "delay"], episodes=6)
    text = str(fragile)
    assert "95% CI" in text and "FAIL" in text and "deployment FAIL" in text
    assert "spike: spike (speed goes 1 -> 5 for 20 steps at step 20) keeps" in text and "Likely cause:" in text and "Fix: train with" in text
