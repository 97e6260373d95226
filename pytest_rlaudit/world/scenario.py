"""``Scenario``: one perturbation with its parameters, under a name and a category.

The registry of named scenarios (``get``, ``register``, ``resolve``, the suites) is
:mod:`pytest_rlaudit.world.scenarios`, which re-exports this class: import it from there
or from ``pytest_rlaudit``.

>>> from pytest_rlaudit.perturbations import Speed
>>> Scenario("slow", "stress", Speed, {"k": 3})
Scenario('slow', stress, Speed(k=3))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import gymnasium as gym

from ..errors import PerturbationError
from . import perturbations as P
from . import schedules
from .perturbations.base import check_params, noop_params
from .schedules import Schedule

__all__ = ["Scenario", "Category", "CATEGORIES"]

Category = Literal["nominal", "deployment", "stress", "custom"]
#: The categories a scenario may have (:data:`Category`'s values).
CATEGORIES: tuple[str, ...] = ("nominal", "deployment", "stress", "custom")


@dataclass(frozen=True)
class Scenario:
    """A perturbation scenario: ``perturbation(env, **params)`` wraps an env.

    ``perturbation`` is ``None`` for the nominal env. ``name`` keys the scenario's random
    stream, so two scenarios with the same name and parameters give the same numbers.

    >>> from pytest_rlaudit.perturbations import ObservationNoise
    >>> s = Scenario("noisy_imu", "custom", ObservationNoise, {"sigma": 0.3})
    >>> import gymnasium as gym
    >>> s.wrap(gym.make("CartPole-v1")).sigma
    0.3
    """

    name: str
    category: Category
    perturbation: Callable[..., gym.Env] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    #: ``timeline(**params)``: the Schedule a scenario that is one applies (see
    #: :attr:`schedule`); by default a ``Scheduled`` wrapper's own ``timeline``.
    timeline: Callable[..., Schedule] | None = None

    @classmethod
    def from_schedule(cls, schedule: Schedule, name: str = "schedule",
                      category: Category = "custom") -> Scenario:
        """A scenario that applies ``schedule`` (what ``audit``, ``assert_robust`` and the
        registry take). ``name`` keys the perturbation's random stream, so schedules under
        one name share noise draws (their comparisons are paired); name them apart to
        audit several together.

        >>> Scenario.from_schedule(Schedule(speed=3), "slow").schedule
        Schedule(speed=3)
        """
        if not isinstance(schedule, Schedule):
            raise TypeError(f"Scenario.from_schedule takes a Schedule, got {schedule!r}")
        return cls(name, category, P.Scheduled, {"schedule": schedule}, schedule.describe())

    def __reduce__(self) -> tuple[Any, ...]:
        # params is a read-only mappingproxy, which neither pickles nor deep-copies: rebuild
        # from a plain dict (a ScenarioMix of Scenario objects goes to SubprocVecEnv)
        return (type(self), (self.name, self.category, self.perturbation, dict(self.params),
                             self.description, self.timeline))

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a scenario needs a non-empty string name, got {self.name!r}")
        if self.category not in CATEGORIES:
            raise ValueError(
                f"scenario {self.name!r}: category must be one of {', '.join(CATEGORIES)}, "
                f"got {self.category!r}"
            )
        if self.perturbation is not None and not callable(self.perturbation):
            raise TypeError(
                f"scenario {self.name!r}: perturbation must be a wrapper class or a callable "
                f"env -> env, got {self.perturbation!r}"
            )
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        self._check_params(self.params)
        if self.timeline is None and isinstance(self.perturbation, type) and issubclass(
                self.perturbation, P.Scheduled):
            object.__setattr__(self, "timeline", self.perturbation.timeline)

    def _check_params(self, params: Mapping[str, Any]) -> None:
        self.check_names(params)
        # every value in its range now, where the scenario is built (a marker at
        # collection, with_params in a script), not when its env is first wrapped
        check_params(f"scenario {self.name!r}", self.perturbation, params)

    def check_names(self, names: Iterable[str]) -> None:
        """A PerturbationError if this scenario has no parameter of one of ``names``."""
        names = list(names)
        if self.perturbation is None:
            if names:
                raise PerturbationError(f"scenario {self.name!r} takes no parameters")
            return
        try:
            signature = inspect.signature(self.perturbation)
        except (TypeError, ValueError):  # builtins and some callables have none
            return
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        allowed = [n for n in list(signature.parameters)[1:]
                   if signature.parameters[n].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                           inspect.Parameter.VAR_KEYWORD)]
        unknown = [n for n in names if n not in allowed]
        if unknown and not accepts_any:
            raise PerturbationError(
                f"scenario {self.name!r} has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters are: {', '.join(allowed) or 'none'}"
            )

    @property
    def noop(self) -> dict[str, Any] | None:
        """The parameters that make this scenario leave the env as it is (``delay`` with
        ``steps=0``), or None: such a scenario measures nothing and would pass as the
        nominal does. Markers refuse it; the API takes it, since tolerance ladders and
        hypothesis strategies start from the unperturbed value on purpose.

        >>> from pytest_rlaudit.world.scenarios import get
        >>> get("delay").with_params(steps=0).noop, get("delay").noop
        ({'steps': 0}, None)
        """
        if self.perturbation is None:
            return None
        return noop_params(self.perturbation, self.params)

    def with_params(self, **params: Any) -> Scenario:
        """A copy with some parameters overridden (unknown names are an error)."""
        return Scenario(self.name, self.category, self.perturbation,
                        {**self.params, **params}, self.description, self.timeline)

    @property
    def needs_spread(self) -> bool:
        """Whether the scenario's sizes are relative to the observations' spread
        (``scale="relative"``), still to be calibrated on the nominal episodes."""
        return self.params.get("scale") == "relative" and self.params.get("spread") is None

    def calibrated(self, spread: tuple[float, ...] | None) -> Scenario:
        """This scenario with its observation ``spread`` set (see :attr:`needs_spread`);
        ``spread=None`` (integer observations such as images, whose unit is their range)
        leaves the perturbation to its own rule.

        >>> from pytest_rlaudit.world.scenarios import get
        >>> s = get("obs_noise").calibrated((0.5, 0.3, 0.05, 0.4))
        >>> s.needs_spread, s.params["spread"]
        (False, (0.5, 0.3, 0.05, 0.4))
        """
        if not self.needs_spread:
            return self
        if spread is None:
            return self.with_params(scale="absolute")
        return self.with_params(spread=tuple(spread))

    def wrap(self, env: gym.Env) -> gym.Env:
        """Wrap ``env`` (outside its ``TimeLimit``) in this scenario's perturbation."""
        if self.perturbation is None:
            return env
        wrapped = self.perturbation(env, **self.params)
        if not isinstance(wrapped, gym.Env):
            # Found here, not later: the runner would fail on the first thing it asks of
            # the env (its close(), its spaces), far from the perturbation that forgot it.
            label = getattr(self.perturbation, "__qualname__", repr(self.perturbation))
            raise PerturbationError(
                f"scenario {self.name!r}: its perturbation {label} returned "
                f"{type(wrapped).__name__ if wrapped is not None else 'None'} where a wrapped "
                "env is expected. A perturbation is called as perturbation(env, **params) and "
                "must return the env wrapped (a gymnasium.Wrapper around it, e.g. "
                "`return MyWrapper(env)`), or env itself to leave it unchanged."
            )
        return wrapped

    @property
    def schedule(self) -> Schedule | None:
        """The timeline this scenario applies, for scenarios that are one (``spike``, any
        :meth:`from_schedule`); None for stationary perturbations.

        >>> from pytest_rlaudit.world.scenarios import get
        >>> get("spike").schedule
        Schedule(speed=[1]*20 + [5]*20)
        """
        return None if self.timeline is None else self.timeline(**self.params)

    def __repr__(self) -> str:
        if self.perturbation is None:
            return f"Scenario({self.name!r}, {self.category})"
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        label = getattr(self.perturbation, "__name__", repr(self.perturbation))
        return f"Scenario({self.name!r}, {self.category}, {label}({args}))"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints failing examples through this (see Schedule._repr_pretty_).
        printer.text(repr(self))

    def __hash__(self) -> int:
        return hash((self.name, self.category, self.perturbation,
                     tuple(sorted((k, repr(v)) for k, v in self.params.items()))))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Scenario):
            return NotImplemented
        return (self.name, self.category, self.perturbation, dict(self.params)) == (
            other.name, other.category, other.perturbation, dict(other.params))


schedules.scenario_of = Scenario.from_schedule  # what Schedule.as_scenario builds (see there)
