"""Seed derivation shared by the world and rollout layers.

Python's ``hash()`` is salted per process, so every stream is keyed by a CRC32 of
the name instead: the same (seed, episode, name) gives the same numbers in every
process, on every xdist worker and on every machine.
"""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["stable_hash", "episode_seed_sequence", "POLICY_STREAM"]

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


def episode_seed_sequence(seed: int, episode: int, stream: str) -> np.random.SeedSequence:
    """The seed sequence of one stream in episode ``episode`` of an audit seeded with ``seed``.

    >>> a = episode_seed_sequence(0, 3, "jitter").generate_state(1)
    >>> b = episode_seed_sequence(0, 3, "jitter").generate_state(1)
    >>> bool((a == b).all())
    True
    """
    return np.random.SeedSequence([int(seed), int(episode), stable_hash(stream)])
