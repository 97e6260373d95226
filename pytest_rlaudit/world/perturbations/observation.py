"""Sensing: stale, noisy and dropped observations."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np

from .base import (
    Perturbation,
    _float_arg,
    _int_arg,
    _require_box_obs,
    check_scale,
    held_frame,
    noisy_observation,
)

__all__ = ["ObservationDelay", "ObservationNoise", "DroppedObservation"]


class ObservationDelay(Perturbation, gym.Wrapper):
    """The agent sees the observation of ``steps`` agent steps earlier, whole (an image:
    the earlier frame exactly, see :func:`held_frame`).

    ``reset`` returns the fresh observation; until ``steps`` steps have passed, ``step``
    returns the reset observation (the oldest one there is). Gymnasium's
    ``DelayObservation`` instead returns zeros at reset and for the first steps, which is
    a different, harsher disturbance (an all-zero CartPole state is a perfect state), so
    the audit's semantics need this class.

    >>> import gymnasium as gym
    >>> env = ObservationDelay(gym.make("CartPole-v1"), steps=1)
    >>> o0, _ = env.reset(seed=0)
    >>> o1 = env.step(0)[0]
    >>> bool((o1 == o0).all())
    True
    """

    def __init__(self, env: gym.Env, steps: int = 1) -> None:
        self.steps = _int_arg("ObservationDelay", "steps", steps, minimum=0)
        self._init_perturbation(steps=self.steps)
        gym.Wrapper.__init__(self, env)
        self._queue: deque[Any] = deque(maxlen=self.steps + 1)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._queue.clear()
        self._queue.extend([held_frame(obs)] * (self.steps + 1))
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._queue.append(held_frame(obs))
        return self._queue[0], reward, terminated, truncated, info


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

    def __init__(self, env: gym.Env, sigma: float = 0.1, scale: str = "absolute",
                 spread: Sequence[float] | None = None) -> None:
        self.sigma = _float_arg("ObservationNoise", "sigma", sigma)
        _require_box_obs("ObservationNoise", env)
        self.scale, self.spread = check_scale("ObservationNoise", scale, spread,
                                              env.observation_space)
        # Recorded as given: an absolute noise's spec stays what it always was.
        relative = {} if self.scale == "absolute" else {"scale": self.scale, "spread": self.spread}
        self._init_perturbation(sigma=self.sigma, **relative)
        gym.Wrapper.__init__(self, env)
        # One std per element: sigma itself (absolute, and integer observations, whose
        # unit is the range), or sigma x the element's spread.
        integer = np.issubdtype(env.observation_space.dtype, np.integer)
        self.noise_std = self.sigma if self.spread is None or integer else (
            self.sigma * np.asarray(self.spread, dtype=np.float64).reshape(
                env.observation_space.shape))

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        noisy = noisy_observation(obs, self.noise_std, self.rng,
                                  cast(gym.spaces.Box, self.observation_space))  # __init__ checked
        return noisy, reward, terminated, truncated, info


class DroppedObservation(Perturbation, gym.Wrapper):
    """Dropped sensor frames: with probability ``p`` a step's observation is lost.

    The agent then sees the last observation it did get, whole (the observation stays
    frozen; an image: the last frame exactly, see :func:`held_frame`). The reset
    observation always arrives.

    >>> import gymnasium as gym
    >>> env = DroppedObservation(gym.make("CartPole-v1"), p=0.5)
    >>> _ = env.reset(seed=0)
    """

    def __init__(self, env: gym.Env, p: float = 0.1) -> None:
        self.p = _float_arg("DroppedObservation", "p", p, high=1.0, high_open=True)
        self._init_perturbation(p=self.p)
        gym.Wrapper.__init__(self, env)
        self._last: Any = None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._last = held_frame(obs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.rng.random() >= self.p:
            self._last = held_frame(obs)
        return self._last, reward, terminated, truncated, info
