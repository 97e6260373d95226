"""LeRobot datasets read with pyarrow alone (issue 45): both layouts (v2.1: a parquet file
per episode; v3.0: episodes packed in one file), columns named by the user, and broken
folders as errors that name the file and the fix."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")
from pytest_rlaudit.errors import DatasetError
from pytest_rlaudit.world.recordings import Recording, load_recording
from tests.replay_files import write_lerobot


def _recording() -> Recording:
    rng = np.random.default_rng(0)
    return Recording("src", "npz", rng.normal(size=(9, 3)).astype(np.float32),
                     rng.normal(size=(9, 2)).astype(np.float32), np.array([0, 4, 6]),
                     rewards=np.arange(9, dtype=np.float64))


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_both_layouts_read_back_the_episodes_written(tmp_path, version):
    rec = _recording()
    back = load_recording(write_lerobot(rec, tmp_path / "robot", version=version))
    assert back.format == "lerobot" and back.ids == (0, 1, 2)
    assert back.starts.tolist() == [0, 4, 6]
    np.testing.assert_array_equal(back.observations, rec.observations)
    np.testing.assert_array_equal(back.actions, rec.actions)
    np.testing.assert_array_equal(back.rewards, rec.rewards)


def test_columns_of_other_names_are_named_by_the_user(tmp_path):
    folder = write_lerobot(_recording(), tmp_path / "robot", state="observation.joints",
                           action="action.joints")
    with pytest.raises(DatasetError) as err:
        load_recording(folder)
    message = str(err.value)
    assert "has no column 'action'" in message and "action.joints" in message
    assert "action='...'" in message and "--rl-replay-action" in message
    back = load_recording(folder, state="observation.joints", action="action.joints")
    assert back.steps == 9


def test_a_truncated_parquet_file_is_named(tmp_path):
    folder = write_lerobot(_recording(), tmp_path / "robot", version="v2.1")
    broken = folder / "data" / "chunk-000" / "episode_000001.parquet"
    broken.write_bytes(broken.read_bytes()[:40])
    with pytest.raises(DatasetError, match=r"episode_000001.parquet cannot be read as parquet"):
        load_recording(folder)


def test_a_folder_without_frames_is_an_error(tmp_path):
    folder = write_lerobot(_recording(), tmp_path / "robot")
    for file in (folder / "data").rglob("*.parquet"):
        file.unlink()
    with pytest.raises(DatasetError, match="no parquet files under data/"):
        load_recording(folder)
