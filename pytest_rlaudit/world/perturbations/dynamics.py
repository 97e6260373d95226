"""Dynamics: a shift of the env's physical parameters (a heavier robot, a longer pole)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from ...errors import PerturbationError
from .base import Perturbation, _float_arg

__all__ = ["Dynamics"]


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
