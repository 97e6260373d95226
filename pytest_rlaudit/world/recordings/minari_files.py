"""Recordings as Minari datasets (Farama's format for offline RL data), read and written
with minari itself (the ``[replay]`` extra: ``minari[arrow]``; Pillow, which its storage
imports without declaring it).

A dataset is a folder: ``<dataset>/data/metadata.json`` and one folder per episode
(:func:`write_minari` writes that layout, with the arrow backend and images stored
losslessly, ``jpeg_encoding=False``). :func:`read_minari` takes such a folder, its
``data`` folder, or the id of a dataset in minari's local store
(``minari.load_dataset``; ``MINARI_DATASETS_PATH`` says where that is). A Minari episode
holds one observation more than its actions (the one its last step returned); replay
drops it, as no action was taken on it.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..._optional import require
from ...errors import DatasetError
from .base import Recording, take

__all__ = ["read_minari", "write_minari", "is_minari_folder", "data_folder"]

#: Per-episode metadata keys this package adds to a Minari episode's metadata.json.
EPISODE_KEYS = ("rlaudit_return", "rlaudit_scenario", "rlaudit_env_steps")


def data_folder(path: str | os.PathLike[str]) -> Path | None:
    """The folder holding a Minari dataset's ``metadata.json`` (``path`` or
    ``path/data``), or None when ``path`` holds no Minari dataset."""
    folder = Path(path)
    for candidate in (folder / "data", folder):
        if (candidate / "metadata.json").is_file():
            return candidate
    return None


def is_minari_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a Minari dataset folder (or its ``data`` folder)."""
    return data_folder(path) is not None


def _minari() -> Any:
    require("PIL", "Minari datasets")  # minari's arrow storage imports it undeclared
    return require("minari", "Minari datasets")


def read_minari(source: str | os.PathLike[str]) -> Recording:
    """The recording of the Minari dataset ``source``: a folder, or a local dataset id."""
    minari = _minari()
    where = os.fspath(source)
    folder = data_folder(where)
    try:
        if folder is not None:
            dataset = minari.MinariDataset(folder)
        elif os.path.exists(where):
            raise DatasetError(
                f"{where}: not a Minari dataset (no metadata.json in it or in {where}/data); "
                "give a dataset folder, a local Minari dataset id, a LeRobot dataset folder "
                "or an .npz recording")
        else:
            dataset = minari.load_dataset(where)
        episodes = list(dataset.iterate_episodes())
        metadata = list(dataset.storage.get_episode_metadata(dataset.episode_indices))
    except DatasetError:
        raise
    except FileNotFoundError as exc:
        raise DatasetError(f"{where}: no such Minari dataset ({exc}); give a dataset folder or "
                           "the id of a dataset in minari's local store (minari list local)"
                           ) from None
    except Exception as exc:  # pyarrow's and json's errors on a truncated or broken file
        raise DatasetError(f"{where}: the Minari dataset cannot be read ({type(exc).__name__}: "
                           f"{exc}); it may be truncated: record it again") from None
    if not episodes:
        raise DatasetError(f"{where}: the Minari dataset holds no episodes; record some "
                           "(pytest_rlaudit.record, or --rl-record=DIR on an audit)")
    obs_parts = [take(e.observations, slice(0, len(e.actions))) for e in episodes]
    observations: Any
    if isinstance(obs_parts[0], dict):
        observations = {k: np.concatenate([p[k] for p in obs_parts]) for k in obs_parts[0]}
    else:
        observations = np.concatenate(obs_parts)
    lengths = [len(e.actions) for e in episodes]
    returns = None
    if all("rlaudit_return" in m for m in metadata):
        returns = np.array([m["rlaudit_return"] for m in metadata], dtype=np.float64)
    info = dataset.storage.metadata
    return Recording(
        where, "minari", observations, np.concatenate([np.asarray(e.actions) for e in episodes]),
        np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
        rewards=np.concatenate([np.asarray(e.rewards, dtype=np.float64) for e in episodes]),
        terminations=np.concatenate([np.asarray(e.terminations, dtype=bool) for e in episodes]),
        truncations=np.concatenate([np.asarray(e.truncations, dtype=bool) for e in episodes]),
        seeds=tuple(m.get("seed") for m in metadata), returns=returns,
        observation_space=dataset.observation_space, action_space=dataset.action_space,
        agent=info.get("algorithm_name") or None, ids=tuple(int(e.id) for e in episodes))


def write_minari(recording: Recording, path: str | os.PathLike[str], *,
                 last_observations: Sequence[Any] | None = None,
                 env_spec: Any = None, scenarios: Sequence[str] | None = None,
                 description: str | None = None) -> Path:
    """Write ``recording`` as a Minari dataset in the folder ``path`` (its ``data``
    folder holds the files; ``path`` must not hold a dataset already) and return the
    ``data`` folder. ``last_observations``: each episode's final observation (the one
    its last step returned); without them the last observation acted on is repeated.
    The recording's spaces are required (a Minari dataset stores them)."""
    minari = _minari()
    from minari.data_collector.episode_buffer import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage

    if recording.observation_space is None or recording.action_space is None:
        raise DatasetError(f"{recording.source}: a Minari dataset stores the observation and "
                           "action spaces; this recording has none: give them")
    data = Path(path) / "data"
    if (data / "metadata.json").exists():
        raise DatasetError(f"{path}: holds a Minari dataset already; remove it or record into "
                           "another folder")
    data.mkdir(parents=True, exist_ok=True)
    # images lossless: minari 0.5.4 JPEG-encodes them unless told not to (0.5.3, which
    # Python 3.10 gets, stores raw arrays and has no such argument)
    lossless = ({"jpeg_encoding": False}
                if "jpeg_encoding" in inspect.signature(MinariStorage.new).parameters else {})
    storage = MinariStorage.new(data, observation_space=recording.observation_space,
                                action_space=recording.action_space, env_spec=env_spec,
                                data_format="arrow", **lossless)
    buffers = []
    obs, n = recording.observations, recording.episodes
    for i, (start, end) in enumerate(zip(recording.starts, recording.ends, strict=True)):
        steps = take(obs, slice(int(start), int(end)))
        last = (last_observations[i] if last_observations is not None
                and last_observations[i] is not None else take(steps, slice(-1, None)))
        if not isinstance(last, dict):
            last = np.asarray(last).reshape((1, *np.shape(steps)[1:]))
        else:
            last = {k: np.asarray(v).reshape((1, *steps[k].shape[1:])) for k, v in last.items()}
        episode_obs = ({k: np.concatenate([steps[k], last[k]]) for k in steps}
                       if isinstance(steps, dict) else np.concatenate([steps, last]))
        length = int(end - start)
        rewards = (np.zeros(length) if recording.rewards is None
                   else recording.rewards[start:end])
        terms = (np.zeros(length, dtype=bool) if recording.terminations is None
                 else recording.terminations[start:end])
        truncs = (np.zeros(length, dtype=bool) if recording.truncations is None
                  else recording.truncations[start:end])
        seed = recording.seeds[i] if recording.seeds else None
        buffers.append(EpisodeBuffer(id=i, seed=None if seed is None else int(seed),
                                     observations=episode_obs,
                                     actions=recording.actions[start:end],
                                     rewards=list(rewards), terminations=list(terms),
                                     truncations=list(truncs)))
    storage.update_episodes(buffers)
    returns = recording.episode_returns()
    storage.update_episode_metadata(
        [{"rlaudit_return": None if returns is None else float(returns[i]),
          "rlaudit_scenario": None if scenarios is None else scenarios[i]}
         for i in range(n)], range(n))
    storage.update_metadata({
        "dataset_id": f"rlaudit/{Path(path).name}-v0",
        "algorithm_name": recording.agent or "",
        "minari_version": minari.__version__,
        "description": description or "episodes recorded by pytest-rlaudit",
    })
    return data
