"""Agents that are plain callables ``obs_batch -> action_batch``, and the random agent."""

from __future__ import annotations

import copy
from typing import Any, cast

import numpy as np
from gymnasium import spaces
from gymnasium.utils.seeding import np_random

from ...errors import PolicyError
from .base import BasePolicy

__all__ = ["CallablePolicy", "RandomPolicy"]


class CallablePolicy(BasePolicy):
    """Any callable ``obs_batch -> action_batch`` (numpy controllers, jitted functions).

    >>> import numpy as np
    >>> CallablePolicy(lambda obs: np.zeros(len(obs), dtype=int)).act(np.ones((3, 4)), None)[0]
    array([0, 0, 0])
    """

    def __init__(self, fn: Any, name: str | None = None) -> None:
        if not callable(fn):
            raise PolicyError(f"CallablePolicy needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or getattr(fn, "__qualname__", None) or type(fn).__name__

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, None]:
        return np.asarray(self.fn(obs)), None


class RandomPolicy(BasePolicy):
    """Uniform random actions, drawn from each episode's own seeded stream.

    Stateful so that an episode's actions depend only on its seed, never on which
    other episodes share the batch. Every audit runs it (the random reference), so a
    bounded float Box is sampled without ``Box.sample``'s per-call masks: the same draws
    from the same generator (tested against ``Box.sample``), at a tenth of the cost.

    >>> import numpy as np
    >>> from gymnasium import spaces
    >>> p = RandomPolicy(); p.bind(spaces.Box(-1, 1, (4,)), spaces.Discrete(2))
    >>> s = [p.initial_state(np.random.SeedSequence(0))]
    >>> p.act(np.zeros((1, 4)), s)[0].shape
    (1,)
    """

    stateful = True
    name = "random"
    _uniform: tuple[np.ndarray, np.ndarray] | None = None

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        super().bind(observation_space, action_space)
        self._uniform = _uniform_bounds(action_space)

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        if self.action_space is None:
            raise PolicyError("RandomPolicy must be bound to an action space before use")
        own = int(seed.generate_state(1, dtype=np.uint32)[0])
        # what `space.seed(own)` gives a copy of the space, without copying it (a copy per
        # episode is most of a random episode's cost on a batch of short ones)
        if self._uniform is not None:
            return _Drawn(np_random(own)[0])
        space = self.action_space
        if type(space) is spaces.Discrete:
            return spaces.Discrete(int(space.n), seed=own, start=int(space.start))
        space = copy.deepcopy(space)
        space.seed(own)
        return space

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        assert states is not None
        if self._uniform is None:
            return np.stack([np.asarray(s.sample()) for s in states]), states
        low, span = self._uniform
        space = cast(spaces.Box, self.action_space)  # _uniform is a bound Box's
        # numpy's uniform(low, high) is low + (high - low) * random(): the same doubles
        # from the same generator, drawn per row, with the arithmetic done once per batch
        draws = np.stack([s.np_random.random(len(low)) for s in states])
        rows = low + span * draws
        return rows.reshape((len(states), *space.shape)).astype(space.dtype, copy=False), states


class _Drawn:
    """A float Box's random state: its generator alone (what :meth:`RandomPolicy.act`
    draws from on that space's fast path)."""

    __slots__ = ("np_random",)

    def __init__(self, generator: np.random.Generator) -> None:
        self.np_random = generator


def _uniform_bounds(space: spaces.Space[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(low, high - low)``, flat, of a float Box bounded on every side, whose
    ``sample()`` is one ``uniform(low, high)`` draw in C order; None for other spaces."""
    if not (type(space) is spaces.Box and space.dtype.kind == "f" and space.is_bounded("both")):
        return None
    low = space.low.astype(np.float64).ravel()
    return low, space.high.astype(np.float64).ravel() - low
