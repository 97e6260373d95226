"""Timing: the agent's control period changes (speed, jitter, spikes, any schedule)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import PerturbationError
from ..schedules import NOMINAL_SETTINGS, Schedule
from .base import (
    Param,
    Perturbation,
    RepeatAction,
    _check_action_noise,
    _int_arg,
    _noisy_action,
    held_frame,
    noisy_observation,
    ranges,
    require_box,
)
from .keys import ObservedKeys, keys_argument

__all__ = ["Speed", "Jitter", "Scheduled", "SpeedSchedule", "spike"]


class Speed(Perturbation, RepeatAction):
    """Speed ``k``: each agent action is held for ``k`` environment steps.

    Rewards are summed, the agent sees the last observation, and the repeat stops early
    when the episode terminates or is truncated. This is gymnasium's ``RepeatAction``
    (which does exactly this) under the audit's name, with the argument validated.

    >>> import gymnasium as gym
    >>> env = Speed(gym.make("CartPole-v1"), k=5)
    >>> _ = env.reset(seed=0)
    >>> env.step(1)[1]
    5.0
    """

    PARAMS = ranges(k=Param("integer", low=1))
    NOOP = ({"k": 1},)
    LOCKSTEP = TIMING = True

    def __init__(self, env: gym.Env, k: int = 5) -> None:
        k = self._argument("k", k)
        self._init_perturbation(k=k)
        RepeatAction.__init__(self, env, num_repeats=k)
        self.k = k

    def decide(self, action: Any) -> tuple[Any, int]:
        return action, self.k


class _VariableRepeat(Perturbation, gym.Wrapper):
    """Hold each action for a per-step number of environment steps (``_next_k``)."""

    LOCKSTEP = TIMING = True

    def __init__(self, env: gym.Env, **arguments: Any) -> None:
        self._init_perturbation(**arguments)
        gym.Wrapper.__init__(self, env)
        self.agent_step = 0

    def _next_k(self) -> int:
        raise NotImplementedError

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.agent_step = 0
        return super().reset(seed=seed, options=options)

    def decide(self, action: Any) -> tuple[Any, int]:
        k = self._next_k()
        self.agent_step += 1
        return action, k

    step = Perturbation._step_by_hooks


class Jitter(_VariableRepeat):
    """Variable control period: each agent step holds the action for a random ``k``.

    ``k`` is ``base + u`` with ``u`` uniform on ``{-jitter, ..., jitter}``, and at least 1
    (so with base 2, jitter 1: k is 1, 2 or 3 with equal probability). Models variable
    inference latency. No gymnasium wrapper varies the repeat, hence this class.

    >>> import gymnasium as gym
    >>> env = Jitter(gym.make("CartPole-v1"), base=2, jitter=1)
    >>> _ = env.reset(seed=0)
    >>> env.step(0)[1] in (1.0, 2.0, 3.0)
    True
    """

    PARAMS = ranges(base=Param("integer", low=1), jitter=Param("integer", low=0))
    NOOP = ({"base": 1, "jitter": 0},)

    def __init__(self, env: gym.Env, base: int = 2, jitter: int = 1) -> None:
        self.base: int = self._argument("base", base)
        self.jitter: int = self._argument("jitter", jitter)
        super().__init__(env, base=self.base, jitter=self.jitter)

    def _next_k(self) -> int:
        return max(1, self.base + int(self.rng.integers(-self.jitter, self.jitter + 1)))


class Scheduled(Perturbation, gym.Wrapper):
    """Apply a :class:`~pytest_rlaudit.world.schedules.Schedule` step by step.

    At agent step ``t`` (0 after reset) the action gets the schedule's action noise
    (as :class:`ActionNoise`), is held for ``speed`` env steps (as :class:`Speed`), the
    resulting measurement gets the observation noise (as :class:`ObservationNoise`) or,
    when ``dropped``, is lost (the last received one stands in, as
    :class:`DroppedObservation`), and the agent sees the measurement of ``delay`` agent
    steps earlier (as :class:`ObservationDelay`; the reset observation is the oldest).
    Noise is drawn at every step from two generators of its own (one for observations,
    one for actions), whether or not the sigma is zero there, so the draw at step ``t``
    is the same whatever the rest of the schedule says: shrinking one part of a schedule
    leaves the noise of the others alone. The same (schedule, seed) replays exactly.
    No gymnasium wrapper follows a timeline, hence this class.

    A Dict observation (a goal-conditioned agent's) is noised, dropped and delayed in
    its observed keys (``keys``; by default every key but ``desired_goal``, see
    :mod:`.keys`), as :class:`ObservationNoise` and :class:`ObservationDelay` do it; the
    others are the current ones.

    >>> import gymnasium as gym
    >>> from pytest_rlaudit import Schedule
    >>> env = Scheduled(gym.make("CartPole-v1"), Schedule(speed=[1, 3]))
    >>> _ = env.reset(seed=0)
    >>> [env.step(0)[1] for _ in range(3)]
    [1.0, 3.0, 1.0]
    """

    LOCKSTEP = TIMING = True

    def __init__(self, env: gym.Env, schedule: Schedule,
                 keys: Sequence[str] | str | None = None) -> None:
        if not isinstance(schedule, Schedule):
            raise PerturbationError(
                f"Scheduled takes a pytest_rlaudit.Schedule, got {schedule!r} "
                f"({type(schedule).__name__})"
            )
        channels = schedule.channels
        chosen = keys_argument("Scheduled", keys)
        self.observed = ObservedKeys("Scheduled", env.observation_space, chosen)
        self._boxes = {key: require_box("a schedule with obs_noise", space, key)
                       for key, space in self.observed.parts().items()
                       } if "obs_noise" in channels else {}
        if "action_noise" in channels:
            _check_action_noise(env.action_space, schedule.max_value("action_noise"),
                                "a schedule with action_noise")
        self._init_perturbation(schedule=schedule, **({} if chosen is None else {"keys": chosen}))
        gym.Wrapper.__init__(self, env)
        self.schedule = schedule
        # A schedule without speed never holds an action: not timing, so a batch may
        # wrap it (attribution shows its observation channels on part of the observation)
        self.TIMING = "speed" in channels
        self.agent_step = 0
        self._t = 0  # the agent step under way, from decide to observe
        horizon = schedule.horizon()
        # Per-step tables up to the horizon; the values past it repeat or hold.
        self._tables = {c: schedule.values(c, horizon) for c in channels}
        self._after = {c: schedule.value(c, horizon) for c in channels}
        self._history: deque[Any] = deque(maxlen=schedule.max_value("delay") + 1)
        self._obs_rng = self._act_rng = self.rng

    def _value(self, channel: str, t: int) -> Any:
        table = self._tables.get(channel)
        if table is None:
            return NOMINAL_SETTINGS[channel]
        if self.schedule.period is not None:
            return table[t % len(table)]
        return table[t] if t < len(table) else self._after[channel]

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._obs_rng, self._act_rng = self.rng.spawn(2)
        self.agent_step = 0
        self._history.clear()
        self._history.append(held_frame(obs))
        return obs, info

    def decide(self, action: Any) -> tuple[Any, int]:
        self._t = t = self.agent_step
        self.agent_step += 1
        if "action_noise" in self._tables:
            action = _noisy_action(self.env.action_space, action,
                                   self._value("action_noise", t), self._act_rng, aligned=True)
        return action, self._value("speed", t)

    def observe(self, obs: Any) -> Any:
        t = self._t
        if "obs_noise" in self._tables:
            sigma = self._value("obs_noise", t)
            obs = self.observed.map(obs, lambda key, part: noisy_observation(
                part, sigma, self._obs_rng, self._boxes[key]))
        self._history.append(self._history[-1] if self._value("dropped", t) else held_frame(obs))
        delay = min(self._value("delay", t), len(self._history) - 1)
        return self.observed.held(self._history[-1 - delay], obs)

    step = Perturbation._step_by_hooks

    @staticmethod
    def timeline(schedule: Schedule, keys: Any = None) -> Schedule:
        """The schedule this wrapper applies with these arguments (for reports)."""
        return schedule


class SpeedSchedule(Scheduled):
    """Speed as a function of the agent step: agent step ``t`` (0 at reset) uses ``speeds[t]``.

    After the list runs out, ``after`` is used (default 1, nominal speed). A
    :class:`Scheduled` with a speed-only schedule: ``Schedule(speed=[*speeds, after, ...])``.
    The ``spike`` scenario is ``SpeedSchedule.spike(env, start=20, duration=20, k=5)``:
    speed 1, then 5 for agent steps 20-39, then 1 again.

    >>> import gymnasium as gym
    >>> env = SpeedSchedule(gym.make("CartPole-v1"), speeds=[1, 3])
    >>> _ = env.reset(seed=0)
    >>> [env.step(0)[1] for _ in range(3)]
    [1.0, 3.0, 1.0]
    """

    def __init__(self, env: gym.Env, speeds: Sequence[int], after: int = 1) -> None:
        if isinstance(speeds, (str, bytes)) or not isinstance(speeds, Sequence | np.ndarray):
            raise PerturbationError(
                f"SpeedSchedule: speeds must be a sequence of integers >= 1, got {speeds!r}"
            )
        self.speeds = tuple(
            _int_arg("SpeedSchedule", f"speeds[{i}]", k, minimum=1) for i, k in enumerate(speeds)
        )
        self.after = _int_arg("SpeedSchedule", "after", after, minimum=1)
        self._init_perturbation(speeds=list(self.speeds), after=self.after)
        super().__init__(env, self.timeline(self.speeds, self.after))

    @classmethod
    def spike(cls, env: gym.Env, start: int = 20, duration: int = 20, k: int = 5) -> SpeedSchedule:
        """Speed 1, then ``k`` for agent steps ``start .. start+duration-1``, then 1."""
        start, duration, k = (spike.PARAMS[n].check("spike", n, v)  # type: ignore[attr-defined]
                              for n, v in (("start", start), ("duration", duration), ("k", k)))
        return cls(env, speeds=[1] * start + [k] * duration, after=1)

    @staticmethod
    def timeline(speeds: Sequence[int], after: int = 1) -> Schedule:  # type: ignore[override]
        """The schedule this wrapper applies with these arguments."""
        return Schedule(speed=[*speeds, after, ...])


def spike(env: gym.Env, start: int = 20, duration: int = 20, k: int = 5) -> SpeedSchedule:
    """The ``spike`` scenario's wrapper; see :meth:`SpeedSchedule.spike`."""
    return SpeedSchedule.spike(env, start=start, duration=duration, k=k)


# declared on the function the registry names (what scenarios check), and read by the method
spike.PARAMS = ranges(start=Param("integer", low=0), duration=Param("integer", low=1),  # type: ignore[attr-defined]
                k=Param("integer", low=1))
spike.NOOP = ({"k": 1},)  # type: ignore[attr-defined]
