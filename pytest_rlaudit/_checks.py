"""Argument validators: one wording per kind, for every layer. Standard library only.

Integers: ``"{name} must be an integer >= {minimum}, got {value!r}"``. Numbers:
``"{name} must be a finite number in [low, high), got {value!r}"`` (or ``>= low``,
``> low`` when unbounded above). Booleans are neither; numpy scalars are both.

>>> integer("Speed: k", 0, minimum=1)
Traceback (most recent call last):
...
ValueError: Speed: k must be an integer >= 1, got 0
>>> number("confidence", 0.95, low=0, high=1, low_open=True, high_open=True)
0.95
>>> bounds(0, 2, low_open=True), bounds(0), bounds(0, low_open=True)
('in (0, 2]', '>= 0', '> 0')
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["integer", "number", "bounds", "workers"]


def integer(name: str, value: Any, *, minimum: int, why: str = "",
            error: type[Exception] = ValueError) -> int:
    """``value`` as an int if it is an integer >= ``minimum``, else ``error``. ``name`` may
    be empty: argparse puts the option's name in front of the message."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise error(f"{_subject(name)}must be an integer >= {minimum}{why}, got {value!r}")
    return int(value)


def number(name: str, value: Any, *, low: float = -math.inf, high: float = math.inf,
           low_open: bool = False, high_open: bool = False, why: str = "",
           error: type[Exception] = ValueError) -> float:
    """``value`` as a float if it is a finite number within the bounds, else ``error``."""
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        raise error(f"{_subject(name)}must be a finite number "
                    f"{bounds(low, high, low_open=low_open, high_open=high_open)}{why}, "
                    f"got {value!r}")
    return float(value)


def bounds(low: float = -math.inf, high: float = math.inf, *, low_open: bool = False,
           high_open: bool = False) -> str:
    """The bounds as the messages say them: ``"in [0, 1)"``, ``">= 0"``, ``"> 0"``."""
    if math.isinf(high):
        return f"{'>' if low_open else '>='} {low:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def _subject(name: str) -> str:
    return f"{name} " if name else ""


def workers(value: Any, *, error: type[Exception] = ValueError) -> int | str | None:
    """A worker count as given: ``None``, ``"auto"`` or an integer >= 0 (text is parsed,
    for options and ini keys), else ``error``.

    >>> workers("auto"), workers("2"), workers(None)
    ('auto', 2, None)
    """
    if value is None or value == "auto":
        return value
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            pass
    return integer("workers" if error is ValueError else "", value, minimum=0,
                   why=' or "auto" (one worker process per core)', error=error)

