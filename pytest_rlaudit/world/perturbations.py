"""Perturbations: Gymnasium wrappers, one class per behaviour.

Every wrapper here is an ordinary ``gymnasium.Wrapper`` and can be used on its own,
for example to train with the disturbance that broke an agent::

    >>> import gymnasium as gym
    >>> from pytest_rlaudit.perturbations import Jitter
    >>> env = Jitter(gym.make("CartPole-v1"), base=2, jitter=1)
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(0)
    >>> reward in (1.0, 2.0, 3.0)
    True

Randomness. Each wrapper draws from its own ``numpy.random.Generator``, never from the
env's ``np_random`` (Gymnasium wrappers share the base env's generator, so a
perturbation drawing from it would change the env's own randomness and break the
pairing of nominal and perturbed episodes). ``reset(seed=s)`` derives the generator
from ``s`` and the wrapper's class name; the audit runner instead calls
:func:`seed_perturbations` before each reset to key it on (seed, episode, scenario).

Placement. Wrap outside the env's ``TimeLimit`` (``gym.make`` puts it innermost), so
episode limits count environment steps: CartPole under ``Speed(k=5)`` still ends at
500 environment steps and a return of at most 500.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import StickyAction as _GymStickyAction

try:
    from gymnasium.wrappers import RepeatAction
except ImportError:  # gymnasium < 1.3: the wrapper as gymnasium 1.3 defines it

    class RepeatAction(gym.Wrapper):  # type: ignore[no-redef]
        """Repeat each action ``num_repeats`` times, summing rewards, until the episode ends."""

        def __init__(self, env: gym.Env, num_repeats: int) -> None:
            gym.Wrapper.__init__(self, env)
            self.num_repeats = num_repeats

        def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
            total = 0.0
            for _ in range(self.num_repeats):
                obs, reward, terminated, truncated, info = self.env.step(action)
                total += float(reward)
                if terminated or truncated:
                    break
            return obs, total, terminated, truncated, info


from .._seeding import stable_hash
from ..errors import PerturbationError
from .schedules import NOMINAL_SETTINGS, Schedule

__all__ = [
    "Perturbation",
    "Speed",
    "Jitter",
    "Scheduled",
    "SpeedSchedule",
    "spike",
    "ObservationDelay",
    "ObservationNoise",
    "DroppedObservation",
    "ActionNoise",
    "StickyAction",
    "ActionDelay",
    "Dynamics",
    "seed_perturbations",
]


# --------------------------------------------------------------------------- helpers


def _int_arg(owner: str, name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise PerturbationError(
            f"{owner}: {name} must be an integer >= {minimum}, got {value!r} "
            f"({type(value).__name__})"
        )
    if value < minimum:
        raise PerturbationError(f"{owner}: {name} must be >= {minimum}, got {value}")
    return int(value)


def _float_arg(
    owner: str, name: str, value: Any, *, low: float = 0.0, high: float = np.inf,
    high_open: bool = False,
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PerturbationError(
            f"{owner}: {name} must be a number, got {value!r} ({type(value).__name__})"
        )
    value = float(value)
    upper_ok = value < high if high_open else value <= high
    if not (np.isfinite(value) and value >= low and upper_ok):
        bracket = ")" if high_open else "]"
        raise PerturbationError(
            f"{owner}: {name} must be a finite number in [{low}, {high}{bracket}, got {value}"
        )
    return value


def _require_box_obs(owner: str, env: gym.Env) -> None:
    if not isinstance(env.observation_space, spaces.Box):
        raise PerturbationError(
            f"{owner} adds noise to array observations (a Box space); this env's observation "
            f"space is {env.observation_space}. Flatten it first "
            "(gymnasium.wrappers.FlattenObservation) or choose another scenario."
        )


def _check_action_noise(space: gym.Space, sigma: Any, owner: str) -> float:
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


def _noisy_action(space: gym.Space, action: Any, sigma: float, rng: np.random.Generator, *,
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
    half = (space.high - space.low) / 2.0
    noisy = np.asarray(action) + sigma * half * rng.standard_normal(space.shape)
    return np.clip(noisy, space.low, space.high).astype(space.dtype)


# ---------------------------------------------------------------------- the base mixin


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
    >>> env = ObservationNoise(gym.make("CartPole-v1"), sigma=0.2)
    >>> gym.make(env.spec)
    <ObservationNoise<TimeLimit<OrderEnforcing<PassiveEnvChecker<CartPoleEnv<CartPole-v1>>>>>>
    """

    rng: np.random.Generator
    _pinned: bool = False

    def _init_perturbation(self, **arguments: Any) -> None:
        # RecordConstructorArgs keeps the first call's arguments, so the outermost class,
        # calling this before its gymnasium parent's __init__, records its own names.
        gym.utils.RecordConstructorArgs.__init__(self, **arguments)
        self.rng = np.random.default_rng()
        self._pinned = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._on_reset(seed)
        return super().reset(seed=seed, options=options)  # type: ignore[misc]

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
    >>> env = ObservationNoise(Jitter(gym.make("CartPole-v1")), sigma=0.1)
    >>> seed_perturbations(env, np.random.SeedSequence(0))
    """
    layers: list[Perturbation] = []
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, Perturbation):
            layers.append(current)
        current = current.env
    for layer, child in zip(layers, seed.spawn(len(layers)), strict=True):
        layer.seed_perturbation(child)


# ------------------------------------------------------------------------ timing


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

    def __init__(self, env: gym.Env, k: int = 5) -> None:
        k = _int_arg("Speed", "k", k, minimum=1)
        self._init_perturbation(k=k)
        RepeatAction.__init__(self, env, num_repeats=k)
        self.k = k


class _VariableRepeat(Perturbation, gym.Wrapper):
    """Hold each action for a per-step number of environment steps (``_next_k``)."""

    def __init__(self, env: gym.Env, **arguments: Any) -> None:
        self._init_perturbation(**arguments)
        gym.Wrapper.__init__(self, env)
        self.agent_step = 0

    def _next_k(self) -> int:
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.agent_step = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        k = self._next_k()
        self.agent_step += 1
        total = 0.0
        for _ in range(k):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


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

    def __init__(self, env: gym.Env, base: int = 2, jitter: int = 1) -> None:
        self.base = _int_arg("Jitter", "base", base, minimum=1)
        self.jitter = _int_arg("Jitter", "jitter", jitter, minimum=0)
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

    >>> import gymnasium as gym
    >>> from pytest_rlaudit import Schedule
    >>> env = Scheduled(gym.make("CartPole-v1"), Schedule(speed=[1, 3]))
    >>> _ = env.reset(seed=0)
    >>> [env.step(0)[1] for _ in range(3)]
    [1.0, 3.0, 1.0]
    """

    def __init__(self, env: gym.Env, schedule: Schedule) -> None:
        if not isinstance(schedule, Schedule):
            raise PerturbationError(
                f"Scheduled takes a pytest_rlaudit.Schedule, got {schedule!r} "
                f"({type(schedule).__name__})"
            )
        channels = schedule.channels
        if "obs_noise" in channels:
            _require_box_obs("a schedule with obs_noise", env)
        if "action_noise" in channels:
            _check_action_noise(env.action_space, schedule.max_value("action_noise"),
                                "a schedule with action_noise")
        self._init_perturbation(schedule=schedule)
        gym.Wrapper.__init__(self, env)
        self.schedule = schedule
        self.agent_step = 0
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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        self._obs_rng, self._act_rng = self.rng.spawn(2)
        self.agent_step = 0
        self._history.clear()
        self._history.append(obs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        t = self.agent_step
        self.agent_step += 1
        if "action_noise" in self._tables:
            action = _noisy_action(self.env.action_space, action,
                                   self._value("action_noise", t), self._act_rng, aligned=True)
        total = 0.0
        for _ in range(self._value("speed", t)):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        if "obs_noise" in self._tables:
            obs = np.asarray(obs)
            draw = self._obs_rng.standard_normal(obs.shape)
            obs = (obs + self._value("obs_noise", t) * draw).astype(obs.dtype, copy=False)
        self._history.append(self._history[-1] if self._value("dropped", t) else obs)
        delay = min(self._value("delay", t), len(self._history) - 1)
        return self._history[-1 - delay], total, terminated, truncated, info

    @staticmethod
    def timeline(schedule: Schedule) -> Schedule:
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
        start = _int_arg("spike", "start", start, minimum=0)
        duration = _int_arg("spike", "duration", duration, minimum=1)
        k = _int_arg("spike", "k", k, minimum=1)
        return cls(env, speeds=[1] * start + [k] * duration, after=1)

    @staticmethod
    def timeline(speeds: Sequence[int], after: int = 1) -> Schedule:  # type: ignore[override]
        """The schedule this wrapper applies with these arguments."""
        return Schedule(speed=[*speeds, after, ...])


def spike(env: gym.Env, start: int = 20, duration: int = 20, k: int = 5) -> SpeedSchedule:
    """The ``spike`` scenario's wrapper; see :meth:`SpeedSchedule.spike`."""
    return SpeedSchedule.spike(env, start=start, duration=duration, k=k)


# ------------------------------------------------------------------ observations


class ObservationDelay(Perturbation, gym.Wrapper):
    """The agent sees the observation of ``steps`` agent steps earlier.

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
        self._queue.extend([obs] * (self.steps + 1))
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._queue.append(obs)
        return self._queue[0], reward, terminated, truncated, info


class ObservationNoise(Perturbation, gym.Wrapper):
    """I.i.d. Gaussian noise of std ``sigma`` added to every step observation.

    The reset observation is clean; values are not clipped to the observation space
    (a real sensor's noise isn't). Gymnasium has no such wrapper for state observations.

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
        obs = np.asarray(obs)
        noisy = obs + self.sigma * self.rng.standard_normal(obs.shape)
        return noisy.astype(obs.dtype, copy=False), reward, terminated, truncated, info


class DroppedObservation(Perturbation, gym.Wrapper):
    """Dropped sensor frames: with probability ``p`` a step's observation is lost.

    The agent then sees the last observation it did get (the observation stays
    frozen). The reset observation always arrives.

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
        self._last = obs
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.rng.random() >= self.p:
            self._last = obs
        return self._last, reward, terminated, truncated, info


# ----------------------------------------------------------------------- actions


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
            duration = tuple(_int_arg("StickyAction", "duration", d, minimum=1) for d in duration)
            if len(duration) != 2 or duration[0] > duration[1]:
                raise PerturbationError(
                    f"StickyAction: duration must be an int or a (low, high) pair, got {duration}"
                )
        else:
            duration = _int_arg("StickyAction", "duration", duration, minimum=1)
        self._init_perturbation(p=p, duration=duration)
        _GymStickyAction.__init__(self, env, repeat_action_probability=p,
                                  repeat_action_duration=duration)
        self.p = p

    @property
    def np_random(self) -> np.random.Generator:  # gymnasium's class draws from here
        return self.rng



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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._queue.clear()
        return super().reset(seed=seed, options=options)

    def action(self, action: Any) -> Any:
        self._queue.append(action)
        if len(self._queue) > self.steps:
            return self._queue.popleft()
        return self._queue[0] if self.noop is None else self.noop


# ---------------------------------------------------------------------- dynamics


def _cartpole_derived(env: Any) -> None:
    env.total_mass = env.masspole + env.masscart
    env.polemass_length = env.masspole * env.length


#: Physical parameters per classic-control env class, the "heavier robot" default
#: shift of each, and how derived attributes are recomputed after a change.
_DYNAMICS: dict[str, tuple[tuple[str, ...], dict[str, float], Any]] = {
    "CartPoleEnv": (("gravity", "masscart", "masspole", "length", "force_mag", "tau"),
                    {"masspole": 2.0, "length": 1.5}, _cartpole_derived),
    "PendulumEnv": (("g", "m", "l", "max_speed", "dt"), {"m": 1.3}, None),
    "MountainCarEnv": (("force", "gravity"), {"gravity": 1.2}, None),
    "Continuous_MountainCarEnv": (("power",), {"power": 0.8}, None),
    "AcrobotEnv": (("LINK_LENGTH_1", "LINK_LENGTH_2", "LINK_MASS_1", "LINK_MASS_2",
                    "LINK_COM_POS_1", "LINK_COM_POS_2", "LINK_MOI", "dt"),
                   {"LINK_MASS_2": 1.5}, None),
}


class Dynamics(Perturbation, gym.Wrapper):
    """A shift of the env's physical parameters (a heavier robot, a longer pole, ...).

    ``scale`` multiplies parameters, keyword arguments set them; derived attributes
    are recomputed (CartPole's ``total_mass`` and ``polemass_length``). With neither,
    the env's default shift applies (CartPole: pole mass x2 and length x1.5; Pendulum:
    mass x1.3; MountainCar: gravity x1.2; MountainCarContinuous: power x0.8; Acrobot:
    second link mass x1.5). Known envs: CartPole, Pendulum, MountainCar,
    MountainCarContinuous, Acrobot; for others set the attribute in your env factory.

    >>> import gymnasium as gym
    >>> env = Dynamics(gym.make("CartPole-v1"), scale={"length": 2.0})
    >>> env.unwrapped.length, env.unwrapped.polemass_length
    (1.0, 0.1)
    """

    def __init__(self, env: gym.Env, scale: Mapping[str, float] | None = None,
                 **values: float) -> None:
        self._init_perturbation(scale=None if scale is None else dict(scale), **values)
        gym.Wrapper.__init__(self, env)
        base = env.unwrapped
        kind = type(base).__name__
        if kind not in _DYNAMICS:
            raise PerturbationError(
                f"Dynamics knows the parameters of {', '.join(sorted(_DYNAMICS))}, not "
                f"{kind}; set the parameter in your env factory instead."
            )
        known, default, derived = _DYNAMICS[kind]
        if scale is None and not values:
            scale = default
        scale = dict(scale or {})
        for name in [*scale, *values]:
            if name not in known:
                raise PerturbationError(
                    f"Dynamics: {kind} has no parameter {name!r}; known: {', '.join(known)}"
                )
        changes: dict[str, float] = {}
        for name, factor in scale.items():
            factor = _float_arg("Dynamics", f"scale[{name!r}]", factor)
            changes[name] = float(getattr(base, name)) * factor
        for name, value in values.items():
            changes[name] = _float_arg("Dynamics", name, value)
        for name, value in changes.items():
            setattr(base, name, value)
        if derived is not None:
            derived(base)
        self.changes = changes
