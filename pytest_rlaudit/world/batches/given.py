"""What an audit takes as a batch the user gave: a gymnasium vector env (envpool's pools
included) or a :class:`~.protocol.BatchedEnv`, each behind its batch kind.

>>> import gymnasium as gym
>>> given_batch(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)).label
'the vector env SyncVectorEnv'
>>> given_batch(lambda: gym.make("CartPole-v1")) is None
True
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from .envpool_rows import EnvpoolRows, is_envpool
from .kinds import BatchKind, ProtocolRows, VectorRows
from .protocol import BatchedEnv

__all__ = ["given_batch"]


def given_batch(env: Any) -> BatchKind | None:
    """``env`` as a batch kind if it is one an audit takes as given (a
    ``gymnasium.vector.VectorEnv``, a :class:`~.protocol.BatchedEnv`), else None."""
    if isinstance(env, gym.vector.VectorEnv):
        return EnvpoolRows(env) if is_envpool(env) else VectorRows(env)
    if isinstance(env, BatchKind):
        return env
    if not isinstance(env, gym.Env) and isinstance(env, BatchedEnv):
        return ProtocolRows(env)
    return None
