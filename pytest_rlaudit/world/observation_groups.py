"""Named parts of an observation (its sensors), for attribution: given, or read from what
the env and the agent already say.

Sources, in order: ``groups=`` as given (or the folder of a LeRobot dataset: the names
its ``meta/info.json`` gives the state's elements); a Dict observation's keys; a flattened Dict
(``gymnasium.wrappers.FlattenObservation``) mapped back to its keys, in the order
gymnasium flattens them; a gymnasium MuJoCo v5 env's ``observation_structure`` (``qpos``,
``qvel``, ``cfrc_ext``...; ``skipped_qpos`` is not observed); an ONNX policy's
``observation_names`` metadata when it names every element; otherwise one group per
element, ``dim_0``, ``dim_1``... A :class:`Groups` says where its names came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..errors import PerturbationError

__all__ = ["Groups", "observation_groups", "ordered"]


def ordered(part: Sequence[Any]) -> tuple[Any, ...]:
    """Elements (indices) or keys of an observation, each once, in one order whatever
    order they were named in (a run is kept by its part).

    >>> ordered([3, 1, 3])
    (1, 3)
    """
    return tuple(sorted(set(part), key=lambda x: (str(type(x)), x)))


@dataclass(frozen=True)
class Groups:
    """Named parts of an observation: each name's element indices (an array observation)
    or keys (a Dict one), in order, and ``source``, where the names came from."""

    parts: Mapping[str, tuple[Any, ...]]
    source: str
    #: Element counts by group (a Dict key's elements), for reports.
    sizes: Mapping[str, int]
    #: Every element (or key) of the observation, in order: what the groups may leave out.
    whole: tuple[Any, ...] = ()

    @property
    def covers(self) -> bool:
        """Whether the groups together are the whole observation."""
        return set(self.union(list(self.parts))) == set(self.whole)

    @property
    def names(self) -> list[str]:
        return list(self.parts)

    def union(self, names: Sequence[str]) -> tuple[Any, ...]:
        """The elements (or keys) of ``names`` together, in observation order."""
        return ordered([x for name in names for x in self.parts[name]])

    def split(self, name: str) -> Groups:
        """The group ``name`` as groups of one element each (a key of a Dict stays whole),
        named ``name[i]`` by its place in the group (Walker2d's ``qpos[0]`` is the first
        observed position: MuJoCo's ``qpos[1]``, as the x position is not observed)."""
        part = self.parts[name]
        if len(part) < 2 or isinstance(part[0], str):
            return Groups({name: part}, self.source, {name: self.sizes[name]}, self.whole)
        return Groups({f"{name}[{i}]": (int(d),) for i, d in enumerate(part)}, self.source,
                      {f"{name}[{i}]": 1 for i in range(len(part))}, self.whole)


def observation_groups(env: gym.Env | spaces.Space[Any],
                       groups: Mapping[str, Any] | str | os.PathLike[str] | None = None,
                       policy: Any = None) -> Groups:
    """The named groups of ``env``'s observations (see the module for the sources); given
    an observation space instead (a batch's, whose envs the audit cannot reach one by
    one), those that the space and ``policy`` say. ``groups`` may also be the folder of a
    LeRobot dataset: a group per name its ``meta/info.json`` gives the state's elements
    (a robot's joints), when they are the observation's.

    >>> import gymnasium as gym
    >>> g = observation_groups(gym.make("CartPole-v1"), {"cart": slice(0, 2), "pole": [2, 3]})
    >>> g.parts, g.source
    ({'cart': (0, 1), 'pole': (2, 3)}, 'groups= as given')
    >>> observation_groups(gym.make("CartPole-v1")).names
    ['dim_0', 'dim_1', 'dim_2', 'dim_3']
    """
    space = env if isinstance(env, spaces.Space) else env.observation_space
    whole = (tuple(str(k) for k in space.spaces) if isinstance(space, spaces.Dict)
             else tuple(range(_size(space))))
    return replace(_groups(env, space, groups, policy), whole=whole)


def _groups(env: gym.Env | spaces.Space[Any], space: spaces.Space[Any],
            groups: Mapping[str, Any] | str | os.PathLike[str] | None, policy: Any) -> Groups:
    if isinstance(space, spaces.Dict):
        keys = [str(k) for k in space.spaces]
        if isinstance(groups, (str, os.PathLike)):
            raise PerturbationError(
                "groups: a LeRobot dataset names the elements of an array state, and this "
                f"observation is a Dict (keys {', '.join(keys)}), whose keys are the groups "
                "already: leave groups out, or map names to keys")
        if groups is not None:
            return _given_keys(groups, keys, space)
        return Groups({k: (k,) for k in keys}, "the Dict observation's keys",
                      {k: _size(space.spaces[k]) for k in keys})
    size = _size(space)
    if isinstance(groups, (str, os.PathLike)):
        return _lerobot(groups, size)
    if groups is not None:
        return _given_dims(groups, size)
    envs: tuple[Groups | None, ...] = () if isinstance(env, spaces.Space) else (
        _flattened(env, size), _mujoco(env, size))
    for found in (*envs, _onnx(policy, size)):
        if found is not None:
            return found
    return Groups({f"dim_{i}": (i,) for i in range(size)}, "one group per element",
                  {f"dim_{i}": 1 for i in range(size)})


def _size(space: spaces.Space[Any]) -> int:
    return int(np.prod(space.shape or (1,)))


def _lerobot(path: str | os.PathLike[str], size: int) -> Groups:
    """A group per name a LeRobot dataset gives its state's elements (elements of one name
    together), where the names are the observation's."""
    from .recordings.lerobot import STATE, feature_names

    names = feature_names(path, STATE)
    if len(names) != size:
        raise PerturbationError(
            f"groups: the LeRobot dataset {os.fspath(path)} names {len(names)} elements of its "
            f"{STATE!r} feature, and the observation has {size}: its names are not this "
            "env's elements. Give groups= as a mapping of names to slices instead.")
    parts: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        parts.setdefault(name, []).append(i)
    return Groups({k: tuple(v) for k, v in parts.items()}, "the LeRobot dataset's feature names",
                  {k: len(v) for k, v in parts.items()})


def _given_dims(groups: Mapping[str, Any], size: int) -> Groups:
    parts: dict[str, tuple[int, ...]] = {}
    for name, where in _checked(groups):
        try:
            dims = (tuple(range(size))[where] if isinstance(where, slice)
                    else tuple(int(i) for i in np.asarray(where, dtype=np.int64).ravel()))
        except (TypeError, ValueError):
            dims = ()
        if not dims or any(not 0 <= d < size for d in dims) or len(set(dims)) != len(dims):
            raise PerturbationError(
                f"groups: {name!r} must be a slice or indices of the observation's "
                f"{size} elements (0..{size - 1}), each once, got {where!r}")
        parts[name] = dims
    _disjoint(parts)
    return Groups(parts, "groups= as given", {n: len(d) for n, d in parts.items()})


def _given_keys(groups: Mapping[str, Any], keys: list[str], space: spaces.Dict) -> Groups:
    parts: dict[str, tuple[str, ...]] = {}
    for name, where in _checked(groups):
        chosen = (where,) if isinstance(where, str) else tuple(where)
        if not chosen or any(k not in keys for k in chosen):
            raise PerturbationError(
                f"groups: {name!r} must name keys of the Dict observation "
                f"({', '.join(keys)}), got {where!r}")
        parts[name] = tuple(str(k) for k in chosen)
    _disjoint(parts)
    return Groups(parts, "groups= as given",
                  {n: sum(_size(space.spaces[k]) for k in ks) for n, ks in parts.items()})


def _checked(groups: Mapping[str, Any]) -> list[tuple[str, Any]]:
    if not isinstance(groups, Mapping) or len(groups) < 2:
        raise PerturbationError(
            "groups must map at least two names to parts of the observation "
            "(e.g. {'qpos': slice(0, 8), 'qvel': slice(8, 17)}), got " + repr(groups))
    return [(str(name), where) for name, where in groups.items()]


def _disjoint(parts: Mapping[str, tuple[Any, ...]]) -> None:
    seen: dict[Any, str] = {}
    for name, part in parts.items():
        for x in part:
            if x in seen:
                raise PerturbationError(
                    f"groups: {seen[x]!r} and {name!r} share element {x!r}; groups must not "
                    "overlap, or a sensor's share could not be told apart")
            seen[x] = name


def _flattened(env: gym.Env, size: int) -> Groups | None:
    """A Dict flattened by ``FlattenObservation``: its keys' slices, in gymnasium's order."""
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, gym.wrappers.FlattenObservation):
            inner = current.env.observation_space
            if isinstance(inner, spaces.Dict) and spaces.flatdim(inner) == size:
                parts, at = {}, 0
                for key, sub in inner.spaces.items():  # flatten's own order
                    n = spaces.flatdim(sub)
                    parts[str(key)] = tuple(range(at, at + n))
                    at += n
                return Groups(parts, "the flattened Dict observation's keys",
                              {k: len(v) for k, v in parts.items()})
            return None
        current = current.env
    return None


def _mujoco(env: gym.Env, size: int) -> Groups | None:
    structure = getattr(env.unwrapped, "observation_structure", None)
    if not isinstance(structure, Mapping):
        return None
    shown = [(str(k), int(n)) for k, n in structure.items()
             if not str(k).startswith("skipped") and int(n) > 0]
    if sum(n for _, n in shown) != size:
        return None  # an env that adds or drops elements: its structure is not the array's
    parts, at = {}, 0
    for name, n in shown:
        parts[name] = tuple(range(at, at + n))
        at += n
    return Groups(parts, "the MuJoCo env's observation_structure",
                  {k: len(v) for k, v in parts.items()})


def _onnx(policy: Any, size: int) -> Groups | None:
    metadata = getattr(policy, "metadata", None)
    names = metadata.get("observation_names") if isinstance(metadata, Mapping) else None
    if not isinstance(names, str):
        return None
    listed = [n.strip() for n in names.split(",") if n.strip()]
    if len(listed) != size:
        # mjlab names its observation terms, not their sizes: no mapping to elements
        return None
    parts: dict[str, list[int]] = {}
    for i, name in enumerate(listed):
        parts.setdefault(name, []).append(i)
    return Groups({k: tuple(v) for k, v in parts.items()}, "the ONNX file's observation_names",
                  {k: len(v) for k, v in parts.items()})
