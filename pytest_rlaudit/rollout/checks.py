"""The runner's checks of what crosses between agent and env: observations (finite) and
actions (in the action space), a whole batch at a time."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from ..errors import RolloutError
from .slots import where

__all__ = ["ActionChecker", "all_finite", "check_obs", "show"]


def check_obs(obs: Any, scenario: str, episode: int, seed: int, step: int) -> None:
    """Raise a :class:`RolloutError` saying where if ``obs`` holds a non-finite number."""
    arrays = obs.values() if isinstance(obs, dict) else (obs,)
    if not all(np.asarray(a).dtype.kind != "f" or np.isfinite(a).all() for a in arrays):
        raise RolloutError(
            f"the env returned a non-finite observation {obs!r} at "
            f"{where(scenario, episode, seed, step)}",
            scenario=scenario, episode=episode, step=step,
        )


def show(action: Any) -> str:
    """An action as an error message shows it."""
    value = np.asarray(action)
    return repr(value.tolist()) if value.dtype != object else repr(action)


def all_finite(batch: Any) -> bool:
    """Whether a batch (an array or a dict of arrays) holds only finite floats."""
    arrays = batch.values() if isinstance(batch, dict) else (batch,)
    return all(a.dtype.kind != "f" or bool(np.isfinite(a).all()) for a in arrays)


class ActionChecker:
    """Vectorised validation of a batch of actions against the env's action space."""

    def __init__(self, space: spaces.Space) -> None:
        self.space = space
        if isinstance(space, spaces.Discrete):
            self.kind = "discrete"
            self.low, self.high = int(space.start), int(space.start + space.n - 1)
        elif isinstance(space, spaces.Box):
            self.kind = "box"
        else:
            self.kind = "generic"

    def __call__(self, actions: Any, n: int) -> tuple[np.ndarray | list[Any], int | None]:
        """Return the actions to step with and the index of the first bad one (or None)."""
        if self.kind == "generic":
            acts = list(actions)
            if len(acts) != n:
                raise ValueError(f"the agent returned {len(acts)} actions for {n} observations")
            for i, a in enumerate(acts):
                if not self.space.contains(a):
                    return acts, i
            return acts, None
        acts = np.asarray(actions)
        if self.kind == "discrete":
            if acts.ndim == 2 and acts.shape[1] == 1:
                acts = acts[:, 0]
            if acts.shape != (n,):
                raise ValueError(
                    f"the agent returned actions of shape {acts.shape} for {n} observations; "
                    f"a Discrete action space needs shape ({n},)"
                )
            if acts.dtype.kind == "f":
                integral = np.isfinite(acts) & (acts == np.round(acts))
                if not integral.all():
                    return acts, int(np.argmin(integral))
                acts = acts.astype(np.int64)
            elif acts.dtype.kind not in "iub":
                return acts, 0
            bad = (acts < self.low) | (acts > self.high)
            return acts, (int(np.argmax(bad)) if bad.any() else None)
        shape = (n, *self.space.shape)
        if acts.shape != shape:
            if acts.size == math.prod(shape):
                acts = acts.reshape(shape)
            else:
                raise ValueError(
                    f"the agent returned actions of shape {acts.shape} for {n} observations; "
                    f"this Box action space needs shape {shape}"
                )
        acts = acts.astype(self.space.dtype, copy=False)
        ok = (np.isfinite(acts) & (acts >= self.space.low) & (acts <= self.space.high))
        ok = ok.reshape(n, -1).all(axis=1)
        return acts, (int(np.argmin(ok)) if not ok.all() else None)
