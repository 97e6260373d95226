"""Recordings as one plain ``.npz`` file: the format for recordings from code of one's own.

Keys (``numpy.savez``):

- ``observations``: one row per step, every episode's steps in order; for Dict
  observations one array per key, named ``observations/<key>``;
- ``actions``: one row per step, as the env received them;
- ``episode_starts``: one bool per step, True at each episode's first step (SB3's name
  and meaning);
- optional: ``rewards``, ``terminations`` and ``truncations`` (one per step), ``seeds``
  and ``returns`` (one per episode), ``agent`` (a string: who recorded it).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
>>> np.savez(path, observations=np.zeros((5, 4)), actions=np.zeros(5, dtype=np.int64),
...          episode_starts=np.array([1, 0, 0, 1, 0], dtype=bool))
>>> read_npz(path).lengths.tolist()
[3, 2]
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

import numpy as np

from ...errors import DatasetError
from .base import Recording

__all__ = ["read_npz", "write_npz", "OBS_PREFIX"]

#: The key prefix of a Dict observation's arrays.
OBS_PREFIX = "observations/"


def read_npz(path: str | os.PathLike[str]) -> Recording:
    """The recording in the ``.npz`` file ``path`` (see the module for its keys)."""
    where = os.fspath(path)
    try:
        with np.load(where, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except FileNotFoundError:
        raise DatasetError(f"{where}: no such file; give the path of an .npz recording") from None
    except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:
        raise DatasetError(f"{where}: cannot be read as an .npz file ({exc}); it may be "
                           "truncated: write it again with numpy.savez") from None
    keyed = {k[len(OBS_PREFIX):]: v for k, v in arrays.items() if k.startswith(OBS_PREFIX)}
    obs: Any = keyed or arrays.get("observations")
    missing = [k for k, v in (("observations", obs), ("actions", arrays.get("actions")),
                              ("episode_starts", arrays.get("episode_starts"))) if v is None]
    if missing:
        raise DatasetError(
            f"{where}: has no {' or '.join(repr(m) for m in missing)} (it holds "
            f"{sorted(arrays) or 'nothing'}); a recording .npz holds 'observations' (or "
            "'observations/<key>' per Dict key), 'actions' and 'episode_starts' (True at each "
            "episode's first step), one row per step")
    flags = np.asarray(arrays["episode_starts"]).astype(bool).reshape(-1)
    if flags.size and not flags[0]:
        raise DatasetError(f"{where}: 'episode_starts' is False at step 0; the first step "
                           "starts an episode, so it must be True")
    seeds = arrays.get("seeds")
    return Recording(
        where, "npz", obs, np.asarray(arrays["actions"]), np.flatnonzero(flags),
        rewards=arrays.get("rewards"), terminations=arrays.get("terminations"),
        truncations=arrays.get("truncations"),
        seeds=() if seeds is None else tuple(int(s) for s in seeds),
        returns=arrays.get("returns"),
        agent=str(arrays["agent"]) if "agent" in arrays else None)


def write_npz(recording: Recording, path: str | os.PathLike[str]) -> None:
    """Write ``recording`` as an ``.npz`` file that :func:`read_npz` reads back."""
    flags = np.zeros(recording.steps, dtype=bool)
    flags[recording.starts] = True
    obs = recording.observations
    arrays: dict[str, Any] = ({f"{OBS_PREFIX}{k}": v for k, v in obs.items()}
                              if isinstance(obs, dict) else {"observations": obs})
    arrays.update(actions=recording.actions, episode_starts=flags)
    for key in ("rewards", "terminations", "truncations", "returns"):
        if getattr(recording, key) is not None:
            arrays[key] = getattr(recording, key)
    if recording.agent:
        arrays["agent"] = np.array(recording.agent)
    if recording.seeds and all(s is not None for s in recording.seeds):
        arrays["seeds"] = np.asarray(recording.seeds, dtype=np.int64)
    np.savez(path, **arrays)
