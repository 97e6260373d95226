"""Trust helpers: tolerances, paired comparisons, baseline files, assert_no_regression,
assert_deterministic and assert_no_policy_collapse."""

from __future__ import annotations

import json
import random

import gymnasium as gym
import numpy as np
import pytest
from cartpole_agents import W, fragile, robust
from gymnasium import spaces

from pytest_rlaudit import (
    RobustnessError,
    assert_deterministic,
    assert_no_policy_collapse,
    assert_no_regression,
    audit,
    scenarios,
)
from pytest_rlaudit.auditing.baselines import (
    BASELINE_SCHEMA,
    baseline_document,
    check_writable,
    load_baseline,
    write_baseline,
)
from pytest_rlaudit.auditing.comparison import compare_audits, compare_records, compare_scenario
from pytest_rlaudit.auditing.tolerances import Tolerance, parse_tolerance
from pytest_rlaudit.errors import BaselineError, RolloutError
from pytest_rlaudit.stats import ratio_change_ci

# ------------------------------------------------------------------ tolerances


@pytest.mark.parametrize(("text", "parsed"), [
    ("return:5%", Tolerance("return", 0.05, True)),
    ("return:10", Tolerance("return", 10.0, False)),
    ("ratio:0.05", Tolerance("ratio", 0.05, False)),
    (" ratio:2.5% ", Tolerance("ratio", 0.025, True)),
])
def test_tolerances_parse_and_print_back(text, parsed):
    assert parse_tolerance(text) == parsed
    assert parse_tolerance(str(parsed)) == parsed


@pytest.mark.parametrize(("text", "match"), [
    ("reward:5%", "METRIC return or ratio"), ("return", "METRIC:AMOUNT"),
    ("return:five", "not a number"), ("ratio:-0.1", ">= 0"), ("ratio:nan", ">= 0"),
])
def test_bad_tolerances_are_clear_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_tolerance(text)


def test_tolerances_measure_drops_relative_or_absolute():
    assert parse_tolerance("return:5%").exceeded(100.0, 94.9)
    assert not parse_tolerance("return:5%").exceeded(100.0, 95.1)
    assert not parse_tolerance("return:5%").exceeded(100.0, 200.0)  # a rise is no drop
    assert parse_tolerance("return:5%").exceeded(-100.0, -106.0)  # negative returns too
    assert parse_tolerance("ratio:0.05").exceeded(0.9, 0.84)
    assert not parse_tolerance("ratio:0.05").exceeded(0.9, 0.86)


# ----------------------------------------------------------- paired comparisons


def _episodes(seed: int = 0, n: int = 20) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return np.full(n, 500.0), rng.uniform(100, 500, n)


TOLERANCES = [parse_tolerance("return:5%"), parse_tolerance("ratio:0.05")]


@pytest.mark.parametrize(("factor", "status"), [
    (1.0, "same"), (0.8, "regressed"), (0.98, "worse"), (1.02, "improved")])
def test_each_change_is_judged_on_significance_and_tolerance(factor, status):
    nominal, perturbed = _episodes()
    rows = compare_scenario("t::x[spike]", "spike", perturbed, perturbed * factor,
                            base_nominal=nominal, nominal=nominal, tolerances=TOLERANCES)
    assert [r.metric for r in rows] == ["return", "ratio"]
    assert {r.status for r in rows} == {status}
    if status == "regressed":
        assert rows[0].exceeded == ("return:5%",) and rows[1].exceeded == ("ratio:0.05",)
        assert rows[1].ci[1] < 0 and rows[0].p_value < 0.05


def test_a_large_drop_on_noise_alone_is_not_significant():
    # Two episodes cannot make a one-sided paired test significant at 0.05 (p >= 1/4).
    rows = compare_scenario("k", "spike", [500.0, 500.0], [100.0, 120.0],
                            tolerances=TOLERANCES)
    assert rows[0].status == "same" and rows[0].p_value >= 0.25


def test_a_comparison_says_when_too_few_episodes_make_it_blind():
    nominal, perturbed = _episodes(n=4)
    # every return halves (the ratio stays): a drop no 4-episode sign-flip test can detect
    blind = compare_records([_record("t::x", "spike", perturbed, nominal)],
                            [_record("t::x", "spike", perturbed * 0.5, nominal * 0.5)], TOLERANCES)
    assert blind.decision == "inconclusive"  # never "ship": return:5% could not fail
    assert [c.status for c in blind.changes if c.metric == "return"] == ["same", "same"]
    assert blind.power_note == ("with 4 paired episodes no mean-return drop can be significant "
                                "over 2 comparisons at alpha 0.05; use at least 6 episodes")
    assert blind.summary() == f"inconclusive: return:5% could not fail: {blind.power_note}"
    nominal, perturbed = _episodes(n=10)
    assert compare_records([_record("t::x", "spike", perturbed, nominal)],
                           [_record("t::x", "spike", perturbed, nominal)]).power_note is None


def test_a_comparison_without_tolerances_only_reports_and_lists_its_significant_drops():
    nominal, perturbed = _episodes()
    base = [_record("t::a[spike]", "spike", perturbed, nominal)]
    now = [_record("t::a[spike]", "spike", perturbed * 0.1, nominal)]
    c = compare_records(base, now)  # no tolerance: nothing gates
    assert [ch.status for ch in c.drops] == ["worse", "worse"] and not c.regressions
    assert c.decision == "report" and json.loads(json.dumps(c.to_dict()))["decision"] == "report"
    assert c.summary() == ("report only: nothing gated (no --rl-compare-fail); "
                           "2 significant drop(s): t::a[spike] (return), "
                           "t::a[spike] (ratio)")
    assert "ship" not in c.summary()
    same = compare_records(base, base)
    assert same.decision == "report" and same.summary().endswith(
        "no significant drop in 3 comparisons")


def test_ratio_change_intervals_are_reproducible_and_point_for_identical_runs():
    nominal, perturbed = _episodes()
    assert ratio_change_ci(nominal, perturbed, nominal, perturbed) == (0.0, 0.0)
    a = ratio_change_ci(nominal, perturbed, nominal, perturbed * 0.9, seed=3)
    assert a == ratio_change_ci(nominal, perturbed, nominal, perturbed * 0.9, seed=3)
    assert a[0] < a[1] < 0
    with pytest.raises(ValueError, match="same length"):
        ratio_change_ci(nominal, perturbed, nominal[:5], perturbed[:5])


def _record(nodeid: str, scenario: str, returns, nominal, seeds=None, env="CartPole-v1",
            agent="ppo"):
    seeds = list(range(len(returns))) if seeds is None else seeds
    return {"nodeid": nodeid, "agent": agent, "env": env, "scenario": scenario, "params": {},
            "seeds": seeds, "returns": list(map(float, returns)),
            "nominal_returns": list(map(float, nominal)), "reference_score": 0.0, "seed": 0,
            "ratio": float(np.mean(returns) / np.mean(nominal))}


def test_records_are_matched_by_node_id_and_nominal_is_compared_once_per_agent():
    nominal, perturbed = _episodes()
    base = [_record("t::a[spike]", "spike", perturbed, nominal),
            _record("t::a[delay]", "delay", nominal, nominal),
            _record("t::gone", "jitter", nominal, nominal)]
    now = [_record("t::a[spike]", "spike", perturbed * 0.7, nominal * 0.9),
           _record("t::a[delay]", "delay", nominal, nominal * 0.9),
           _record("t::new", "jitter", nominal, nominal)]
    c = compare_records(base, now, TOLERANCES)
    keys = [(ch.key, ch.metric) for ch in c.changes]
    assert keys[0] == ("nominal (ppo on CartPole-v1)", "return")
    assert keys.count(("nominal (ppo on CartPole-v1)", "return")) == 1
    assert c.new == ["t::new"] and c.missing == ["t::gone"]
    assert {ch.key for ch in c.regressions} == {"nominal (ppo on CartPole-v1)", "t::a[spike]"}
    assert [(ch.key, ch.metric) for ch in c.improvements] == [("t::a[delay]", "ratio")]
    assert c.decision == "hold" and "hold: " in c.summary() and "t::a[spike] (return)" in c.summary()
    assert json.loads(json.dumps(c.to_dict()))["decision"] == "hold"


@pytest.mark.parametrize(("change", "match"), [
    ({"seeds": list(range(1, 21))}, "the same episode seeds"),
    ({"env": "Acrobot-v1"}, "different envs"),
    ({"scenario": "jitter"}, "the baseline ran scenario 'spike' with {}, this run scenario 'jitter'"),
])
def test_results_that_cannot_be_paired_are_mismatches_and_hold(change, match):
    nominal, perturbed = _episodes()
    base = [_record("t::x", "spike", perturbed, nominal)]
    now = [{**_record("t::x", "spike", perturbed, nominal), **change}]
    c = compare_records(base, now, TOLERANCES)
    assert len(c.mismatches) == 1 and match in c.mismatches[0] and c.decision == "hold"
    assert not c.changes


def test_a_baseline_of_other_scenario_parameters_is_not_paired_and_says_both_and_the_fix():
    nominal, perturbed = _episodes()
    base = [{**_record("t::x", "jitter", perturbed, nominal), "params": {"base": 2, "jitter": 1}}]
    severe = [{**_record("t::x", "jitter", perturbed, nominal), "params": {"base": 3, "jitter": 2}}]
    c = compare_records(base, severe, TOLERANCES)
    assert not c.changes and c.decision == "hold"  # never SHIP on two perturbations
    (mismatch,) = c.mismatches
    assert mismatch.startswith("t::x: the baseline ran scenario 'jitter' with {'base': 2, "
                               "'jitter': 1}, this run with {'base': 3, 'jitter': 2}; ")
    assert "--rl-severity" in mismatch and "--rl-save" in mismatch


def test_audits_of_other_scenario_parameters_are_not_compared_scenario_by_scenario():
    from pytest_rlaudit import audit
    from pytest_rlaudit.world.scenarios import preset

    (severe,) = [s for s in preset("severe") if s.name == "jitter"]
    base = audit(robust, "CartPole-v1", ["jitter", "delay"], episodes=4)
    cand = audit(robust, "CartPole-v1", [severe, "delay"], episodes=4)
    c = compare_audits(base, cand, TOLERANCES)
    assert [ch.scenario for ch in c.changes if ch.metric == "ratio"] == ["delay"]
    (mismatch,) = c.mismatches
    assert mismatch.startswith("jitter: the baseline ran scenario 'jitter' with {'base': 2, "
                               "'jitter': 1}, the candidate with {'base': 3, 'jitter': 2}")
    assert c.decision == "hold" and "ship" not in c.summary()


def _runs_record(nodeid: str, runs: int, episodes: int):
    """A runs record (--rl-agent a glob): every run's episodes, run after run."""
    nominal, perturbed = _episodes(n=episodes)
    rec = _record(nodeid, "spike", np.tile(perturbed, runs), np.tile(nominal, runs),
                  seeds=list(range(episodes)) * runs, agent="runs/*.zip")
    return {**rec, "runs": runs, "labels": [f"runs/CartPole-v1_{i}.zip" for i in range(runs)],
            "per_run": [0.6] * runs, "nominal_means": [500.0] * runs, "nominal_iqm": 500.0}


def test_a_runs_baseline_against_one_agent_says_it_holds_runs_and_gives_one_fix():
    nominal, perturbed = _episodes(n=10)
    base = [_runs_record("rl-audit::spike", 2, 10)]
    one = [_record("rl-audit::spike", "spike", perturbed, nominal)]
    (mismatch,) = compare_records(base, one, TOLERANCES).mismatches
    assert mismatch == (
        "rl-audit::spike: the baseline holds 2 training runs of runs/*.zip (10 episodes each, "
        "env seeds 0-9), this run audits one agent, ppo (10 episodes with env seeds 0-9); a "
        "runs baseline pairs only with runs: compare runs with runs: pass --rl-agent a glob "
        "matching the baseline's runs (runs/CartPole-v1_0.zip, runs/CartPole-v1_1.zip), or "
        "save a new baseline with --rl-save from a run of this one agent")
    assert "--rl-episodes" not in mismatch  # no episode count to contradict the options'
    (mismatch,) = compare_records(one, base, TOLERANCES).mismatches
    assert "a baseline of one agent pairs only with one agent" in mismatch
    (mismatch,) = compare_records(base, [_runs_record("rl-audit::spike", 3, 10)]).mismatches
    assert "the baseline holds 2 training runs" in mismatch and "this run holds 3" in mismatch
    (mismatch,) = compare_records(base, [_runs_record("rl-audit::spike", 2, 8)]).mismatches
    assert "(10 episodes each, env seeds 0-9), this run holds 2 training runs of " in mismatch
    assert "(8 episodes each, env seeds 0-7)" in mismatch and "--rl-episodes (the episodes of each" in mismatch
    assert not compare_records(base, [_runs_record("rl-audit::spike", 2, 10)]).mismatches


# ---------------------------------------------------------------- baseline files


def _doc(records=None, **kwargs):
    nominal, perturbed = _episodes()
    return baseline_document(records if records is not None else
                             [_record("t::x", "spike", perturbed, nominal)],
                             version="0.1.0", options={"rl_seed": 0}, **kwargs)


def test_a_baseline_round_trips_and_carries_machine_and_options(tmp_path):
    path = write_baseline(_doc(), tmp_path / "sub" / "base.json")
    doc = load_baseline(path)
    assert doc["schema"] == BASELINE_SCHEMA and doc["complete"] and doc["options"]["rl_seed"] == 0
    assert doc["machine"]["python"] and "numpy" in doc["machine"]["packages"]
    assert doc["results"][0]["returns"] == _doc()["results"][0]["returns"]
    assert [p.name for p in path.parent.iterdir()] == ["base.json"]  # no temporary left


def test_a_partial_baseline_says_so():
    doc = _doc(missing=["t::y"], incomplete=None)
    assert doc["complete"] is False and doc["missing"] == ["t::y"]
    assert _doc(incomplete="the run stopped early")["complete"] is False


@pytest.mark.parametrize(("content", "match"), [
    ('{"kind": "pytest-rlaudit baseline", "schema": 1, "results": [', "not valid JSON"),
    ('{"schema": 1, "results": []}', "not a pytest-rlaudit baseline"),
    ('{"kind": "pytest-rlaudit baseline", "schema": 99, "results": []}', "schema 99"),
    ('{"kind": "pytest-rlaudit baseline", "schema": 1}', "no results list"),
    ('{"kind": "pytest-rlaudit baseline", "schema": 1, "results": [{"nodeid": "t"}]}',
     "lacks a valid 'agent'"),
])
def test_corrupt_baselines_are_clear_errors(tmp_path, content, match):
    path = tmp_path / "base.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=match):
        load_baseline(path)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("returns", [1.0], "different lengths"),
    ("returns", None, "lacks a valid 'returns'"),
])
def test_baselines_with_broken_results_are_refused(tmp_path, field, value, match):
    doc = _doc()
    doc["results"][0][field] = value
    path = tmp_path / "base.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match=match):
        load_baseline(path)


def test_non_finite_returns_in_a_baseline_are_refused(tmp_path):
    doc = _doc()
    doc["results"][0]["returns"][3] = float("nan")
    path = tmp_path / "base.json"
    path.write_text(json.dumps(doc))  # json writes NaN, which json reads back
    with pytest.raises(BaselineError, match="non-finite"):
        load_baseline(path)


def test_a_missing_baseline_says_how_to_make_one(tmp_path):
    with pytest.raises(BaselineError, match="--rl-save"):
        load_baseline(tmp_path / "nope.json")


def test_a_file_that_is_not_a_baseline_is_never_overwritten(tmp_path):
    precious = tmp_path / "notes.json"
    precious.write_text("my notes")
    with pytest.raises(BaselineError, match="not overwritten"):
        check_writable(precious)
    check_writable(write_baseline(_doc(), tmp_path / "ok.json"))  # a baseline may be replaced
    check_writable(tmp_path / "new.json")
    with pytest.raises(BaselineError, match="is a directory"):
        check_writable(tmp_path)


# ---------------------------------------------------------- assert_no_regression


def test_the_same_agent_ships():
    comparison = assert_no_regression(robust, robust, "CartPole-v1", scenarios=["spike"],
                                      episodes=8)
    assert comparison.decision == "ship" and not comparison.regressions
    assert {c.status for c in comparison.changes} == {"same"}


def test_a_degraded_candidate_is_held_with_the_numbers():
    with pytest.raises(RobustnessError) as info:
        assert_no_regression(fragile, robust, "CartPole-v1", scenarios=["spike", "delay"],
                             episodes=10)
    text = str(info.value)
    assert text.startswith("hold: ")
    assert "REGRESSED spike: mean return 439.1 -> 216.9" in text and "beyond return:5%" in text
    assert "reproduce: assert_no_regression(candidate, baseline, 'CartPole-v1'" in text
    assert info.value.comparison.decision == "hold"


def test_a_better_candidate_ships_and_reports_the_improvement():
    comparison = assert_no_regression(robust, fragile, "CartPole-v1", scenarios=["spike"],
                                      episodes=10)
    assert comparison.decision == "ship"
    assert {(c.scenario, c.metric) for c in comparison.improvements} == {
        ("spike", "return"), ("spike", "ratio")}


def test_a_drop_within_the_margin_ships():
    comparison = assert_no_regression(fragile, robust, "CartPole-v1", scenarios=["spike"],
                                      episodes=10, margin=0.6)
    assert comparison.decision == "ship"
    assert [c.status for c in comparison.changes if c.scenario == "spike"] == ["worse", "worse"]


def _never(obs):
    raise AssertionError("audited")


def test_too_few_episodes_for_a_meaningful_gate_is_an_error_before_any_audit():
    with pytest.raises(ValueError, match="with 3 paired episodes no mean-return drop can be "
                       "significant over 2 comparisons at alpha 0.05; use at least 6 episodes"):
        assert_no_regression(_never, _never, "CartPole-v1", scenarios=["delay"], episodes=3)
    # the default suite: nominal's row and one per scenario
    rows = 1 + len(list(scenarios.resolve(None)))
    with pytest.raises(ValueError, match=f"over {rows} comparisons at alpha 0.01"):
        assert_no_regression(_never, _never, "CartPole-v1", episodes=7, alpha=0.01)


def test_the_early_error_is_what_the_comparison_of_the_audits_says():
    kwargs = dict(scenarios=["delay", "jitter"], episodes=5)
    with pytest.raises(ValueError) as info:
        assert_no_regression(robust, robust, "CartPole-v1", **kwargs)
    tolerances = (Tolerance("return", 0.05, True), Tolerance("ratio", 0.05, False))
    audits = [audit(robust, "CartPole-v1", **kwargs) for _ in range(2)]
    comparison = compare_audits(*audits, tolerances)
    assert comparison.decision == "inconclusive"
    assert str(info.value) == f"assert_no_regression: {comparison.inconclusive}"
    # one episode more and the gate can fail: it runs, and ships
    assert assert_no_regression(robust, robust, "CartPole-v1", scenarios=["delay", "jitter"],
                                episodes=6).decision == "ship"


@pytest.mark.parametrize("bad, match", [(dict(margin=1.5), "margin"), (dict(alpha=0), "alpha"),
                                        (dict(episodes=1), "episodes")])
def test_bad_margins_alphas_and_episodes_are_clear_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        assert_no_regression(_never, _never, "CartPole-v1", **bad)


# ----------------------------------------------------------- assert_deterministic


def test_a_deterministic_agent_passes_on_scenarios_with_noise_too():
    returns = assert_deterministic(robust, "CartPole-v1", episodes=2,
                                   scenarios=["jitter", "obs_noise"])
    assert set(returns) == {"nominal", "jitter", "obs_noise"}


def test_an_agent_with_global_randomness_is_caught_at_the_first_differing_step():
    def noisy(obs):
        return ((np.asarray(obs) @ W + np.random.normal(0, 0.05, len(obs))) > 0).astype(np.int64)

    with pytest.raises(RobustnessError, match=r"(?s)running the same episodes again changed "
                       r"scenario 'nominal', episode 0 \(env seed 0\) at agent step \d+: "
                       r"(observation|action) .*global generator"):
        assert_deterministic(noisy, "CartPole-v1", episodes=2)


def test_an_agent_whose_output_depends_on_the_batch_is_caught():
    def batch_dependent(obs):
        obs = np.asarray(obs)
        return ((obs @ W) - 1e-3 * (len(obs) > 1) > 0).astype(np.int64)

    with pytest.raises(RobustnessError, match=r"batch size 1\) changed .* at agent step"):
        assert_deterministic(batch_dependent, "CartPole-v1", episodes=2)


class _GlobalRandomEnv(gym.Env):
    """Draws its dynamics from Python's global generator (the bug to catch)."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), random.random(), self.t >= 10, False, {}


def test_an_env_with_global_randomness_is_caught_by_its_rewards():
    with pytest.raises(RobustnessError, match=r"episode 0 \(env seed 0\): return \S+ vs \S+ "
                       r"\(first differing reward at env step 0\)"):
        assert_deterministic(lambda o: np.zeros(len(o), np.int64), _GlobalRandomEnv, episodes=2)


# ------------------------------------------------------- assert_no_policy_collapse


def test_a_varied_policy_passes_and_reports_its_action_statistics():
    stats = assert_no_policy_collapse(robust, "CartPole-v1", episodes=2, min_entropy=0.9)
    assert stats.distinct == 2 and 0.9 < stats.entropy <= 1.0 and stats.decisions == 1000


def test_a_constant_discrete_policy_has_collapsed():
    with pytest.raises(RobustnessError, match=r"policy collapse on CartPole-v1 \(nominal\): "
                       r"1 distinct action\(s\), the floor is 2.* action 0 was chosen 100%"):
        assert_no_policy_collapse(lambda o: np.zeros(len(o), np.int64), "CartPole-v1")


def test_an_entropy_floor_is_checked_too():
    # Two actions carry at most 1 bit: a floor above it must fail, with the number.
    with pytest.raises(RobustnessError, match=r"action entropy (0\.9\d+|1\.000) bits, the floor is 1.01"):
        assert_no_policy_collapse(robust, "CartPole-v1", episodes=2, min_entropy=1.01)


def test_box_actions_are_binned():
    with pytest.raises(RobustnessError, match=r"action \(binned\) 0.2 was chosen 100%"):
        assert_no_policy_collapse(lambda o: np.full((len(o), 1), 0.3), "Pendulum-v1", episodes=2)
    stats = assert_no_policy_collapse(lambda o: np.clip(-2 * o[:, 2:3], -2, 2), "Pendulum-v1",
                                      episodes=2)
    assert stats.distinct >= 3


def test_non_finite_actions_are_reported_as_such():
    with pytest.raises(RolloutError, match=r"action \[nan\].*non-finite.*episode 0"):
        assert_no_policy_collapse(lambda o: np.full((len(o), 1), np.nan), "Pendulum-v1",
                                  episodes=2)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"min_distinct": 0}, "min_distinct"), ({"min_entropy": -1}, "min_entropy"),
    ({"bins": 1}, "bins")])
def test_bad_collapse_arguments_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        assert_no_policy_collapse(robust, "CartPole-v1", **kwargs)


def test_a_spread_calibrated_on_each_run_does_not_stop_the_pairing():
    nominal, perturbed = _episodes()
    noise = {"sigma": 0.1, "scale": "relative"}
    base = [{**_record("t::x", "obs_noise", perturbed, nominal),
             "params": {**noise, "spread": [0.02, 0.14, 0.006, 0.2]}}]
    other_agent = [{**_record("t::x", "obs_noise", perturbed, nominal),
                    "params": {**noise, "spread": [0.35, 0.15, 0.005, 0.2]}}]
    assert not compare_records(base, other_agent).mismatches
    louder = [{**_record("t::x", "obs_noise", perturbed, nominal),
               "params": {**noise, "sigma": 0.3, "spread": [0.02, 0.14, 0.006, 0.2]}}]
    (mismatch,) = compare_records(base, louder).mismatches
    assert "'sigma': 0.3" in mismatch
