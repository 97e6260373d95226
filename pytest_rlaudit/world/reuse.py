"""Whether an env can be reused for the next episode: ``reset(seed=s)`` on a used env
gives exactly the episode a fresh env gives.

The runner keeps an env for the next episode of the same scenario only then; otherwise
every episode needs a fresh env (or its results would depend on which episodes the env
ran before, that is on the batch size and the worker count).

Gymnasium's classic_control, toy_text and mujoco envs and LunarLander rebuild all of their
state in ``reset``; tests/world/test_reuse.py checks that env by env. BipedalWalker and
CarRacing do not: their Box2D world outlives ``reset`` (only its bodies are replaced),
and a used BipedalWalker-v3 was seen to leave a fresh one's episode within a few steps.
Any other env is probed once per process (:func:`probe_reset`).

>>> from pytest_rlaudit.world.envs import env_spec
>>> reset_is_exact(env_spec("CartPole-v1")), reset_is_exact(env_spec("Pendulum-v1"))
(True, True)
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from .envs import AuditEnv

__all__ = ["reset_is_exact", "EXACT_FAMILIES", "NOT_EXACT", "probe_reset"]

#: Entry-point modules whose ``reset(seed=...)`` rebuilds the whole state.
EXACT_FAMILIES = (
    "gymnasium.envs.classic_control.",
    "gymnasium.envs.toy_text.",
    "gymnasium.envs.mujoco.",
    "gymnasium.envs.box2d.lunar_lander",  # makes a new Box2D world in every reset
)
#: Entry-point modules whose envs keep state across resets: never probed, a probe's few
#: steps could miss what they keep.
NOT_EXACT = (
    "gymnasium.envs.box2d.bipedal_walker",
    "gymnasium.envs.box2d.car_racing",
)

#: A probe uses its first env for at least ``WARMUP_STEPS`` steps and on until an
#: episode has ended (what is kept across resets often shows only after an end), at most
#: ``MAX_WARMUP_STEPS``; then compares ``COMPARED_STEPS`` steps.
WARMUP_STEPS, MAX_WARMUP_STEPS, COMPARED_STEPS = 30, 300, 50
_PROBE_SEED = 20_250_515

_verdicts: dict[tuple[str, Any], bool] = {}


def reset_is_exact(env: AuditEnv) -> bool:
    """Whether a used env of ``env``, reset with a seed, replays a fresh env's episode.

    Decided by the entry point of a registered env made as ``gymnasium.make`` makes it (no
    wrappers beyond its default ones): True for :data:`EXACT_FAMILIES`, False for
    :data:`NOT_EXACT`. Otherwise :func:`probe_reset` decides, once per process for each
    name and factory (a name alone is not enough: every lambda of one function has the
    same one, and an id's keyword arguments are not in it).

    >>> from pytest_rlaudit.world.envs import env_spec
    >>> reset_is_exact(env_spec("FrozenLake-v1"))
    True
    """
    module = _entry_module(env)
    if module is not None and module.startswith(NOT_EXACT):
        return False
    if module is not None and module.startswith(EXACT_FAMILIES):
        return True
    try:
        key: tuple[str, Any] | None = (env.name, env.factory)
        hash(key)
    except TypeError:  # an unhashable factory: probe every time
        key = None
    if key is not None and key in _verdicts:
        return _verdicts[key]
    verdict = probe_reset(env)
    if key is not None:
        _verdicts[key] = verdict
    return verdict


def _entry_module(env: AuditEnv) -> str | None:
    """The entry point's module of a registered env made by ``gymnasium.make`` with its
    default wrappers only; None for anything else (factories, extra wrappers)."""
    if getattr(env.needs, "wrappers", ()):  # the agent's own wrappers go around it
        return None
    spec = _spec_of(env.source)
    if spec is None or spec.additional_wrappers:
        return None
    entry = spec.entry_point
    if isinstance(entry, str):
        return entry.partition(":")[0]
    return getattr(entry, "__module__", None)


def _spec_of(source: str | EnvSpec | None) -> EnvSpec | None:
    if isinstance(source, EnvSpec):
        return source
    if not isinstance(source, str):
        return None
    env_id = source.partition(":")[2] if ":" in source else source
    try:
        return gym.spec(env_id)
    except gym.error.Error:
        return None


def probe_reset(env: AuditEnv, *, warmup: int = WARMUP_STEPS,
                max_warmup: int = MAX_WARMUP_STEPS, steps: int = COMPARED_STEPS) -> bool:
    """Use one env of ``env`` (seeded random actions, resetting as episodes end) for at
    least ``warmup`` steps and until an episode has ended (at most ``max_warmup``), then
    reset it and a fresh one with the same seed and step both with the same seeded
    actions for ``steps`` steps (resetting both, with the next seed, as episodes end):
    True when observations, rewards and ends are equal all along.

    Any difference, exception or non-determinism (two fresh envs would differ too) is
    False: reusing such an env would not be exact; so is an env of :data:`NOT_EXACT`. A
    probe sees only so many steps, so state an env keeps but shows rarely can escape it.

    >>> from pytest_rlaudit.world.envs import env_spec
    >>> probe_reset(env_spec("CartPole-v1"))
    True
    """
    made: list[gym.Env] = []
    try:
        used = env.make()
        made.append(used)
        if type(used.unwrapped).__module__.startswith(NOT_EXACT):  # made by a factory
            return False
        actions = copy.deepcopy(used.action_space)
        actions.seed(_PROBE_SEED)
        used.reset(seed=_PROBE_SEED + 1)
        ended = False
        for i in range(max_warmup):
            if i >= warmup and ended:
                break
            _, _, terminated, truncated, _ = used.step(actions.sample())
            if terminated or truncated:
                ended = True
                used.reset(seed=_PROBE_SEED + 2 + i)
        fresh = env.make()
        made.append(fresh)
        seed = _PROBE_SEED
        if not _same(used.reset(seed=seed)[0], fresh.reset(seed=seed)[0]):
            return False
        for _ in range(steps):
            action = actions.sample()
            a = used.step(copy.deepcopy(action))
            b = fresh.step(action)
            if not all(_same(x, y) for x, y in zip(a[:4], b[:4], strict=True)):
                return False
            if a[2] or a[3]:
                seed += 1
                if not _same(used.reset(seed=seed)[0], fresh.reset(seed=seed)[0]):
                    return False
        return True
    except Exception:
        return False
    finally:
        for made_env in made:
            try:
                made_env.close()
            except Exception:
                pass


def _same(x: Any, y: Any) -> bool:
    """Equal observations (arrays, dicts and tuples of them) or rewards; NaN equals NaN.

    >>> _same({"a": np.array([1.0, np.nan])}, {"a": np.array([1.0, np.nan])}), _same(1, 2)
    (True, False)
    """
    if isinstance(x, dict) or isinstance(y, dict):
        return (isinstance(x, dict) and isinstance(y, dict) and x.keys() == y.keys()
                and all(_same(x[k], y[k]) for k in x))
    if isinstance(x, tuple) or isinstance(y, tuple):
        return (isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y)
                and all(_same(a, b) for a, b in zip(x, y, strict=True)))
    a, b = np.asarray(x), np.asarray(y)
    try:
        return bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:  # not numbers: NaN does not apply
        return bool(np.array_equal(a, b))
