"""audit_runs(): every run a plain audit on the same seeds, the IQM across runs, its
interval and rating, the random reference run once, globs, records and errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from scipy import stats

from pytest_rlaudit import RunsResult, audit, audit_runs
from pytest_rlaudit.auditing import reference as reference_module
from pytest_rlaudit.errors import InvalidArgumentError, MisloadedAgentError
from pytest_rlaudit.stats import INCONCLUSIVE, rating

SCENARIOS = ["jitter", "speed_5x"]


def controller(gain: float):
    """A CartPole controller; the gain on the pole's angular velocity sets how well it
    copes with jitter (0.1 barely loses, 1.0 loses about 40%): runs of one "recipe"."""
    def act(obs: np.ndarray) -> np.ndarray:
        return (obs[:, 2] + gain * obs[:, 3] > 0).astype(np.int64)
    return act


GAINS = (0.1, 0.2, 0.3, 0.5, 0.7)
AGENTS = [controller(g) for g in GAINS]


@pytest.fixture(scope="module")
def runs() -> RunsResult:
    return audit_runs(AGENTS, "CartPole-v1", scenarios=SCENARIOS, episodes=4, seed=3)


def test_each_run_equals_a_plain_audit_of_it(runs):
    assert len(runs.runs) == 5
    for agent, result in zip(AGENTS, runs.runs, strict=True):
        alone = audit(agent, "CartPole-v1", scenarios=SCENARIOS, episodes=4, seed=3)
        got, want = result.to_dict(), alone.to_dict()
        got.pop("seconds"), want.pop("seconds")
        assert got == want  # returns, ratios, intervals, p-values, ratings, diagnoses


def test_every_run_plays_the_same_episode_seeds(runs):
    for result in runs.runs:
        assert result.nominal.seeds.tolist() == [3, 4, 5, 6]
        assert result["jitter"].seeds.tolist() == [3, 4, 5, 6]


def test_the_iqm_interval_and_rating_across_runs(runs):
    jitter = runs["jitter"]
    assert jitter.per_run.tolist() == [r["jitter"].ratio for r in runs.runs]
    assert jitter.iqm == stats.trim_mean(jitter.per_run, 0.25)
    assert jitter.ci[0] <= jitter.iqm <= jitter.ci[1]
    assert jitter.rating == rating(jitter.iqm, runs.thresholds)
    assert jitter.nominal.tolist() == [r.nominal.mean_return for r in runs.runs]
    assert jitter.nominal_iqm == stats.trim_mean(jitter.nominal, 0.25)
    assert jitter.per_run_ratings == tuple(r["jitter"].rating for r in runs.runs)
    assert jitter.profile([0.0, 2.0]).tolist() == [1.0, 0.0]
    assert [s.name for s in runs] == SCENARIOS and len(runs) == 2
    assert runs.stress is not None and runs.stress.scenario == "speed_5x"
    assert runs.stress.score == runs["speed_5x"].iqm


def test_the_same_inputs_give_the_same_numbers_bit_for_bit(runs):
    again = audit_runs(AGENTS, "CartPole-v1", scenarios=SCENARIOS, episodes=4, seed=3)
    a, b = runs.to_dict(), again.to_dict()
    for d in (a, b):
        d.pop("seconds")
        for r in d["runs"]:
            r.pop("seconds")
    assert a == b


def test_to_dict_is_json_with_the_documented_keys(runs):
    data = json.loads(json.dumps(runs.to_dict()))
    assert data["schema"] == 1 and data["kind"] == "runs"
    assert set(data) == {"schema", "kind", "name", "env", "seed", "episodes", "reference",
                         "confidence", "thresholds", "seconds", "labels", "deployment",
                         "stress", "scenarios", "runs"}
    jitter = data["scenarios"]["jitter"]
    assert set(jitter) == {"name", "category", "runs", "labels", "per_run", "per_run_ci",
                           "per_run_ratings", "nominal_means", "iqm", "ci_low", "ci_high",
                           "rating", "nominal_iqm"}
    assert jitter["runs"] == 5 and len(data["runs"]) == 5
    assert data["runs"][0]["scenarios"]["jitter"]["ratio"] == jitter["per_run"][0]


def test_str_is_a_table_per_scenario_and_per_run(runs):
    text = str(runs)
    assert text.splitlines()[0].startswith("runs audit of controller.<locals>.act on CartPole-v1: "
                                           "5 runs, 4 paired episodes per scenario each, seed 3")
    header = text.splitlines()[2].split()
    assert header[:4] == ["scenario", "category", "IQM", "ratio"]
    assert "ratio of each run:" in text
    assert "controller.<locals>.act [4]" in text  # the same name five times: numbered


def test_the_random_reference_is_run_once_for_all_runs(monkeypatch):
    calls = []
    real = reference_module.random_returns

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("pytest_rlaudit.auditing.engine.random_returns", counted)
    together = audit_runs(AGENTS[:3], "CartPole-v1", scenarios="delay", episodes=3,
                          reference="random")
    assert len(calls) == 1
    alone = audit(AGENTS[2], "CartPole-v1", scenarios="delay", episodes=3, reference="random")
    assert together.runs[2]["delay"].ratio == alone["delay"].ratio
    assert together.reference == alone.reference > 0


def test_a_glob_names_the_runs_sorted(tmp_path):
    examples = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples"  # the clone's
    for name in ("run_2.zip", "run_1.zip"):
        shutil.copy(examples / "ppo_cartpole.zip", tmp_path / name)
    result = audit_runs(str(tmp_path / "run_*.zip"), "CartPole-v1", scenarios="delay",
                        episodes=2)
    assert result.labels == (str(tmp_path / "run_1.zip"), str(tmp_path / "run_2.zip"))
    assert result.name == str(tmp_path / "run_*.zip")
    assert result["delay"].per_run[0] == result["delay"].per_run[1]  # copies: one agent


def test_a_path_that_exists_is_one_run_not_a_pattern(tmp_path):
    (tmp_path / "run[1]").mkdir()  # a folder whose name reads as a glob of run1
    (tmp_path / "run1").mkdir()
    with pytest.raises(InvalidArgumentError, match=r"got 1 \('.*run\[1\]' is an existing "
                                                   r"path, one run\)"):
        audit_runs(str(tmp_path / "run[1]"), "CartPole-v1")


def test_errors_name_the_cause_and_the_fix(tmp_path):
    with pytest.raises(InvalidArgumentError, match="no file or folder matches the agents "
                                                   r"pattern '.*nothing_\*'"):
        audit_runs(str(tmp_path / "nothing_*"), "CartPole-v1")
    with pytest.raises(InvalidArgumentError, match=r"at least 2 runs .*got 1; audit one agent "
                                                   r"with audit\(\)"):
        audit_runs([AGENTS[0]], "CartPole-v1")
    with pytest.raises(InvalidArgumentError, match="list of agents"):
        audit_runs(3, "CartPole-v1")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="episodes must be an integer >= 2"):
        audit_runs(AGENTS[:2], "CartPole-v1", episodes=1)
    with pytest.raises(KeyError, match="scenario 'delay' was not audited; this result has: "
                                       "jitter, speed_5x"):
        audit_runs(AGENTS[:2], "CartPole-v1", scenarios=SCENARIOS, episodes=2)["delay"]


def test_a_run_the_plain_audit_refuses_stops_the_runs_audit_naming_it():
    def always_left(obs: np.ndarray) -> np.ndarray:
        return np.zeros(len(obs), dtype=np.int64)

    with pytest.raises(MisloadedAgentError, match="does no better than random") as info:
        audit_runs([AGENTS[0], always_left], "CartPole-v1", scenarios="delay", episodes=3)
    notes = getattr(info.value, "__notes__", None)  # Python 3.11+
    assert notes is None or notes == [
        "(in run 1 of audit_runs: test_a_run_the_plain_audit_refuses_stops_the_runs_audit_"
        "naming_it.<locals>.always_left)"]


def test_an_inconclusive_run_makes_the_runs_rating_inconclusive(monkeypatch):
    from pytest_rlaudit.auditing import runs as runs_module

    result = audit_runs(AGENTS[:3], "CartPole-v1", scenarios="delay", episodes=2)
    first = result.runs[0]
    unclear = type(first["delay"])(**{**first["delay"].__dict__, "rating": INCONCLUSIVE})
    runs = list(result.runs)
    runs[0] = type(first)(**{**first.__dict__, "scenarios": {"delay": unclear}})
    settings = runs_module.AuditSettings(episodes=2)
    summary = runs_module.summarise_runs(runs, result.labels, settings)
    assert summary["delay"].rating == INCONCLUSIVE


def test_the_timeout_bounds_all_the_runs_together(monkeypatch):
    import time

    from pytest_rlaudit.auditing import runs as runs_module
    from pytest_rlaudit.errors import RolloutTimeoutError

    real = runs_module.run_audit
    seen = []

    def slower(*args, **kwargs):  # each run well within the limit, three of them not
        time.sleep(0.4)
        seen.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(runs_module, "run_audit", slower)
    with pytest.raises(RolloutTimeoutError):
        audit_runs(AGENTS[:3], "CartPole-v1", scenarios="delay", episodes=2, timeout=1.0)
    assert 1 <= len(seen) < 3
