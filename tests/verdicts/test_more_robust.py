"""probability_of_improvement(a, b, scenario) and assert_more_robust: the Mann-Whitney
estimate over per-run ratios, its interval, the verdict modes, messages and errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_rlaudit import (
    RobustnessError,
    assert_more_robust,
    audit_runs,
    probability_of_improvement,
)
from pytest_rlaudit.errors import InvalidArgumentError
from pytest_rlaudit.stats.runs import improvement_ci
from pytest_rlaudit.stats.runs import probability_of_improvement as mann_whitney


def controller(gain: float):
    def act(obs: np.ndarray) -> np.ndarray:
        return (obs[:, 2] + gain * obs[:, 3] > 0).astype(np.int64)
    return act


def recipe(gains, name, **kwargs):
    kwargs = {"scenarios": "jitter", "episodes": 3, **kwargs}
    return audit_runs([controller(g) for g in gains], "CartPole-v1", name=name, **kwargs)


@pytest.fixture(scope="module")
def light():  # jitter ratios 1.0, 1.0, 0.82, 0.88, 0.93
    return recipe((0.1, 0.15, 0.2, 0.25, 0.3), "light")


@pytest.fixture(scope="module")
def heavy():  # jitter ratios 0.61, 0.42, 0.34, 0.63, 0.63
    return recipe((0.5, 0.6, 0.8, 0.7, 1.0), "heavy")


@pytest.fixture(scope="module")
def mixed():  # two light runs beside three heavy ones
    return recipe((0.1, 0.2, 0.5, 0.6, 0.9), "mixed")


def test_the_estimate_is_mann_whitney_over_the_runs_ratios(light, heavy, mixed):
    found = probability_of_improvement(light, heavy, "jitter")
    assert found.point == 1.0 and found.runs == (5, 5)
    assert found.ci == improvement_ci(light["jitter"].per_run, heavy["jitter"].per_run)
    assert found.ci[0] == pytest.approx(0.6427, abs=1e-4) and found.ci[1] == 1.0
    found = probability_of_improvement(mixed, heavy, "jitter")
    assert found.point == mann_whitney(mixed["jitter"].per_run, heavy["jitter"].per_run)
    assert found.ci[0] <= found.point <= found.ci[1]
    assert probability_of_improvement(mixed, heavy, "jitter", confidence=0.5).ci[0] > found.ci[0]
    assert probability_of_improvement(mixed, heavy, "jitter") == found  # seeded: the same
    assert json.loads(json.dumps(found.to_dict()))["a"]["per_run"] == mixed["jitter"].per_run.tolist()
    assert str(found).startswith("P(mixed more robust than heavy under jitter) = ")


def test_assert_more_robust_passes_a_confident_improvement(light, heavy):
    assert assert_more_robust(light, heavy, "jitter").point == 1.0


def test_its_failure_message_stands_on_its_own(light, heavy):
    with pytest.raises(RobustnessError) as info:
        assert_more_robust(heavy, light, "jitter")
    lines = str(info.value).splitlines()
    assert lines[0] == (
        "heavy is not shown more robust than light under jitter: P(a run of it keeps more of "
        "its return than a run of light) = 0.000 (95% CI 0.000 to 0.357); required the "
        "interval's low end above 0.5 ('confident' mode)")
    assert lines[1].startswith("  heavy: IQM ratio ") and "over 5 runs [" in lines[1]
    assert lines[2].startswith("  light: IQM ratio ") and "nominal IQM return 500.0" in lines[2]
    assert lines[3] == "  episodes: 3 paired per run (env seeds 0-2) on CartPole-v1, reference 0.0"
    assert lines[4].startswith("  to pass: heavy's runs must keep more of their return")
    assert info.value.result.point == 0.0


def test_confident_is_the_default_and_point_judges_the_estimate(mixed, heavy):
    found = probability_of_improvement(mixed, heavy, "jitter")
    assert found.point > 0.5 and found.ci[0] <= 0.5  # likely better, not shown
    with pytest.raises(RobustnessError, match=r"more runs of each recipe narrow it \(5 and 5 "
                                              r"now\), or mode='point'"):
        assert_more_robust(mixed, heavy, "jitter")
    assert assert_more_robust(mixed, heavy, "jitter", mode="point") == found
    assert assert_more_robust(mixed, heavy, "jitter", mode="not_worse") == found
    with pytest.raises(RobustnessError, match="the estimate above 0.9"):
        assert_more_robust(mixed, heavy, "jitter", mode="point", min_probability=0.9)


def test_recipes_audited_differently_are_refused_naming_what_differs(light):
    other = recipe((0.1, 0.2), "other seed", seed=1, episodes=4)
    with pytest.raises(InvalidArgumentError, match=r"not audited alike \(seed 0 vs 1; episodes 3 "
                                                   r"vs 4\).*same seed, episodes and reference"):
        probability_of_improvement(light, other, "jitter")
    with pytest.raises(InvalidArgumentError, match="b must be a RunsResult .* got AuditResult"):
        probability_of_improvement(light, light.runs[0], "jitter")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="scenario 'delay' was not audited"):
        probability_of_improvement(light, light, "delay")


def test_bad_arguments(light, heavy):
    with pytest.raises(ValueError, match="unknown verdict mode 'sure'"):
        assert_more_robust(light, heavy, "jitter", mode="sure")
    with pytest.raises(InvalidArgumentError, match="min_probability must be"):
        assert_more_robust(light, heavy, "jitter", min_probability=1.0)


def test_recipes_audited_under_other_scenario_parameters_are_not_compared(light):
    # the same five runs, once under the default jitter and once under preset("severe")'s
    # (base 3, spread 2): "more robust" would be the milder perturbation's doing (P = 1.000)
    from pytest_rlaudit.world.scenarios import preset

    (severe,) = [s for s in preset("severe") if s.name == "jitter"]
    harsher = recipe((0.1, 0.15, 0.2, 0.25, 0.3), "light under severe jitter", scenarios=[severe])
    for call in (probability_of_improvement, assert_more_robust):
        with pytest.raises(InvalidArgumentError) as info:
            call(light, harsher, "jitter")
        message = str(info.value)
        assert ("light ran scenario 'jitter' with {'base': 2, 'jitter': 1}, light under severe "
                "jitter with {'base': 3, 'jitter': 2}") in message
        assert "audit both with audit_runs under the same scenario" in message
