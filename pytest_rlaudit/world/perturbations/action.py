"""Actuation: noisy, sticky and delayed actions."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import StickyAction as _GymStickyAction

from ...errors import PerturbationError
from .base import (
    Param,
    Perturbation,
    _check_action_noise,
    _int_arg,
    _noisy_action,
    noised_action,
    ranges,
)
from .draws import Blocks

__all__ = ["ActionNoise", "StickyAction", "ActionDelay", "AleFrameSticky"]


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

    PARAMS = ranges(sigma=Param("number"))  # on Discrete actions a probability too: at wrap
    NOOP = ({"sigma": 0},)
    LOCKSTEP = True

    def __init__(self, env: gym.Env, sigma: float = 0.1) -> None:
        self.sigma = _check_action_noise(env.action_space, sigma, "ActionNoise")
        self._init_perturbation(sigma=self.sigma)
        gym.ActionWrapper.__init__(self, env)
        # a Box action's noise is drawn in blocks of steps (the stream's own numbers, see
        # .draws); a Discrete one draws a number, then maybe another, so step by step
        self._box = env.action_space if isinstance(env.action_space, spaces.Box) else None
        self._blocks = Blocks("standard_normal")

    def action(self, action: Any) -> Any:
        if self._box is None:
            return _noisy_action(self.env.action_space, action, self.sigma, self.rng)
        return self.decide_rows([self], [action])[0][0]  # the rows' rule with one row

    def decide(self, action: Any) -> tuple[Any, int]:  # gymnasium's ActionWrapper.step
        return self.action(action), 1

    @classmethod
    def decide_rows(cls, layers: Sequence[Perturbation],
                    actions: Sequence[Any]) -> tuple[Any, Sequence[int]]:
        first = cast(ActionNoise, layers[0])
        box = first._box
        if box is None:
            return super().decide_rows(layers, actions)
        # np.array: a fifth of np.stack's time on a thousand small rows
        noise = np.array([layer._blocks.next(layer.rng, box.shape)  # type: ignore[attr-defined]
                          for layer in layers])
        return noised_action(np.asarray(actions), first.sigma, noise, box), [1] * len(layers)


class StickyAction(Perturbation, _GymStickyAction):
    """With probability ``p`` the env repeats the previous action instead of the new one.

    Gymnasium's ``StickyAction`` (Machado et al., 2018), drawing from this wrapper's own
    generator instead of the env's ``np_random`` (see the module docstring): one draw
    per agent step.

    On an Atari (ALE) env that skips frames in its wrappers (``*NoFrameskip-v4`` under
    SB3's ``AtariWrapper``, as the zoo trains), the draw is made at every emulator frame
    instead, as ALE's own ``repeat_action_probability`` does (Machado et al.'s protocol:
    ``p=0.25`` per frame, the previous frame's action kept, NOOP before the first): an
    :class:`AleFrameSticky` is put directly around the ALE env, under the frame skip, and
    draws from this wrapper's generator. ``duration`` is then 1 (a frame). An ALE env that
    skips frames inside the emulator (``ALE/...-v5``, ``frameskip=4``) has its own sticky
    actions (``repeat_action_probability``, 0.25 by default in v5): it is an error here.

    >>> import gymnasium as gym
    >>> env = StickyAction(gym.make("CartPole-v1"), p=0.25)
    >>> _ = env.reset(seed=0)
    """

    PARAMS = ranges(p=Param("number", high=1.0, high_open=True))
    NOOP = ({"p": 0},)
    LOCKSTEP = True

    def __init__(self, env: gym.Env, p: float = 0.25, duration: int | tuple[int, int] = 1) -> None:
        p = self._argument("p", p)
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
        frames = _frame_sticky(env, p, duration, self)
        if frames is not None and not isinstance(env, gym.Wrapper):
            env = frames  # a bare ALE env: the per-frame wrapper goes right inside this one
        _GymStickyAction.__init__(self, env, repeat_action_probability=p,
                                  repeat_action_duration=duration)
        self.p = p
        self.frames = frames  # the per-frame wrapper on an ALE env, else None
        self.LOCKSTEP = frames is None  # frame by frame under a frame skip: not per agent step

    def decide(self, action: Any) -> tuple[Any, int]:  # gymnasium's ActionWrapper.step
        return self.action(action), 1

    def action(self, action: Any) -> Any:
        if self.frames is not None:
            return action  # stuck frame by frame under the frame skip instead
        return _GymStickyAction.action(self, action)

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

    PARAMS = ranges(steps=Param("integer", low=0))
    NOOP = ({"steps": 0},)
    LOCKSTEP = True

    def __init__(self, env: gym.Env, steps: int = 1, noop: Any = None) -> None:
        self.steps = self._argument("steps", steps)
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

    def decide(self, action: Any) -> tuple[Any, int]:  # gymnasium's ActionWrapper.step
        return self.action(action), 1


class AleFrameSticky(gym.ActionWrapper):
    """ALE's sticky actions, frame by frame: at every emulator frame, with probability
    ``p`` the previous frame's action is executed again instead of the one given; the
    action before an episode's first frame is NOOP (0), as ALE's own
    ``repeat_action_probability`` does after ``reset_game``. It draws from ``owner.rng``
    (the :class:`StickyAction` perturbation that put it here), never from the env's.

    Placed directly around the ALE env, under the wrappers that skip frames
    (``MaxAndSkipEnv``), so one agent step of 4 frames makes 4 draws.
    """

    def __init__(self, env: gym.Env, p: float, owner: Perturbation) -> None:
        super().__init__(env)
        self.p = p
        self.owner = owner
        self.last: Any = 0
        self.stuck = 0  # frames that kept the previous action, since the last reset

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.last, self.stuck = 0, 0
        return self.env.reset(seed=seed, options=options)

    def action(self, action: Any) -> Any:
        if self.owner.rng.random() >= self.p:
            self.last = action
        else:
            self.stuck += 1
        return self.last


def _frame_sticky(env: gym.Env, p: float, duration: Any,
                  owner: Perturbation) -> AleFrameSticky | None:
    """Put an :class:`AleFrameSticky` directly around the ALE env under ``env``'s
    wrappers and return it; None when ``env`` is not an ALE env."""
    base = env.unwrapped
    if not (hasattr(base, "ale") and hasattr(base, "_frameskip")):
        return None
    skip = base._frameskip
    if skip != 1:
        raise PerturbationError(
            f"StickyAction: this Atari env skips {skip} frames inside the emulator, where its "
            "own sticky actions are (make it with gymnasium.make(id, "
            "repeat_action_probability=p); ALE/...-v5 has p=0.25 by default); sticky actions "
            "per frame need the frame skip in the wrappers (a *NoFrameskip-v4 id under "
            "SB3's AtariWrapper)")
    if duration != 1:
        raise PerturbationError(
            f"StickyAction: on an Atari env actions stick frame by frame, as ALE's own "
            f"repeat_action_probability does; duration must be 1, got {duration!r}")
    sticky = AleFrameSticky(base, p, owner)
    inner: Any = env
    while isinstance(inner, gym.Wrapper) and inner.env is not base:
        inner = inner.env
    if isinstance(inner, gym.Wrapper):
        inner.env = sticky  # spliced under the frame skip (this env is the audit's own)
    return sticky
