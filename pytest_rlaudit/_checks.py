"""Argument validators: one wording per kind, for every layer. Standard library only.

Integers: ``"{name} must be an integer >= {minimum}, got {value!r}"`` (``in [min, max]``
when bounded above). Numbers:
``"{name} must be a finite number in [low, high), got {value!r}"`` (or ``>= low``,
``> low`` when unbounded above). Booleans are neither; numpy scalars are both.

>>> integer("Speed: k", 0, minimum=1)
Traceback (most recent call last):
...
pytest_rlaudit.errors.InvalidArgumentError: Speed: k must be an integer >= 1, got 0
>>> number("confidence", 0.95, low=0, high=1, low_open=True, high_open=True)
0.95
>>> bounds(0, 2, low_open=True), bounds(0), bounds(0, low_open=True)
('in (0, 2]', '>= 0', '> 0')
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal, overload

from .errors import InvalidArgumentError

__all__ = ["integer", "number", "bounds", "workers", "seed", "confidence", "MAX_SEED"]

#: The largest env seed: episode seeds travel as int64 (numpy arrays, JSON, JUnit).
MAX_SEED = 2**63 - 1


def integer(name: str, value: Any, *, minimum: int, maximum: int | None = None, why: str = "",
            error: type[Exception] = InvalidArgumentError) -> int:
    """``value`` as an int if it is an integer >= ``minimum`` (and <= ``maximum``), else
    ``error``. ``name`` may be empty: argparse puts the option's name in front of the
    message."""
    # int(): numbers.Integral declares no comparisons; for an Integral it is the same number
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum
            or (maximum is not None and int(value) > maximum)):
        allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise error(f"{_subject(name)}must be an integer {allowed}{why}, got {value!r}")
    return int(value)


def seed(value: Any, *, episodes: int = 1, name: str = "seed",
         error: type[Exception] = InvalidArgumentError) -> int:
    """An audit seed: an integer >= 0 whose last episode's env seed, ``seed + episodes -
    1``, still fits the 64 bits episode seeds travel in.

    >>> seed(7, episodes=30)
    7
    >>> seed(2**70)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.InvalidArgumentError: seed must be an integer in [0, 9223372036854775807] ...
    """
    top = MAX_SEED - max(0, int(episodes) - 1)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) > top:
        return integer(name, value, minimum=0, maximum=top, error=error,
                       why=" (episode i resets with env seed seed + i, a 64-bit integer)")
    return integer(name, value, minimum=0, error=error)


def number(name: str, value: Any, *, low: float = -math.inf, high: float = math.inf,
           low_open: bool = False, high_open: bool = False, why: str = "",
           error: type[Exception] = InvalidArgumentError) -> float:
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


def confidence(value: Any) -> float:
    """A confidence level, strictly between 0 and 1.

    >>> confidence(0.9)
    0.9
    >>> confidence("0.9")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.InvalidArgumentError: confidence must be a finite number in (0, 1), got '0.9'
    """
    return number("confidence", value, low=0, high=1, low_open=True, high_open=True)


def bounds(low: float = -math.inf, high: float = math.inf, *, low_open: bool = False,
           high_open: bool = False) -> str:
    """The bounds as the messages say them: ``"in [0, 1)"``, ``">= 0"``, ``"> 0"``."""
    if math.isinf(high):
        return f"{'>' if low_open else '>='} {low:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def _subject(name: str) -> str:
    return f"{name} " if name else ""


@overload
def workers(value: None, *, error: type[Exception] = ...) -> None: ...
@overload
def workers(value: str | int, *, error: type[Exception] = ...) -> int | Literal["auto"]: ...
@overload
def workers(value: Any, *, error: type[Exception] = ...) -> int | Literal["auto"] | None: ...


def workers(value: Any, *, error: type[Exception] = InvalidArgumentError
            ) -> int | Literal["auto"] | None:
    """A worker count as given: ``None``, ``"auto"`` or an integer >= 0 (text is parsed,
    for options and ini keys), else ``error``.

    >>> workers("auto"), workers("2"), workers(None)
    ('auto', 2, None)
    """
    if value is None:
        return None
    if value == "auto":
        return "auto"
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            pass
    return integer("workers" if error is InvalidArgumentError else "", value, minimum=0,
                   why=' or "auto" (one worker process per core)', error=error)

