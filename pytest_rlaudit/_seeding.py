"""Seed derivation shared by the world and rollout layers.

Python's ``hash()`` is salted per process, so every stream is keyed by a CRC32 of
the name instead: the same (seed, episode, name) gives the same numbers in every
process, on every xdist worker and on every machine.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np

__all__ = ["stable_hash", "episode_seeds", "episode_seed_sequence", "POLICY_STREAM"]

#: Stream name for an agent's own randomness (random or stochastic policies). It is
#: the same in every scenario, so a stochastic agent draws the same numbers in the
#: nominal and perturbed runs of one episode (common random numbers).
POLICY_STREAM = "__policy__"


def stable_hash(name: str) -> int:
    """Return a process-independent 32-bit hash of ``name``.

    >>> stable_hash("jitter") == stable_hash("jitter")
    True
    """
    return zlib.crc32(name.encode("utf-8"))


def episode_seeds(seed: int, indices: Iterable[int]) -> np.ndarray:
    """The env reset seeds of episodes ``indices`` of an audit seeded with ``seed``, as
    int64: episode ``i`` of every scenario, nominal included, resets with ``seed + i``
    (common random numbers).

    >>> episode_seeds(7, [0, 1, 5])
    array([ 7,  8, 12])
    """
    return np.asarray([episode_seed(seed, i) for i in indices], dtype=np.int64)


def episode_seed(seed: int, index: int) -> int:
    """The env reset seed of episode ``index`` (see :func:`episode_seeds`).

    >>> episode_seed(7, 5)
    12
    """
    return int(seed) + int(index)


def episode_seed_sequence(seed: int, episode: int, stream: str) -> np.random.SeedSequence:
    """The seed sequence of one stream in episode ``episode`` of an audit seeded with ``seed``.

    >>> a = episode_seed_sequence(0, 3, "jitter").generate_state(1)
    >>> b = episode_seed_sequence(0, 3, "jitter").generate_state(1)
    >>> bool((a == b).all())
    True
    """
    return np.random.SeedSequence([int(seed), int(episode), stable_hash(stream)])
