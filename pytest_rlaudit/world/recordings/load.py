"""Which reader a recording's source needs: an ``.npz`` file, a LeRobot dataset folder
(``meta/info.json``), a Minari dataset folder or a local Minari dataset id."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import Recording

__all__ = ["load_recording", "RecordingLike"]

#: What replay takes as a recording: a :class:`Recording`, or where one is.
RecordingLike = Any


def load_recording(source: RecordingLike, *, state: str | None = None,
                   action: str | None = None) -> Recording:
    """The :class:`Recording` at ``source``: a ``.npz`` file (:mod:`.npz`), a LeRobot
    dataset folder (:mod:`.lerobot`; ``state`` and ``action`` name its observation and
    action columns where they are not ``observation.state`` and ``action``), a Minari
    dataset folder or local dataset id (:mod:`.minari_files`), or a Recording.

    >>> import numpy as np
    >>> rec = Recording("x", "npz", np.zeros((3, 2)), np.zeros(3, dtype=int), np.array([0]))
    >>> load_recording(rec) is rec
    True
    """
    if isinstance(source, Recording):
        return source
    where = os.fspath(source)
    if where.lower().endswith(".npz"):
        from .npz import read_npz

        return read_npz(where)
    if (Path(where) / "meta" / "info.json").is_file():
        from .lerobot import read_lerobot

        lerobot: Recording = read_lerobot(where, state=state, action=action)
        return lerobot
    from .minari_files import read_minari

    return read_minari(where)
