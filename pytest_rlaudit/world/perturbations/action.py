"""Actuation: noisy, sticky and delayed actions."""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import StickyAction as _GymStickyAction

from ...errors import PerturbationError
from .base import Perturbation, _check_action_noise, _float_arg, _int_arg, _noisy_action

__all__ = ["ActionNoise", "StickyAction", "ActionDelay"]


class ActionNoise(Perturbation, gym.ActionWrapper):
    """Noise on the executed action.

    Box actions: Gaussian noise of std ``sigma`` times half the action range is added and
    the result clipped to the bounds (so ``sigma=0.1`` is 10% of the half-range).
    Discrete actions: with probability ``sigma`` the action is replaced by a uniformly
    random one (epsilon noise).

    >>> import gymnasium as gym
    >>> env = ActionNoise(gym.make("Pendulum-v1"), sigma=0.1)
    >>> _ = env.reset(seed=0)
    """

    def __init__(self, env: gym.Env, sigma: float = 0.1) -> None:
        self.sigma = _check_action_noise(env.action_space, sigma, "ActionNoise")
        self._init_perturbation(sigma=self.sigma)
        gym.ActionWrapper.__init__(self, env)

    def action(self, action: Any) -> Any:
        return _noisy_action(self.env.action_space, action, self.sigma, self.rng)


class StickyAction(Perturbation, _GymStickyAction):
    """With probability ``p`` the env repeats the previous action instead of the new one.

    Gymnasium's ``StickyAction`` (Machado et al., 2018), drawing from this wrapper's own
    generator instead of the env's ``np_random`` (see the module docstring).

    >>> import gymnasium as gym
    >>> env = StickyAction(gym.make("CartPole-v1"), p=0.25)
    >>> _ = env.reset(seed=0)
    """

    def __init__(self, env: gym.Env, p: float = 0.25, duration: int | tuple[int, int] = 1) -> None:
        p = _float_arg("StickyAction", "p", p, high=1.0, high_open=True)
        if isinstance(duration, (list, tuple)):
            pair = tuple(_int_arg("StickyAction", "duration", d, minimum=1) for d in duration)
            if len(pair) != 2 or pair[0] > pair[1]:
                raise PerturbationError(
                    f"StickyAction: duration must be an int or a (low, high) pair, got {pair}"
                )
            duration = (pair[0], pair[1])
        else:
            duration = _int_arg("StickyAction", "duration", duration, minimum=1)
        self._init_perturbation(p=p, duration=duration)
        _GymStickyAction.__init__(self, env, repeat_action_probability=p,
                                  repeat_action_duration=duration)
        self.p = p

    @property
    def np_random(self) -> np.random.Generator:  # gymnasium's class draws from here
        return self.rng

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        # As gymnasium's Wrapper: setting a wrapper's generator sets the env's (a wrapper
        # above this one forwards its own there); the actions still stick by self.rng.
        self.env.np_random = value


class ActionDelay(Perturbation, gym.ActionWrapper):
    """The env executes the action chosen ``steps`` agent steps earlier.

    Until ``steps`` actions have been chosen, the env receives ``noop`` if given, else the
    first action of the episode (so nothing unphysical happens at the start).

    >>> import gymnasium as gym
    >>> env = ActionDelay(gym.make("CartPole-v1"), steps=1)
    >>> _ = env.reset(seed=0)
    """

    def __init__(self, env: gym.Env, steps: int = 1, noop: Any = None) -> None:
        self.steps = _int_arg("ActionDelay", "steps", steps, minimum=0)
        if noop is not None and not env.action_space.contains(noop):
            raise PerturbationError(
                f"ActionDelay: noop {noop!r} is not in the action space {env.action_space}"
            )
        self._init_perturbation(steps=self.steps, noop=noop)
        gym.ActionWrapper.__init__(self, env)
        self.noop = noop
        self._queue: deque[Any] = deque()

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._queue.clear()
        return super().reset(seed=seed, options=options)

    def action(self, action: Any) -> Any:
        self._queue.append(action)
        if len(self._queue) > self.steps:
            return self._queue.popleft()
        return self._queue[0] if self.noop is None else self.noop
