"""Diagnoses: parting_step on hand-made traces, diagnose() texts, and diagnoses through audit()."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit import audit, scenarios
from pytest_rlaudit.auditing.diagnosis import (
    BENCHMARKED,
    MIX_WEIGHT_CAP,
    UNTESTED,
    Diagnosis,
    diagnose,
    mix_line,
    mix_mark,
    mix_weights,
    parting_step,
)
from pytest_rlaudit.scenarios import Scenario

ENV = "CartPole-v1"


def fragile(obs: np.ndarray) -> np.ndarray:
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def trace(rewards) -> np.ndarray:
    """An episode trace: its reward at every env step."""
    return np.asarray(rewards, dtype=float)


# --------------------------------------------------------------------------- parting_step


def test_episode_ending_early_parts_at_its_last_step():
    nominal = trace([1.0] * 100)
    perturbed = trace([1.0] * 60)
    assert parting_step([nominal], [perturbed]) == (60.0, 1)


def test_equal_length_episode_earning_less_parts_where_the_gap_exceeds_5_percent():
    nominal = trace([1.0] * 100)                       # return 100: the tolerance is 5
    perturbed = trace([1.0] * 50 + [0.0] * 50)         # behind by k at step 50 + k
    # the gap is 5 at step 55 (not more than 5) and 6 at step 56
    assert parting_step([nominal], [perturbed]) == (56.0, 1)
    half = trace([0.5] * 100)                          # behind by t/2: 5.5 > 5 first at 11
    assert parting_step([nominal], [half]) == (11.0, 1)


def test_tolerance_is_a_parameter():
    nominal = trace([1.0] * 100)
    perturbed = trace([1.0] * 50 + [0.0] * 50)
    assert parting_step([nominal], [perturbed], tolerance=0.2) == (71.0, 1)  # gap > 20
    assert parting_step([nominal], [perturbed], tolerance=0.6) == (None, 0)  # lost 50 <= 60


def test_pairs_losing_less_than_the_tolerance_do_not_count():
    nominal = trace([1.0] * 100)
    assert parting_step([nominal], [trace([1.0] * 97)]) == (None, 0)     # lost 3 < 5
    assert parting_step([nominal], [trace([1.0] * 95)]) == (None, 0)     # lost exactly 5
    assert parting_step([nominal], [trace([1.0] * 94)]) == (94.0, 1)     # lost 6
    assert parting_step([nominal], [nominal.copy()]) == (None, 0)        # identical
    assert parting_step([nominal], [trace([1.0] * 150)]) == (None, 0)    # gained


def test_median_over_several_pairs():
    nominal = trace([1.0] * 100)
    pairs = [trace([1.0] * 10), trace([1.0] * 30), trace([1.0] * 60), trace([1.0] * 99)]
    # the last pair lost 1 < 5: it does not count
    assert parting_step([nominal] * 4, pairs) == (30.0, 3)
    assert parting_step([nominal] * 2, pairs[:2]) == (20.0, 2)


def test_reference_shifts_the_tolerance():
    nominal = trace([1.0] * 100)     # return 100
    perturbed = trace([1.0] * 97)    # lost 3
    assert parting_step([nominal], [perturbed]) == (None, 0)                  # 3 < 5% of 100
    assert parting_step([nominal], [perturbed], reference=80.0) == (97.0, 1)  # 3 > 5% of 20
    slower = trace([1.0] * 50 + [0.0] * 50)
    # the gap must exceed 1 (5% of 100 - 80): step 52
    assert parting_step([nominal], [slower], reference=80.0) == (52.0, 1)


def test_negative_returns_use_the_distance_to_the_reference():
    nominal = trace([-1.0] * 100)                       # return -100
    perturbed = trace([-1.0] * 50 + [-2.0] * 50)        # falls behind by k at step 50 + k
    # reference -300: the tolerance is 5% of 200 = 10, exceeded (11) at step 61
    assert parting_step([nominal], [perturbed], reference=-300.0) == (61.0, 1)


def test_empty_traces_are_skipped():
    empty = np.empty(0)
    nominal = trace([1.0] * 100)
    assert parting_step([empty], [trace([1.0] * 10)]) == (None, 0)
    assert parting_step([nominal], [empty]) == (None, 0)
    assert parting_step([], []) == (None, 0)
    assert parting_step([empty, nominal], [empty, trace([1.0] * 40)]) == (40.0, 1)


def test_unpaired_traces_are_an_error():
    nominal = trace([1.0] * 10)
    with pytest.raises(ValueError):
        parting_step([nominal, nominal], [nominal])


def test_held_actions_part_where_the_episode_ends():
    """Under Speed(k=5) an episode that earns what nominal earns at every env step but ends
    at env step 15 of 20 parts at 15 (traces are per env step, whatever the agent step)."""
    nominal = trace([1.0] * 20)                  # return 20: the tolerance is 1
    assert parting_step([nominal], [trace([1.0] * 15)]) == (15.0, 1)


def test_traces_of_a_speed_scenario_are_per_env_step(controller):
    r = audit(controller, ENV, scenarios=["speed_5x"], episodes=2)["speed_5x"]
    for i, t in enumerate(r.traces):
        assert len(t) == r.env_steps[i] > r.lengths[i]
        assert t.sum() == r.returns[i]


# --------------------------------------------------------------------------- diagnose


def diagnosis_of(scenario, *, nominal=(500, 500), perturbed=(120, 80), parting=40.0, parted=2,
                 ratio=0.3, rating="FAIL", reference=0.0):
    return diagnose(scenario, nominal_env_steps=np.array(nominal),
                    perturbed_env_steps=np.array(perturbed), parting=parting, parted=parted,
                    ratio=ratio, rating=rating, reference=reference)


EXPECTED_FIX = {
    "speed_5x": "Speed(env, k=5)",
    "jitter": "Jitter(env, base=2, jitter=1)",
    "delay": "ObservationDelay(env, steps=1)",
    "spike": "SpeedSchedule.spike(env, start=20, duration=20, k=5)",
    "obs_noise": "ObservationNoise(env, sigma=0.1, scale='relative')",
    "action_noise": "ActionNoise(env, sigma=0.1)",
    "sticky_actions": "StickyAction(env, p=0.25)",
    "action_delay": "ActionDelay(env, steps=1)",
    "dropped_obs": "DroppedObservation(env, p=0.1)",
    "dynamics": "Dynamics(env)",
    "push": "Push(env, strength=0.5, duration=5, interval=50)",
    "adversarial_obs": "AdversarialObservation(env, epsilon=0.1, scale='relative')",
}


def test_pass_has_no_diagnosis():
    for name in EXPECTED_FIX:
        assert diagnosis_of(scenarios.get(name), ratio=0.99, rating="PASS") is None


@pytest.mark.parametrize("name", sorted(EXPECTED_FIX))
def test_every_builtin_scenario_names_its_wrapper_and_parameters(name):
    d = diagnosis_of(scenarios.get(name))
    assert isinstance(d, Diagnosis)
    assert d.fix.startswith("train with") and EXPECTED_FIX[name] in d.fix
    assert d.cause and "not trained under" not in d.cause  # specific advice, not the generic one


def test_every_registered_scenario_gets_a_diagnosis_naming_its_wrapper():
    assert set(EXPECTED_FIX) <= set(scenarios.names())
    for name in scenarios.names():
        if name == "nominal":
            continue
        s = scenarios.get(name)
        d = diagnosis_of(s, rating="DEGRADED", ratio=0.6)
        assert isinstance(d, Diagnosis), name
        label = getattr(s.perturbation, "__name__", name)
        assert label in d.fix, name
        for key, value in s.params.items():
            assert f"{key}={value!r}" in d.fix, (name, key)
        label = name if name != "spike" else "spike (speed goes 1 -> 5 for 20 steps at step 20)"
        assert d.pattern.startswith(f"{label} keeps 60% of the nominal return (DEGRADED)")


def test_delay_advice_mentions_history_and_memory():
    d = diagnosis_of(scenarios.get("delay"))
    assert "ObservationDelay(env, steps=1)" in d.fix
    assert "FrameStackObservation" in d.fix and "RecurrentPPO" in d.fix
    assert "stale" in d.cause


def test_parameters_of_a_custom_scenario_on_a_known_wrapper():
    wider = scenarios.get("jitter").with_params(jitter=2)
    assert "Jitter(env, base=2, jitter=2)" in diagnosis_of(wider).fix
    short = scenarios.get("spike").with_params(duration=5)
    assert "SpeedSchedule.spike(env, start=20, duration=5, k=5)" in diagnosis_of(short).fix


def wobble(env: gym.Env, amount: float = 0.5) -> gym.Env:
    return env


def test_unknown_perturbation_gets_generic_advice_naming_it():
    custom = Scenario("wobbly_floor", "custom", wobble, {"amount": 0.25})
    d = diagnosis_of(custom)
    assert "'wobbly_floor'" in d.cause
    assert d.fix == f"train with the scenario's wrapper: wobble(env, amount=0.25) ({UNTESTED})"


def test_pattern_when_episodes_end_early():
    d = diagnosis_of(scenarios.get("jitter"), perturbed=(120, 80), parting=None)
    assert d.pattern == ("jitter keeps 30% of the nominal return (FAIL); "
                         "episodes end early: median 100 env steps vs 500 nominal")


def test_pattern_when_episodes_last_as_long():
    d = diagnosis_of(scenarios.get("obs_noise"), perturbed=(500, 490), parting=None,
                     ratio=0.85, rating="MILD")
    assert "episodes last as long as nominal (median 495 env steps) but earn less" in d.pattern
    assert "end early" not in d.pattern and "part from nominal" not in d.pattern


def test_pattern_when_episodes_run_longer():
    d = diagnosis_of(scenarios.get("speed_5x"), nominal=(200, 200), perturbed=(300, 300),
                     parting=None)
    assert "episodes run longer: median 300 env steps vs 200 nominal" in d.pattern


def test_pattern_names_the_parting_step():
    d = diagnosis_of(scenarios.get("spike"), nominal=(500, 500, 500, 500),
                     perturbed=(150, 170, 500, 130), parting=57.5, parted=3)
    assert ("returns part from nominal at env step 58 (median over the 3 of 4 episodes "
            "that lost return)") in d.pattern
    assert "episodes end early: median 160 env steps vs 500 nominal" in d.pattern


def test_pattern_mentions_episodes_ending_early_even_when_most_survive():
    """3 of 12 episodes end early (and they alone lose return): the median length is
    nominal's, but "episodes last as long as nominal ... but earn less" would be false."""
    d = diagnosis_of(scenarios.get("spike"), nominal=[500] * 12,
                     perturbed=[500] * 9 + [150, 180, 200], parting=179.0, parted=3,
                     ratio=0.84, rating="MILD")
    assert "end early" in d.pattern
    assert "but earn less" not in d.pattern


def test_pattern_with_a_reference():
    d = diagnosis_of(scenarios.get("jitter"), reference=20.0)
    assert d.pattern.startswith(
        "jitter keeps 30% of the nominal return above the reference (FAIL)")


def test_str_and_to_dict():
    d = diagnosis_of(scenarios.get("jitter"))
    assert str(d) == f"{d.pattern}. Likely cause: {d.cause}. Fix: {d.fix}."
    assert d.to_dict() == {"pattern": d.pattern, "cause": d.cause, "fix": d.fix}
    assert str(d).startswith("jitter keeps 30% of the nominal return (FAIL); episodes end early")


# --------------------------------------------------------------------------- through audit()


@pytest.fixture(scope="module")
def fragile_audit():
    return audit(fragile, ENV, scenarios=["delay", "spike", "speed_5x"], episodes=8, seed=0)


def test_traces_match_the_episode_numbers(fragile_audit):
    for r in (fragile_audit.nominal, *fragile_audit):
        assert len(r.traces) == r.episodes
        for i, t in enumerate(r.traces):
            assert len(t) == r.env_steps[i] and t.sum() == pytest.approx(r.returns[i])


def test_fail_rated_scenarios_carry_a_diagnosis_with_the_real_numbers(fragile_audit):
    nominal = fragile_audit.nominal
    n_med = np.median(nominal.env_steps)
    failed = [r for r in fragile_audit if r.rating == "FAIL"]
    assert {r.name for r in failed} == {"spike", "speed_5x"}
    for r in failed:
        d = r.diagnosis
        assert isinstance(d, Diagnosis)
        p_med = np.median(r.env_steps)
        assert p_med < 0.9 * n_med
        assert f"episodes end early: median {p_med:.0f} env steps vs {n_med:.0f} nominal" in d.pattern
        label = r.name if r.name != "spike" else "spike (speed goes 1 -> 5 for 20 steps at step 20)"
        assert d.pattern.startswith(f"{label} keeps {r.ratio:.0%} of the nominal return (FAIL)")
        parting, parted = parting_step(nominal.traces, r.traces)
        assert parting is not None and 1 <= parted <= r.episodes
        assert (f"returns part from nominal at env step {parting:.0f} (median over the "
                f"{parted} of {r.episodes} episodes that lost return)") in d.pattern
        assert parting <= max(r.env_steps)
        assert EXPECTED_FIX[r.name] in d.fix
        assert str(d) == f"{d.pattern}. Likely cause: {d.cause}. Fix: {d.fix}."
    # the spike starts at agent step 20, one env step each until then
    assert fragile_audit["spike"].diagnosis and parting_step(
        nominal.traces, fragile_audit["spike"].traces)[0] >= 20


def test_pass_rated_scenarios_have_no_diagnosis(fragile_audit, controller):
    assert fragile_audit["delay"].rating == "PASS"
    assert fragile_audit["delay"].diagnosis is None
    robust = audit(controller, ENV, scenarios=["jitter", "delay"], episodes=4)
    assert all(r.rating == "PASS" and r.diagnosis is None for r in robust)
    assert "Likely cause" not in str(robust)


def test_audit_str_lists_the_diagnoses(fragile_audit):
    text = str(fragile_audit)
    for name in ("spike", "speed_5x"):  # each a paragraph, wrapped to the table's width
        assert f"{name}: {fragile_audit[name].diagnosis}" in text.replace("\n", " ")
    assert max(map(len, text.splitlines()[4:])) <= 90
    assert "delay: " not in text


def test_every_non_pass_rating_is_diagnosed(fragile_audit):
    for r in fragile_audit:
        assert (r.diagnosis is None) == (r.rating == "PASS")
        if r.diagnosis is not None:
            assert f"({r.rating})" in r.diagnosis.pattern


class PlusOne(gym.Wrapper):
    """Adds 1 to every reward: a perturbation that only helps."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + 1.0, terminated, truncated, info


BONUS = Scenario("bonus", "custom", PlusOne)


@pytest.mark.parametrize("reference", [0, "random"])
def test_a_perturbation_that_improves_returns_is_rated_pass(controller, reference):
    for agent in (controller, fragile):
        r = audit(agent, ENV, scenarios=[BONUS], episodes=4, reference=reference)["bonus"]
        assert r.ratio > 1
        assert r.rating == "PASS" and r.diagnosis is None
        assert r.p_value == 1.0


def test_a_subclass_of_a_known_wrapper_gets_its_parents_advice():
    from pytest_rlaudit.perturbations import Jitter

    class SlowGpuJitter(Jitter):
        pass

    d = diagnosis_of(Scenario("gpu_jitter", "custom", SlowGpuJitter, {"base": 3, "jitter": 2}))
    assert "fixed control period" in d.cause
    assert "SlowGpuJitter(env, base=3, jitter=2)" in d.fix


@pytest.mark.parametrize(("ratio", "kept"), [(-0.0004, "keeps 0% of"), (-0.5, "keeps none of"),
                                             (0.004, "keeps 0% of"), (0.208, "keeps 21% of")])
def test_the_share_kept_never_reads_as_a_negative_percentage(ratio, kept):
    d = diagnose(scenarios.get("jitter"), nominal_env_steps=np.array([500, 500]),
                 perturbed_env_steps=np.array([20, 30]), parting=None, ratio=ratio, rating="FAIL")
    assert kept in d.pattern and "-0%" not in d.pattern
    assert d.short().startswith(f"jitter {kept} the nominal return (FAIL); train with Jitter(")


def test_advice_follows_the_wrapper_classes_so_a_subclass_gets_its_parents():
    import pytest_rlaudit.perturbations as P
    from pytest_rlaudit import Schedule

    class MyTimeline(P.Scheduled):
        pass

    timeline = Schedule(delay=[0, 2, 2])
    d = diagnose(Scenario("mine", "custom", MyTimeline, {"schedule": timeline}),
                 nominal_env_steps=np.array([500, 500]), perturbed_env_steps=np.array([20, 30]),
                 parting=None, ratio=0.3, rating="FAIL")
    assert d.pattern.startswith(f"breaks when {timeline.describe()}: keeps 30%")
    assert d.fix.startswith(f"train with Scheduled(env, {timeline!r}) (this timeline)")
    spike = diagnose(scenarios.get("spike"), nominal_env_steps=np.array([500, 500]),
                     perturbed_env_steps=np.array([20, 30]), parting=None, ratio=0.3, rating="FAIL")
    assert spike.fix.startswith("train with SpeedSchedule.spike(env, start=20, duration=20, k=5)")


# ============================================================ marks and the mix weights


@pytest.mark.parametrize("name", ["jitter", "spike", "speed_5x", "delay", "obs_noise"])
def test_a_wrapper_fix_no_benchmark_backs_is_marked_an_untested_suggestion(name: str):
    d = diagnosis_of(scenarios.get(name))
    assert d.fix.endswith(f"({UNTESTED})")
    assert str(d).endswith(f"({UNTESTED}).")
    assert d.short().endswith(f"({UNTESTED})")  # the table's short form keeps the mark


def test_a_timeline_fix_is_marked_an_untested_suggestion_too():
    from pytest_rlaudit import Schedule

    timeline = Schedule(speed=[1] * 10 + [6] * 30)
    d = diagnosis_of(Scenario.from_schedule(timeline, "late_slowdown"))
    assert d.fix.endswith(f"({UNTESTED})")


def test_mix_weights_follow_the_episode_lengths_nominal_first():
    # the bundled fragile agent's audit: spike 103.8, speed_5x 67.5 env steps, nominal 500
    assert mix_weights(500, [103.8, 67.5]) == [1, 5, 7]
    assert mix_weights(500, [250, 100, 50]) == [1, 2, 5, 10]


def test_mix_weights_are_uniform_when_the_lengths_are_equal():
    assert mix_weights(500, [500, 500]) == [1, 1, 1]
    assert mix_weights(200, [230, 190]) == [1, 1, 1]  # longer than nominal: still 1


def test_mix_weights_are_capped():
    assert mix_weights(1000, [1, 2]) == [1, MIX_WEIGHT_CAP, MIX_WEIGHT_CAP]


@pytest.mark.parametrize(("nominal", "lengths"), [
    (0, [10]), (500, [0]), (float("nan"), [10]), (500, [float("inf")]), (-5, [10])])
def test_mix_weights_refuse_lengths_that_are_not_positive_numbers(nominal, lengths):
    with pytest.raises(ValueError, match="mix_weights: .*positive number of env steps"):
        mix_weights(nominal, lengths)


def test_the_mix_line_says_its_weights_and_only_when_they_differ():
    assert mix_line("CartPole-v1", ["spike"], [1, 5]) == (
        'ScenarioMix(gym.make("CartPole-v1"), ["nominal", "spike"], weights=[1, 5])')
    assert mix_line("CartPole-v1", ["spike"], [1, 1]) == (
        'ScenarioMix(gym.make("CartPole-v1"), ["nominal", "spike"])')


def test_only_the_benchmarked_weighted_mix_is_marked_benchmarked():
    # benchmarks/bench_fixes.py: the rule's line on CartPole's spike and speed_5x
    assert mix_mark("CartPole-v1", ["spike", "speed_5x"], [1, 5, 7]) == BENCHMARKED
    assert mix_mark("CartPole-v1", ["speed_5x", "spike"], [1, 7, 5]) == BENCHMARKED
    # uniform weights left both failures at FAIL; other envs and sets were not trained
    assert mix_mark("CartPole-v1", ["spike", "speed_5x"], None) == UNTESTED
    assert mix_mark("Acrobot-v1", ["spike", "speed_5x"], [1, 5, 7]) == UNTESTED
    assert mix_mark("CartPole-v1", ["spike"], [1, 5]) == UNTESTED
    assert mix_mark("CartPole-v1", ["spike", "speed_5x", "delay"], [1, 5, 7, 2]) == UNTESTED
