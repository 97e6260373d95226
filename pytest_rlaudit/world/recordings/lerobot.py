"""Recordings as LeRobot datasets (Hugging Face's robot-learning format), read with pyarrow
alone (the ``[replay]`` extra), never the ``lerobot`` package.

A LeRobot dataset is a folder with ``meta/info.json`` (its ``codebase_version``,
``features`` and ``data_path``) and parquet files under ``data/``:

- v2.0 / v2.1: one file per episode, ``data/chunk-000/episode_000000.parquet``, with the
  episodes listed in ``meta/episodes.jsonl``;
- v3.0: many episodes per file, ``data/chunk-000/file-000.parquet``, with the episodes
  listed in ``meta/episodes/chunk-000/file-000.parquet``.

Either way every row is one frame carrying ``episode_index`` and ``frame_index``: the
frames of every parquet file under ``data/`` are read and ordered by the two, and each
run of one ``episode_index`` is an episode (its id). The observations are the
``observation.state`` column and the actions the ``action`` column (name others with
``state=`` and ``action=``), list columns read in their own dtype and reshaped to their
feature's ``shape`` in ``info.json``; ``next.reward`` and ``next.done``, where present,
are the rewards and terminations. Image and video columns are not read.

The observation space is an unbounded Box of the state's shape. LeRobot stores shapes,
not bounds, so the recording holds no action space: replay takes the candidate's own (an
SB3 model's, Discrete or bounded), else ``action_space=``, else an unbounded
``Box(-inf, inf, shape, float32)`` of the action feature's shape (:func:`action_box`).

>>> import tempfile, sys, os
>>> sys.path.insert(0, os.getcwd())  # the repository root, for the tests' writer
>>> from tests.replay_files import write_lerobot
>>> from pytest_rlaudit.world.recordings import Recording
>>> rec = Recording("x", "npz", np.arange(10.0).reshape(5, 2), np.zeros((5, 1)),
...                 np.array([0, 3]))
>>> folder = write_lerobot(rec, tempfile.mkdtemp() + "/robot")
>>> back = read_lerobot(folder)
>>> back.lengths.tolist(), back.ids, back.observations.shape, back.observation_space
([3, 2], (0, 1), (5, 2), Box(-inf, inf, (2,), float64))
>>> action_box(back)
Box(-inf, inf, (1,), float32)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from ..._optional import require
from ...errors import DatasetError
from .base import Recording

__all__ = ["read_lerobot", "action_box", "feature_names", "STATE", "ACTION"]

#: The default observation and action columns.
STATE, ACTION = "observation.state", "action"
#: The bookkeeping columns every LeRobot frame has (not data to name as state or action).
BOOKKEEPING = ("timestamp", "frame_index", "episode_index", "index", "task_index")
#: What each codebase_version's data files are called, for the messages.
LAYOUTS = {"v2.0": "data/chunk-000/episode_000000.parquet, one per episode",
           "v2.1": "data/chunk-000/episode_000000.parquet, one per episode",
           "v3.0": "data/chunk-000/file-000.parquet, many episodes each"}


def _info(folder: Path, where: str) -> dict[str, Any]:
    try:
        info = json.loads((folder / "meta" / "info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{where}: meta/info.json cannot be read ({exc}); a LeRobot "
                           "dataset folder holds it: give the dataset's root folder") from None
    if not isinstance(info, dict):
        raise DatasetError(f"{where}: meta/info.json holds no JSON object; it should be "
                           "LeRobot's (codebase_version, features, data_path)")
    return info


def _values(pa: Any, pc: Any, column: Any, name: str, where: str) -> np.ndarray:
    """A column's rows as one array: (rows, *list widths), in the column's own dtype."""
    values = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    rows, shape = len(values), []
    while True:
        if values.null_count:
            raise DatasetError(f"{where}: column {name!r} has {values.null_count} empty (null) "
                               "values; every frame needs one: record the dataset again or "
                               "drop those frames")
        kind = values.type
        if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)
                or pa.types.is_fixed_size_list(kind)):
            break
        lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
        if len(lengths) and np.any(lengths != lengths[0]):
            raise DatasetError(f"{where}: column {name!r} holds lists of different lengths "
                               f"({sorted(set(lengths.tolist()))[:5]}); a state or action "
                               "column has one fixed shape per frame")
        shape.append(int(lengths[0]) if len(lengths) else 0)
        values = values.flatten()
    kind = values.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind)):
        raise DatasetError(f"{where}: column {name!r} holds {kind}, not numbers; name a "
                           "numeric column (images and videos are not replayed)")
    return np.asarray(values.to_numpy(zero_copy_only=False)).reshape((rows, *shape))


def _shaped(array: np.ndarray, name: str, feature: Any, where: str) -> np.ndarray:
    """``array`` reshaped to its feature's ``shape`` in info.json, where it has one."""
    shape = feature.get("shape") if isinstance(feature, dict) else None
    if not shape:
        return array
    want = tuple(int(n) for n in shape)
    if int(np.prod(want)) != int(np.prod(array.shape[1:])):
        raise DatasetError(f"{where}: column {name!r} holds {tuple(array.shape[1:])} per "
                           f"frame, but meta/info.json's features say shape {list(want)}; "
                           "the dataset is inconsistent: write it again")
    return array.reshape((len(array), *want))


def feature_names(path: str | os.PathLike[str], feature: str = STATE) -> tuple[str, ...]:
    """The names ``meta/info.json`` of the LeRobot dataset at ``path`` gives the elements of
    ``feature`` (the state, by default): a robot's joints, say; () where it names none."""
    folder = Path(path)
    features = _info(folder, f"LeRobot dataset {folder}").get("features")
    return _names(features.get(feature)) if isinstance(features, dict) else ()


def _names(feature: Any) -> tuple[str, ...]:
    names = feature.get("names") if isinstance(feature, dict) else None
    if isinstance(names, dict):  # LeRobot's {"motors": [...]} form
        names = next(iter(names.values()), None)
    if isinstance(names, list) and all(isinstance(n, (str, int)) for n in names):
        return tuple(str(n) for n in names)
    return ()


def action_box(recording: Recording) -> spaces.Box:
    """The unbounded ``Box(-inf, inf, shape, float32)`` of a recording's actions: all a
    LeRobot dataset says of its action space."""
    return spaces.Box(-np.inf, np.inf, tuple(np.asarray(recording.actions).shape[1:]),
                      dtype=np.float32)


def read_lerobot(path: str | os.PathLike[str], *, state: str | None = None,
                 action: str | None = None) -> Recording:
    """The recording of the LeRobot dataset folder ``path`` (v2.0, v2.1 or v3.0; see the
    module); ``state`` and ``action`` name its observation and action columns where they
    are not ``observation.state`` and ``action``. Its ``action_space`` is None: LeRobot
    stores no action bounds (:func:`action_box` is the unbounded Box of its shape)."""
    pq = require("pyarrow.parquet", "LeRobot datasets")
    pa = require("pyarrow", "LeRobot datasets")
    pc = require("pyarrow.compute", "LeRobot datasets")
    folder, where = Path(path), os.fspath(path)
    info = _info(folder, where)
    version = str(info.get("codebase_version") or "")
    layout = LAYOUTS.get(version) or str(info.get("data_path") or "data/**/*.parquet")
    files = sorted((folder / "data").rglob("*.parquet"))
    if not files:
        raise DatasetError(f"{where}: no parquet files under data/ (a LeRobot {version or ''} "
                           f"dataset keeps its frames in {layout}); the dataset holds no "
                           "frames: give the dataset's root folder, or download it again")
    state, action = state or STATE, action or ACTION
    optional = {"frame_index", "next.reward", "next.done"}
    parts: list[dict[str, np.ndarray]] = []
    for file in files:
        name = file.relative_to(folder).as_posix()
        try:
            parquet = pq.ParquetFile(file)
            columns = list(parquet.schema_arrow.names)
        except Exception as exc:  # pyarrow's ArrowInvalid, OSError: a broken footer
            raise DatasetError(f"{where}: {name} cannot be read as parquet "
                               f"({type(exc).__name__}: {exc}); it may be truncated: copy or "
                               "download the dataset again") from None
        for role, column, argument in (("action", action, "action"),
                                       ("observation", state, "state")):
            if column not in columns:
                data = [c for c in columns if c not in BOOKKEEPING]
                raise DatasetError(
                    f"{where}: {name} has no column {column!r} for the {role}s (its "
                    f"columns: {', '.join(data) or 'none'}); name the {role} column: "
                    f"replay(..., {argument}='...') or --rl-replay-{argument}=...")
        if "episode_index" not in columns:
            raise DatasetError(f"{where}: {name} has no 'episode_index' column; every LeRobot "
                               "frame names its episode: this is no LeRobot data file")
        optional &= set(columns)
        wanted = [state, action, "episode_index", *sorted(optional & set(columns))]
        try:
            table = parquet.read(columns=wanted)
        except Exception as exc:
            raise DatasetError(f"{where}: {name} cannot be read as parquet "
                               f"({type(exc).__name__}: {exc}); it may be truncated: copy or "
                               "download the dataset again") from None
        parts.append({c: _values(pa, pc, table.column(c), c, f"{where}: {name}")
                      for c in wanted})
    optional = {c for c in optional if all(c in part for part in parts)}

    def joined(column: str) -> np.ndarray:
        try:
            return np.concatenate([part[column] for part in parts])
        except ValueError:
            shapes = sorted({str(part[column].shape[1:]) for part in parts})
            raise DatasetError(f"{where}: column {column!r} has different shapes in "
                               f"different files ({', '.join(shapes)}); the dataset is "
                               "inconsistent: write it again") from None

    episode = joined("episode_index").reshape(-1).astype(np.int64)
    if not len(episode):
        raise DatasetError(f"{where}: the parquet files under data/ hold no frames; record "
                           "some episodes first")
    frame = (joined("frame_index").reshape(-1) if "frame_index" in optional
             else np.arange(len(episode)))
    order = np.lexsort((frame, episode))
    episode = episode[order]
    given = info.get("features")
    features: dict[str, Any] = given if isinstance(given, dict) else {}
    observations = _shaped(joined(state)[order], state, features.get(state), where)
    actions = _shaped(joined(action)[order], action, features.get(action), where)
    starts = np.flatnonzero(np.r_[True, episode[1:] != episode[:-1]])
    rewards = (joined("next.reward")[order].reshape(-1) if "next.reward" in optional
               else None)
    dones = (joined("next.done")[order].reshape(-1).astype(bool) if "next.done" in optional
             else None)
    box = spaces.Box(-np.inf, np.inf, tuple(observations.shape[1:]),
                     dtype=observations.dtype if observations.dtype.kind == "f"
                     else np.float32)
    names = _names(features.get(action))
    return Recording(
        where, "lerobot", observations, actions, starts, rewards=rewards,
        terminations=dones, observation_space=box,
        ids=tuple(int(e) for e in episode[starts]),
        action_names=names if len(names) == int(np.prod(actions.shape[1:])) else ())
