"""Push: random external shoves, a force on the robot's body for a few env steps.

On MuJoCo envs the force goes through ``data.xfrc_applied`` on one body; on the
classic-control envs it is the velocity change the same force would cause, added to the
state. See :class:`Push` for the rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ...errors import PerturbationError
from .base import Param, Perturbation, ranges
from .dynamics import CLASSIC_CONTROL, MUJOCO_ENVS, mujoco_parts

__all__ = ["Push"]

_OWNER = "Push"
#: Standard gravity: the weight unit on a MuJoCo model without gravity (Pusher-v5).
STANDARD_GRAVITY = 9.81


# ----------------------------------------------------------------------- MuJoCo


def _body_id(model: Any, body: str | None) -> int:
    """The pushed body: ``body`` by name, else body 1 (the root: the first body after
    the world, a locomotion robot's torso or a cart-pole's cart)."""
    if body is None:
        if model.nbody < 2:
            raise PerturbationError(f"{_OWNER}: this MuJoCo model has no body besides the "
                                    "world, so nothing to push; leave 'push' out of the audit")
        return 1
    names = [model.body(i).name for i in range(1, model.nbody)]
    if body not in names:
        raise PerturbationError(
            f"{_OWNER}: this MuJoCo model has no body {body!r}; its bodies: {', '.join(names)}")
    return names.index(body) + 1


def _horizontal_axes(model: Any, body: int) -> np.ndarray:
    """Which world axes (x, y) the body's frame can move along, from its Jacobian at the
    model's reference pose: x only for a planar robot (Hopper, HalfCheetah, Walker2d) or a
    cart on a rail, both for a free-floating one (Ant, Humanoid) or an arm fixed at a
    hinge (whose frame origin does not move: pushes there go any horizontal way)."""
    import mujoco  # imported already: the env holds a model

    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    jacp = np.zeros((3, model.nv))
    mujoco.mj_jacBody(model, data, jacp, None, body)
    movable = np.abs(jacp[:2]).max(axis=1, initial=0.0) > 1e-9
    return movable if movable.any() else np.ones(2, dtype=bool)


def _direction(u: float, axes: np.ndarray) -> np.ndarray:
    """A horizontal unit vector from one uniform draw ``u``: a uniform angle when both
    axes move, else a random sign along the one that does."""
    if axes.all():
        angle = 2.0 * math.pi * u
        return np.array([math.cos(angle), math.sin(angle), 0.0])
    out = np.zeros(3)
    out[int(np.argmax(axes))] = 1.0 if u < 0.5 else -1.0
    return out


class _BodyPush:
    """A force on one MuJoCo body, through ``data.xfrc_applied`` (at the body's centre of
    mass, in world coordinates), which holds until cleared."""

    def __init__(self, env: Any, body: str | None) -> None:
        self.env = env
        model = env.model
        self.body = _body_id(model, body)
        self.axes = _horizontal_axes(model, self.body)

    def weight(self) -> float:
        """The weight of the robot the body belongs to: every body of its kinematic tree
        (not other objects of the scene), under the model's gravity. Read at each push, so
        a Dynamics shift of mass or gravity counts."""
        model = self.env.model
        tree = model.body_rootid == model.body_rootid[self.body]
        gravity = float(np.linalg.norm(model.opt.gravity)) or STANDARD_GRAVITY
        return float(model.body_mass[tree].sum()) * gravity

    def start(self, u: float, strength: float) -> np.ndarray:
        force = strength * self.weight() * _direction(u, self.axes)
        self.env.data.xfrc_applied[self.body, :3] = force
        return force

    def during(self) -> None:
        """Nothing per step: ``xfrc_applied`` holds."""

    def stop(self) -> None:
        self.env.data.xfrc_applied[self.body, :3] = 0.0


# -------------------------------------------------------------- classic control


def _cartpole(env: Any, accel: float) -> np.ndarray:
    # A horizontal force on the cart enters CartPole's equations of motion as the action's
    # does: the cart and the pole both respond (x_dot and theta_dot).
    cos = math.cos(float(env.state[2]))
    theta_acc = -cos * accel / (env.length * (4.0 / 3.0 - env.masspole * cos**2 / env.total_mass))
    x_acc = accel - env.polemass_length * theta_acc * cos / env.total_mass
    return np.array([0.0, x_acc * env.tau, 0.0, theta_acc * env.tau])


def _pendulum(env: Any, accel: float) -> np.ndarray:
    # Along the bob's path: angular velocity changes by (a dt) / l.
    return np.array([0.0, accel * env.dt / env.l])


def _acrobot(env: Any, accel: float) -> np.ndarray:
    # On the first link's tip, along its path (the second link follows through the joint).
    return np.array([0.0, 0.0, accel * env.dt / env.LINK_LENGTH_1, 0.0])


def _mountain_car(env: Any, accel: float) -> np.ndarray:
    # Its time unit is one step; its velocity is clipped to max_speed by its own step.
    return np.array([0.0, accel])


#: Classic-control env class -> (the velocity change of a push's step for an acceleration
#: ``a``, the env's gravity). Gravity in the env's own units: MountainCar's is 0.0025 per
#: step squared (MountainCarContinuous hard-codes it), Acrobot's 9.8 is a constant of
#: its equations, Pendulum's is ``g``.
_KICKS: dict[str, tuple[Callable[[Any, float], np.ndarray], Callable[[Any], float]]] = {
    "CartPoleEnv": (_cartpole, lambda env: env.gravity),
    "PendulumEnv": (_pendulum, lambda env: env.g),
    "AcrobotEnv": (_acrobot, lambda env: 9.8),
    "MountainCarEnv": (_mountain_car, lambda env: env.gravity),
    "Continuous_MountainCarEnv": (_mountain_car, lambda env: 0.0025),
}


def _added(state: Any, delta: np.ndarray) -> Any:
    """``state + delta`` in the state's own container and dtype (MountainCar keeps a
    tuple, Acrobot float32 after reset)."""
    new = np.asarray(state, dtype=np.float64) + delta
    if isinstance(state, np.ndarray):
        return new.astype(state.dtype)
    return tuple(float(v) for v in new)


class _StateKick:
    """The velocity change of a push's force, added to a classic-control env's ``state``
    before each env step of the push (the env then integrates it)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.kick, self.gravity = _KICKS[type(env).__name__]
        self.accel = 0.0

    def start(self, u: float, strength: float) -> np.ndarray:
        self.accel = (1.0 if u < 0.5 else -1.0) * strength * self.gravity(self.env)
        return self.kick(self.env, self.accel)

    def during(self) -> None:
        self.env.state = _added(self.env.state, self.kick(self.env, self.accel))

    def stop(self) -> None:
        self.accel = 0.0


def _target(env: Any, body: str | None) -> _BodyPush | _StateKick:
    kind = type(env).__name__
    if mujoco_parts(env) is not None:
        return _BodyPush(env, body)
    if kind in _KICKS:
        if body is not None:
            raise PerturbationError(
                f"{_OWNER}: body= names a MuJoCo body; {kind} is pushed as a whole, leave "
                "body unset")
        return _StateKick(env)
    raise PerturbationError(
        f"{_OWNER} cannot push {kind}: it pushes the classic-control envs "
        f"{', '.join(CLASSIC_CONTROL)} and {MUJOCO_ENVS}. Fix: leave 'push' out of the "
        "audit's scenarios, or write the disturbance into your env and audit that env."
    )


# ---------------------------------------------------------------------- wrapper


class Push(Perturbation, gym.Wrapper):
    """Random external shoves: every ``interval`` env steps, a horizontal force of
    ``strength`` x the robot's weight for ``duration`` env steps.

    The rule, so that a push means the same on every robot: the force is a fraction of
    the robot's weight (its mass x gravity), so it accelerates the robot's centre of mass
    by ``strength`` x g whatever the robot weighs; unresisted, it changes that velocity by
    ``strength * g * duration * dt`` (``dt``: the env's step). The default, half the
    weight for 5 steps every 50, is a shove the robot must catch (on CartPole about half
    its motor's force; on Hopper a change of 0.2 m/s, on HalfCheetah of 1.2 m/s: its step
    is longer). Pushes start at env steps ``interval``, ``2 * interval``, ... (counted from
    reset; a fixed interval, so an audit's diagnosis can be read against it), each in a
    random direction drawn from this wrapper's generator (seeded per episode, never the
    env's ``np_random``), so the same seed replays the same pushes.

    - MuJoCo envs: the force goes on ``body`` (a body name; default body 1, the root: a
      locomotion robot's torso, a cart-pole's cart) through ``data.xfrc_applied`` at its
      centre of mass, and is cleared after ``duration`` steps and on reset. The weight is
      that of the body's kinematic tree (the robot, not other objects in the scene),
      under the model's gravity (standard gravity if it has none). The direction is a
      uniform horizontal angle, or a random sign along the one horizontal axis a planar
      robot (Hopper, HalfCheetah, Walker2d) or a cart on a rail can move along.
    - Classic control: the velocity change the same force causes in each step, added to
      the env's state before the step, with a random sign: CartPole, a force on the cart
      through its equations of motion (``x_dot`` and ``theta_dot``); Pendulum, along the
      bob's path (angular velocity); Acrobot, on the first link's tip (its angular
      velocity); MountainCar(Continuous), on the car (its velocity; its gravity is
      0.0025 per step squared and its step the time unit).

    ``pushes`` lists this episode's pushes as ``(env step, force)``: the force vector in
    newtons (MuJoCo) or the first step's velocity change (classic control).

    >>> import gymnasium as gym
    >>> env = Push(gym.make("CartPole-v1"), strength=0.5, duration=2, interval=3)
    >>> _ = env.reset(seed=0)
    >>> for _ in range(4):
    ...     _ = env.step(0)
    >>> [step for step, _ in env.pushes]
    [3]
    """

    PARAMS = ranges(strength=Param("number"), duration=Param("integer", low=1),
              interval=Param("integer", low=1))
    NOOP = ({"strength": 0},)

    def __init__(self, env: gym.Env, strength: float = 0.5, duration: int = 5,
                 interval: int = 50, body: str | None = None) -> None:
        self._init_perturbation(strength=strength, duration=duration, interval=interval,
                                body=body)
        gym.Wrapper.__init__(self, env)
        self.strength = self._argument("strength", strength)
        self.interval = self._argument("interval", interval)
        self.duration = self._argument("duration", duration)
        if self.duration > self.interval:
            raise PerturbationError(
                f"{_OWNER}: duration ({self.duration} env steps) must be at most interval "
                f"({self.interval}): one push ends before the next starts")
        if body is not None and not isinstance(body, str):
            raise PerturbationError(f"{_OWNER}: body must be a body's name, got {body!r}")
        self._target = _target(env.unwrapped, body)
        self._t = 0
        self.pushes: list[tuple[int, np.ndarray]] = []

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._target.stop()
        self._t, self.pushes = 0, []
        obs, info = super().reset(seed=seed, options=options)
        self._target.stop()  # whatever reset left (MuJoCo's mj_resetData clears it too)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        t, pushed = self._t, self._t >= self.interval
        phase = t % self.interval
        if pushed and phase == 0:
            self.pushes.append((t, self._target.start(float(self.rng.random()), self.strength)))
        if pushed and phase < self.duration:
            self._target.during()
        result = self.env.step(action)
        self._t += 1
        if pushed and phase == self.duration - 1:
            self._target.stop()
        return result
