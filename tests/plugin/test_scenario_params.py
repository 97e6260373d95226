"""Scenario parameters checked when the marker is read (issue 42, point 6): a value out
of range, of the wrong type, unknown, or one that makes the scenario a no-op is a
collection error naming the marker, the scenario, the parameter and its range, before any
episode runs; the registered scenarios and the severity presets stay valid."""

from __future__ import annotations

import pytest
from audit_records import INTERRUPTED, collection_errors

from pytest_rlaudit.errors import PerturbationError
from pytest_rlaudit.world import scenarios as registry

#: (marker, what its collection error says): one module each, all in one run.
CASES = [
    ('@pytest.mark.rl_scenario("delay", steps=-1)',
     ["@pytest.mark.rl_scenario", "scenario 'delay'", "steps must be an integer >= 0, got -1"]),
    ('@pytest.mark.rl_scenario("delay", steps=0)',
     ["@pytest.mark.rl_scenario", "scenario 'delay' with steps=0 leaves the env unperturbed",
      "(default: steps=1)"]),
    ('@pytest.mark.rl_scenario("delay", steps="2")',
     ["scenario 'delay'", "steps must be an integer >= 0, got '2'"]),
    ('@pytest.mark.rl_scenario("jitter", base=0)',
     ["scenario 'jitter'", "base must be an integer >= 1, got 0"]),
    ('@pytest.mark.rl_scenario("jitter", base=1, jitter=0)',
     ["scenario 'jitter' with base=1, jitter=0 leaves the env unperturbed"]),
    ('@pytest.mark.rl_scenario("obs_noise", sigma=-0.1)',
     ["scenario 'obs_noise'", "sigma must be a finite number >= 0, got -0.1"]),
    ('@pytest.mark.rl_scenario("obs_noise", sigma=0)',
     ["scenario 'obs_noise' with sigma=0 leaves the env unperturbed", "(default: sigma=0.1)"]),
    ('@pytest.mark.rl_scenario("spike", k=1.5)',
     ["scenario 'spike'", "k must be an integer >= 1, got 1.5"]),
    ('@pytest.mark.rl_scenario("spike", k=1)',
     ["scenario 'spike' with k=1 leaves the env unperturbed"]),
    ('@pytest.mark.rl_scenario("dropped_obs", p=1.0)',
     ["scenario 'dropped_obs'", "p must be a finite number in [0, 1), got 1.0"]),
    ('@pytest.mark.rl_scenario("sticky_actions", p=0)',
     ["scenario 'sticky_actions' with p=0 leaves the env unperturbed"]),
    ('@pytest.mark.rl_scenario("speed_5x", k=0)',
     ["scenario 'speed_5x'", "k must be an integer >= 1, got 0"]),
    ('@pytest.mark.rl_scenario("push", interval=0)',
     ["scenario 'push'", "interval must be an integer >= 1, got 0"]),
    ('@pytest.mark.rl_scenario("delay", stepz=2)',
     ["scenario 'delay' has no parameter 'stepz'", "its parameters are: steps"]),
]

_RUN: dict[str, tuple[int, str]] = {}


def _bad_run(pytester: pytest.Pytester) -> tuple[int, str]:
    """One run of a module per case (each with a plain test beside it), made once."""
    if not _RUN:
        pytester.makeini("[pytest]\n")  # not this repo's (rl_audit = true)
        pytester.makepyfile(**{f"test_bad_{i}": (
            f"import pytest\n\n{marker}\ndef test_x(rl_audit):\n    rl_audit()\n\n"
            "def test_plain():\n    pass\n") for i, (marker, _) in enumerate(CASES)})
        result = pytester.runpytest("--rl-audit", "--rl-agent=random", "--rl-env=CartPole-v1",
                                    "--rl-episodes=2")
        _RUN["run"] = (result.ret, "\n".join(result.outlines + result.errlines))
    return _RUN["run"]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[m for m, _ in CASES])
def test_a_bad_scenario_parameter_is_a_collection_error(pytester: pytest.Pytester, case: int):
    ret, out = _bad_run(pytester)
    assert ret == INTERRUPTED  # collection errors: no episode ran
    errors = collection_errors(out)
    assert sorted(errors) == sorted(f"test_bad_{i}.py" for i in range(len(CASES)))
    section = errors[f"test_bad_{case}.py"]
    for fragment in CASES[case][1]:
        assert fragment in section, (fragment, section)
    assert "Traceback" not in section and "INTERNALERROR" not in out


@pytest.mark.parametrize("name, params", [("delay", {"steps": -1}), ("jitter", {"base": 0}),
                                          ("obs_noise", {"sigma": float("nan")}),
                                          ("action_noise", {"sigma": "0.1"})])
def test_the_api_refuses_out_of_range_values_where_the_scenario_is_built(name, params):
    with pytest.raises(PerturbationError, match=f"scenario '{name}': "):
        registry.get(name).with_params(**params)


def test_a_wrapper_and_a_scenario_word_a_range_alike():
    import gymnasium as gym

    from pytest_rlaudit.perturbations import ObservationDelay

    with pytest.raises(PerturbationError) as wrapper:
        ObservationDelay(gym.make("CartPole-v1"), steps=-1)
    with pytest.raises(PerturbationError) as scenario:
        registry.get("delay").with_params(steps=-1)
    assert str(wrapper.value).split(": ", 1)[1] == str(scenario.value).split(": ", 1)[1]


@pytest.mark.parametrize("severity", registry.SEVERITIES)
def test_the_presets_and_registered_scenarios_are_valid_and_perturb(severity: str):
    chosen = registry.resolve(list(registry.preset(severity)))
    assert all(s.noop is None for s in chosen)
    assert all(registry.get(n).noop is None for n in registry.names())
