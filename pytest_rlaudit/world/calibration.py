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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["observation_spread", "CALIBRATED", "definition"]

#: Scenario parameters measured on each run's own nominal episodes, not chosen: two runs of
#: one scenario definition (``obs_noise``, sigma 0.1 of the spread) differ in them when
#: their agents do, and still audit the same scenario.
CALIBRATED = ("spread",)


def definition(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` without the calibrated ones: what makes two runs the same scenario.

    >>> definition({"sigma": 0.1, "scale": "relative", "spread": [0.5, 0.2]})
    {'sigma': 0.1, 'scale': 'relative'}
    """
    return {k: v for k, v in params.items() if k not in CALIBRATED}


def observation_spread(episodes: Iterable[Any],
                       keys: Sequence[str] | str | None = None) -> tuple[float, ...] | None:
    """The standard deviation of each observation element over every observation of
    ``episodes`` (each a sequence of array observations, in episode order), or None when
    the observations are not float arrays (images keep the range as their unit).

    Dict observations (a goal-conditioned agent's; an episode is then a dict of arrays,
    one row per step) are measured in the keys the noise acts on: ``keys`` as the
    scenario gives them, by default every key but ``desired_goal``
    (:func:`~.perturbations.keys.observed_keys`), one value per element of each key in
    sorted key order; None unless all of them are float.

    >>> goal = {"observation": np.array([[0.0], [2.0]]), "desired_goal": np.array([[5.0], [9.0]])}
    >>> observation_spread([goal]), observation_spread([goal], keys=["desired_goal"])
    ((1.0,), (2.0,))
    """
    listed = list(episodes)
    if listed and isinstance(listed[0], Mapping):
        return _dict_spread(listed, keys)
    # an episode recorded as one array (a row a step) is taken whole: stacking its rows
    # one by one cost half a second for a thousand 500-step episodes
    parts = [episode if isinstance(episode, np.ndarray)
             else np.stack([np.asarray(obs) for obs in episode])
             for episode in listed if len(episode)]
    if not parts or not np.issubdtype(parts[0].dtype, np.floating):
        return None
    stacked = np.concatenate([p.reshape(len(p), -1) for p in parts]).astype(np.float64)
    return tuple(float(v) for v in stacked.std(axis=0))


def _dict_spread(episodes: list[Mapping[str, Any]],
                 keys: Sequence[str] | str | None) -> tuple[float, ...] | None:
    """:func:`observation_spread` of episodes of Dict observations (dicts of arrays)."""
    from .perturbations.keys import observed_keys

    chosen = observed_keys(episodes[0], keys, owner="the noise's calibration")
    columns = []
    for key in chosen:
        rows = [np.asarray(episode[key]) for episode in episodes]
        if not np.issubdtype(rows[0].dtype, np.floating):
            return None
        columns.append(np.concatenate([r.reshape(len(r), -1) for r in rows]).astype(np.float64))
    if not columns:
        return None
    return tuple(float(v) for v in np.concatenate(columns, axis=1).std(axis=0))
