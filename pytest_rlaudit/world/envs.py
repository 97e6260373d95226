"""Environments: turn what a user passes as ``env`` into a factory of fresh envs.

An env is a Gymnasium id (``"CartPole-v1"``, or ``"module:Name-v0"`` which imports the
module that registers it; Atari ids such as ``"BreakoutNoFrameskip-v4"`` import ale-py,
:mod:`.atari`), a ``gymnasium.envs.registration.EnvSpec``, or a
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
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Union

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec, parse_env_id

from .._imports import import_module
from ..errors import RLAuditError, RolloutError, UnknownEnvError
from .atari import register_ale
from .batches.given import given_batch
from .batches.kinds import BatchSource, RowView, vector_entry
from .mujoco_log import mujoco_warnings

__all__ = ["EnvLike", "AuditEnv", "env_spec"]

EnvLike = Union[str, EnvSpec, Callable[[], gym.Env], "AuditEnv", gym.vector.VectorEnv, Any]


@dataclass(frozen=True)
class AuditEnv:
    """A named factory of fresh envs (``make()`` returns a new env on every call).

    ``source``: the id or ``EnvSpec`` it makes, if any (so keyword arguments can still be
    passed to ``gymnasium.make``); ``needs``: the agent's needs already applied to it
    (:class:`~pytest_rlaudit.world.agents.EnvNeeds`), so they are applied once;
    ``recipe``: a hashable value equal for AuditEnvs whose factories make the same env
    (an id, its keyword arguments, the agent's wrappers), None where only the factory
    itself says that. Each call of :func:`env_spec` makes a new factory, so facts learnt
    about an env once (:func:`~pytest_rlaudit.world.reuse.reset_verdict`) are kept by
    recipe. ``batch``: where the same episodes can run as one lock-step batch (a vector
    env, a batched simulator; :class:`~pytest_rlaudit.world.batches.kinds.BatchSource`),
    or None.
    """

    name: str
    factory: Callable[[], gym.Env]
    source: str | EnvSpec | None = None
    needs: Any = None
    recipe: Hashable | None = None
    batch: BatchSource | None = None

    def make(self) -> gym.Env:
        """A new env from the factory; an exception of the factory is a
        :class:`~pytest_rlaudit.errors.RolloutError` naming the env, the original chained."""
        try:
            with mujoco_warnings():  # an audit builds many: MuJoCo's would print each time
                env = self.factory()
        except RLAuditError:
            raise
        except Exception as exc:
            raise RolloutError(f"making env {self.name!r} failed ({type(exc).__name__}: "
                               f"{exc})") from exc
        if not isinstance(env, gym.Env):
            raise TypeError(
                f"the env factory for {self.name!r} returned {type(env).__name__}, not a "
                "gymnasium.Env; it must build and return a new env on each call"
            )
        return env


def _unknown_id(env_id: str, module: str | None = None) -> UnknownEnvError:
    known = list(gym.registry)
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
    if not close:  # "cartpole" vs "CartPole-v1": compare case-insensitively, without version
        lowered = {k.lower(): k for k in known}
        stem = env_id.lower().split("-v")[0]
        close = [lowered[k] for k in lowered if k.split("-v")[0] == stem][:3]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    where = f" (module {module!r} was imported but did not register it)" if module else ""
    return UnknownEnvError(
        f"unknown Gymnasium environment id {env_id!r}{where}.{hint} Ids are registered by the "
        "package that defines the env: import it first, write 'module:EnvName-v0', or pass "
        "a zero-argument factory instead of an id."
    )


def _versions(env_id: str) -> list[str]:
    """The registered ids with ``env_id``'s namespace and name, oldest version first.

    >>> _versions("CartPole-v7")
    ['CartPole-v0', 'CartPole-v1']
    """
    try:
        namespace, name, _ = parse_env_id(env_id)
    except gym.error.Error:  # malformed: no versions of it can be registered
        return []
    same = [s for s in gym.registry.values() if (s.namespace, s.name) == (namespace, name)]
    return [s.id for s in sorted(same, key=lambda s: -1 if s.version is None else s.version)]


def _version_of(env_id: str) -> int | None:
    """The version number of ``env_id``; None when it has none or is malformed."""
    try:
        return parse_env_id(env_id)[2]
    except gym.error.Error:
        return None


def _is_newer(env_id: str, than: str) -> bool:
    version, other = _version_of(env_id), _version_of(than)
    return version is not None and other is not None and version > other


def _unregistered_version(env_id: str, versions: list[str]) -> UnknownEnvError:
    """``env_id`` is not registered but other versions of its env are.

    >>> print(_unregistered_version("CartPole", ["CartPole-v0", "CartPole-v1"]))
    Gymnasium environment id 'CartPole' has no version; the registered versions are
    CartPole-v0, CartPole-v1. Use 'CartPole-v1'.
    """
    latest, version = versions[-1], _version_of(env_id)
    newest = _version_of(latest)
    old = version is not None and newest is not None and version < newest
    if version is None:
        cause = f"Gymnasium environment id {env_id!r} has no version"
    elif old:
        cause = (f"Gymnasium environment {env_id!r} is an old version, no longer registered "
                 f"(gymnasium {gym.__version__})")
    else:
        cause = f"Gymnasium environment {env_id!r} is not a registered version"
    fix = (f"Use {latest!r}, or install the older release that still registers {env_id!r}."
           if old else f"Use {latest!r}.")
    return UnknownEnvError(f"{cause}; the registered versions are {', '.join(versions)}. {fix}")


def _missing_dependency(env_id: str, exc: BaseException) -> UnknownEnvError:
    """``env_id`` is registered but making it failed for a missing dependency; keep the
    install hint of ``exc`` (gymnasium's own) and name the newer versions, if any."""
    detail = str(exc).strip() or type(exc).__name__
    if not detail.endswith("."):
        detail += "."
    newer = [v for v in _versions(env_id) if _is_newer(v, env_id)]
    fix = (" Install the missing dependency, or use a newer version of the env (which may "
           f"need other dependencies): the newer registered versions are {', '.join(newer)}."
           if newer else " Install the missing dependency and run again.")
    return UnknownEnvError(
        f"Gymnasium environment {env_id!r} cannot be made, a dependency is missing: "
        f"{detail}{fix}"
    )


def _unknown_module(env: str, module: str, exc: ModuleNotFoundError) -> UnknownEnvError:
    """The module part of ``module:Id`` cannot be imported."""
    top = module.partition(".")[0]
    dist = top.replace("_", "-")
    guess = (f" A guess from the module's name: it is often published as {dist!r} (pip "
             f"install {dist})." if dist != top else "")
    return UnknownEnvError(
        f"cannot make Gymnasium env {env!r}: its module {module!r}, which registers the id, "
        f"could not be imported. {exc}{guess}"
    )


def _checked(name: str, env_id: str | EnvSpec, kwargs: dict[str, Any]) -> None:
    """Make one env of ``env_id`` and close it, so that an env that cannot be made fails
    here, with its cause and fix, before any rollout starts."""
    shown = env_id.id if isinstance(env_id, EnvSpec) else env_id
    entry = (env_id if isinstance(env_id, EnvSpec) else gym.spec(env_id)).entry_point
    try:
        with mujoco_warnings(load="mujoco" in str(entry)):  # the first env imports it
            gym.make(env_id, **kwargs).close()
    except (gym.error.DependencyNotInstalled, ImportError) as exc:
        raise _missing_dependency(shown, exc) from exc
    except gym.error.Error as exc:
        raise UnknownEnvError(f"cannot make Gymnasium env {name!r}: {exc}") from exc


def _id_env(env: str, kwargs: dict[str, Any]) -> AuditEnv:
    """An :class:`AuditEnv` of the id ``env`` (``"Name-v0"`` or ``"module:Name-v0"``)."""
    module, _, env_id = env.partition(":") if ":" in env else ("", "", env)
    if module:
        # Imported here rather than by gymnasium.make, so that a module in the current
        # folder imports under the plain `pytest` script too (see _imports).
        try:
            import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise  # the module is there; something it imports is not: its own error
            raise _unknown_module(env, module, exc) from exc
    register_ale(env_id)  # Atari ids exist once ale_py is imported (gymnasium >= 1.0)
    if env_id not in gym.registry:
        register_ale(env_id, if_installed=True)  # "Pong-v4": old gym's Atari ids
    if env_id not in gym.registry:
        versions = _versions(env_id)
        if versions:
            raise _unregistered_version(env_id, versions)
        raise _unknown_id(env_id, module or None)
    _checked(env, env_id, kwargs)
    rows = None if kwargs else vector_entry(env_id)
    # the entry point too: an id registered again in this process is another env
    return AuditEnv(env, lambda: gym.make(env_id, **kwargs), source=env,
                    recipe=recipe(env, kwargs, gym.spec(env_id).entry_point),
                    batch=None if rows is None else BatchSource(partial(rows, env_id)))


def recipe(*parts: Any) -> Hashable | None:
    """``parts`` as an :attr:`AuditEnv.recipe`, keyword-argument mappings as sorted
    pairs; None if a part cannot be hashed (then no two AuditEnvs share what is learnt).

    >>> recipe("CartPole-v1", {"max_episode_steps": 50}) == recipe("CartPole-v1", {"max_episode_steps": 50})
    True
    >>> recipe("CartPole-v1", {"weights": [1, 2]}) is None
    True
    """
    frozen = tuple(tuple(sorted(p.items())) if isinstance(p, Mapping) else p for p in parts)
    try:
        hash(frozen)
    except TypeError:
        return None
    return frozen


def env_spec(env: EnvLike, **kwargs: Any) -> AuditEnv:
    """Normalise ``env`` (an id, an ``EnvSpec``, a factory) into an :class:`AuditEnv`.

    ``kwargs`` are passed to ``gymnasium.make`` for ids and specs. Ids and specs are
    checked by making one env (and closing it): an env that cannot be made raises
    :class:`~pytest_rlaudit.errors.UnknownEnvError` saying why and what to do.

    >>> env_spec("CartPol-v1")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.UnknownEnvError: unknown ... id 'CartPol-v1'. Did you mean 'CartPole-v1', ...
    >>> env_spec("CartPole-v7")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.UnknownEnvError: Gymnasium environment 'CartPole-v7' is not a
    registered version; the registered versions are CartPole-v0, CartPole-v1. Use 'CartPole-v1'.
    """
    if isinstance(env, AuditEnv):
        return env
    if isinstance(env, EnvSpec):
        spec = env
        _checked(spec.id, spec, kwargs)
        return AuditEnv(spec.id, lambda: gym.make(spec, **kwargs), source=spec)
    if isinstance(env, str):
        return _id_env(env, kwargs)
    given = given_batch(env)
    if given is not None:  # a vector env or a batched simulator: one lock-step batch
        return AuditEnv(given.label, lambda: RowView(given), batch=BatchSource(given=given))
    if isinstance(env, gym.Env):
        raise TypeError(
            f"env is an env instance ({env!r}); pass its id or a zero-argument factory instead "
            "(for example `lambda: make_my_env()`), since an audit needs a fresh env per slot"
        )
    if callable(env):
        name = getattr(env, "__qualname__", None) or type(env).__name__
        return AuditEnv(name, env)
    raise TypeError(
        f"env must be a Gymnasium id, an EnvSpec, a zero-argument factory, a gymnasium "
        f"VectorEnv or a BatchedEnv, got {type(env).__name__}"
    )
