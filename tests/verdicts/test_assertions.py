"""assert_robust(): verdicts, modes, ratings, messages, bad input, adaptive sampling."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit import audit, scenarios
from pytest_rlaudit.auditing.results import ScenarioResult
from pytest_rlaudit.errors import UnknownScenarioError
from pytest_rlaudit.scenarios import Scenario
from pytest_rlaudit.stats import Thresholds
from pytest_rlaudit.verdicts.assertions import RobustnessError, assert_robust

ENV = "CartPole-v1"


def fragile(obs: np.ndarray) -> np.ndarray:
    """A hand-tuned CartPole controller that balances nominally but breaks under timing faults."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def pendulum(obs: np.ndarray) -> np.ndarray:
    return np.clip(-(6 * np.arctan2(obs[:, 1], obs[:, 0]) + obs[:, 2]), -2, 2)[:, None]


def boom(obs: np.ndarray) -> np.ndarray:
    raise RuntimeError("the agent must not run when the arguments are bad")


class DropEveryNth(gym.Wrapper):
    """Zeroes the reward of every n-th env step: a 500-step CartPole episode keeps 1 - 1/n."""

    def __init__(self, env: gym.Env, n: int = 5) -> None:
        super().__init__(env)
        self.n, self.t = n, 0

    def reset(self, **kwargs):
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        return obs, (0.0 if self.t % self.n == 0 else reward), terminated, truncated, info


# The robust controller always lasts 500 steps, so these give ratios of exactly 0.80 and 0.95:
# the edges of the MILD and PASS bands. Every episode keeps the same share, so two episodes
# (the fewest an audit takes) give these exact ratios as surely as any number would.
AT_MILD_EDGE = Scenario("drop_every_5th", "custom", DropEveryNth, {"n": 5})
AT_PASS_EDGE = Scenario("drop_every_20th", "custom", DropEveryNth, {"n": 20})


def message_of(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


@pytest.fixture(scope="module")
def spike_numbers(controller):
    """The robust controller's spike numbers at 6 episodes: ratio ~0.9, interval ~(0.52, 1.0)."""
    result = assert_robust(controller, ENV, "spike", min_rating="FAIL", episodes=6, seed=0)
    low, high = result.ci
    assert low < result.ratio < high, "the mode tests need an interval around the ratio"
    return result


@pytest.fixture(scope="module")
def fragile_spike_error():
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(fragile, ENV, "spike", episodes=8, seed=3)
    return excinfo.value


# --------------------------------------------------------------------------- pass / fail


def test_robust_case_passes_and_returns_its_numbers(controller):
    result = assert_robust(controller, ENV, "jitter", episodes=4)
    assert isinstance(result, ScenarioResult)
    assert result.name == "jitter" and result.rating == "PASS"
    assert result.ratio == 1.0 and result.ci == (1.0, 1.0)
    assert result.p_value == 1.0
    assert result.diagnosis is None
    assert result.episodes == 4 and result.seeds.tolist() == [0, 1, 2, 3]


def test_fragile_case_raises_a_robustness_error_that_is_an_assertion_error(fragile_spike_error):
    assert issubclass(RobustnessError, AssertionError)
    assert isinstance(fragile_spike_error, AssertionError)  # what assert_robust raised


def test_error_carries_the_scenario_result(fragile_spike_error):
    result = fragile_spike_error.result
    assert isinstance(result, ScenarioResult)
    assert result.name == "spike" and result.rating == "FAIL"
    assert result.ratio < 0.8
    assert result.episodes == 8 and result.seeds.tolist() == list(range(3, 11))
    assert 0.0 <= result.p_value < 0.05
    assert result.diagnosis is not None


def test_failure_message_is_readable_on_its_own(fragile_spike_error):
    result, text = fragile_spike_error.result, str(fragile_spike_error)
    lo, hi = result.ci
    # the first line (pytest's short summary, JUnit's message): the essence
    assert text.splitlines()[0] == (f"FAIL under spike: ratio {result.ratio:.3f} (95% CI "
                                    f"{lo:.3f} to {hi:.3f}); required MILD or better")
    required = next(x for x in text.splitlines() if "required:" in x)
    assert "0.8" in required and "in 'point' mode" in required  # the default gate: MILD
    assert f"ratio {result.ratio:.3f}" in required
    assert "episodes: 8 paired (env seeds 3-10)" in text
    assert f"p = {result.p_value:.3g}" in text
    reproduce = next(x for x in text.splitlines() if "reproduce:" in x)
    assert reproduce.strip().startswith("reproduce: assert_robust(agent, 'CartPole-v1', 'spike'")
    assert reproduce.endswith("episodes=8, seed=3)")
    d = result.diagnosis
    assert f"what broke: {d.pattern}" in text
    assert "ratios of: nominal mean return " in text and ", reference 0.0" in text
    assert f"likely cause: {d.cause}" in text and "latency spike" in text
    assert f"fix: {d.fix}" in text
    assert "SpeedSchedule.spike(env, start=20, duration=20, k=5)" in text
    # every part on its own line, in that order
    lines = text.splitlines()
    order = ["FAIL under spike", "fix:", "what broke:", "likely cause:", "required:",
             "episodes:", "ratios of:", "reproduce:"]
    positions = [next(i for i, line in enumerate(lines) if key in line) for key in order]
    assert positions == sorted(positions)
    assert text.count(d.cause) == 1 and text.count(d.fix) == 1  # each part said once


def test_message_names_the_seed_that_was_used():
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(fragile, ENV, "speed_5x", episodes=4, seed=11)
    text = message_of(excinfo)
    assert "seed=11" in text and "env seeds 11-14" in text
    assert excinfo.value.result.seeds.tolist() == [11, 12, 13, 14]


@pytest.mark.parametrize("kwargs", [
    {},
    {"min_ratio": 0.95},                                    # a stricter gate than the default
    {"min_ratio": 0.95, "mode": "confident"},
    {"reference": "random"},                                # changes the ratio itself
    {"min_ratio": 0.95, "confidence": 0.8},                 # changes the interval
    {"min_ratio": 0.95, "max_episodes": 12},                # adaptive: interval at the look level
    {"reference": "random", "max_episodes": 12},            # adaptive: reference on max_episodes
], ids=["default", "min_ratio", "confident", "reference", "confidence", "adaptive",
        "adaptive-reference"])
def test_reproduce_line_reproduces_the_failure(controller, kwargs):
    agent = controller if "min_ratio" in kwargs else fragile
    # speed_5x of the fragile agent is decided at the first look: the adaptive run stops at 6
    scenario = "spike" if "min_ratio" in kwargs else "speed_5x"
    with pytest.raises(RobustnessError) as first:
        assert_robust(agent, ENV, scenario, episodes=6, seed=0, **kwargs)
    line = next(x for x in message_of(first).splitlines() if "reproduce:" in x)
    call = line.split("reproduce:", 1)[1].strip()
    # Running the printed call must fail again, with the same numbers and the same message.
    with pytest.raises(RobustnessError) as again:
        eval(call, {"assert_robust": assert_robust, "agent": agent})
    assert again.value.result.ratio == first.value.result.ratio
    assert again.value.result.ci == first.value.result.ci
    assert message_of(again) == message_of(first)


# --------------------------------------------------------------------------- modes


def test_point_above_threshold_but_interval_reaching_below_it(controller, spike_numbers):
    r = spike_numbers
    threshold = (r.ratio + r.ci[0]) / 2
    common = dict(min_ratio=threshold, episodes=6, seed=0)
    assert assert_robust(controller, ENV, "spike", mode="point", **common).ratio == r.ratio
    assert assert_robust(controller, ENV, "spike", mode="not_worse", **common).ratio == r.ratio
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(controller, ENV, "spike", mode="confident", **common)
    text = message_of(excinfo)
    assert "'confident' mode" in text
    assert f"interval low end {r.ci[0]:.3f} is below {threshold:g}" in text
    assert excinfo.value.result.ratio == r.ratio


def test_point_below_threshold_but_interval_reaching_above_it(controller, spike_numbers):
    r = spike_numbers
    threshold = (r.ratio + r.ci[1]) / 2
    common = dict(min_ratio=threshold, episodes=6, seed=0)
    assert assert_robust(controller, ENV, "spike", mode="not_worse", **common).ratio == r.ratio
    with pytest.raises(RobustnessError) as point:
        assert_robust(controller, ENV, "spike", mode="point", **common)
    assert "'point' mode" in message_of(point)
    assert f"ratio {r.ratio:.3f} is below {threshold:g}" in message_of(point)
    with pytest.raises(RobustnessError) as confident:
        assert_robust(controller, ENV, "spike", mode="confident", **common)
    assert "'confident' mode" in message_of(confident)


def test_not_worse_fails_when_the_whole_interval_is_below():
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(fragile, ENV, "speed_5x", min_ratio=0.8, mode="not_worse", episodes=8)
    result = excinfo.value.result
    assert result.ci[1] < 0.8
    assert "'not_worse' mode" in message_of(excinfo)
    assert "confidently below it" in message_of(excinfo)


def test_confident_passes_when_the_whole_interval_is_above(controller):
    result = assert_robust(controller, ENV, "delay", min_ratio=0.9, mode="confident", episodes=4)
    assert result.ci[0] >= 0.9


# --------------------------------------------------------------------------- ratings


def test_rating_edges_are_exact_on_the_drop_scenarios(controller):
    mild_edge = assert_robust(controller, ENV, AT_MILD_EDGE, min_rating="FAIL", episodes=2)
    pass_edge = assert_robust(controller, ENV, AT_PASS_EDGE, min_rating="FAIL", episodes=2)
    assert mild_edge.ratio == 0.8 and mild_edge.rating == "DEGRADED"
    assert pass_edge.ratio == 0.95 and pass_edge.rating == "MILD"


def test_min_rating_mild_is_strictly_above_080(controller):
    with pytest.raises(RobustnessError):
        assert_robust(controller, ENV, AT_MILD_EDGE, min_rating="MILD", episodes=2)
    # min_ratio is inclusive: ratio >= 0.8 passes
    assert assert_robust(controller, ENV, AT_MILD_EDGE, min_ratio=0.8, episodes=2).ratio == 0.8
    assert assert_robust(controller, ENV, AT_MILD_EDGE, min_rating="DEGRADED", episodes=2)


def test_min_rating_pass_is_strictly_above_095(controller):
    with pytest.raises(RobustnessError):
        assert_robust(controller, ENV, AT_PASS_EDGE, min_rating="PASS", episodes=2)
    assert assert_robust(controller, ENV, AT_PASS_EDGE, min_ratio=0.95, episodes=2).ratio == 0.95
    assert assert_robust(controller, ENV, AT_PASS_EDGE, min_rating="MILD", episodes=2)


def test_strict_gate_message_does_not_contradict_itself(controller):
    """At ratio exactly 0.80 the MILD gate fails, and the message must say why truthfully:
    not "required: ratio >= 0.8 ... ratio 0.800 is below 0.8" (0.800 is not below 0.8)."""
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(controller, ENV, AT_MILD_EDGE, min_rating="MILD", episodes=2)
    text = message_of(excinfo)
    assert text.startswith("DEGRADED under drop_every_5th: ratio 0.800")
    assert "ratio >= 0.8" not in text
    assert "0.800 is below 0.8" not in text
    assert "ratio > 0.8" in text


def test_custom_thresholds_move_the_rating_gate(controller):
    loose = Thresholds(pass_=0.9)
    result = assert_robust(controller, ENV, AT_PASS_EDGE, min_rating="PASS", episodes=2,
                           thresholds=loose)
    assert result.rating == "PASS"


def test_min_rating_fail_always_passes():
    result = assert_robust(fragile, ENV, "speed_5x", min_rating="FAIL", episodes=4)
    assert result.rating == "FAIL" and result.ratio < 0.5


def test_min_ratio_and_min_rating_must_both_hold(controller, spike_numbers):
    r = spike_numbers  # ratio ~0.9, rated MILD
    assert r.rating == "MILD"
    common = dict(episodes=6, seed=0)
    assert assert_robust(controller, ENV, "spike", min_ratio=0.5, min_rating="MILD", **common)
    with pytest.raises(RobustnessError) as by_rating:
        assert_robust(controller, ENV, "spike", min_ratio=0.5, min_rating="PASS", **common)
    required = [x for x in message_of(by_rating).splitlines() if "required:" in x]
    assert len(required) == 1 and "0.95" in required[0]  # only the missed gate is listed
    with pytest.raises(RobustnessError) as by_ratio:
        assert_robust(controller, ENV, "spike", min_ratio=0.99, min_rating="FAIL", **common)
    required = [x for x in message_of(by_ratio).splitlines() if "required:" in x]
    assert len(required) == 1 and "0.99" in required[0]


def test_both_gates_missed_lists_both_requirements():
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(fragile, ENV, "spike", min_ratio=0.9, min_rating="MILD", episodes=8)
    required = [x for x in message_of(excinfo).splitlines() if "required:" in x]
    assert len(required) == 2
    assert any("0.9" in x for x in required) and any("0.8" in x for x in required)


def test_default_gate_is_min_rating_mild(controller, fragile_spike_error):
    # the fixture's call gives no gate: FAIL misses the default one
    assert fragile_spike_error.result.rating == "FAIL"
    assert "0.8" in next(x for x in str(fragile_spike_error).splitlines() if "required:" in x)
    # MILD passes the default gate
    assert assert_robust(controller, ENV, "spike", episodes=6, seed=0).rating == "MILD"
    # DEGRADED does not
    with pytest.raises(RobustnessError):
        assert_robust(controller, ENV, AT_MILD_EDGE, episodes=2)


# --------------------------------------------------------------------------- bad input


def test_unknown_scenario_lists_the_known_names():
    with pytest.raises(UnknownScenarioError) as excinfo:
        assert_robust(boom, ENV, "spikey", episodes=4)
    text = message_of(excinfo)
    assert "'spikey'" in text and "Did you mean 'spike'" in text
    for name in scenarios.DEFAULT:
        assert name in text
    assert isinstance(excinfo.value, LookupError)


def test_nominal_is_not_a_scenario_to_assert_on():
    for scenario in ("nominal", scenarios.NOMINAL):
        with pytest.raises(ValueError, match="nominal") as excinfo:
            assert_robust(boom, ENV, scenario, episodes=4)
        assert "jitter" in message_of(excinfo)  # suggests real scenarios


@pytest.mark.parametrize("episodes", [1, 0, -3, 1.5, True, "10", None])
def test_bad_episodes(episodes):
    with pytest.raises(ValueError, match="episodes must be an integer >= 2"):
        assert_robust(boom, ENV, "jitter", episodes=episodes)


@pytest.mark.parametrize("value", [0, -0.1, 2.5, math.nan, "0.8", True])
def test_bad_min_ratio(value):
    with pytest.raises(ValueError, match=r"min_ratio must be .*\(0, 2\]"):
        assert_robust(boom, ENV, "jitter", min_ratio=value, episodes=4)


def test_min_ratio_edges_are_accepted(controller):
    assert assert_robust(controller, ENV, "delay", min_ratio=1.0, episodes=2).ratio == 1.0
    with pytest.raises(RobustnessError):
        assert_robust(controller, ENV, "delay", min_ratio=2, episodes=2)


def test_bad_mode():
    with pytest.raises(ValueError, match="mode") as excinfo:
        assert_robust(boom, ENV, "jitter", mode="strict", episodes=4)
    for mode in ("point", "confident", "not_worse"):
        assert mode in message_of(excinfo)


@pytest.mark.parametrize("value", ["GOOD", "mild", "", 0.8])
def test_bad_min_rating(value):
    with pytest.raises(ValueError, match="min_rating") as excinfo:
        assert_robust(boom, ENV, "jitter", min_rating=value, episodes=4)
    assert "PASS, MILD, DEGRADED, FAIL" in message_of(excinfo)


def test_max_episodes_below_episodes():
    with pytest.raises(ValueError, match=r"max_episodes \(5\) must be >= episodes \(10\)"):
        assert_robust(boom, ENV, "jitter", episodes=10, max_episodes=5)


@pytest.mark.parametrize("value", [1, 2.5, True])
def test_bad_max_episodes(value):
    with pytest.raises(ValueError, match="max_episodes must be an integer >= 2"):
        assert_robust(boom, ENV, "jitter", episodes=2, max_episodes=value)


def test_target_ci_width_needs_max_episodes():
    with pytest.raises(ValueError, match="target_ci_width needs max_episodes"):
        assert_robust(boom, ENV, "jitter", episodes=4, target_ci_width=0.1)


@pytest.mark.parametrize("value", [0.0, 1.0, -0.5, 1.5, math.nan, "0.9", None])
def test_bad_confidence(value):
    with pytest.raises(ValueError, match=r"confidence must be a finite number in \(0, 1\)"):
        assert_robust(boom, ENV, "jitter", confidence=value, episodes=4)


def test_bad_reference():
    with pytest.raises(ValueError, match="reference"):
        assert_robust(boom, ENV, "jitter", reference="best", episodes=4)


# --------------------------------------------------------------------------- adaptive sampling


def test_clearly_robust_case_stops_at_the_first_look(controller):
    result = assert_robust(controller, ENV, "jitter", episodes=4, max_episodes=16)
    assert result.episodes == 4 and result.rating == "PASS"


def test_clearly_fragile_case_stops_at_the_first_look():
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(fragile, ENV, "speed_5x", episodes=8, max_episodes=24)
    assert excinfo.value.result.episodes == 8
    assert "adaptive sampling stopped: decided" in message_of(excinfo)


def test_borderline_case_uses_more_episodes_up_to_max(controller, spike_numbers):
    threshold = round(spike_numbers.ratio, 2)  # inside every interval: never decided
    result = assert_robust(controller, ENV, "spike", min_ratio=threshold, mode="not_worse",
                           episodes=4, max_episodes=12, seed=0)
    assert result.episodes == 12
    assert result.seeds.tolist() == list(range(12))
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(controller, ENV, "spike", min_ratio=1.0, episodes=4, max_episodes=16)
    # point mode: stopped before the cap once more rounds could not lift the ratio to 1.0
    # (settled; a FAIL settles on half the margin a PASS does, so the ratio, 0.84 at 12
    # episodes, must lie further below the threshold than 0.95 allowed within 10)
    assert 4 < excinfo.value.result.episodes < 16
    assert "adaptive sampling stopped: settled" in message_of(excinfo)


def test_rounds_keep_the_pairing(controller):
    """Episodes added in rounds are the episodes a single run of that many would play."""
    adaptive = assert_robust(controller, ENV, "spike", min_ratio=0.88, mode="not_worse",
                             episodes=3, max_episodes=8, seed=5)
    n = adaptive.episodes
    assert n > 3
    assert adaptive.seeds.tolist() == list(range(5, 5 + n))
    once = assert_robust(controller, ENV, "spike", min_rating="FAIL", episodes=n, seed=5)
    np.testing.assert_array_equal(adaptive.returns, once.returns)
    np.testing.assert_array_equal(adaptive.env_steps, once.env_steps)
    assert adaptive.ratio == once.ratio


def test_target_ci_width_stops_once_the_interval_is_narrow(controller):
    first = assert_robust(controller, ENV, "spike", episodes=4, max_episodes=16,
                          target_ci_width=1.5)
    first_width = first.ci[1] - first.ci[0]
    assert first.episodes == 4 and first_width <= 1.5
    target = first_width * 0.9  # the first look is too wide for it
    narrower = assert_robust(controller, ENV, "spike", episodes=4, max_episodes=16,
                             target_ci_width=target)
    assert narrower.episodes > 4
    assert narrower.ci[1] - narrower.ci[0] <= target or narrower.episodes == 16
    tiny = assert_robust(controller, ENV, "spike", episodes=4, max_episodes=16,
                         target_ci_width=1e-6)
    assert tiny.episodes == 16


def test_adaptive_runs_are_deterministic(controller):
    kwargs = dict(min_ratio=0.88, mode="not_worse", episodes=4, max_episodes=12, seed=1)
    a = assert_robust(controller, ENV, "spike", **kwargs)
    b = assert_robust(controller, ENV, "spike", **kwargs)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert a.ci == b.ci and a.ratio == b.ratio and a.p_value == b.p_value


# --------------------------------------------------------------------------- determinism, references


def test_same_seed_same_numbers():
    def run(seed):
        return assert_robust(fragile, ENV, "obs_noise", min_rating="FAIL", episodes=5, seed=seed)

    a, b, c = run(4), run(4), run(5)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert (a.ratio, a.ci, a.p_value, a.rating) == (b.ratio, b.ci, b.p_value, b.rating)
    assert a.seeds.tolist() != c.seeds.tolist()


def test_agrees_with_audit():
    mine = assert_robust(fragile, ENV, "spike", min_rating="FAIL", episodes=6, seed=2)
    theirs = audit(fragile, ENV, scenarios=["spike"], episodes=6, seed=2)["spike"]
    np.testing.assert_array_equal(mine.returns, theirs.returns)
    assert (mine.ratio, mine.ci, mine.rating) == (theirs.ratio, theirs.ci, theirs.rating)


def test_reference_random_measures_from_a_random_policy():
    mine = assert_robust(fragile, ENV, "spike", min_rating="FAIL", reference="random",
                         episodes=6, seed=2)
    theirs = audit(fragile, ENV, scenarios=["spike"], episodes=6, seed=2, reference="random")
    assert theirs.reference > 0
    nominal = theirs.nominal.mean_return
    expected = (mine.mean_return - theirs.reference) / (nominal - theirs.reference)
    assert mine.ratio == pytest.approx(expected)
    plain = assert_robust(fragile, ENV, "spike", min_rating="FAIL", episodes=6, seed=2)
    assert mine.ratio < plain.ratio  # a degraded score measured from a positive floor


def test_negative_return_env_needs_a_reference():
    with pytest.raises(ValueError, match="reference") as excinfo:
        assert_robust(pendulum, "Pendulum-v1", "jitter", episodes=3)
    assert "reference='random'" in message_of(excinfo)
    result = assert_robust(pendulum, "Pendulum-v1", "jitter", episodes=3, reference="random",
                           min_rating="FAIL")
    assert np.isfinite(result.ratio) and (result.returns < 0).all()


def test_confidence_sets_the_interval_level(controller):
    wide = assert_robust(controller, ENV, "spike", min_rating="FAIL", episodes=6, confidence=0.99)
    narrow = assert_robust(controller, ENV, "spike", min_rating="FAIL", episodes=6,
                           confidence=0.6)
    assert wide.ratio == narrow.ratio
    assert wide.ci[1] - wide.ci[0] > narrow.ci[1] - narrow.ci[0]
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(controller, ENV, "spike", min_ratio=0.99, episodes=6, confidence=0.8)
    assert "80% CI" in message_of(excinfo)


# --------------------------------------------------------------------------- Scenario objects


def test_a_scenario_object_is_accepted():
    wider = scenarios.get("jitter").with_params(jitter=2)
    result = assert_robust(fragile, ENV, wider, min_rating="FAIL", episodes=4)
    assert result.name == "jitter" and result.params == {"base": 2, "jitter": 2}
    registered = assert_robust(fragile, ENV, "jitter", min_rating="FAIL", episodes=4)
    assert registered.params == {"base": 2, "jitter": 1}
    assert not np.array_equal(result.returns, registered.returns)


def test_a_custom_scenario_failure_names_its_wrapper(controller):
    with pytest.raises(RobustnessError) as excinfo:
        assert_robust(controller, ENV, AT_MILD_EDGE, episodes=2)
    assert "'drop_every_5th'" in message_of(excinfo)
    assert "DropEveryNth(env, n=5)" in message_of(excinfo)


@pytest.mark.parametrize("value", [0, -0.1, "0.1", math.inf])
def test_bad_target_ci_width(value):
    with pytest.raises(ValueError, match="target_ci_width must be a finite number > 0"):
        assert_robust(boom, ENV, "jitter", episodes=4, max_episodes=8, target_ci_width=value)


def test_the_reproduce_line_names_an_agent_given_by_path(tmp_path):
    """A failure's reproduce line can be pasted: the agent's path as given (an object
    without one stays ``agent``: the tests above)."""
    import shutil
    from pathlib import Path

    path = tmp_path / "ppo.zip"
    shutil.copy(Path(__file__).parents[2] / "examples" / "ppo_cartpole.zip", path)
    with pytest.raises(RobustnessError) as info:
        assert_robust(path, "CartPole-v1", "spike", min_ratio=0.9, episodes=3)
    assert f"reproduce: assert_robust({str(path)!r}, 'CartPole-v1', 'spike'" in str(info.value)
