"""Rows of a batch of observations: one array, or a dict of arrays (a Dict observation
space: each key's array has the rows on its first axis), taken and put by row indices.

A lock-step batch (:mod:`pytest_rlaudit.rollout.lockstep`) keeps what every row's agent
saw in one such batch, a batch kind returns its rows' observations as one, and a
recording stacks its steps so; these few functions treat both forms alike, with the
array's own indexing on the hot path.

>>> import numpy as np
>>> batch = {"pos": np.zeros((3, 2)), "goal": np.ones((3, 1))}
>>> put(batch, np.array([0, 2]), {"pos": np.full((2, 2), 5.0), "goal": np.zeros((2, 1))})
>>> take(batch, np.array([2]))["pos"].tolist(), row_of(batch, 0)["goal"].tolist()
([[5.0, 5.0]], [0.0])
>>> take(np.arange(4), np.array([1, 3])).tolist()
[1, 3]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["as_rows", "blank", "copied", "put", "row_of", "take"]


def blank(first: Any, rows: int) -> Any:
    """A batch of ``rows`` rows, zeros, of the shape and dtype of the rows of ``first``."""
    if isinstance(first, dict):
        return {k: blank(v, rows) for k, v in first.items()}
    return np.zeros((rows, *first.shape[1:]), dtype=first.dtype)


def take(batch: Any, rows: Any) -> Any:
    """``batch[rows]``: the rows ``rows`` (indices or a mask: a batch; a slice: a view)."""
    if isinstance(batch, dict):
        return {k: v[rows] for k, v in batch.items()}
    return batch[rows]


def put(batch: Any, rows: Any, value: Any) -> None:
    """``batch[rows] = value``, ``value`` a batch of those rows (or one row, for an int)."""
    if isinstance(batch, dict):
        for k, v in batch.items():
            v[rows] = value[k]
    else:
        batch[rows] = value


def row_of(batch: Any, i: int) -> Any:
    """Row ``i`` of ``batch``, as one observation (views of the batch's arrays)."""
    if isinstance(batch, dict):
        return {k: v[i] for k, v in batch.items()}
    return batch[i]


def copied(batch: Any) -> Any:
    """A copy of ``batch`` (or of one row of it), sharing no memory with it."""
    if isinstance(batch, dict):
        return {k: np.array(v, copy=True) for k, v in batch.items()}
    return np.array(batch, copy=True)


def as_rows(obs: Any) -> Any:
    """A batch as numpy: an array, or a dict of arrays for a Dict observation."""
    if isinstance(obs, dict):
        return {k: np.asarray(v) for k, v in obs.items()}
    return np.asarray(obs)
