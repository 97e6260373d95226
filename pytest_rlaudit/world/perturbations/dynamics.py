"""Dynamics: a shift of the env's physical parameters (a heavier robot, a longer pole).

Two kinds of env are known: the classic-control envs, by their attributes, and any
MuJoCo env, through its compiled model (``env.unwrapped.model``). :func:`mujoco_parts`
and :data:`CLASSIC_CONTROL` are shared with the ``Push`` wrapper.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from ...errors import PerturbationError
from .base import Perturbation, _float_arg

__all__ = ["Dynamics", "mujoco_parts", "CLASSIC_CONTROL", "MUJOCO_ENVS", "MUJOCO_DEFAULT"]

#: How the error messages name the MuJoCo envs (one wording for Dynamics and Push).
MUJOCO_ENVS = "any MuJoCo env (gymnasium.envs.mujoco.MujocoEnv)"


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

#: The classic-control env classes Dynamics (and Push) know, by class name.
CLASSIC_CONTROL: tuple[str, ...] = tuple(sorted(_DYNAMICS))


def _scale_mass(model: Any, factor: float) -> None:
    # Inertia scales with mass at fixed geometry (a denser body, not a bigger one).
    model.body_mass[:] *= factor
    model.body_inertia[:] *= factor


def _scale_friction(model: Any, factor: float) -> None:
    # Every coefficient (sliding, torsional, rolling) of every geom, the floor's too
    # (MuJoCo takes the larger of two geoms' coefficients), and of explicit contact pairs.
    model.geom_friction[:] *= factor
    model.pair_friction[:] *= factor


def _scale_gravity(model: Any, factor: float) -> None:
    model.opt.gravity[:] *= factor


def _scale_actuator(model: Any, factor: float) -> None:
    # The gear maps an actuator's force to joint torque: a weaker motor gives less
    # torque for the same command (every gymnasium MuJoCo env drives motors).
    model.actuator_gear[:] *= factor


#: MuJoCo parameter -> how it scales the model. All are multiplicative scales.
_MUJOCO: dict[str, Callable[[Any, float], None]] = {
    "mass": _scale_mass,
    "friction": _scale_friction,
    "gravity": _scale_gravity,
    "actuator": _scale_actuator,
}

#: The default MuJoCo shift, a heavier robot on a more slippery floor. Anchored on the
#: real-world RL suite (Dulac-Arnold et al. 2021, ``realworldrl_suite``): its combined
#: challenges lengthen a limb by up to x1.1-1.2 ("easy") or x1.8-3.2 ("medium"), its
#: quadruped torso density ranges over x0.5-10 and its contact friction over
#: 0.01-2 (walker, nominal 0.7) and 0.1-4.5 (quadruped, nominal 1.5). Mass x1.3 (Pendulum's
#: default too) and friction x0.8 sit between "easy" and "medium": a shift a deployed
#: robot meets (a payload, a worn or dusty floor), not a different robot.
MUJOCO_DEFAULT: dict[str, float] = {"mass": 1.3, "friction": 0.8}


def mujoco_parts(env: Any) -> tuple[Any, Any] | None:
    """``(model, data)`` of an unwrapped MuJoCo env (an ``mujoco.MjModel`` and ``MjData``
    as ``model`` and ``data``: gymnasium's ``MujocoEnv`` and others), else None.

    Found without importing mujoco: an env that holds a model has imported it already.

    >>> import gymnasium as gym
    >>> mujoco_parts(gym.make("CartPole-v1").unwrapped) is None
    True
    """
    mujoco = sys.modules.get("mujoco")
    if mujoco is None:
        return None
    model, data = getattr(env, "model", None), getattr(env, "data", None)
    if isinstance(model, mujoco.MjModel) and isinstance(data, mujoco.MjData):
        return model, data
    return None


def _unsupported(kind: str) -> PerturbationError:
    return PerturbationError(
        f"Dynamics cannot shift {kind}: it knows the parameters of the classic-control envs "
        f"{', '.join(CLASSIC_CONTROL)} and of {MUJOCO_ENVS}. Fix: build the shifted env in "
        "your env factory (a zero-argument function that sets the parameter), or leave "
        "'dynamics' out of the audit's scenarios."
    )


def _shift_classic(base: Any, scale: Mapping[str, float] | None,
                   values: Mapping[str, float]) -> dict[str, float]:
    """Set a classic-control env's attributes; returns the new values by name."""
    kind = type(base).__name__
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
    return changes


def _mujoco_scales(kind: str, scale: Mapping[str, float] | None,
                   values: Mapping[str, float]) -> dict[str, float]:
    """The checked scales of a MuJoCo shift (the default when none are given)."""
    if values:
        name = next(iter(values))
        raise PerturbationError(
            f"Dynamics: a MuJoCo env ({kind}) takes its parameters as scales of the model's "
            f"own values, not as values: pass scale={{{name!r}: ...}}, not {name}=..."
        )
    scale = dict(MUJOCO_DEFAULT if scale is None else scale)
    checked: dict[str, float] = {}
    for name, factor in scale.items():
        if name not in _MUJOCO:
            raise PerturbationError(
                f"Dynamics: a MuJoCo env ({kind}) has no parameter {name!r}; its parameters "
                f"are the scales {', '.join(_MUJOCO)} (for example scale={{'mass': 1.3}})"
            )
        factor = _float_arg("Dynamics", f"scale[{name!r}]", factor)
        if name == "mass" and factor == 0.0:  # massless moving bodies: MuJoCo cannot step them
            raise PerturbationError(
                f"Dynamics: scale['mass'] must be a finite number > 0, got {factor!r}")
        checked[name] = factor
    return checked


def _shift_mujoco(model: Any, scales: Mapping[str, float]) -> None:
    """Scale ``model`` in place, then recompute the constants MuJoCo derives from it."""
    import mujoco  # imported already: the env holds a model

    for name, factor in scales.items():
        _MUJOCO[name](model, factor)
    # Subtree masses, inverse weights (constraint softness) and actuator constants are
    # derived at compile time; recompute them as a recompiled model would have them. A
    # scratch MjData: mj_setConst uses its data as workspace, and the env's is left alone.
    mujoco.mj_setConst(model, mujoco.MjData(model))


class Dynamics(Perturbation, gym.Wrapper):
    """A shift of the env's physical parameters (a heavier robot, a longer pole, ...).

    Classic control (CartPole, Pendulum, MountainCar, MountainCarContinuous, Acrobot):
    ``scale`` multiplies the env's attributes, keyword arguments set them; derived
    attributes are recomputed (CartPole's ``total_mass`` and ``polemass_length``). With
    neither, the env's default shift applies (CartPole: pole mass x2 and length x1.5;
    Pendulum: mass x1.3; MountainCar: gravity x1.2; MountainCarContinuous: power x0.8;
    Acrobot: second link mass x1.5). ``changes`` holds the new values by name.

    MuJoCo envs (any gymnasium ``MujocoEnv``): ``scale`` multiplies the compiled model's

    - ``mass``: every body's mass and inertia (``body_mass``, ``body_inertia``);
    - ``friction``: every geom's friction coefficients (``geom_friction``, and
      ``pair_friction`` of explicit contact pairs);
    - ``gravity``: ``opt.gravity``;
    - ``actuator``: every actuator's gear (``actuator_gear``): torque per command.

    The default (no ``scale``) is :data:`MUJOCO_DEFAULT`, mass x1.3 and friction x0.8: a
    heavier robot on a more slippery floor (see there for where the numbers come from).
    ``changes`` holds the scales applied. The model is changed in place when the wrapper
    is made, with the constants MuJoCo derives from it recomputed (``mj_setConst``), and
    stays changed: ``reset`` resets the simulation state, not the model. Each env owns
    its model (``gym.make`` compiles one per env), so wrap a fresh env: wrapping one env
    twice compounds the shift.

    Other envs are a :class:`~pytest_rlaudit.errors.PerturbationError`: set the
    parameter in your env factory instead.

    >>> import gymnasium as gym
    >>> env = Dynamics(gym.make("CartPole-v1"), scale={"length": 2.0})
    >>> env.unwrapped.length, env.unwrapped.polemass_length
    (1.0, 0.1)

    On MuJoCo (``pip install 'gymnasium[mujoco]'``)::

        env = Dynamics(gym.make("Hopper-v5"), scale={"mass": 1.5, "actuator": 0.8})
    """

    def __init__(self, env: gym.Env, scale: Mapping[str, float] | None = None,
                 **values: float) -> None:
        self._init_perturbation(scale=None if scale is None else dict(scale), **values)
        gym.Wrapper.__init__(self, env)
        base = env.unwrapped
        kind = type(base).__name__
        parts = mujoco_parts(base)
        self.changes: dict[str, float]
        if parts is not None:
            self.changes = _mujoco_scales(kind, scale, values)
            _shift_mujoco(parts[0], self.changes)
        elif kind in _DYNAMICS:
            self.changes = _shift_classic(base, scale, values)
        else:
            raise _unsupported(kind)
