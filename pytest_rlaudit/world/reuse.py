"""Whether an env can be reused for the next episode: ``reset(seed=s)`` on a used env
gives exactly the episode a fresh env gives.

The runner keeps an env for the next episode of the same scenario only then; otherwise
every episode needs a fresh env (or its results would depend on which episodes the env
ran before, that is on the batch size and the worker count).

Gymnasium's classic_control, toy_text and mujoco envs and LunarLander rebuild all of their
state in ``reset``; tests/world/test_reuse.py checks that env by env. BipedalWalker and
CarRacing do not: their Box2D world outlives ``reset`` (only its bodies are replaced),
and a used BipedalWalker-v3 was seen to leave a fresh one's episode within a few steps.
Any other env is probed once per process (:func:`probe`). The probe also tells an env
that ignores its seed (two fresh envs reset with one seed and stepped alike differ):
such an env can be neither reused nor audited with paired episodes, and
:func:`~pytest_rlaudit.rollout.replay.check_replay` refuses it by its verdict.

>>> from pytest_rlaudit.world.envs import env_spec
>>> reset_is_exact(env_spec("CartPole-v1")), reset_is_exact(env_spec("Pendulum-v1"))
(True, True)
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from ..errors import RolloutError
from .envs import AuditEnv

__all__ = ["reset_is_exact", "reset_verdict", "Verdict", "EXACT", "KEEPS_STATE", "UNSEEDED",
           "UNKNOWN", "EXACT_FAMILIES", "NOT_EXACT", "probe", "probe_reset", "same"]

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

#: What a probe finds: a used env replays a fresh one's episodes (reused); it does not
#: but two fresh ones replay each other (state kept across resets: a fresh env per
#: episode); two fresh envs differ under one seed (the env ignores its seed: no paired
#: audit is possible); the env raised in the probe (not reused, no claim; the verdict
#: carries the error, which the seed-replay check and the runner raise, never swallow).
EXACT, KEEPS_STATE, UNSEEDED, UNKNOWN = "exact", "keeps state", "unseeded", "unknown"


class Verdict(NamedTuple):
    """What :func:`probe` found (one of :data:`EXACT`, :data:`KEEPS_STATE`,
    :data:`UNSEEDED`, :data:`UNKNOWN`) and, for :data:`UNSEEDED`, where two fresh envs
    first differed; for :data:`UNKNOWN`, the error to raise (the env's exception chained)."""

    kind: str
    detail: str = ""
    error: RolloutError | None = None


_verdicts: dict[Any, Verdict] = {}


def reset_is_exact(env: AuditEnv) -> bool:
    """Whether a used env of ``env``, reset with a seed, replays a fresh env's episode.

    Decided by the entry point of a registered env made as ``gymnasium.make`` makes it (no
    wrappers beyond its default ones): True for :data:`EXACT_FAMILIES`, False for
    :data:`NOT_EXACT`. Otherwise :func:`probe` decides, once per process for each
    :attr:`~pytest_rlaudit.world.envs.AuditEnv.recipe` (an id with its keyword arguments
    and the agent's wrappers: every :func:`~pytest_rlaudit.world.envs.env_spec` call makes
    a new factory), or for each name and factory where there is none (a name alone is not
    enough: every lambda of one function has the same one).

    >>> from pytest_rlaudit.world.envs import env_spec
    >>> reset_is_exact(env_spec("FrozenLake-v1"))
    True
    """
    return reset_verdict(env).kind == EXACT


def reset_verdict(env: AuditEnv) -> Verdict:
    """:func:`reset_is_exact`'s verdict in full: registered families by their entry point
    (gymnasium's own envs all honour their seed), any other env by :func:`probe`, cached
    per process as there.

    >>> from pytest_rlaudit.world.envs import env_spec
    >>> reset_verdict(env_spec("MountainCar-v0")).kind
    'exact'
    """
    module = _entry_module(env)
    if module is not None and module.startswith(NOT_EXACT):
        return Verdict(KEEPS_STATE)
    if module is not None and module.startswith(EXACT_FAMILIES):
        return Verdict(EXACT)
    key: Any = ("recipe", env.recipe) if env.recipe is not None else (env.name, env.factory)
    try:
        hash(key)
    except TypeError:  # an unhashable factory: probe every time
        key = None
    if key is not None and key in _verdicts:
        return _verdicts[key]
    verdict = probe(env)
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
    """Whether :func:`probe` finds ``env`` :data:`EXACT`: a used env replays a fresh one.

    >>> from pytest_rlaudit.world.envs import env_spec
    >>> probe_reset(env_spec("CartPole-v1"))
    True
    """
    return probe(env, warmup=warmup, max_warmup=max_warmup, steps=steps).kind == EXACT


def probe(env: AuditEnv, *, warmup: int = WARMUP_STEPS, max_warmup: int = MAX_WARMUP_STEPS,
          steps: int = COMPARED_STEPS) -> Verdict:
    """Use one env of ``env`` (seeded random actions, resetting as episodes end) for at
    least ``warmup`` steps and until an episode has ended (at most ``max_warmup``), then
    run it and a fresh one from the same seed with the same seeded actions for ``steps``
    steps (resetting each, with the next seed, as its episodes end): :data:`EXACT` when
    observations, rewards and ends are equal all along.

    When they differ, a second fresh env runs the same steps: if it replays the first
    fresh one, the used env kept state across resets (:data:`KEEPS_STATE`); if not, the
    env does not replay under its seed at all (:data:`UNSEEDED`, with where they
    differed). An env of :data:`NOT_EXACT` made by a factory is :data:`KEEPS_STATE`. An
    exception of the env (made, reset or stepped) is :data:`UNKNOWN`, with the
    :class:`~pytest_rlaudit.errors.RolloutError` naming the probe's call (the original
    chained) for the caller to raise once its own episodes had their chance to name a
    fault that repeats in their own terms: an env that fails once must not pass unseen.
    A probe sees only so many steps, so state an env keeps (or randomness it draws) but
    shows rarely can escape it.

    >>> from pytest_rlaudit.world.envs import env_spec
    >>> probe(env_spec("CartPole-v1")).kind
    'exact'
    """
    made: list[gym.Env] = []
    at = ["making the first env"]  # the env call under way, for the message
    try:
        verdict = _judge(env, made, at, warmup, max_warmup, steps)
    except Exception as exc:
        verdict = _failed(env, exc, at[0])
    finally:
        closing = _close(made)
    if closing is not None and verdict.error is None:
        verdict = _failed(env, closing, "closing its envs")
    return verdict


def _judge(env: AuditEnv, made: list[gym.Env], at: list[str], warmup: int, max_warmup: int,
           steps: int) -> Verdict:
    """:func:`probe`'s verdict; every env it makes goes into ``made`` (for the caller to
    close), and ``at[0]`` says the env call under way."""
    used = env.make()
    made.append(used)
    if type(used.unwrapped).__module__.startswith(NOT_EXACT):  # made by a factory
        return Verdict(KEEPS_STATE)
    actions = copy.deepcopy(used.action_space)
    actions.seed(_PROBE_SEED)
    at[0] = f"resetting the first env (env seed {_PROBE_SEED + 1})"
    used.reset(seed=_PROBE_SEED + 1)
    ended = False
    for i in range(max_warmup):
        if i >= warmup and ended:
            break
        at[0] = f"at env step {i + 1} of the first env"
        _, _, terminated, truncated, _ = used.step(actions.sample())
        if terminated or truncated:
            ended = True
            at[0] = f"resetting the first env after env step {i + 1}"
            used.reset(seed=_PROBE_SEED + 2 + i)
    plan = [actions.sample() for _ in range(steps)]
    at[0] = "making a second env"
    fresh = env.make()
    made.append(fresh)
    expected = _trajectory(fresh, plan, at, "the second env")
    if _difference(_trajectory(used, plan, at, "the first env"), expected) is None:
        return Verdict(EXACT)
    at[0] = "making a third env"
    other = env.make()
    made.append(other)
    differs = _difference(_trajectory(other, plan, at, "the third env"), expected)
    return Verdict(KEEPS_STATE) if differs is None else Verdict(UNSEEDED, differs)


def _failed(env: AuditEnv, exc: Exception, at: str) -> Verdict:
    """The verdict of a probe in which the env raised ``exc``, ``at`` that call."""
    error = RolloutError(
        f"env {env.name!r} failed ({type(exc).__name__}: {exc}) in the probe that tells "
        "whether it honours its reset seed (seeded random actions, before any episode "
        f"of the audit), {at}", scenario="nominal")
    error.__cause__ = exc
    return Verdict(UNKNOWN, at, error)


def _close(made: list[gym.Env]) -> Exception | None:
    """Close every env of ``made``; the first exception one raised, if any."""
    first = None
    for made_env in made:
        try:
            made_env.close()
        except Exception as exc:
            first = first or exc
    return first


def _trajectory(env: gym.Env, plan: list[Any], at: list[str],
                name: str) -> list[tuple[Any, ...]]:
    """What ``env`` does from a reset with the probe's seed under the actions of ``plan``
    (the next seed at each episode end): each reset's observation and each step's
    observation, reward and ends, copied (an env may render into one reused buffer).
    ``at[0]``: the call under way, in words (``name``: which env)."""
    seed = _PROBE_SEED
    at[0] = f"resetting {name} (env seed {seed})"
    out: list[tuple[Any, ...]] = [("reset", copy.deepcopy(env.reset(seed=seed)[0]))]
    for i, action in enumerate(plan):
        at[0] = f"at env step {i + 1} of {name}'s comparison"
        obs, reward, terminated, truncated, _ = env.step(copy.deepcopy(action))
        out.append(("step", copy.deepcopy(obs), reward, terminated, truncated))
        if terminated or truncated:
            seed += 1
            at[0] = f"resetting {name} (env seed {seed})"
            out.append(("reset", copy.deepcopy(env.reset(seed=seed)[0])))
    return out


def _difference(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> str | None:
    """Where two trajectories of :func:`_trajectory` first differ, in words; None if
    they are equal.

    >>> _difference([("reset", 1.0)], [("reset", 2.0)])
    'the observations after the first reset differ: 1.0 vs 2.0'
    """
    steps = 0
    for x, y in zip(a, b, strict=False):
        at = f"after {steps} step(s)" if steps else "after the first reset"
        if x[0] != y[0]:
            return f"one episode ended and the other went on {at}"
        if x[0] == "step":
            steps += 1
            at = f"at step {steps}"
        for what, u, v in zip(("observations", "rewards", "terminated", "truncated"), x[1:],
                              y[1:], strict=False):
            if not same(u, v):
                return f"the {what} {at} differ: {_show(u)} vs {_show(v)}"
    return None if len(a) == len(b) else "one ran more steps than the other"


def _show(value: Any) -> str:
    """A value as the probe's words show it: short, one line."""
    text = repr(np.asarray(value).tolist()) if not isinstance(value, dict) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def same(x: Any, y: Any) -> bool:
    """Equal observations (arrays, dicts and tuples of them) or rewards; NaN equals NaN.

    >>> same({"a": np.array([1.0, np.nan])}, {"a": np.array([1.0, np.nan])}), same(1, 2)
    (True, False)
    """
    if isinstance(x, dict) or isinstance(y, dict):
        return (isinstance(x, dict) and isinstance(y, dict) and x.keys() == y.keys()
                and all(same(x[k], y[k]) for k in x))
    if isinstance(x, tuple) or isinstance(y, tuple):
        return (isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y)
                and all(same(a, b) for a, b in zip(x, y, strict=True)))
    a, b = np.asarray(x), np.asarray(y)
    try:
        return bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:  # not numbers: NaN does not apply
        return bool(np.array_equal(a, b))
