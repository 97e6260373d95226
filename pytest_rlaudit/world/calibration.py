"""Calibration: what a disturbance's size means on this env, measured on the audit's own
nominal episodes, so that ``obs_noise`` with ``sigma=0.1`` is a tenth of what each
observation element normally varies on every env (DESIGN section 13).

Deterministic: the spread is computed from the nominal observations in episode order, and
those depend only on agent, env, seed and episode index.

>>> import numpy as np
>>> episodes = [[np.array([0.0, 1.0]), np.array([2.0, 1.0])], [np.array([4.0, 1.0])]]
>>> observation_spread(episodes)
(1.632993161855452, 0.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["observation_spread"]


def observation_spread(episodes: Iterable[Sequence[Any]]) -> tuple[float, ...] | None:
    """The standard deviation of each observation element over every observation of
    ``episodes`` (each a sequence of array observations, in episode order), or None when
    the observations are not float arrays (images keep the range as their unit)."""
    frames = [np.asarray(obs) for episode in episodes for obs in episode]
    if not frames or not np.issubdtype(frames[0].dtype, np.floating):
        return None
    stacked = np.stack(frames).astype(np.float64).reshape(len(frames), -1)
    return tuple(float(v) for v in stacked.std(axis=0))
