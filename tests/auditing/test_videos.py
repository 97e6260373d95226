"""Videos of failing scenarios: which episode, the replay with frames, the window, the GIF."""

from __future__ import annotations

import dataclasses
import io
import pickle

import gymnasium as gym
import numpy as np
import pytest
from PIL import Image

from pytest_rlaudit import check_robust, scenarios
from pytest_rlaudit.auditing.diagnosis import parting_step
from pytest_rlaudit.auditing.records import RecordError, record_of, validate
from pytest_rlaudit.auditing.videos import (
    Clip,
    VideoUnavailable,
    capture,
    rendering_env,
    window,
    worst_episode,
)
from pytest_rlaudit.reports.gif import gif_bytes, video_name, write_gif
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import env_spec
from pytest_rlaudit.world.scenarios import NOMINAL

SPEED = scenarios.get("speed_5x")


def fragile(obs):
    """Balances CartPole nominally, falls over when its actions are held 5 steps."""
    return (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)


@pytest.fixture(scope="module")
def check():
    check = check_robust(fragile, "CartPole-v1", SPEED, min_ratio=0.8, episodes=3, seed=4)
    assert not check.passed  # the scenario breaks the agent: what a video is for
    return check


@pytest.fixture(scope="module")
def record(check):
    return record_of("tests/test_x.py::test_y[speed_5x]", check, check.gate)


#: A shorter window than the default keeps the tests fast.
WINDOW = {"before": 20, "after": 20}


@pytest.fixture(scope="module")
def clip(record):
    return capture(fragile, "CartPole-v1", SPEED, record, **WINDOW)


@pytest.fixture(scope="module")
def clip_gif(clip) -> bytes:
    """The clip's GIF (0.3 s to encode): what every replay of it must give, byte for byte."""
    return gif_bytes(clip)


def test_the_worst_episode_is_filmed_as_the_audit_ran_it(record, clip):
    drops = np.subtract(record["nominal_returns"], record["returns"])
    position = int(np.flatnonzero(drops == drops.max())[0])
    assert worst_episode(record["returns"], record["nominal_returns"]) == position
    assert clip.seed == record["seeds"][position] == 4 + clip.episode
    assert clip.returns == (record["returns"][position], record["nominal_returns"][position])
    # the parting step is the diagnosis's, on the same episode's traces, and in the window
    policy = as_policy(fragile)
    traces = [run_episodes(policy, env_spec("CartPole-v1"), [s], [clip.episode], seed=4)[s.name]
              .traces[0] for s in (SPEED, NOMINAL)]
    assert clip.lengths == (len(traces[0]), len(traces[1]))
    assert clip.parting_step == int(parting_step([traces[1]], [traces[0]])[0])
    assert clip.start <= clip.parting_step < clip.stop
    assert clip.parting_step in clip.steps
    assert clip.steps == tuple(range(clip.start, clip.stop))  # short enough: every step


def test_frames_are_small_and_the_shorter_episode_holds_its_last_frame(clip):
    shapes = {f.shape for f in (*clip.perturbed, *clip.nominal)}
    assert shapes == {(200, 300, 3)}  # CartPole's 400 x 600, halved to <= 240 rows
    ended = [j for j, t in enumerate(clip.steps) if t >= clip.lengths[0]]
    assert ended  # the perturbed episode ends inside the window (it parts by falling)
    assert all(np.array_equal(clip.perturbed[j], clip.perturbed[ended[0]]) for j in ended)
    assert not np.array_equal(clip.nominal[ended[0]], clip.nominal[ended[-1]])  # nominal goes on


def test_the_gif_is_animated_side_by_side_and_the_sides_differ(clip, tmp_path):
    path = write_gif(clip, tmp_path / "videos" / "x.gif")
    assert not list(path.parent.glob(".*.tmp"))  # written atomically, nothing left behind
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.is_animated
        assert gif.n_frames == len(clip.steps) > 1
        assert gif.height <= 240 + 60
        differ = []
        for j in range(gif.n_frames):
            gif.seek(j)
            rgb = np.asarray(gif.convert("RGB"))
            half = rgb.shape[1] // 2
            differ.append(not np.array_equal(rgb[30:-30, :half - 3], rgb[30:-30, half + 3:]))
    assert differ[-1]  # the perturbed pole is down where the nominal one still stands


def test_the_same_inputs_give_the_same_bytes(record, clip_gif):
    again = capture(fragile, "CartPole-v1", SPEED, record, **WINDOW)
    assert gif_bytes(again) == clip_gif


def test_a_check_keeps_what_its_replay_needs_apart_from_its_numbers(check, record, clip_gif):
    # what --rl-videos films a test's own assert_robust from: the policy adapter and env
    # the check ran and its scenario, which neither its repr, its record nor a pickle holds
    replay = check.replay
    assert replay.policy.name == check.agent and replay.env.name == check.env == "CartPole-v1"
    assert replay.scenario.name == "speed_5x" and replay.scenario.params == SPEED.params
    bare = dataclasses.replace(check, replay=None)
    assert repr(bare) == repr(check) and "Replay" not in repr(check)
    assert record_of(record["nodeid"], bare, bare.gate) == record
    assert pickle.loads(pickle.dumps(check)).replay is None
    again = capture(replay.policy, replay.env, replay.scenario, record, **WINDOW)
    assert gif_bytes(again) == clip_gif


def test_the_record_field_validates_in_either_shape(record, clip):
    filmed = {**record, "video": clip.field("videos/" + video_name(record["nodeid"]))}
    assert validate(filmed)["video"]["file"].startswith("videos/tests_test_x.py_test_y_speed_5x")
    assert validate({**record, "video": {"skipped": "CartPole cannot"}})
    for bad in ({"file": "a.gif"}, {"skipped": None}, {**filmed["video"], "start": "0"}):
        with pytest.raises(RecordError, match="'video'"):
            validate({**record, "video": bad})


def test_a_factory_env_films_only_when_it_renders_rgb_array(record):
    with pytest.raises(VideoUnavailable, match=r"factory .* render_mode=None; to film it, make "
                                                r"the factory pass render_mode='rgb_array'"):
        capture(fragile, lambda: gym.make("CartPole-v1"), SPEED, record)
    renders = env_spec(lambda: gym.make("CartPole-v1", render_mode="rgb_array"))
    assert rendering_env(renders) is renders


class _Blind(gym.Env):
    """An env with no rgb_array mode, or (``mode="rgb_array"``) one whose render gives None."""

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(self, mode=None):
        self.render_mode = mode
        self.observation_space = gym.spaces.Box(-1, 1, (4,))
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 1.0, True, False, {}

    def render(self):
        return None


def blind():
    return _Blind()


def black():
    return _Blind("rgb_array")


@pytest.mark.parametrize(("env", "why"), [
    (blind, r"^blind does not render rgb_array \(its render modes: none\)$"),
    (black, r"^black's render\(\) returned None in rgb_array mode, so there are no frames"),
])
def test_an_env_that_cannot_render_says_why(env, why):
    record = {"seed": 0, "seeds": [0, 1], "returns": [1.0, 1.0], "nominal_returns": [1.0, 1.0]}
    with pytest.raises(VideoUnavailable, match=why):
        capture(fragile, env, scenarios.get("delay"), record)


def test_a_replay_that_differs_from_the_record_is_refused(record):
    position = worst_episode(record["returns"], record["nominal_returns"])
    returns = list(record["returns"])
    returns[position] -= 1.0  # still the worst episode, but not the one the audit ran
    with pytest.raises(VideoUnavailable, match=r"returned \d+, not the recorded \d+"):
        capture(fragile, "CartPole-v1", SPEED, {**record, "returns": returns})


def test_a_scenario_calibrated_on_the_audit_replays_with_the_audit_s_calibration():
    # obs_noise's sigma is relative to the spread of the audit's nominal observations; one
    # replayed episode alone would calibrate another spread, and another noise
    noise = scenarios.get("obs_noise")
    check = check_robust(fragile, "CartPole-v1", noise, episodes=3)
    record = record_of("t::x", check, None)
    clip = capture(fragile, "CartPole-v1", noise, record, before=2, after=2)
    position = worst_episode(record["returns"], record["nominal_returns"])
    assert clip.returns == (record["returns"][position], record["nominal_returns"][position])
    alone = run_episodes(as_policy(fragile), env_spec("CartPole-v1"), [noise], [clip.episode])
    assert alone["obs_noise"].returns[0] != clip.returns[0]  # so the calibration mattered
    # the check keeps the scenario as it ran, calibrated: replayed as is, the same episode
    ran = check.replay.scenario
    assert not ran.needs_spread and list(ran.params["spread"]) == record["params"]["spread"]
    assert capture(fragile, "CartPole-v1", ran, record, before=2, after=2).returns == clip.returns


def test_the_rendering_env_keeps_the_keyword_arguments_it_was_made_with():
    env = rendering_env(env_spec("CartPole-v1", sutton_barto_reward=True)).make()
    assert env.render_mode == "rgb_array" and env.unwrapped._sutton_barto_reward is True
    assert env.spec.max_episode_steps == 500


def test_a_long_window_is_subsampled_through_the_parting_step():
    steps = window(777, 5000, before=600, after=600, max_frames=120)
    assert len(steps) <= 120 and 777 in steps
    assert steps[0] >= 177 and steps[-1] <= 1377
    assert window(None, 500)[:2] == (0, 1)  # never parted: from the reset on


def test_a_clip_of_one_frame_is_a_still_gif():
    frame = np.zeros((10, 20, 3), np.uint8)
    data = gif_bytes(Clip("delay", 0, 0, None, (5,), (frame,), (frame,), (5, 5), (5.0, 5.0)))
    with Image.open(io.BytesIO(data)) as gif:
        assert gif.n_frames == 1
