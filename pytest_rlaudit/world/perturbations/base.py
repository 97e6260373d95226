"""The base of every perturbation wrapper, and the helpers wrappers share: argument
checks, noisy actions, the generator of each wrapper and its reseeding."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..._checks import integer, number
from ..._seeding import stable_hash
from ...errors import PerturbationError

__all__ = ["Perturbation", "seed_perturbations", "RepeatAction", "hold", "noisy_observation",
           "noised", "noised_action", "held_frame", "check_scale", "SCALES", "require_box",
           "Param", "declared_params", "check_params", "noop_params", "ranges"]

try:
    from gymnasium.wrappers import RepeatAction
except ImportError:  # gymnasium < 1.3: the wrapper as gymnasium 1.3 defines it

    class RepeatAction(gym.Wrapper):  # type: ignore[no-redef]
        """Repeat each action ``num_repeats`` times, summing rewards, until the episode ends."""

        def __init__(self, env: gym.Env, num_repeats: int) -> None:
            gym.Wrapper.__init__(self, env)
            self.num_repeats = num_repeats

        def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
            return hold(self.env, action, self.num_repeats)


def hold(env: gym.Env, action: Any, k: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """Step ``env`` with ``action`` ``k`` times, summing rewards, stopping when the episode
    ends: the agent sees the last observation (speed ``k``)."""
    total = 0.0
    for _ in range(k):
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        if terminated or truncated:
            break
    return obs, total, terminated, truncated, info


#: What a noise ``sigma`` is measured in (see ObservationNoise).
SCALES = ("relative", "absolute")


def check_scale(owner: str, scale: Any, spread: Any, space: spaces.Space[Any],
                size: int | None = None) -> tuple[str, tuple[float, ...] | None]:
    """``(scale, spread)`` checked: relative noise needs one finite spread >= 0 per
    observation element (audits calibrate it; ``size`` elements, by default those of
    ``space``: for a Dict, those of the keys the noise acts on); absolute noise takes
    none."""
    if scale not in SCALES:
        raise PerturbationError(f"{owner}: scale must be 'relative' or 'absolute', got {scale!r}")
    if scale == "absolute":
        if spread is not None:
            raise PerturbationError(f"{owner}: spread is for scale='relative'; absolute noise "
                                    "is in raw observation units")
        return scale, None
    if spread is None:
        raise PerturbationError(
            f"{owner}(scale='relative') needs spread=: each observation element's standard "
            "deviation in the nominal episodes (audit() and assert_robust calibrate it; "
            "pytest_rlaudit.world.calibration.observation_spread computes it), or "
            "scale='absolute' for raw units")
    values = np.asarray(spread, dtype=np.float64).ravel()
    if size is None:
        size = int(np.prod(getattr(space, "shape", ()) or (1,)))
    if values.size != size or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise PerturbationError(
            f"{owner}: spread must hold {size} finite values >= 0 (one per observation "
            f"element of {space}), got {values.size} values")
    return scale, tuple(float(v) for v in values)


def noisy_observation(obs: Any, sigma: float | np.ndarray, rng: np.random.Generator,
                      space: spaces.Box) -> np.ndarray:
    """``obs`` (an observation of ``space``) plus i.i.d. Gaussian noise, in its dtype.

    ``sigma`` is a number or one std per element (relative noise, see ObservationNoise).
    One standard normal per element is drawn whatever ``sigma`` and dtype, so the stream
    does not depend on them. The rule depends on the dtype:

    - float: std ``sigma`` in the observation's own units, not clipped (a real sensor's
      reading can leave the nominal range; the established timing audit's semantics).
    - integer (images: uint8 pixels in [0, 255]): std ``sigma`` x the space's range
      (``high - low``; ``sigma=0.1`` is about 25 grey levels), rounded to the nearest
      integer and clipped to the space's bounds, so dtype and bounds are kept. Raw units
      would round ``sigma=0.1`` away to nothing (an audit that measures nothing), and a
      plain cast would bias values toward zero and wrap negative ones (-1 -> 255).
      Rounding is unbiased; clipping saturates like a camera, so pixels at a bound can
      only move inward.

    >>> space = spaces.Box(0, 255, (2,), np.uint8)
    >>> noisy_observation(np.array([0, 128], np.uint8), 0.1, np.random.default_rng(0), space)
    array([  3, 125], dtype=uint8)
    """
    obs = np.asarray(obs)
    return noised(obs, sigma, rng.standard_normal(obs.shape), space)


def noised(obs: np.ndarray, sigma: float | np.ndarray, noise: np.ndarray,
           space: spaces.Box) -> np.ndarray:
    """:func:`noisy_observation`'s rule with the standard normals ``noise`` given, element
    by element: ``obs`` may be one observation or a batch of them (a row each).

    >>> noised(np.zeros((2, 2), np.float32), 0.5, np.ones((2, 2)), spaces.Box(-1, 1, (2,)))
    array([[0.5, 0.5],
           [0.5, 0.5]], dtype=float32)
    """
    noisy: np.ndarray
    if obs.dtype.kind not in "iu":  # np.issubdtype(dtype, np.integer), at a tenth the cost
        noisy = (obs + sigma * noise).astype(obs.dtype, copy=False)
    else:
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        noisy = np.clip(np.rint(obs + sigma * (high - low) * noise), low, high).astype(obs.dtype)
    return noisy


def held_frame(obs: Any) -> Any:
    """``obs`` as a wrapper keeps it to show again later (a delayed or frozen frame): a
    copy of an array, since an env may render every frame into one reused buffer and
    the held frame must stay the frame it was; other observations are kept as they are."""
    if type(obs) is np.ndarray:  # first: a batch holds a frame per row at every step
        return obs.copy()
    if isinstance(obs, Mapping):  # a Dict observation: each array held as above
        return {key: held_frame(value) for key, value in obs.items()}
    return obs.copy() if isinstance(obs, np.ndarray) else obs


@dataclass(frozen=True)
class Param:
    """The range of one perturbation parameter, declared once by its wrapper (a class's
    ``PARAMS``) and checked by :func:`check_params`, both where the wrapper is built and
    where a scenario is (a marker's or ``with_params``' value fails at collection, before
    any episode). ``optional``: ``None`` is allowed too.

    >>> Param("integer", low=1).check("delay", "steps", 0)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PerturbationError: delay: steps must be an integer >= 1, got 0
    """

    kind: Literal["integer", "number"]
    low: float = 0.0
    high: float = math.inf
    high_open: bool = False
    optional: bool = False

    def check(self, owner: str, name: str, value: Any) -> Any:
        """``value`` checked (an int or a float), else a PerturbationError naming
        ``owner``, the parameter and its range."""
        if value is None and self.optional:
            return None
        if self.kind == "integer":
            return integer(f"{owner}: {name}", value, minimum=int(self.low),
                           error=PerturbationError)
        return number(f"{owner}: {name}", value, low=self.low, high=self.high,
                      high_open=self.high_open, error=PerturbationError)


def ranges(**params: Param) -> Mapping[str, Param]:
    """A perturbation's ``PARAMS``: its parameters' ranges, read-only."""
    return MappingProxyType(params)


def declared_params(perturbation: Any) -> Mapping[str, Param]:
    """The parameter ranges ``perturbation`` (a wrapper class or function) declares in its
    ``PARAMS``; none for a perturbation of one's own that declares none."""
    return cast(Mapping[str, Param], getattr(perturbation, "PARAMS", {}))


def check_params(owner: str, perturbation: Any, params: Mapping[str, Any]) -> None:
    """Check each of ``params`` that ``perturbation`` declares a range for (the one place
    a parameter's range is worded: :class:`Param`)."""
    for name, spec in declared_params(perturbation).items():
        if name in params:
            spec.check(owner, name, params[name])


def noop_params(perturbation: Any, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parameters among ``params`` (the perturbation's defaults filling the rest) that
    make ``perturbation`` leave the env as it is (its ``NOOP``: each a set of values
    that together do), or None when it perturbs.

    >>> from pytest_rlaudit.perturbations import Jitter
    >>> noop_params(Jitter, {"base": 1, "jitter": 0}), noop_params(Jitter, {"base": 2, "jitter": 0})
    ({'base': 1, 'jitter': 0}, None)
    """
    combos: tuple[Mapping[str, Any], ...] = getattr(perturbation, "NOOP", ())
    if not combos:
        return None
    try:
        defaults = {n: p.default for n, p in inspect.signature(perturbation).parameters.items()
                    if p.default is not p.empty}
    except (TypeError, ValueError):
        defaults = {}
    values = {**defaults, **params}
    for combo in combos:
        if all(n in values and _same(values[n], v) for n, v in combo.items()):
            return {n: values[n] for n in combo}
    return None


def _same(value: Any, noop: Any) -> bool:
    try:
        return bool(value == noop) and not isinstance(value, bool)
    except Exception:  # an array, a value that compares oddly: not the no-op value
        return False


def _int_arg(owner: str, name: str, value: Any, *, minimum: int) -> int:
    return integer(f"{owner}: {name}", value, minimum=minimum, error=PerturbationError)


def _float_arg(owner: str, name: str, value: Any, *, low: float = 0.0, high: float = np.inf,
               high_open: bool = False) -> float:
    return number(f"{owner}: {name}", value, low=low, high=high, high_open=high_open,
                  error=PerturbationError)


def _require_box_obs(owner: str, env: gym.Env) -> spaces.Box:
    """Observation noise needs a Box, and a bounded one for integers (its unit is the range):
    ``env``'s observation space, if it is one. A Dict is refused here with its own words:
    wrappers that act key by key (:mod:`.keys`) check each key with :func:`require_box`."""
    space = env.observation_space
    if isinstance(space, spaces.Dict):
        raise PerturbationError(
            f"{owner} works on array observations (a Box space); this env's observation "
            f"space is a Dict (keys {', '.join(map(str, space.spaces))}), as a "
            "goal-conditioned agent's is. Flattening it (gymnasium.wrappers.FlattenObservation) "
            "would change what the agent was trained on: choose another scenario (obs_noise, "
            "delay and dropped_obs act on the Dict's observed keys)."
        )
    return require_box(owner, space)


def require_box(owner: str, space: spaces.Space[Any], key: str | None = None) -> spaces.Box:
    """``space`` (the observation space, or the space of a Dict's ``key``) if observation
    noise can act on it: a Box, and a bounded one for integers (its unit is the range)."""
    where = "this env's observation space" if key is None else (
        f"the Dict observation's key {key!r}")
    if not isinstance(space, spaces.Box):
        fix = ("Flatten it first (gymnasium.wrappers.FlattenObservation) or choose another "
               "scenario." if key is None else
               "Choose the keys it acts on with keys=(...) (a scenario parameter: "
               "scenarios.get(name).with_params(keys=[...])), or another scenario.")
        raise PerturbationError(
            f"{owner} adds noise to array observations (a Box space); {where} is {space}. "
            + fix)
    if np.issubdtype(space.dtype, np.integer) and not space.is_bounded("both"):
        raise PerturbationError(
            f"{owner}: noise on integer observations is scaled by the observation range, but "
            f"{where} {space} is unbounded; give it bounds (an 8-bit image's are 0 and 255)."
        )
    return space


def _check_action_noise(space: gym.Space[Any], sigma: Any, owner: str) -> float:
    """Validate an action-noise sigma for ``space`` (a probability for Discrete actions)."""
    if isinstance(space, spaces.Discrete):
        return _float_arg(owner, "sigma (a probability for Discrete actions)", sigma, high=1.0)
    if isinstance(space, spaces.Box):
        if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            raise PerturbationError(
                f"{owner}: action noise is scaled by the action range, but this env's action "
                f"space {space} is unbounded; rescale it first (gymnasium.wrappers.RescaleAction)."
            )
        return _float_arg(owner, "sigma", sigma)
    raise PerturbationError(f"{owner}: action noise needs a Box or Discrete action space, not {space}.")


def _noisy_action(space: gym.Space[Any], action: Any, sigma: float, rng: np.random.Generator, *,
                  aligned: bool = False) -> Any:
    """Box: Gaussian noise of ``sigma`` x half the range, clipped; Discrete: a random action
    with probability ``sigma``. ``aligned`` draws the same numbers at every call (a
    schedule's sigma varies by step; the stream must not)."""
    if isinstance(space, spaces.Discrete):
        if aligned:
            replace, other = rng.random(), int(rng.integers(space.n))
            return space.start + other if replace < sigma else action
        if rng.random() < sigma:
            return space.start + int(rng.integers(space.n))
        return action
    box = cast(spaces.Box, space)  # the action noise's check admits Box and Discrete only
    return noised_action(np.asarray(action), sigma, rng.standard_normal(box.shape), box)


def noised_action(action: np.ndarray, sigma: float, noise: np.ndarray,
                  box: spaces.Box) -> np.ndarray:
    """A Box action plus the standard normals ``noise`` x ``sigma`` x half the range,
    clipped, element by element: ``action`` may be one action or a batch (a row each).

    >>> noised_action(np.zeros((2, 1)), 0.5, np.ones((2, 1)), spaces.Box(-2, 2, (1,)))
    array([[1.],
           [1.]], dtype=float32)
    """
    half = (box.high - box.low) / 2.0
    noisy = action + sigma * half * noise
    out: np.ndarray = np.clip(noisy, box.low, box.high).astype(box.dtype)
    return out


class Perturbation(gym.utils.RecordConstructorArgs):
    """Base of every perturbation wrapper: its own seeded generator and its arguments.

    Put it first among a wrapper's bases and call ``_init_perturbation(**arguments)``
    first in ``__init__``, with the arguments that rebuild the wrapper: gymnasium then
    rebuilds it from the env's spec (``gym.make(env.spec)``), and ``reset`` reseeds
    ``self.rng``. ``seed_perturbation(seed)`` pins the generator for the next reset (the
    audit runner uses it); otherwise ``reset(seed=s)`` derives it from ``s`` and the class
    name, and ``reset()`` without a seed continues the current stream. A wrapper with
    state of its own overrides ``reset``, calling ``super().reset(...)`` first.

    >>> import gymnasium as gym
    >>> from pytest_rlaudit.perturbations import ObservationNoise
    >>> env = ObservationNoise(gym.make("CartPole-v1"), sigma=0.2)
    >>> gym.make(env.spec)
    <ObservationNoise<TimeLimit<OrderEnforcing<PassiveEnvChecker<CartPoleEnv<CartPole-v1>>>>>>
    """

    rng: np.random.Generator
    _pinned: bool = False
    #: The ranges of the wrapper's parameters (see :class:`Param`), checked by
    #: :meth:`_argument` and when a scenario is built.
    PARAMS: Mapping[str, Param] = MappingProxyType({})
    #: Sets of parameter values that make the wrapper leave the env as it is (see
    #: :func:`noop_params`): a scenario with them would pass as the nominal does.
    NOOP: tuple[Mapping[str, Any], ...] = ()

    #: Whether the wrapper's step is :meth:`decide`, the env's step(s), then :meth:`observe`
    #: (see :meth:`_step_by_hooks`): then a lock-step batch runs the same code per slot
    #: without calling the wrapper's step (:mod:`pytest_rlaudit.world.batches`).
    LOCKSTEP: bool = False
    #: Whether :meth:`decide` may hold an action for more than one env step (timing):
    #: in a chain of wrappers only the innermost may, or a batch could not say when a
    #: slot's agent decides next.
    TIMING: bool = False
    #: Whether the wrapper draws random numbers: :func:`seed_perturbations` gives a stream
    #: only to those that do, so a layer that draws nothing (one that shows part of
    #: another's output) leaves the others' streams as they were without it.
    DRAWS: bool = True

    def decide(self, action: Any) -> tuple[Any, int]:
        """The first half of an agent step: the action the env below executes for the
        agent's ``action``, and for how many env steps it is held (at least 1)."""
        return action, 1

    def observe(self, obs: Any) -> Any:
        """The second half of an agent step: what the agent sees of ``obs``, the
        observation the env below returned after the held steps."""
        return obs

    @classmethod
    def observe_rows(cls, layers: Sequence[Perturbation], obs: np.ndarray) -> np.ndarray:
        """:meth:`observe` of each of ``layers`` (one wrapper of this class per row of a
        lock-step batch, all of one scenario) on its row of ``obs``: how a batch calls
        it. A perturbation that can act on all the rows at once overrides this, its
        :meth:`observe` doing the same with a batch of one."""
        seen = [layer.observe(row) for layer, row in zip(layers, obs, strict=True)]
        out: np.ndarray = np.stack(seen)
        return out

    @classmethod
    def decide_rows(cls, layers: Sequence[Perturbation],
                    actions: Sequence[Any]) -> tuple[Any, Sequence[int]]:
        """:meth:`decide` of each of ``layers`` (as :meth:`observe_rows`) on its row of
        ``actions``: the actions the envs execute, and for how many env steps each."""
        decided = [layer.decide(a) for layer, a in zip(layers, actions, strict=True)]
        return [a for a, _ in decided], [k for _, k in decided]

    def _step_by_hooks(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """One agent step as :meth:`decide`, the held env steps (:func:`hold`, the rewards
        summed) and :meth:`observe`: the one implementation the gymnasium wrapper and a
        lock-step batch share."""
        action, k = self.decide(action)
        env: gym.Env = self.env  # type: ignore[attr-defined]  # a mixin of a gym.Wrapper
        # the sum's float for timing, as gymnasium's RepeatAction gives it
        obs, reward, terminated, truncated, info = (
            hold(env, action, k) if self.TIMING else env.step(action))
        return self.observe(obs), reward, terminated, truncated, info

    @classmethod
    def _argument(cls, name: str, value: Any) -> Any:
        """``value`` of the parameter ``name``, checked against ``PARAMS``."""
        return cls.PARAMS[name].check(cls.__name__, name, value)

    def _init_perturbation(self, **arguments: Any) -> None:
        # RecordConstructorArgs keeps the first call's arguments, so the outermost class,
        # calling this before its gymnasium parent's __init__, records its own names.
        gym.utils.RecordConstructorArgs.__init__(self, **arguments)
        self.rng = np.random.default_rng()
        self._pinned = False

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._on_reset(seed)
        # A mixin: super() is the gymnasium wrapper after it in the subclass's bases, which
        # the type checker cannot see from here.
        return super().reset(seed=seed, options=options)  # type: ignore[misc, no-any-return]

    def seed_perturbation(self, seed: int | np.random.SeedSequence) -> None:
        """Seed this wrapper's generator; the next ``reset`` keeps it."""
        self.rng = np.random.default_rng(seed)
        self._pinned = True

    def _on_reset(self, seed: int | None) -> None:
        if self._pinned:
            self._pinned = False
        elif seed is not None:
            self.rng = np.random.default_rng(
                np.random.SeedSequence([int(seed), stable_hash(type(self).__name__)])
            )


def seed_perturbations(env: gym.Env, seed: np.random.SeedSequence) -> None:
    """Pin the generator of every :class:`Perturbation` in ``env``'s wrapper chain.

    Each wrapper gets its own child of ``seed`` (outermost first), so stacked
    perturbations draw independent streams.

    >>> import gymnasium as gym, numpy as np
    >>> from pytest_rlaudit.perturbations import Jitter, ObservationNoise
    >>> env = ObservationNoise(Jitter(gym.make("CartPole-v1")), sigma=0.1)
    >>> seed_perturbations(env, np.random.SeedSequence(0))
    """
    layers: list[Perturbation] = []
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, Perturbation) and current.DRAWS:
            layers.append(current)
        current = current.env
    for layer, child in zip(layers, seed.spawn(len(layers)), strict=True):
        layer.seed_perturbation(child)
