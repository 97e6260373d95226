"""A recording: episodes someone recorded (observations the deployed agent acted on, the
actions it took), read from any of the formats :func:`~.load.load_recording` takes.

Steps of every episode are stacked on one first axis (``observations[k]`` is step ``k``
of the whole recording), with ``starts[i]`` the first step of episode ``i``: the layout
a batched policy call wants, and the one Minari, LeRobot and SB3 (``episode_starts``)
agree on once read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from gymnasium import spaces

from ...errors import DatasetError
from ..rows import take

__all__ = ["Recording", "rows", "take", "width"]


def rows(obs: Any) -> int:
    """The number of steps of an observation array or a Dict of them."""
    return len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)


def width(obs: Any) -> str:
    """The per-step shape of observations, as words: ``(4,)`` or ``{'pos': (3,), ...}``."""
    if isinstance(obs, dict):
        return "{" + ", ".join(f"{k!r}: {tuple(v.shape[1:])}" for k, v in obs.items()) + "}"
    return str(tuple(obs.shape[1:]))


@dataclass(frozen=True, eq=False)
class Recording:
    """Recorded episodes, steps stacked (see the module).

    ``observations``: what the recorded agent acted on at each step (an array, or a dict
    of arrays for Dict observations); ``actions``: what it did, as the env received them;
    ``starts``: the first step of each episode. ``rewards``, ``terminations`` and
    ``truncations`` per step, ``seeds`` and ``returns`` per episode, where the format holds
    them. ``source`` and ``format`` say where it came from; ``agent`` who recorded it.

    >>> rec = Recording("demo", "npz", np.zeros((5, 2)), np.zeros((5, 1)), np.array([0, 3]))
    >>> rec.episodes, rec.lengths.tolist(), rec.steps
    (2, [3, 2], 5)
    """

    source: str
    format: str
    observations: Any
    actions: np.ndarray
    starts: np.ndarray
    rewards: np.ndarray | None = None
    terminations: np.ndarray | None = None
    truncations: np.ndarray | None = None
    seeds: tuple[int | None, ...] = ()
    returns: np.ndarray | None = None
    observation_space: spaces.Space[Any] | None = None
    action_space: spaces.Space[Any] | None = None
    agent: str | None = None
    #: each episode's id in the source (Minari's episode id, LeRobot's episode_index)
    ids: tuple[int, ...] = field(default=())
    #: names of the action's dimensions (LeRobot's feature names: joints), if known
    action_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        steps = rows(self.observations) if self._has_steps() else 0
        if steps == 0 or len(self.starts) == 0:
            raise DatasetError(f"{self.source}: the {self.format} recording holds no steps; "
                               "record some episodes first (pytest_rlaudit.record, or "
                               "--rl-record=DIR on an audit)")
        if len(self.actions) != steps:
            raise DatasetError(f"{self.source}: {steps} observations but {len(self.actions)} "
                               "actions; a recording needs one action per observation the "
                               "agent acted on")
        starts = np.asarray(self.starts, dtype=np.int64)
        if starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= steps:
            raise DatasetError(f"{self.source}: episode starts {starts[:8].tolist()}... are not "
                               f"increasing offsets from 0 below {steps} (every episode needs "
                               "at least one step)")
        object.__setattr__(self, "starts", starts)
        if not self.ids:
            object.__setattr__(self, "ids", tuple(range(len(starts))))

    def _has_steps(self) -> bool:
        obs = self.observations
        return bool(obs) if isinstance(obs, dict) else getattr(obs, "ndim", 0) >= 1

    @property
    def episodes(self) -> int:
        """How many episodes."""
        return len(self.starts)

    @property
    def steps(self) -> int:
        """How many steps, every episode's."""
        return len(self.actions)

    @property
    def ends(self) -> np.ndarray:
        """One past the last step of each episode."""
        return np.append(self.starts[1:], self.steps)

    @property
    def lengths(self) -> np.ndarray:
        """Each episode's steps."""
        lengths: np.ndarray = self.ends - self.starts
        return lengths

    @property
    def episode_of(self) -> np.ndarray:
        """The episode (position) of every step."""
        return np.repeat(np.arange(self.episodes), self.lengths)

    def episode_returns(self) -> np.ndarray | None:
        """The recorded return of each episode: as recorded apart (``returns``), else
        the sum of its rewards; None without either."""
        if self.returns is not None:
            return np.asarray(self.returns, dtype=np.float64)
        if self.rewards is None:
            return None
        return np.add.reduceat(np.asarray(self.rewards, dtype=np.float64), self.starts)

    def select(self, episodes: Sequence[int]) -> Recording:
        """The recording of ``episodes`` (positions) only, in that order."""
        chosen = [int(e) for e in episodes]
        if not chosen:
            raise DatasetError(f"{self.source}: episodes=[] selects nothing; name at least one "
                               f"of its {self.episodes} episodes (0 to {self.episodes - 1})")
        bad = [e for e in chosen if not 0 <= e < self.episodes]
        if bad:
            raise DatasetError(f"{self.source}: episode {bad[0]} is not in the recording, "
                               f"which holds episodes 0 to {self.episodes - 1}")
        index = np.concatenate([np.arange(self.starts[e], self.ends[e]) for e in chosen])
        lengths = self.lengths[chosen]

        def part(values: np.ndarray | None) -> np.ndarray | None:
            return None if values is None else np.asarray(values)[index]

        returns = None if self.returns is None else np.asarray(self.returns)[chosen]
        return replace(self, observations=take(self.observations, index),
                       actions=self.actions[index],
                       starts=np.concatenate([[0], np.cumsum(lengths)[:-1]]),
                       rewards=part(self.rewards), terminations=part(self.terminations),
                       truncations=part(self.truncations),
                       seeds=tuple(self.seeds[e] for e in chosen) if self.seeds else (),
                       returns=returns, ids=tuple(self.ids[e] for e in chosen))
