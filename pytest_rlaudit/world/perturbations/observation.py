"""Sensing: stale, noisy and dropped observations."""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym

from .base import (
    Perturbation,
    _float_arg,
    _int_arg,
    _require_box_obs,
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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        self._queue.clear()
        self._queue.extend([held_frame(obs)] * (self.steps + 1))
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._queue.append(held_frame(obs))
        return self._queue[0], reward, terminated, truncated, info


class ObservationNoise(Perturbation, gym.Wrapper):
    """I.i.d. Gaussian noise of std ``sigma`` added to every step observation.

    The reset observation is clean. Float observations get noise in their own units, not
    clipped to the observation space (a real sensor's noise isn't); integer ones (images)
    get ``sigma`` x the space's range, rounded and clipped, keeping dtype and bounds (the
    rule and why: :func:`noisy_observation`). Gymnasium has no such wrapper for state
    observations.

    >>> import gymnasium as gym
    >>> env = ObservationNoise(gym.make("CartPole-v1"), sigma=0.1)
    >>> obs, _ = env.reset(seed=0)
    >>> env.step(0)[0].dtype
    dtype('float32')
    """

    def __init__(self, env: gym.Env, sigma: float = 0.1) -> None:
        self.sigma = _float_arg("ObservationNoise", "sigma", sigma)
        _require_box_obs("ObservationNoise", env)
        self._init_perturbation(sigma=self.sigma)
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        noisy = noisy_observation(obs, self.sigma, self.rng, self.observation_space)
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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        self._last = held_frame(obs)
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.rng.random() >= self.p:
            self._last = held_frame(obs)
        return self._last, reward, terminated, truncated, info
