"""The one audit engine: every verb asks it, so they agree; its settings validate once; a
shared cache runs an agent's nominal and reference episodes once; the record's schema is
derived from its one definition."""

from __future__ import annotations

import typing

import numpy as np
import pytest
from cartpole_agents import fragile

import pytest_rlaudit.auditing.settings as settings_module
from pytest_rlaudit import audit, check_robust, scenarios, tolerance
from pytest_rlaudit.auditing.engine import Engine
from pytest_rlaudit.auditing.records import FIELDS, REQUIRED, Record, record_of, validate
from pytest_rlaudit.auditing.settings import AuditSettings
from pytest_rlaudit.errors import InvalidArgumentError


@pytest.mark.parametrize("name", ["spike", "obs_noise"])  # obs_noise: calibrated on nominal
def test_every_verb_measures_a_scenario_alike(name):
    audited = audit(fragile, "CartPole-v1", [name], episodes=6, seed=3)[name]
    checked = check_robust(fragile, "CartPole-v1", name, episodes=6, seed=3).result
    own = scenarios.get(name)
    param = {"spike": "k", "obs_noise": "sigma"}[name]
    curve = tolerance(fragile, "CartPole-v1", name, param=param, values=[own.params[param]],
                      episodes=6, seed=3)
    point = curve.at(own.params[param])
    for r in (checked, point):
        assert np.array_equal(r.returns, audited.returns)
        assert (r.ratio, r.ci, r.p_value, r.rating) == (
            audited.ratio, audited.ci, audited.p_value, audited.rating)
    assert checked.diagnosis == audited.diagnosis == point.diagnosis
    if name == "spike":  # it breaks the agent: diagnosed alike
        assert checked.rating in ("DEGRADED", "FAIL") and checked.diagnosis is not None


@pytest.mark.parametrize(("changes", "match"), [
    ({"episodes": 1}, "episodes must be an integer >= 2"),
    ({"seed": -1}, "seed"),
    ({"confidence": 1.5}, r"confidence must be a finite number in \(0, 1\)"),
    ({"reference": "median"}, "reference must be a number or 'random'"),
    ({"workers": "many"}, "workers"),
    ({"backend": "dask"}, "backend must be one of 'local', 'ray'"),
    ({"timeout": 0}, r"timeout must be a finite number in \(0, "),
    ({"timeout": 1e10}, r"timeout must be a finite number in \(0, 3.1536e\+07\]"),
    ({"call_timeout": -1}, r"call_timeout must be a finite number in \(0, 3.1536e\+07\] "
                           r"\(seconds one env step, reset or policy call may take"),
    ({"call_timeout": 1e10}, r"call_timeout .*got 10000000000.0: pass at most a year of "
                             r"seconds, or 0 or None for no bound"),
])
def test_settings_refuse_a_bad_value_naming_it(changes, match):
    with pytest.raises(ValueError, match=match):
        AuditSettings(**changes)
    with pytest.raises(ValueError, match=match):  # a copy is validated again
        AuditSettings().but(**changes)


def test_every_verb_refuses_a_bad_setting_in_the_same_words():
    words = set()
    for call in (lambda: audit(fragile, "CartPole-v1", episodes=2, confidence=2.0),
                 lambda: check_robust(fragile, "CartPole-v1", "spike", episodes=2, confidence=2.0),
                 lambda: tolerance(fragile, "CartPole-v1", "spike", episodes=2, confidence=2.0)):
        with pytest.raises(InvalidArgumentError) as caught:
            call()
        words.add(str(caught.value))
    assert len(words) == 1


def test_episode_seeds_are_the_audit_seed_plus_the_index():
    s = AuditSettings(seed=10)
    assert s.episode_seeds(range(3, 6)).tolist() == [13, 14, 15]
    batch = Engine(fragile, "CartPole-v1", s.but(episodes=2)).nominal(range(3, 5))
    assert batch.seeds.tolist() == [13, 14]


def test_a_shared_cache_runs_the_nominal_and_reference_episodes_once(monkeypatch):
    calls: list[tuple[str, ...]] = []
    run = settings_module.run_episodes

    def counting(policy, env, chosen, *args, **kwargs):
        calls.append((policy.name, *(s.name for s in chosen)))
        return run(policy, env, chosen, *args, **kwargs)

    monkeypatch.setattr(settings_module, "run_episodes", counting)
    cache: dict = {}
    first = check_robust(fragile, "CartPole-v1", "spike", episodes=4, cache=cache)
    second = check_robust(fragile, "CartPole-v1", "delay", episodes=4, cache=cache)
    assert calls.count(("fragile", "nominal")) == 1
    assert calls.count(("random", "nominal")) == 1
    assert [c for c in calls if c[0] == "fragile" and c[1] != "nominal"] == [
        ("fragile", "spike"), ("fragile", "delay")]
    # the cache changes no number
    alone = check_robust(fragile, "CartPole-v1", "delay", episodes=4)
    assert second.result.ratio == alone.result.ratio and first.passed is not None


def test_the_record_schema_is_derived_from_the_record_type():
    hints = typing.get_type_hints(Record)
    assert list(FIELDS) == list(hints)
    assert set(REQUIRED) == {"nodeid", "agent", "env", "scenario", "seeds", "returns",
                             "nominal_returns", "ratio"}
    assert FIELDS["p_value"][0] == (int, float, type(None))  # a JSON number or null
    check = check_robust(fragile, "CartPole-v1", "spike", min_rating="MILD", episodes=4)
    rec = record_of("t::spike", check, check.gate)
    assert set(rec) <= set(FIELDS) and validate(rec) is rec
    assert rec["gate"] == {"min_ratio": None, "min_rating": "MILD", "mode": "point"}
