"""Replay (DESIGN.md section 22, issue 45): record an audit's episodes, replay a candidate
on them open loop, and measure how differently it acts.

Recording and replaying the same agent agrees bit for bit (an SB3 zip, a zoo folder with
VecNormalize, an ONNX export, a recurrent policy); another checkpoint diverges with an
interval that excludes 0; the same episodes read from Minari, ``.npz`` and LeRobot give
the same numbers; bad recordings are errors that name the file, and a candidate that
raises on one episode loses that episode only."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("minari")
from gymnasium import spaces

from pytest_rlaudit import (
    ReplayError,
    assert_replay_close,
    compare_replay,
    record,
    replay,
)
from pytest_rlaudit.errors import DatasetError
from pytest_rlaudit.world.recordings import Recording, load_recording
from pytest_rlaudit.world.recordings.npz import write_npz

ROOT = Path(__file__).parents[2]
PPO = str(ROOT / "examples" / "ppo_cartpole.zip")
ROBUST = str(ROOT / "examples" / "robust_ppo_cartpole.zip")
ZOO_A2C = ROOT / "tests" / "data" / "zoo" / "a2c" / "Pendulum-v1_1"


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory) -> Path:
    """Four episodes of the bundled PPO on CartPole (500 steps each), as a Minari dataset."""
    return record(PPO, "CartPole-v1", tmp_path_factory.mktemp("rec") / "ppo", episodes=4)


def _same_numbers(a, b) -> bool:
    skip = {"recording", "format", "seconds", "recorded_by"}  # LeRobot keeps no agent name
    da = {k: v for k, v in a.to_dict().items() if k not in skip}
    db = {k: v for k, v in b.to_dict().items() if k not in skip}
    return da == db


def test_the_recorded_agent_replays_its_own_episodes_bit_for_bit(cartpole):
    result = replay(PPO, cartpole)
    assert (result.episodes, result.steps) == (4, 2000)
    assert result.divergence == (0.0, 0.0, 0.0, 0.95)
    assert result.disagreement.value == 0.0 and result.ood_actions.value == 0.0
    assert result.failed == () and result.worst == ()
    assert result.recorded_by == "PPO(ppo_cartpole.zip)"
    assert result.baseline_returns == (500.0,) * 4  # the recording's own, labelled so
    assert "takes the recorded action at every step" in result.summary()


def test_another_checkpoint_diverges_with_an_interval_that_excludes_0(cartpole):
    result = replay(ROBUST, cartpole)
    assert result.divergence.low > 0
    assert result.divergence.low <= result.divergence.value <= result.divergence.high
    assert result.disagreement.value == result.divergence.value  # Discrete: the same share
    worst = result.worst[0]
    assert worst.distance == 1.0 and worst.candidate != worst.recorded
    assert "departs most" in result.diagnosis
    # open loop: nothing it prints claims the candidate's return or success
    text = result.summary().lower()
    assert "candidate's return" not in text.replace("not the candidate's return", "")
    assert "success" not in text


def test_a_replay_is_reproducible(cartpole):
    assert _same_numbers(replay(ROBUST, cartpole), replay(ROBUST, cartpole))


def test_compare_replay_is_paired_by_episode_and_says_which_acts_more_like_it(cartpole):
    comparison = compare_replay(PPO, ROBUST, cartpole)
    assert comparison.closer == "a" and comparison.difference.high < 0
    assert "PPO(ppo_cartpole.zip) acts more like the recording" in comparison.summary()


def test_the_same_episodes_as_minari_npz_and_lerobot_give_identical_numbers(cartpole, tmp_path):
    replay_files = pytest.importorskip("tests.replay_files")
    recording = load_recording(cartpole)
    write_npz(recording, tmp_path / "rec.npz")
    replay_files.write_lerobot(recording, tmp_path / "lerobot", version="v3.0")
    base = replay(ROBUST, cartpole)
    # LeRobot stores no action space: the candidate's own (Discrete(2)) is used
    for other in (tmp_path / "rec.npz", tmp_path / "lerobot"):
        assert _same_numbers(base, replay(ROBUST, other)), other


def test_a_zoo_folder_with_vecnormalize_replays_its_recording_bit_for_bit(tmp_path):
    path = record(str(ZOO_A2C), "Pendulum-v1", tmp_path / "a2c", episodes=2)
    result = replay(str(ZOO_A2C), path)
    assert result.steps == 400 and result.divergence.value == 0.0
    assert [d.value for d in result.per_dimension] == [0.0]
    # the statistics matter: the bare model, without them, acts otherwise
    from pytest_rlaudit import as_policy

    bare = as_policy(str(ZOO_A2C / "Pendulum-v1.zip"), vec_normalize=None, env="Pendulum-v1")
    raw = replay(bare, path)
    assert raw.divergence.value > 0


def test_an_onnx_export_replays_the_zips_recording_bit_for_bit(cartpole, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from stable_baselines3 import PPO as SB3PPO

    policy = SB3PPO.load(PPO, device="cpu").policy

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.policy = policy

        def forward(self, obs):
            return self.policy.get_distribution(obs).distribution.logits

    path = tmp_path / "policy.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Logits().eval(), torch.zeros(1, 4), str(path), dynamo=False,
                          input_names=["obs"], dynamic_axes={"obs": {0: "batch"}})
    result = replay(str(path), cartpole)
    assert result.divergence.value == 0.0 and result.steps == 2000


def _recurrent_zip(env_id: str, tmp_path: Path) -> str:
    """An untrained RecurrentPPO (a small LSTM) for ``env_id``, saved as a zip."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    model = sb3_contrib.RecurrentPPO("MlpLstmPolicy", env_id, seed=0, device="cpu",
                                     policy_kwargs={"net_arch": [8], "lstm_hidden_size": 8})
    model.save(tmp_path / "lstm.zip")
    return str(tmp_path / "lstm.zip")


def test_a_recurrent_policy_replays_its_recording_bit_for_bit(tmp_path):
    zip_path = _recurrent_zip("CartPole-v1", tmp_path)
    path = record(zip_path, "CartPole-v1", tmp_path / "rec", episodes=3)
    result = replay(zip_path, path)
    assert result.episodes == 3 and result.divergence.value == 0.0
    # episodes of more than one step: the state was carried, not only made at the start
    assert load_recording(path).lengths.min() > 1


def test_a_dataset_made_without_an_env_replays_by_its_local_id(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari")
    from minari.data_collector.episode_buffer import EpisodeBuffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    rng = np.random.default_rng(0)
    buffers = []
    for i in range(3):
        obs = rng.normal(size=(11, 4)).astype(np.float32)
        buffers.append(EpisodeBuffer(id=i, observations=obs,
                                     actions=(obs[:-1, 2] > 0).astype(np.int64),
                                     rewards=[1.0] * 10, terminations=[False] * 9 + [True],
                                     truncations=[False] * 10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # minari asks for an author, a description...
        minari.create_dataset_from_buffers(
            "robot/arm-v0", buffers, env=None,
            observation_space=spaces.Box(-np.inf, np.inf, (4,), np.float32),
            action_space=spaces.Discrete(2), data_format="arrow")
    result = replay(lambda o: (o[:, 2] > 0).astype(np.int64), "robot/arm-v0")
    assert (result.episodes, result.steps, result.divergence.value) == (3, 30, 0.0)
    assert result.baseline_returns == (10.0, 10.0, 10.0)


# ----------------------------------------------------------------------- bad input

def _npz(path: Path, obs, actions, starts) -> Path:
    np.savez(path, observations=obs, actions=actions, episode_starts=starts)
    return path


def test_an_empty_recording_is_an_error_naming_the_file(tmp_path):
    path = _npz(tmp_path / "empty.npz", np.zeros((0, 4)), np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=bool))
    with pytest.raises(DatasetError, match="empty.npz: the npz recording holds no steps"):
        replay(PPO, path)


def test_a_truncated_file_is_an_error_naming_it(tmp_path, cartpole):
    path = tmp_path / "rec.npz"
    write_npz(load_recording(cartpole), path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(DatasetError, match="rec.npz: cannot be read.*truncated"):
        replay(PPO, path)
    broken = tmp_path / "broken"
    shutil.copytree(cartpole, broken)
    parquet = next((broken / "data").glob("*/*.arrow"), None) or next(
        p for p in (broken / "data").rglob("*") if p.is_file() and p.suffix != ".json")
    parquet.write_bytes(parquet.read_bytes()[:100])
    with pytest.raises(DatasetError, match="cannot be read"):
        replay(PPO, broken)


def test_observations_of_the_wrong_width_are_refused_before_any_call(tmp_path):
    path = _npz(tmp_path / "wide.npz", np.zeros((6, 5), np.float32),
                np.zeros(6, dtype=np.int64), np.arange(6) % 3 == 0)
    with pytest.raises(DatasetError) as err:
        replay(PPO, path)
    message = str(err.value)
    assert "wide.npz" in message and "(5,)" in message and "(4,)" in message


def test_nan_in_recorded_observations_names_the_episode_and_step(tmp_path):
    obs = np.zeros((6, 4), np.float32)
    obs[4, 1] = np.nan
    path = _npz(tmp_path / "nan.npz", obs, np.zeros(6, dtype=np.int64), np.arange(6) % 3 == 0)
    with pytest.raises(DatasetError, match="NaN or an infinite value at episode 1, step 1"):
        replay(PPO, path)


def test_an_action_space_that_differs_is_an_error(cartpole):
    with pytest.raises(DatasetError, match="does not fit the candidate|action space"):
        replay(PPO, cartpole, action_space=spaces.Box(-1, 1, (1,), np.float32))


def test_a_candidate_raising_on_one_episode_loses_that_episode_only(cartpole):
    recording = load_recording(cartpole)
    bad_start = recording.observations[recording.starts[2]].copy()

    def touchy(obs):
        if any(np.array_equal(row, bad_start) for row in obs):
            raise RuntimeError("sensor out of range")
        return np.zeros(len(obs), dtype=np.int64)

    result = replay(touchy, cartpole)
    assert [(f.id, f.error) for f in result.failed] == [
        (2, "RuntimeError: sensor out of range")]
    assert result.episodes == 3 and result.episode_ids == (0, 1, 3)
    with pytest.raises(ReplayError, match="raised on 1 episode"):
        assert_replay_close(touchy, cartpole)


# ----------------------------------------------------------------------- the verdict

def test_assert_replay_close_passes_within_the_limits_and_fails_beyond(cartpole):
    assert assert_replay_close(PPO, cartpole, max_disagreement=0.0).divergence.value == 0
    with pytest.raises(ReplayError) as err:
        assert_replay_close(ROBUST, cartpole, max_disagreement=0.01, mode="confident")
    message = str(err.value)
    assert "disagreement" in message and "max_disagreement=1.0%" in message
    assert "compares actions only" in message
    assert err.value.result.disagreement.value > 0.01


def test_limits_and_modes_are_checked(cartpole):
    from pytest_rlaudit.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="mode='loose'"):
        assert_replay_close(PPO, cartpole, mode="loose")
    with pytest.raises(InvalidArgumentError, match="max_divergence=-1"):
        assert_replay_close(PPO, cartpole, max_divergence=-1)


def test_ood_actions_are_read_before_the_clip(tmp_path):
    torch = pytest.importorskip("torch")

    class Agent(torch.nn.Module):  # CleanRL's continuous shape: actor_mean, clipped
        def __init__(self):
            super().__init__()
            self.actor_mean = torch.nn.Linear(3, 1)
            torch.nn.init.constant_(self.actor_mean.weight, 4.0)
            torch.nn.init.zeros_(self.actor_mean.bias)

    obs = np.linspace(-1, 1, 30, dtype=np.float32).reshape(10, 3)
    rec = Recording("box", "npz", obs, np.zeros((10, 1), np.float32), np.array([0, 5]),
                    observation_space=spaces.Box(-1, 1, (3,), np.float32),
                    action_space=spaces.Box(-2, 2, (1,), np.float32))
    result = replay(Agent(), rec)
    raw = obs.sum(axis=1) * 4.0
    assert result.ood_actions.value == pytest.approx(np.mean(np.abs(raw) > 2))
    assert result.ood_actions.value > 0
    # the actions compared are the clipped ones the env would receive
    expected = np.mean(np.abs(np.clip(raw, -2, 2))) / 4.0
    assert result.divergence.value == pytest.approx(expected, rel=1e-6)


# ------------------------------------------------- the candidate's own preprocessing

def test_a_frame_stack_is_rebuilt_from_the_recorded_sequence(tmp_path):
    from pytest_rlaudit import as_policy

    def stacked(obs):  # pushes toward where the pole moved over the last two frames
        return (obs[:, 6] > obs[:, 2]).astype(np.int64)

    path = record(as_policy(stacked, frame_stack=2, name="stacked"), "CartPole-v1",
                  tmp_path / "rec", episodes=3)
    same = replay(as_policy(stacked, frame_stack=2), path)
    assert same.divergence.value == 0.0 and same.steps > 3 * 5
    # reading the frames as if unstacked (the last frame twice) acts otherwise
    flat = replay(lambda o: (o[:, 2] > o[:, 2]).astype(np.int64), path)
    assert flat.divergence.value > 0


def test_dict_observations_are_replayed_by_key(tmp_path):
    rng = np.random.default_rng(1)
    pos, vel = rng.normal(size=(200, 3)), rng.normal(size=(200, 2))
    np.savez(tmp_path / "dict.npz", **{"observations/pos": pos, "observations/vel": vel},
             actions=(vel[:, 0] > 0).astype(np.int64), episode_starts=np.arange(200) % 20 == 0)
    result = replay(lambda o: (o["vel"][:, 0] > 0).astype(np.int64), tmp_path / "dict.npz")
    assert (result.episodes, result.divergence.value) == (10, 0.0)
    # a candidate that also pushes where pos[1] is high: the diagnosis names that sensor
    wrong = replay(lambda o: ((o["vel"][:, 0] > 0) | (o["pos"][:, 1] > 1)).astype(np.int64),
                   tmp_path / "dict.npz")
    assert wrong.divergence.value > 0
    assert wrong.apart[0][0] == "pos[1]" and wrong.apart[0][1] > 1
    assert "pos[1] high" in wrong.diagnosis


def test_images_are_written_losslessly(tmp_path):
    from pytest_rlaudit.world.recordings.minari_files import write_minari

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(6, 16, 16, 3), dtype=np.uint8)  # noise: JPEG would blur it
    rec = Recording("pixels", "npz", frames, np.zeros(6, dtype=np.int64), np.array([0, 3]),
                    observation_space=spaces.Box(0, 255, (16, 16, 3), np.uint8),
                    action_space=spaces.Discrete(2), agent="camera")
    write_minari(rec, tmp_path / "pixels")
    back = load_recording(tmp_path / "pixels")
    np.testing.assert_array_equal(back.observations, frames)
    assert back.agent == "camera" and back.lengths.tolist() == [3, 3]


def test_ood_actions_is_not_measured_where_sb3_predict_clips_unseen(tmp_path):
    """A recurrent SB3 policy answers through predict, which clips inside: its actions
    before the clip cannot be read, so out-of-space is reported as not measured (never 0),
    as null in the record."""
    from pytest_rlaudit.auditing.replay_records import replay_record

    zip_path = _recurrent_zip("Pendulum-v1", tmp_path)
    path = record(zip_path, "Pendulum-v1", tmp_path / "rec", episodes=2)
    result = replay(zip_path, path)
    assert result.divergence.value == 0.0
    assert np.isnan(result.ood_actions.value)
    assert "n/a" in result.summary() and "not measured" in result.summary()
    rec = replay_record("t::r", result, limits=None, passed=None)
    assert rec["ood_actions"] == {"value": None, "ci_low": None, "ci_high": None}
    from pytest_rlaudit.reports.replays import replay_line

    assert "out of space n/a" in replay_line(rec)


def test_a_sampling_candidates_unclipped_actions_are_kept_row_by_row(tmp_path):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO as SB3PPO

    from pytest_rlaudit import as_policy

    model = SB3PPO("MlpPolicy", "Pendulum-v1", seed=0, device="cpu",
                   policy_kwargs={"net_arch": [8], "log_std_init": 1.0})
    path = record(model, "Pendulum-v1", tmp_path / "rec", episodes=2)
    result = replay(as_policy(model, deterministic=False), path)
    # sampled with a wide std, some actions fall outside [-2, 2] before the clip
    assert 0 < result.ood_actions.value < 1 and result.steps == 400
