"""Environments: turn what a user passes as ``env`` into a factory of fresh envs.

An env is a Gymnasium id (``"CartPole-v1"``, or ``"module:Name-v0"`` which imports the
module that registers it), a ``gymnasium.envs.registration.EnvSpec``, or a
zero-argument factory returning a new ``gymnasium.Env`` on each call.

>>> spec = env_spec("CartPole-v1")
>>> spec.name
'CartPole-v1'
>>> env = spec.make()
>>> env.observation_space.shape
(4,)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from ..errors import UnknownEnvError

__all__ = ["EnvLike", "AuditEnv", "env_spec"]

EnvLike = Union[str, EnvSpec, Callable[[], gym.Env], "AuditEnv"]


@dataclass(frozen=True)
class AuditEnv:
    """A named factory of fresh envs (``make()`` returns a new env on every call)."""

    name: str
    factory: Callable[[], gym.Env]

    def make(self) -> gym.Env:
        env = self.factory()
        if not isinstance(env, gym.Env):
            raise TypeError(
                f"the env factory for {self.name!r} returned {type(env).__name__}, not a "
                "gymnasium.Env; it must build and return a new env on each call"
            )
        return env


def _unknown_id(env_id: str) -> UnknownEnvError:
    known = list(gym.registry)
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
    if not close:  # "cartpole" vs "CartPole-v1": compare case-insensitively, without version
        lowered = {k.lower(): k for k in known}
        stem = env_id.lower().split("-v")[0]
        close = [lowered[k] for k in lowered if k.split("-v")[0] == stem][:3]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return UnknownEnvError(
        f"unknown Gymnasium environment id {env_id!r}.{hint} Ids are registered by the "
        "package that defines the env: import it first, write 'module:EnvName-v0', or pass "
        "a zero-argument factory instead of an id."
    )


def env_spec(env: EnvLike, **kwargs: Any) -> AuditEnv:
    """Normalise ``env`` (an id, an ``EnvSpec``, a factory) into an :class:`AuditEnv`.

    ``kwargs`` are passed to ``gymnasium.make`` for ids and specs.

    >>> env_spec("CartPol-v1")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.UnknownEnvError: unknown ... id 'CartPol-v1'. Did you mean 'CartPole-v1', ...
    """
    if isinstance(env, AuditEnv):
        return env
    if isinstance(env, EnvSpec):
        spec = env
        return AuditEnv(spec.id, lambda: gym.make(spec, **kwargs))
    if isinstance(env, str):
        if ":" not in env and env not in gym.registry:
            raise _unknown_id(env)
        if ":" in env:
            # gymnasium imports the module part, which registers the id; check it once here
            # so a typo fails before any rollout starts.
            try:
                gym.make(env, **kwargs).close()
            except gym.error.Error as exc:
                raise UnknownEnvError(f"cannot make Gymnasium env {env!r}: {exc}") from exc
        env_id = env
        return AuditEnv(env_id, lambda: gym.make(env_id, **kwargs))
    if isinstance(env, gym.Env):
        raise TypeError(
            f"env is an env instance ({env!r}); pass its id or a zero-argument factory instead "
            "(for example `lambda: make_my_env()`), since an audit needs a fresh env per slot"
        )
    if callable(env):
        name = getattr(env, "__qualname__", None) or type(env).__name__
        return AuditEnv(name, env)
    raise TypeError(
        f"env must be a Gymnasium id, an EnvSpec or a zero-argument factory, got "
        f"{type(env).__name__}"
    )
