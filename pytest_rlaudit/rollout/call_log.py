"""What the agent saw and chose in recorded episodes, kept one policy call at a time.

The runner records the observations and actions of some scenarios (nominal's, for the
spread that sizes ``obs_noise`` and for the seed-replay check). Kept row by row, that is
a Python append per row per step, and a stack per episode; kept by call, it is one array
copy per call, and the episodes are cut out of all the calls at once at the end (a
stable sort by episode keeps each episode's steps in order).

>>> import numpy as np
>>> log = CallLog()
>>> log.add(np.array([[0.0], [1.0]]), np.array([0, 1]), np.array([3, 5]))
>>> log.add(np.array([[2.0]]), np.array([1]), np.array([3]))
>>> seen, chosen = log.episodes()[3]
>>> seen.ravel().tolist(), chosen.tolist()
([0.0, 2.0], [0, 1])
"""

from __future__ import annotations

import numpy as np

__all__ = ["CallLog"]


class CallLog:
    """Rows of policy calls (observations, actions, episode ids), gathered by id."""

    def __init__(self) -> None:
        self.obs: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []

    def add(self, obs: np.ndarray, actions: np.ndarray, ids: np.ndarray) -> None:
        """The rows of one call (copies: a group may reuse its buffers)."""
        self.obs.append(np.array(obs, copy=True))
        self.actions.append(np.array(actions, copy=True))
        self.ids.append(np.asarray(ids))

    def episodes(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Each id's observations and actions, in the order of the calls."""
        if not self.ids:
            return {}
        ids = np.concatenate(self.ids)
        if ids.max() < 2**16:  # numpy sorts 16-bit integers by radix: linear, stable
            ids = ids.astype(np.uint16)
        order = np.argsort(ids, kind="stable")
        obs, actions = np.concatenate(self.obs)[order], np.concatenate(self.actions)[order]
        keys, starts = np.unique(ids[order], return_index=True)
        ends = [*starts[1:].tolist(), len(order)]
        return {int(k): (obs[a:b], actions[a:b])
                for k, a, b in zip(keys.tolist(), starts.tolist(), ends, strict=True)}
