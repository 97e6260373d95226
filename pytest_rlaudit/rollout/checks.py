"""The runner's checks of what crosses between agent and env: observations (finite, of
the declared shape and, on the first steps of each episode, near the declared bounds),
actions (in the action space), and the Gymnasium API itself, a whole batch at a time
where the hot path allows.

>>> import numpy as np
>>> from gymnasium import spaces
>>> contract = ObservationContract(spaces.Box(-1.0, 1.0, (2,)), "Toy-v0")
>>> contract.check(np.array([0.5, 2.5]), "at reset")   # strays, within a box width: kept
>>> contract.check(np.array([0.5, 100.0]), "at reset")
Traceback (most recent call last):
...
pytest_rlaudit.errors.EnvContractError: env 'Toy-v0' returned an observation far outside its
observation space at reset: element 1 is 100, but the space's bounds there are [-1, 1] ...
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from gymnasium import spaces

from ..errors import EnvContractError, RolloutError

__all__ = ["ActionChecker", "ObservationContract", "agent_failed", "action_refused",
           "output_not_finite",
           "all_finite", "check_obs",
           "check_observation_space", "show", "unpacks_old_api", "where", "CHECKED_STEPS",
           "BOUNDS_SLACK"]

#: Env steps at the start of each episode whose observations are held to the bounds of
#: the observation space, after the reset's. The first steps are where a contract broken
#: for good (wrong units, unnormalised pixels, a mis-declared space) shows; checking
#: every step would cost the hot path for envs that are fine.
CHECKED_STEPS = 3

#: How far past a bound of its Box an observation element may stray before it is refused,
#: in widths of the box there (high - low). Real envs stray past declared bounds: declared
#: bounds are often guides rather than limits (LunarLander's), integrators overshoot a
#: clip, float32 rounds; a broken contract sits orders of magnitude out (pixels in
#: [0, 255] declared in [0, 1], degrees declared as radians, 100x the box). A whole width
#: keeps the first and refuses the second. Elements with an infinite bound are not held.
BOUNDS_SLACK = 1.0

#: Observation spaces the runner batches (as arrays, or a dict of arrays by key).
BATCHED = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)

#: The numpy dtype kinds of numbers (bool, int, unsigned, float): every batched space's
#: observations are numbers; text or objects would reach the agent as its own failure.
NUMBERS = "biuf"

#: Where an observation was seen, in words (``"at reset"``), or a function that says it:
#: the words are only put together for a message, never on the hot path.
At = str | Callable[[], str]

#: Where Gymnasium's migration guide is (the old gym API's fix).
MIGRATION_GUIDE = "https://gymnasium.farama.org/introduction/migration_guide/"


def where(scenario: str, episode: int, seed: int, step: int) -> str:
    """The words every rollout error uses to say where it happened."""
    return f"scenario {scenario!r}, episode {episode} (env seed {seed + episode}), agent step {step}"


def agent_failed(exc: BaseException, rows: Sequence[tuple[str, int, int]], seed: int,
                 call: str = "a batched call") -> RolloutError:
    """The error for a ``call`` of the agent's (a policy call; its ``initial_state``) that
    raised ``exc`` on ``rows`` (scenario, episode, agent step of each), naming the first
    three; raise it ``from exc``."""
    at = "; ".join(where(s, e, seed, t) for s, e, t in rows[:3])
    more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
    scenario, episode, step = rows[0]
    return RolloutError(
        f"the agent failed ({type(exc).__name__}: {exc}) in {call} for {at}{more}",
        scenario=scenario, episode=episode, step=step)


def action_refused(action: Any, space: spaces.Space[Any], scenario: str, episode: int,
                   seed: int, step: int, obs: Any = None) -> RolloutError:
    """The error for an ``action`` the agent chose on observation ``obs`` that is not in
    the action ``space`` (:func:`output_not_finite`'s if it holds NaN or infinity)."""
    if _not_finite(action):
        return output_not_finite(action, obs, scenario, episode, seed, step, "action")
    seen = f", on the observation {show(obs)}" if obs is not None else ""
    return RolloutError(
        f"the agent returned action {show(action)}, which is not in the action "
        f"space {space} (out of bounds or of the wrong "
        f"type){seen}, at {where(scenario, episode, seed, step)}. Fix the policy's "
        "output, or clip it (gymnasium.wrappers.ClipAction) if that is what deployment "
        "does.",
        scenario=scenario, episode=episode, step=step)


def output_not_finite(output: Any, obs: Any, scenario: str, episode: int, seed: int,
                      step: int, what: str = "output") -> RolloutError:
    """The error for an agent whose ``what`` (its ``"action"``, or the ``"output"``, scores
    or logits, an action is read from) holds NaN or infinity on observation ``obs``: the
    one wording for every agent kind (raise it ``from`` the
    :class:`~pytest_rlaudit.errors.NonFiniteOutputError` if there is one)."""
    return RolloutError(
        f"the agent returned {what} {show(output)}, which is non-finite (NaN or infinite), "
        f"on the observation {show(obs)}, at {where(scenario, episode, seed, step)}. No "
        "action can stand for it (an argmax would quietly turn NaN scores into action 0), "
        "so the audit stops rather than rate it. Fix the policy: a NaN usually comes from "
        "weights that diverged in training, or from observations it was not trained on "
        "(missing normalisation statistics, a division by zero in preprocessing).",
        scenario=scenario, episode=episode, step=step)


def _not_finite(value: Any) -> bool:
    try:
        array = np.asarray(value)
        return array.dtype.kind in "fc" and not bool(np.isfinite(array).all())
    except (TypeError, ValueError):  # a Dict or Tuple action: left to the space's check
        return False


def check_observation_space(space: spaces.Space[Any], env: str) -> None:
    """Raise an :class:`EnvContractError` unless the runner can batch observations of
    ``space``: a Box, Discrete, MultiDiscrete or MultiBinary space, or a Dict of them.

    >>> check_observation_space(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), "Toy-v0")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.EnvContractError: env 'Toy-v0' has the observation space Tuple(...
    """
    parts = space.spaces.values() if isinstance(space, spaces.Dict) else (space,)
    odd = next((p for p in parts if not isinstance(p, BATCHED)), None)
    if odd is None:
        return
    inside = f" (in its Dict observation space {space})" if odd is not space else ""
    raise EnvContractError(
        f"env {env!r} has the observation space {odd}{inside}, which the audit cannot "
        f"batch: it stacks observations into arrays, one row per episode, and a "
        f"{type(odd).__name__} observation is not one array. Supported: Box, Discrete, "
        "MultiDiscrete, MultiBinary, and a Dict of these. Fix: wrap the env in "
        "gymnasium.wrappers.FlattenObservation (one flat Box; the agent then gets the "
        "flattened array, as it must have in training), or in an ObservationWrapper that "
        "makes it a Dict of supported spaces."
    )


class ObservationContract:
    """What ``env``'s observation space promises of every observation, checked cheaply:
    :meth:`fits` a whole batch's shape and number type on every decision step,
    :meth:`check` one observation's shape, number type and Box bounds (within
    :data:`BOUNDS_SLACK`) at each reset and on the first :data:`CHECKED_STEPS` env steps
    of an episode. Also holds the env to
    Gymnasium's API there (:meth:`check_reset`, :meth:`check_step`).

    The space must be one the runner batches (:func:`check_observation_space`).
    """

    def __init__(self, space: spaces.Space[Any], env: str) -> None:
        check_observation_space(space, env)
        self.space = space
        self.env = env
        parts: Mapping[Any, spaces.Space[Any]] = {None: space}  # key None: the whole space
        if isinstance(space, spaces.Dict):
            parts = space.spaces
        # per key: (shape, lower and upper limits with the slack, or None without bounds)
        self.parts: dict[Any, tuple[tuple[int, ...], Any]] = {  # every batched space has a shape
            key: (tuple(part.shape or ()), _limits(part)) for key, part in parts.items()}

    def fits(self, batch: Any) -> bool:
        """Whether a batch (observations stacked along a new first axis) has the
        declared shape in every row, and holds numbers."""
        parts = self.parts
        if None in parts:
            return (getattr(batch, "shape", (None,))[1:] == parts[None][0]
                    and batch.dtype.kind in NUMBERS)
        return (isinstance(batch, Mapping) and batch.keys() == parts.keys()
                and all(batch[k].shape[1:] == parts[k][0] and batch[k].dtype.kind in NUMBERS
                        for k in parts))

    def check(self, obs: Any, at: At) -> None:
        """Raise an :class:`EnvContractError` (naming the env, the space, what was seen
        ``at`` and the fix) if ``obs`` is not of the declared shape, or lies beyond a
        finite bound of a Box by more than :data:`BOUNDS_SLACK` widths of the box."""
        if None in self.parts:
            self._check_part(obs, None, self.space, at)
            return
        if not isinstance(obs, Mapping) or obs.keys() != self.parts.keys():
            got = sorted(map(str, obs)) if isinstance(obs, Mapping) else type(obs).__name__
            raise EnvContractError(
                f"env {self.env!r} returned an observation with keys {got} {_words(at)}, but its "
                f"observation space {self.space} declares the keys "
                f"{sorted(map(str, self.parts))}. Fix the env's observation (or its "
                "observation_space) so that they agree.")
        for key, part in cast(spaces.Dict, self.space).spaces.items():  # keys: a Dict's
            self._check_part(obs[key], key, part, at)

    def _check_part(self, obs: Any, key: Any, space: spaces.Space[Any], at: At) -> None:
        shape, limits = self.parts[key]
        value = np.asarray(obs)
        what = f"an observation ({key!r} of it)" if key is not None else "an observation"
        if value.shape != shape:
            raise EnvContractError(
                f"env {self.env!r} returned {what} of shape {value.shape} {_words(at)}, but its "
                f"observation space {space} declares shape {shape}. The agent is built for "
                "the declared space, and every check and perturbation relies on it. Fix: "
                "make the env's observations and its observation_space agree.")
        if value.dtype.kind not in NUMBERS:
            kind = "text" if value.dtype.kind in "US" else f"{value.dtype.kind!r}-kind values"
            raise EnvContractError(
                f"env {self.env!r} returned {what} of {kind} (dtype {value.dtype}, "
                f"{_short(value)}) {_words(at)}, but its observation space {space} declares "
                f"numbers (dtype {space.dtype}). The agent computes on the observations as "
                "numbers, so this would show as the agent's failure. Fix: make the env "
                "return numbers of the declared dtype at every step.")
        if limits is None:
            return
        low, high = limits
        if value.dtype.kind not in "biuf" or not ((value < low).any() or (value > high).any()):
            return
        flat = value.reshape(-1)
        i = int(np.flatnonzero((flat < low.reshape(-1)) | (flat > high.reshape(-1)))[0])
        index = np.unravel_index(i, shape) if len(shape) > 1 else (i,)
        element = ", ".join(map(str, index)) if shape else "0"
        box = cast(spaces.Box, space)  # limits are a Box's
        bound_low = np.broadcast_to(box.low, shape).reshape(-1)[i]
        bound_high = np.broadcast_to(box.high, shape).reshape(-1)[i]
        raise EnvContractError(
            f"env {self.env!r} returned {what} far outside its observation space {_words(at)}: "
            f"element {element} is {float(flat[i]):g}, but the space's bounds there are "
            f"[{float(bound_low):g}, {float(bound_high):g}] (an element is refused once it "
            f"is more than {BOUNDS_SLACK:g} box width(s) past a bound; the space is {space}). "
            "The observation space is the contract the agent was trained on and the audit's "
            "disturbances are sized by. Fix: the env's observations (their units or "
            "normalisation), or the declared bounds (np.inf where an element is unbounded).")

    def check_reset(self, result: Any, at: At) -> None:
        """Hold what ``reset()`` returned to Gymnasium's API (``(obs, info)``) and its
        observation to :meth:`check`."""
        # The pair's shape only: an info that is no dict is Gymnasium's passive checker's
        # business (it fails registered envs for it), not the old API.
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise self.old_api(f"reset() returned {_kind(result)} instead of the pair "
                                f"(observation, info), {_words(at)}")
        self.check(result[0], at)

    def check_step(self, result: Any, at: At) -> None:
        """Hold what ``step()`` returned to Gymnasium's API (five values) and its
        observation to :meth:`check`."""
        if not (isinstance(result, (tuple, list)) and len(result) == 5):
            raise self.old_api(
                f"step() returned {_kind(result)} instead of Gymnasium's five values "
                f"(observation, reward, terminated, truncated, info), {_words(at)}")
        self.check(result[0], at)

    def old_api(self, what: str) -> EnvContractError:
        """The error for an env on the old gym API, saying ``what`` showed it."""
        return EnvContractError(
            f"env {self.env!r} does not follow Gymnasium's API: {what}. This is the old gym "
            "API (before gym 0.26: reset() returns the observation alone, step() returns "
            "(observation, reward, done, info)). Fix: port the env (reset(*, seed=None, "
            "options=None) calls super().reset(seed=seed) and returns (obs, info); step() "
            f"returns (obs, reward, terminated, truncated, info); see {MIGRATION_GUIDE}), or "
            "pass a factory that wraps it: shimmy.GymV21CompatibilityV0(env=your_env) "
            "(pip install 'shimmy[gym-v21]').")


def unpacks_old_api(exc: BaseException) -> bool:
    """Whether ``exc`` is Python failing to unpack the four values of an old-API
    ``step()`` into Gymnasium's five: what gymnasium's own wrappers (``TimeLimit``, made
    by ``gymnasium.make``) raise when the env beneath them is on the old gym API, before
    the runner sees what the env returned.

    >>> try:
    ...     obs, reward, terminated, truncated, info = (0, 1.0, False, {})
    ... except ValueError as exc:
    ...     unpacks_old_api(exc)
    True
    """
    return isinstance(exc, ValueError) and "(expected 5, got 4)" in str(exc)


def _limits(space: spaces.Space[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """A Box's bounds widened by :data:`BOUNDS_SLACK` widths, -inf/+inf where a bound is
    infinite (not held); None for other spaces or a Box without a finite pair."""
    if not isinstance(space, spaces.Box):
        return None
    low = np.broadcast_to(space.low, space.shape).astype(np.float64)
    high = np.broadcast_to(space.high, space.shape).astype(np.float64)
    held = np.isfinite(low) & np.isfinite(high)
    if not held.any():
        return None
    width = np.where(held, high - low, 0.0)
    # A box of width 0 (a constant element) keeps the slack of its bound's size instead.
    width = np.where(width > 0, width, np.abs(np.where(held, low, 0.0)))
    with np.errstate(invalid="ignore"):
        return (np.where(held, low - BOUNDS_SLACK * width, -np.inf),
                np.where(held, high + BOUNDS_SLACK * width, np.inf))


def _words(at: At) -> str:
    return at if isinstance(at, str) else at()


def _short(value: np.ndarray) -> str:
    """An observation in a message: short, one line."""
    text = repr(value.tolist())
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"a {type(value).__name__}"


def check_obs(obs: Any, scenario: str, episode: int, seed: int, step: int) -> None:
    """Raise a :class:`RolloutError` saying where if ``obs`` holds a non-finite number."""
    arrays = obs.values() if isinstance(obs, dict) else (obs,)
    if not all(np.asarray(a).dtype.kind != "f" or np.isfinite(a).all() for a in arrays):
        raise RolloutError(
            f"the env returned a non-finite observation {obs!r} at "
            f"{where(scenario, episode, seed, step)}",
            scenario=scenario, episode=episode, step=step,
        )


def show(action: Any) -> str:
    """An action (or an observation) as an error message shows it."""
    value = np.asarray(action)
    return repr(value.tolist()) if value.dtype != object else repr(action)


def all_finite(batch: Any) -> bool:
    """Whether a batch (an array or a dict of arrays) holds only finite floats."""
    arrays = batch.values() if isinstance(batch, dict) else (batch,)
    return all(a.dtype.kind != "f" or bool(np.isfinite(a).all()) for a in arrays)


class ActionChecker:
    """Vectorised validation of a batch of actions against the env's action space."""

    def __init__(self, space: spaces.Space[Any]) -> None:
        self.space = space
        if isinstance(space, spaces.Discrete):
            self.kind = "discrete"
            self.low, self.high = int(space.start), int(space.start + space.n - 1)
        elif isinstance(space, spaces.Box):
            self.kind = "box"
        else:
            self.kind = "generic"

    def __call__(self, actions: Any, n: int) -> tuple[np.ndarray | list[Any], int | None]:
        """Return the actions to step with and the index of the first bad one (or None)."""
        if self.kind == "generic":
            listed = list(actions)
            if len(listed) != n:
                raise ValueError(f"the agent returned {len(listed)} actions for {n} observations")
            for i, a in enumerate(listed):
                if not self.space.contains(a):
                    return listed, i
            return listed, None
        acts = np.asarray(actions)
        if self.kind == "discrete":
            if acts.ndim == 2 and acts.shape[1] == 1:
                acts = acts[:, 0]
            if acts.shape != (n,):
                raise ValueError(
                    f"the agent returned actions of shape {acts.shape} for {n} observations; "
                    f"a Discrete action space needs shape ({n},)"
                )
            if acts.dtype.kind == "f":
                integral = np.isfinite(acts) & (acts == np.round(acts))
                if not integral.all():
                    return acts, int(np.argmin(integral))
                acts = acts.astype(np.int64)
            elif acts.dtype.kind not in "iub":
                return acts, 0
            bad = (acts < self.low) | (acts > self.high)
            return acts, (int(np.argmax(bad)) if bad.any() else None)
        box = cast(spaces.Box, self.space)  # kind "box"
        shape = (n, *box.shape)
        if acts.shape != shape:
            if acts.size == math.prod(shape):
                acts = acts.reshape(shape)
            else:
                raise ValueError(
                    f"the agent returned actions of shape {acts.shape} for {n} observations; "
                    f"this Box action space needs shape {shape}"
                )
        acts = acts.astype(box.dtype, copy=False)
        ok = (np.isfinite(acts) & (acts >= box.low) & (acts <= box.high))
        ok = ok.reshape(n, -1).all(axis=1)
        return acts, (int(np.argmin(ok)) if not ok.all() else None)
