"""envpool's gymnasium pools as a batch kind, with a seed per episode.

An envpool pool seeds each of its envs once, when it is made (env ``i`` of a pool made
with ``seed=s`` gets ``s + i``, or ``env_seed[i]``), and resets an env from where that
env's generator stands: a reset takes no seed. So :class:`EnvpoolRows` makes a pool of
the user's pool's kind and settings for each wave of episodes that start together, each
env seeded with its episode's seed (``env_seed``), and steps every live pool each tick.
Episode ``i`` of every scenario then starts from the same state, whatever the row, the
batch size or what ran before it: the audit's pairing (DESIGN section 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .kinds import BatchKind, as_numpy

__all__ = ["EnvpoolRows", "is_envpool"]

#: A pool's settings that each wave's pool sets for itself.
_OWN = ("num_envs", "batch_size", "seed", "env_seed")


def is_envpool(env: Any) -> bool:
    """Whether ``env`` is one of envpool's pools (checked on the classes, not imported)."""
    return any(c.__module__.startswith("envpool.") for c in type(env).__mro__)


class EnvpoolRows(BatchKind):
    """An envpool gymnasium pool's rows (see the module); the pool given is the template:
    its kind, settings and ``num_envs`` (the rows), never stepped itself."""

    def __init__(self, pool: Any) -> None:  # envpool's classes, untyped: read as they are
        self.template = pool
        config = self.template.spec.config._asdict()
        self.settings = {k: v for k, v in config.items() if k not in _OWN}
        name = type(pool).__name__.removeprefix("Gym").removesuffix("GymnasiumEnvPool")
        self.label = f"envpool's {name} pool"
        self.num_envs = int(config["num_envs"])
        # envpool's gymnasium pools give the spaces of one env (not batched)
        self.observation_space = pool.observation_space
        self.action_space = pool.action_space
        self.parts: list[tuple[Any, np.ndarray]] = []  # the live pools and their rows
        self.owner = np.full(self.num_envs, -1)  # each row's pool, by position in parts
        self._shape: tuple[int, ...] | None = None

    def _pool(self, seeds: Sequence[int]) -> Any:
        spec_class = type(self.template.spec)
        n = len(seeds)
        spec = spec_class(spec_class.gen_config(num_envs=n, batch_size=n,
                                                env_seed=[int(s) for s in seeds],
                                                **self.settings))
        return type(self.template)(spec)

    def reset(self, ids: np.ndarray, seeds: Sequence[int]) -> np.ndarray:
        pool = self._pool(seeds)
        obs, _ = pool.reset()
        self.parts.append((pool, ids.copy()))
        self.owner[ids] = len(self.parts) - 1
        self._prune()
        out = as_numpy(obs)
        self._shape = out.shape[1:]
        return out

    def _prune(self) -> None:
        """Close the pools none of whose rows runs in them any more."""
        live = set(self.owner[self.owner >= 0].tolist())
        kept: list[tuple[Any, np.ndarray]] = []
        renumber = np.full(len(self.parts), -1)
        for k, (pool, rows) in enumerate(self.parts):
            if k in live:
                renumber[k] = len(kept)
                kept.append((pool, rows))
            else:
                pool.close()
        self.parts = kept
        held = self.owner >= 0
        self.owner[held] = renumber[self.owner[held]]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        n = self.num_envs
        assert self._shape is not None  # a row is reset before any step
        obs = np.zeros((n, *self._shape))
        rewards = np.zeros(n)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        for k, (pool, rows) in enumerate(self.parts):
            got, reward, term, trunc, _ = pool.step(np.asarray(actions)[rows])
            mine = self.owner[rows] == k  # rows since given to a later pool are not its
            at = rows[mine]
            obs[at] = as_numpy(got)[mine]
            rewards[at] = as_numpy(reward)[mine]
            terminated[at] = as_numpy(term)[mine]
            truncated[at] = as_numpy(trunc)[mine]
        return obs, rewards, terminated, truncated

    def finish(self) -> None:
        for pool, _ in self.parts:
            pool.close()
        self.parts = []
        self.owner[:] = -1

    close = finish  # the template is the user's: only the waves' pools are ours
