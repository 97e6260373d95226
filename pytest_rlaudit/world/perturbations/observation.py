"""Sensing: stale, noisy and dropped observations."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np

from .base import (
    Param,
    Perturbation,
    check_scale,
    held_frame,
    noised,
    noisy_observation,
    ranges,
    require_box,
)
from .draws import Blocks
from .keys import ObservedKeys, keys_argument

__all__ = ["ObservationDelay", "ObservationNoise", "DroppedObservation"]


class ObservationDelay(Perturbation, gym.Wrapper):
    """The agent sees the observation of ``steps`` agent steps earlier, whole (an image:
    the earlier frame exactly, see :func:`held_frame`).

    ``reset`` returns the fresh observation; until ``steps`` steps have passed, ``step``
    returns the reset observation (the oldest one there is). Gymnasium's
    ``DelayObservation`` instead returns zeros at reset and for the first steps, which is
    a different, harsher disturbance (an all-zero CartPole state is a perfect state), so
    the audit's semantics need this class.

    A Dict observation (a goal-conditioned agent's) is delayed in its observed keys
    (``keys``; by default every key but ``desired_goal``, see :mod:`.keys`); the others
    are the current ones: a stale sensor, the current command.

    >>> import gymnasium as gym
    >>> env = ObservationDelay(gym.make("CartPole-v1"), steps=1)
    >>> o0, _ = env.reset(seed=0)
    >>> o1 = env.step(0)[0]
    >>> bool((o1 == o0).all())
    True
    """

    PARAMS = ranges(steps=Param("integer", low=0))
    NOOP = ({"steps": 0},)
    LOCKSTEP = True

    def __init__(self, env: gym.Env, steps: int = 1,
                 keys: Sequence[str] | str | None = None) -> None:
        self.steps = self._argument("steps", steps)
        chosen = keys_argument("ObservationDelay", keys)
        # keys recorded only when given: the spec of a delay on other envs stays as it was
        self._init_perturbation(steps=self.steps, **({} if chosen is None else {"keys": chosen}))
        gym.Wrapper.__init__(self, env)
        self.observed = ObservedKeys("ObservationDelay", env.observation_space, chosen)
        self._queue: deque[Any] = deque(maxlen=self.steps + 1)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._queue.clear()
        self._queue.extend([held_frame(obs)] * (self.steps + 1))
        return obs, info

    def observe(self, obs: Any) -> Any:
        if self.observed.keys is None and isinstance(obs, np.ndarray):
            return self.observe_rows([self], obs[None])[0]  # the rows' rule with one row
        self._queue.append(held_frame(obs))
        return self.observed.held(self._queue[0], obs)

    @classmethod
    def observe_rows(cls, layers: Sequence[Perturbation], obs: np.ndarray) -> np.ndarray:
        if cast(ObservationDelay, layers[0]).observed.keys is not None:
            return super().observe_rows(layers, obs)
        held = obs.copy()  # one copy for every row (held_frame's, which the env cannot reuse)
        for layer, row in zip(layers, held, strict=True):
            layer._queue.append(row)  # type: ignore[attr-defined]
        # np.array: a fifth of np.stack's time on a thousand small rows
        return np.array([layer._queue[0] for layer in layers])  # type: ignore[attr-defined]

    step = Perturbation._step_by_hooks


class ObservationNoise(Perturbation, gym.Wrapper):
    """I.i.d. Gaussian noise added to every step observation (the reset one is clean).

    ``scale`` says what ``sigma`` is measured in:

    - ``"absolute"`` (the wrapper's default): raw observation units, the established
      timing audit's semantics. Float observations are not clipped to the observation
      space (a real sensor's noise isn't).
    - ``"relative"``: a fraction of each dimension's ``spread`` (a sequence, one value per
      observation element: the standard deviation of that element over the audit's
      nominal observations, which audits calibrate and pass in). So ``sigma=0.1`` means
      the same on every env: a tenth of what the dimension normally varies, whether it is
      MountainCar's velocity (about 0.01) or a joint angle. The ``obs_noise`` scenario
      uses it. An element constant in the nominal episodes gets no noise.

    Integer observations (images) get ``sigma`` x the space's range in either scale,
    rounded and clipped, keeping dtype and bounds (see :func:`noisy_observation`).
    Gymnasium has no such wrapper for state observations.

    A Dict observation (a goal-conditioned agent's) gets noise in its observed keys
    (``keys``; by default every key but ``desired_goal``, see :mod:`.keys`), each by the
    rule of its dtype, drawn key after key in sorted order; ``spread`` then holds one
    value per element of those keys, in that order. The other keys are left exact.

    >>> import gymnasium as gym
    >>> env = ObservationNoise(gym.make("CartPole-v1"), sigma=0.1)
    >>> obs, _ = env.reset(seed=0)
    >>> env.step(0)[0].dtype
    dtype('float32')
    >>> env = ObservationNoise(gym.make("CartPole-v1"), sigma=0.1, scale="relative",
    ...                        spread=[0.5, 0.3, 0.05, 0.4])
    >>> env.noise_std.round(6).tolist()
    [0.05, 0.03, 0.005, 0.04]
    """

    PARAMS = ranges(sigma=Param("number"))
    NOOP = ({"sigma": 0},)
    LOCKSTEP = True

    def __init__(self, env: gym.Env, sigma: float = 0.1, scale: str = "absolute",
                 spread: Sequence[float] | None = None,
                 keys: Sequence[str] | str | None = None) -> None:
        self.sigma = self._argument("sigma", sigma)
        chosen = keys_argument("ObservationNoise", keys)
        self.observed = ObservedKeys("ObservationNoise", env.observation_space, chosen)
        self._boxes = {key: require_box("ObservationNoise", space, key)
                       for key, space in self.observed.parts().items()}
        self.scale, self.spread = check_scale("ObservationNoise", scale, spread,
                                              env.observation_space, self.observed.size())
        # Recorded as given: an absolute noise's spec stays what it always was.
        relative = {} if self.scale == "absolute" else {"scale": self.scale, "spread": self.spread}
        self._init_perturbation(sigma=self.sigma, **relative,
                                **({} if chosen is None else {"keys": chosen}))
        gym.Wrapper.__init__(self, env)
        # One std per element of each part: sigma itself (absolute, and integer
        # observations, whose unit is the range), or sigma x the element's spread.
        spreads = None if self.spread is None else self.observed.split(self.spread)
        self._std: dict[str | None, float | np.ndarray] = {
            key: self.sigma if spreads is None or np.issubdtype(box.dtype, np.integer)
            else self.sigma * spreads[key] for key, box in self._boxes.items()}
        # the std of a Box observation, as it always was; per key for a Dict
        self.noise_std: Any = self._std[None] if None in self._std else dict(self._std)
        # an array's noise is drawn in blocks of steps (the stream's own numbers, see
        # .draws); a Dict's key by key at each step, as the keys interleave in the stream
        self._blocks = Blocks("standard_normal")

    def observe(self, obs: Any) -> Any:
        if self.observed.keys is None:  # an array: the rows' rule with one row
            return self.observe_rows([self], np.asarray(obs)[None])[0]
        return self.observed.map(obs, lambda key, part: noisy_observation(
            part, self._std[key], self.rng, self._boxes[key]))

    @classmethod
    def observe_rows(cls, layers: Sequence[Perturbation], obs: np.ndarray) -> np.ndarray:
        first = cast(ObservationNoise, layers[0])
        if first.observed.keys is not None:
            return super().observe_rows(layers, obs)
        shape = obs.shape[1:]
        # np.array: a fifth of np.stack's time on a thousand small rows
        noise = np.array([layer._blocks.next(layer.rng, shape)  # type: ignore[attr-defined]
                          for layer in layers])
        return noised(obs, first._std[None], noise, first._boxes[None])

    step = Perturbation._step_by_hooks


class DroppedObservation(Perturbation, gym.Wrapper):
    """Dropped sensor frames: with probability ``p`` a step's observation is lost.

    The agent then sees the last observation it did get, whole (the observation stays
    frozen; an image: the last frame exactly, see :func:`held_frame`). The reset
    observation always arrives. A Dict observation (a goal-conditioned agent's) is frozen
    in its observed keys (``keys``; by default every key but ``desired_goal``, see
    :mod:`.keys`); the others are the current ones.

    >>> import gymnasium as gym
    >>> env = DroppedObservation(gym.make("CartPole-v1"), p=0.5)
    >>> _ = env.reset(seed=0)
    """

    PARAMS = ranges(p=Param("number", high=1.0, high_open=True))
    NOOP = ({"p": 0},)
    LOCKSTEP = True

    def __init__(self, env: gym.Env, p: float = 0.1,
                 keys: Sequence[str] | str | None = None) -> None:
        self.p = self._argument("p", p)
        chosen = keys_argument("DroppedObservation", keys)
        self._init_perturbation(p=self.p, **({} if chosen is None else {"keys": chosen}))
        gym.Wrapper.__init__(self, env)
        self.observed = ObservedKeys("DroppedObservation", env.observation_space, chosen)
        self._last: Any = None
        self._blocks = Blocks("random")

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._last = held_frame(obs)
        return obs, info

    def observe(self, obs: Any) -> Any:
        if self.observed.keys is None and isinstance(obs, np.ndarray):
            return self.observe_rows([self], obs[None])[0]  # the rows' rule with one row
        if self._blocks.next(self.rng, ()) >= self.p:  # one uniform a step, drawn in blocks
            self._last = held_frame(obs)
        return self.observed.held(self._last, obs)

    @classmethod
    def observe_rows(cls, layers: Sequence[Perturbation], obs: np.ndarray) -> np.ndarray:
        first = cast(DroppedObservation, layers[0])
        if first.observed.keys is not None:
            return super().observe_rows(layers, obs)
        held = obs.copy()  # one copy for every row (held_frame's, which the env cannot reuse)
        arrived = np.array([layer._blocks.next(layer.rng, ())  # type: ignore[attr-defined]
                            for layer in layers]) >= first.p
        for i in np.flatnonzero(arrived).tolist():
            layers[i]._last = held[i]  # type: ignore[attr-defined]
        return np.array([layer._last for layer in layers])  # type: ignore[attr-defined]

    step = Perturbation._step_by_hooks
