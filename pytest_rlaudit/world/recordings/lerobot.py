"""Recordings as LeRobot datasets (Hugging Face's robot-learning format), read with pyarrow
alone (the ``[replay]`` extra), never the ``lerobot`` package.

A LeRobot dataset is a folder with ``meta/info.json`` and parquet files under ``data/``:

- v2.0 / v2.1: one file per episode, ``data/chunk-000/episode_000000.parquet``;
- v3.0: many episodes per file, ``data/chunk-000/file-000.parquet``.

Either way every row is one frame with ``episode_index`` and ``frame_index``; the frames
are read from every parquet file under ``data/`` and ordered by the two. The observations
are the ``observation.state`` column and the actions the ``action`` column (name others
with ``state=`` and ``action=``), each reshaped to its feature's ``shape`` in
``info.json``; ``next.reward`` and ``next.done``, where present, are the rewards and
terminations. Image and video columns are not read. LeRobot stores no action bounds:
replay takes the candidate's action space (an SB3 model's) or ``action_space=``, else an
unbounded one, and then normalises divergence by the recorded spread.

>>> import tempfile, sys, os
>>> sys.path.insert(0, os.getcwd())  # the repository root, for the tests' writer
>>> from tests.replay_files import write_lerobot
>>> from pytest_rlaudit.world.recordings import Recording
>>> rec = Recording("x", "npz", np.arange(10.0).reshape(5, 2), np.zeros((5, 1)),
...                 np.array([0, 3]))
>>> folder = write_lerobot(rec, tempfile.mkdtemp() + "/robot")
>>> read_lerobot(folder).lengths.tolist()
[3, 2]
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..._optional import require
from ...errors import DatasetError
from .base import Recording

__all__ = ["read_lerobot", "STATE", "ACTION"]

#: The default observation and action columns.
STATE, ACTION = "observation.state", "action"


def _column(table: Any, name: str, feature: dict[str, Any] | None) -> np.ndarray:
    values = table.column(name).combine_chunks()
    try:
        array = np.stack(values.to_numpy(zero_copy_only=False)) if hasattr(
            values, "flatten") else values.to_numpy(zero_copy_only=False)
    except ValueError:  # a plain (not list) column
        array = np.asarray(values.to_numpy(zero_copy_only=False))
    array = np.asarray(array)
    shape = tuple((feature or {}).get("shape") or array.shape[1:])
    return array.reshape((len(array), *shape)) if array.size else array


def read_lerobot(path: str | os.PathLike[str], *, state: str | None = None,
                 action: str | None = None) -> Recording:
    """The recording of the LeRobot dataset folder ``path`` (see the module); ``state``
    and ``action`` name its observation and action columns where they are not
    ``observation.state`` and ``action``."""
    pq = require("pyarrow.parquet", "LeRobot datasets")
    pa = require("pyarrow", "LeRobot datasets")
    folder = Path(path)
    where = os.fspath(path)
    try:
        info = json.loads((folder / "meta" / "info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{where}: meta/info.json cannot be read ({exc}); a LeRobot "
                           "dataset folder holds it") from None
    files = sorted((folder / "data").rglob("*.parquet"))
    if not files:
        raise DatasetError(f"{where}: no parquet files under data/; the LeRobot dataset "
                           "holds no frames (record some episodes, or give the dataset's "
                           "root folder)")
    tables = []
    for file in files:
        try:
            tables.append(pq.read_table(file))
        except Exception as exc:  # pyarrow's ArrowInvalid and OSError on a broken file
            raise DatasetError(f"{where}: {file.relative_to(folder)} cannot be read as parquet "
                               f"({type(exc).__name__}: {exc}); it may be truncated: copy the "
                               "dataset again") from None
    try:
        table = pa.concat_tables(tables, promote_options="default")
    except TypeError:  # pyarrow < 14 has no promote_options
        table = pa.concat_tables(tables, promote=True)
    features = info.get("features") or {}
    state, action = state or STATE, action or ACTION
    columns = table.column_names
    for role, name, argument in (("action", action, "action"),
                                 ("observation", state, "state")):
        if name not in columns:
            numeric = [c for c in columns if c not in ("timestamp", "frame_index",
                                                       "episode_index", "index", "task_index")]
            raise DatasetError(
                f"{where}: has no column {name!r} for the {role}s (its columns: "
                f"{', '.join(numeric) or 'none'}); name the {role} column: replay(..., "
                f"{argument}='...') or --rl-replay-{argument}=...")
    if "episode_index" not in columns:
        raise DatasetError(f"{where}: has no 'episode_index' column; every LeRobot frame names "
                           "its episode")
    episode = table.column("episode_index").to_numpy()
    frame = (table.column("frame_index").to_numpy() if "frame_index" in columns
             else np.arange(len(episode)))
    order = np.lexsort((frame, episode))
    table = table.take(pa.array(order))
    episode = episode[order]
    observations = _column(table, state, features.get(state))
    actions = _column(table, action, features.get(action))
    starts = np.flatnonzero(np.r_[True, episode[1:] != episode[:-1]]) if len(episode) else (
        np.zeros(0, dtype=np.int64))
    rewards = (table.column("next.reward").to_numpy().astype(np.float64).reshape(-1)
               if "next.reward" in columns else None)
    dones = (table.column("next.done").to_numpy().astype(bool).reshape(-1)
             if "next.done" in columns else None)
    names = (features.get(action) or {}).get("names")
    if isinstance(names, dict):  # LeRobot's {"motors": [...]} form
        names = next(iter(names.values()), None)
    # no spaces: LeRobot stores shapes, not bounds (replay takes the candidate's, or
    # unbounded ones from the shapes)
    return Recording(
        where, "lerobot", observations, actions, starts, rewards=rewards,
        terminations=dones,
        ids=tuple(int(e) for e in episode[starts]),
        action_names=tuple(str(n) for n in names) if isinstance(names, list) else ())
