"""The audit record: one list of fields, one validator, one builder."""

from __future__ import annotations

import json

import pytest

from pytest_rlaudit import check_robust
from pytest_rlaudit.auditing.records import (
    FIELDS,
    REQUIRED,
    RUNS_KEYS,
    RecordError,
    record_of,
    validate,
)


@pytest.fixture(scope="module")
def record(controller):
    check = check_robust(controller, "CartPole-v1", "jitter", min_ratio=0.5, episodes=3)
    return record_of("t.py::test_x[jitter]", check, {"min_ratio": 0.5, "min_rating": None,
                                                     "mode": "point"})


def test_the_builder_writes_every_field_the_plugin_does_not_add_later(record):
    added_by_the_plugin = {"order", "outcome", "checks", "hypothesis"}
    assert set(record) == set(FIELDS) - added_by_the_plugin - set(RUNS_KEYS)
    assert set(REQUIRED) <= set(record)
    assert validate(json.loads(json.dumps(record))) == record  # JSON-safe and valid


@pytest.mark.parametrize(("field", "value", "match"), [
    ("agent", None, "lacks a valid 'agent'"),
    ("ratio", "0.9", "lacks a valid 'ratio'"),
    ("passed", 1, "lacks a valid 'passed'"),
    ("episodes", True, "lacks a valid 'episodes'"),
    ("p_value", "small", "lacks a valid 'p_value'"),
    ("returns", [1.0], "different lengths"),
    ("returns", [float("nan")] * 3, "non-finite"),
    ("attribution", {"kind": "attribution", "diagnosis": "x"}, "an 'attribution' that is not"),
])
def test_validate_names_what_is_wrong(record, field, value, match):
    with pytest.raises(RecordError, match=match):
        validate({**record, field: value})


def test_optional_fields_may_be_missing_but_required_ones_may_not(record):
    minimal = {k: record[k] for k in REQUIRED}
    assert validate(minimal) is minimal
    for key in REQUIRED:
        with pytest.raises(RecordError, match=repr(key)):
            validate({k: v for k, v in minimal.items() if k != key})
    with pytest.raises(RecordError, match="is not an object"):
        validate([minimal])


def test_a_record_carries_the_rating_scale_the_check_used(controller):
    from pytest_rlaudit.stats import Thresholds

    strict = Thresholds(pass_=0.99, mild=0.9, degraded=0.6)
    check = check_robust(controller, "CartPole-v1", "delay", episodes=3, thresholds=strict)
    assert record_of("t", check, None)["thresholds"] == {"pass": 0.99, "mild": 0.9, "degraded": 0.6}


def test_the_record_keeps_the_mean_episode_lengths_the_mix_weights_come_from(controller):
    import numpy as np

    from pytest_rlaudit.auditing.diagnosis import mix_weights
    from pytest_rlaudit.reports.rows import mix_fix

    check = check_robust(controller, "CartPole-v1", "speed_5x", episodes=3)
    rec = record_of("t.py::test_x[speed_5x]", check, None)
    assert rec["mean_env_steps"] == pytest.approx(np.mean(check.result.env_steps))
    assert rec["nominal_mean_env_steps"] == pytest.approx(np.mean(check.nominal.env_steps))
    weights = mix_weights(rec["nominal_mean_env_steps"], [rec["mean_env_steps"]])
    line, _ = mix_fix([{**rec, "rating": "FAIL"}])
    assert line == ('ScenarioMix(gym.make("CartPole-v1"), ["nominal", "speed_5x"]'
                    + (f", weights={weights}" if weights[1] != 1 else "") + ")")
