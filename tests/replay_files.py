"""Recordings written as LeRobot datasets, for tests: the two layouts replay reads
(v2.1: one parquet file per episode; v3.0: episodes packed into one file), with the
``meta/info.json`` LeRobot writes (its codebase_version, fps, features and data_path) and
its episode list (``meta/episodes.jsonl`` or ``meta/episodes/chunk-000/file-000.parquet``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def write_lerobot(recording, folder, *, version: str = "v3.0", state: str = "observation.state",
                  action: str = "action") -> Path:
    """Write ``recording`` (array observations) as a LeRobot dataset in ``folder``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    obs = np.asarray(recording.observations)
    acts = np.asarray(recording.actions)
    steps = recording.steps
    episode = np.repeat(np.arange(recording.episodes), recording.lengths)
    frame = np.concatenate([np.arange(n) for n in recording.lengths])

    def listed(values: np.ndarray) -> pa.Array:
        flat = values.reshape(len(values), -1)
        return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), flat.shape[1])

    columns = {state: listed(obs), action: listed(acts),
               "timestamp": pa.array(frame / 30.0, pa.float32()),
               "frame_index": pa.array(frame), "episode_index": pa.array(episode),
               "index": pa.array(np.arange(steps))}
    if recording.rewards is not None:
        columns["next.reward"] = pa.array(np.asarray(recording.rewards, np.float32))
    if recording.terminations is not None:
        columns["next.done"] = pa.array(np.asarray(recording.terminations, bool))
    table = pa.table(columns)
    data = folder / "data" / "chunk-000"
    data.mkdir(parents=True)
    (folder / "meta").mkdir()
    if version == "v3.0":
        path = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
        pq.write_table(table, data / "file-000.parquet")
        episodes = folder / "meta" / "episodes" / "chunk-000"
        episodes.mkdir(parents=True)
        pq.write_table(pa.table({"episode_index": pa.array(np.arange(recording.episodes)),
                                 "length": pa.array(recording.lengths)}),
                       episodes / "file-000.parquet")
    else:
        path = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
        lines = []
        for e in range(recording.episodes):
            pq.write_table(table.slice(int(recording.starts[e]), int(recording.lengths[e])),
                           data / f"episode_{e:06d}.parquet")
            lines.append(json.dumps({"episode_index": e, "length": int(recording.lengths[e])}))
        (folder / "meta" / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    info = {"codebase_version": version, "fps": 30, "total_episodes": recording.episodes,
            "total_frames": steps, "data_path": path,
            "features": {state: {"dtype": str(obs.dtype), "shape": list(obs.shape[1:]),
                                 "names": None},
                         action: {"dtype": str(acts.dtype), "shape": list(acts.shape[1:]) or [1],
                                  "names": list(recording.action_names) or None}}}
    (folder / "meta" / "info.json").write_text(json.dumps(info, indent=2))
    return folder
