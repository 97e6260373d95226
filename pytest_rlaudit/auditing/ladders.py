"""Tolerance ladders: which parameter a scenario's tolerance curve varies, the values it
tests by default (mildest first), and how a tolerance reads.

Standard library only: the plugin checks ``rl_tolerance`` markers at collection and the
reports render curves from records with it, without the engine.

>>> LADDERS["delay"]
('steps', (1, 2, 3, 4, 6, 8))
>>> tolerance_sentence("delay", "steps", 1, 2)
'delay: tolerates 1 step, breaks at 2'
>>> tolerance_sentence("obs_noise", "sigma", 0.05, 0.1)
'obs_noise: tolerates sigma 0.05, breaks at 0.1'
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LADDERS", "Ladder", "ladder", "point_name", "value_text", "amount",
           "tolerance_sentence"]

#: Per registered scenario: the parameter its tolerance curve varies by default (its main
#: one) and the values tested by default, in increasing severity. Each ladder holds the
#: scenario's default value, so a curve shows where the single-point audit stands on it;
#: integer ladders mean an integer parameter. ``obs_noise``'s sigma is a fraction of each
#: observation element's nominal spread, so its ladder reaches twice that spread
#: (``adversarial_obs``' epsilon is in the same units); ``push``'s strength is a fraction of
#: the robot's weight.
LADDERS: dict[str, tuple[str, tuple[int | float, ...]]] = {
    "speed_5x": ("k", (2, 3, 4, 5, 6, 8)),
    "jitter": ("jitter", (1, 2, 3, 4, 6)),
    "delay": ("steps", (1, 2, 3, 4, 6, 8)),
    "spike": ("k", (2, 3, 4, 5, 6, 8)),
    "obs_noise": ("sigma", (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)),
    "action_noise": ("sigma", (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)),
    "sticky_actions": ("p", (0.05, 0.1, 0.25, 0.5, 0.75, 0.9)),
    "action_delay": ("steps", (1, 2, 3, 4, 6, 8)),
    "dropped_obs": ("p", (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)),
    "push": ("strength", (0.1, 0.2, 0.5, 1.0, 2.0)),
    "adversarial_obs": ("epsilon", (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)),
}

#: Parameters counted in a unit, which sentences name ("1 step", "3 steps").
_UNITS = {"steps": ("step", "steps")}


@dataclass(frozen=True)
class Ladder:
    """What one tolerance curve tests: ``param`` at ``values`` (strictly increasing), of a
    scenario whose own value of ``param`` is ``default``."""

    scenario: str
    param: str
    values: tuple[int | float, ...]
    default: int | float


def ladder(scenario: Any, param: Any = None, values: Any = None) -> Ladder:
    """The ladder of ``scenario`` (a :class:`~pytest_rlaudit.scenarios.Scenario`):
    ``param`` (default: its main parameter, :data:`LADDERS`) at ``values`` (default: its
    ladder), checked; a ValueError says what to pass instead.

    >>> from pytest_rlaudit import scenarios
    >>> ladder(scenarios.get("delay"), values=[0, 1, 2])
    Ladder(scenario='delay', param='steps', values=(0, 1, 2), default=1)
    >>> ladder(scenarios.get("delay"), values=[2, 1])
    Traceback (most recent call last):
    ...
    ValueError: values must increase strictly, mildest first: 1 comes after 2; sort them ...
    """
    name = scenario.name
    params: Mapping[str, Any] = scenario.params
    main = LADDERS.get(name)
    if param is None:
        if main is None:
            numeric = [k for k, v in params.items() if _is_number(v)]
            raise ValueError(
                f"scenario {name!r} has no default tolerance parameter: pass param= (one of "
                f"{', '.join(numeric) or 'none: it has no numeric parameter'}) and values=")
        param = main[0]
    if not isinstance(param, str):
        raise ValueError(f"param must be the name of a parameter of {name!r} (a string), got "
                         f"{param!r}")
    if param not in params:
        raise ValueError(
            f"scenario {name!r} sets no parameter {param!r}; its parameters are "
            f"{', '.join(params) or 'none'}. To vary another one the perturbation takes, set "
            f"it on the scenario first: scenarios.get({name!r}).with_params({param}=...)")
    default = params[param]
    if not _is_number(default):
        numeric = [k for k, v in params.items() if _is_number(v)]
        raise ValueError(
            f"scenario {name!r}'s parameter {param!r} is {default!r}, not a number: a "
            f"tolerance curve varies a numeric parameter ({', '.join(numeric) or 'none here'})")
    integral = isinstance(default, numbers.Integral)
    if values is None:
        if main is None or main[0] != param:
            raise ValueError(f"no default values for {name!r}'s parameter {param!r}: pass "
                             f"values=[...], mildest first")
        values = main[1]
    return Ladder(name, param, _checked_values(name, param, values, integral), default)


def _is_number(value: Any) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def _checked_values(name: str, param: str, values: Any, integral: bool) -> tuple[int | float, ...]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise ValueError(f"values must be a list of numbers, mildest first (e.g. values=[1, 2, "
                         f"4]), got {values!r}")
    values = list(values)
    if not values:
        raise ValueError("values is empty: give at least one value to test, mildest first "
                         "(e.g. values=[1, 2, 4])")
    out: list[int | float] = []
    for v in values:
        if not _is_number(v):
            raise ValueError(f"values must be finite numbers, got {v!r} in {values!r}")
        if integral and not isinstance(v, numbers.Integral):
            raise ValueError(f"{name!r}'s parameter {param!r} takes integers, got {v!r}: "
                             f"give whole numbers (e.g. values=[1, 2, 4])")
        out.append(int(v) if integral else float(v))
    for before, after in itertools.pairwise(out):
        if not after > before:
            raise ValueError(f"values must increase strictly, mildest first: "
                             f"{value_text(after)} comes after {value_text(before)}; sort them "
                             "(values=sorted(...)) and drop repeats")
    return tuple(out)


def value_text(value: int | float) -> str:
    """A tested value as names and reports show it: ints as ints, floats as Python writes
    them (exact, so two values never share a name).

    >>> value_text(2), value_text(0.05), value_text(1.0)
    ('2', '0.05', '1.0')
    """
    if isinstance(value, numbers.Integral):
        return str(int(value))
    return repr(float(value))


def point_name(scenario: str, param: str, value: int | float, default: int | float) -> str:
    """The scenario name of one point of a curve: the scenario's own name at its default
    value (so that point repeats the single-point audit, random streams included, which
    the name keys), else ``name[param=value]``.

    >>> point_name("delay", "steps", 1, 1), point_name("delay", "steps", 2, 1)
    ('delay', 'delay[steps=2]')
    """
    return scenario if value == default else f"{scenario}[{param}={value_text(value)}]"


def amount(param: str, value: int | float) -> str:
    """A value of ``param`` in words: "sigma 0.05", "2 steps".

    >>> amount("sigma", 0.05), amount("steps", 1)
    ('sigma 0.05', '1 step')
    """
    unit = _UNITS.get(param)
    if unit is None:
        return f"{param} {value_text(value)}"
    return f"{value_text(value)} {unit[0] if value == 1 else unit[1]}"


def tolerance_sentence(scenario: str, param: str, tolerated: int | float | None,
                       breaks_at: int | float | None) -> str:
    """How a tolerance reads in every report: "delay: tolerates 1 step, breaks at 2".

    >>> tolerance_sentence("dropped_obs", "p", None, 0.02)
    'dropped_obs: tolerates none of the values tested, breaks at p 0.02 (the mildest)'
    >>> tolerance_sentence("delay", "steps", 8, None)
    'delay: tolerates 8 steps (the most severe tested), breaks at none'
    """
    if tolerated is None and breaks_at is None:
        return f"{scenario}: no values tested"
    if tolerated is None:
        return (f"{scenario}: tolerates none of the values tested, breaks at "
                f"{amount(param, breaks_at)} (the mildest)")  # type: ignore[arg-type]
    if breaks_at is None:
        return f"{scenario}: tolerates {amount(param, tolerated)} (the most severe tested), breaks at none"
    text = f"{scenario}: tolerates {amount(param, tolerated)}, breaks at {value_text(breaks_at)}"
    if breaks_at < tolerated:  # a dip below the line at a milder value: noise, or real
        text += " (not monotone: a milder value breaks it; more episodes tell noise from a real dip)"
    return text
