"""The LeRobot reader (pyarrow alone): both layouts round trip, columns named by the user,
and broken folders as DatasetErrors naming the folder, the file and the fix."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")
from gymnasium import spaces

from pytest_rlaudit.errors import DatasetError
from pytest_rlaudit.world.recordings import Recording
from pytest_rlaudit.world.recordings.lerobot import action_box, read_lerobot
from tests.replay_files import write_lerobot


def _recording() -> Recording:
    rng = np.random.default_rng(1)
    done = np.zeros(9, dtype=bool)
    done[[3, 5, 8]] = True
    return Recording("src", "npz", rng.normal(size=(9, 3)).astype(np.float32),
                     rng.normal(size=(9, 2)).astype(np.float32), np.array([0, 4, 6]),
                     rewards=np.arange(9, dtype=np.float64), terminations=done,
                     action_names=("shoulder", "elbow"))


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_three_episodes_round_trip_through_either_layout(tmp_path, version):
    rec = _recording()
    back = read_lerobot(write_lerobot(rec, tmp_path / "robot", version=version))
    assert back.format == "lerobot" and back.source == str(tmp_path / "robot")
    assert back.starts.tolist() == [0, 4, 6] and back.ids == (0, 1, 2)
    assert back.observations.dtype == np.float32 and back.actions.dtype == np.float32
    np.testing.assert_array_equal(back.observations, rec.observations)
    np.testing.assert_array_equal(back.actions, rec.actions)
    np.testing.assert_array_equal(back.rewards, rec.rewards)
    np.testing.assert_array_equal(back.terminations, rec.terminations)
    assert back.truncations is None and back.agent is None
    assert back.observation_space == spaces.Box(-np.inf, np.inf, (3,), np.float32)
    assert back.action_space is None  # LeRobot stores no bounds
    assert action_box(back) == spaces.Box(-np.inf, np.inf, (2,), np.float32)
    assert back.action_names == ("shoulder", "elbow")


def test_frames_out_of_order_are_sorted_by_episode_and_frame(tmp_path):
    import pyarrow.parquet as pq

    rec = _recording()
    folder = write_lerobot(rec, tmp_path / "robot")
    data = folder / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(data)
    pq.write_table(table.take(np.random.default_rng(0).permutation(len(table))), data)
    back = read_lerobot(folder)
    assert back.starts.tolist() == [0, 4, 6]
    np.testing.assert_array_equal(back.actions, rec.actions)


def test_columns_of_other_names_are_read_when_named(tmp_path):
    rec = _recording()
    folder = write_lerobot(rec, tmp_path / "robot", version="v2.1",
                           state="observation.joints", action="action.joints")
    back = read_lerobot(folder, state="observation.joints", action="action.joints")
    np.testing.assert_array_equal(back.observations, rec.observations)
    np.testing.assert_array_equal(back.actions, rec.actions)


def test_a_missing_action_column_names_the_columns_and_the_fix(tmp_path):
    folder = write_lerobot(_recording(), tmp_path / "robot", action="action.joints")
    with pytest.raises(DatasetError) as err:
        read_lerobot(folder)
    message = str(err.value)
    assert message.startswith(str(folder))
    assert "has no column 'action'" in message
    assert "observation.state" in message and "action.joints" in message
    assert "action='...'" in message and "--rl-replay-action" in message


def test_a_missing_state_column_names_state_as_the_fix(tmp_path):
    folder = write_lerobot(_recording(), tmp_path / "robot", state="observation.joints")
    with pytest.raises(DatasetError, match=r"no column 'observation.state'.*observation"
                                           r"\.joints.*state='\.\.\.'.*--rl-replay-state"):
        read_lerobot(folder)


def test_a_truncated_parquet_file_is_named(tmp_path):
    folder = write_lerobot(_recording(), tmp_path / "robot", version="v2.1")
    broken = folder / "data" / "chunk-000" / "episode_000001.parquet"
    broken.write_bytes(broken.read_bytes()[:60])
    with pytest.raises(DatasetError) as err:
        read_lerobot(folder)
    message = str(err.value)
    assert str(folder) in message and "data/chunk-000/episode_000001.parquet" in message
    assert "truncated" in message


def test_an_empty_data_folder_is_an_error(tmp_path):
    folder = write_lerobot(_recording(), tmp_path / "robot")
    for file in (folder / "data").rglob("*.parquet"):
        file.unlink()
    with pytest.raises(DatasetError, match="no parquet files under data/") as err:
        read_lerobot(folder)
    assert str(folder) in str(err.value) and "file-000.parquet" in str(err.value)
