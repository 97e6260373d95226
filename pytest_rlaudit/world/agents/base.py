"""The batched policy protocol every agent is adapted to, and a base for adapters."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

__all__ = ["Policy", "BasePolicy"]


@runtime_checkable
class Policy(Protocol):
    """The batched policy protocol the rollout runner drives.

    ``act(obs, states)`` maps a batch of observations (first axis: one row per active
    episode) to a batch of actions. Stateless policies have ``stateful = False`` and get
    and return ``states = None``. Stateful ones (recurrent nets, random policies) get a
    list with one state per row, where ``initial_state(seed)`` made each state at the
    start of its episode from that episode's own seed, and return the updated list.
    ``reset()`` is called once before each rollout.
    """

    stateful: bool

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        ...

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        ...

    def reset(self) -> None:
        ...


class BasePolicy:
    """Convenience base: a stateless policy bound to the env's spaces by the runner."""

    stateful: bool = False
    name: str = "policy"
    observation_space: spaces.Space | None = None
    action_space: spaces.Space | None = None
    #: What the agent needs of its env (a zoo folder's env_kwargs and wrappers), if anything.
    env_needs: Any = None
    #: Whether the runner's worker processes may each run a copy of it on episodes of
    #: their own (``workers=``), rather than send every step's observations to one copy:
    #: for policies that cost nothing to copy and gain nothing from large batches.
    shards_freely: bool = False

    def bind(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        """Learn the env's spaces before a rollout (and check they fit the agent)."""
        self.observation_space = observation_space
        self.action_space = action_space

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        return None

    def reset(self) -> None:
        return None

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
