"""The channels of a :class:`~pytest_rlaudit.world.schedules.Schedule` and how their
arguments are read: the channel names, their nominal values, and the parsing of one
channel's argument (a number, a list, a list ending in ``...``) into canonical runs.

A run is ``(value, count)``; a last count of ``None`` holds the value for ever. Runs are
canonical when equal neighbours are merged and trailing nominal steps are dropped, so
equal timelines have equal runs however they were written:

>>> parse_runs("speed", [1, 1, 3, 3, 1])
((1, 2), (3, 2))
>>> parse_runs("delay", [0] * 5 + [2, ...])
((0, 5), (2, None))
>>> check_value("speed", 0, "[3]")
Traceback (most recent call last):
...
ValueError: Schedule: speed[3] must be >= 1, got 0

Plain data, like the schedule: this module imports neither gymnasium nor numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._checks import integer

__all__ = ["CHANNELS", "NOMINAL_SETTINGS", "Run", "check_value", "parse_runs", "canonical",
           "check_settings", "check_count"]

#: The channels of a schedule, in the order the repr and ``describe()`` use.
CHANNELS: tuple[str, ...] = ("speed", "delay", "obs_noise", "action_noise", "dropped")
#: The nominal value of each channel: what a schedule reverts to.
NOMINAL_SETTINGS: Mapping[str, Any] = {
    "speed": 1, "delay": 0, "obs_noise": 0.0, "action_noise": 0.0, "dropped": False}

Run = tuple[Any, int | None]  # (value, count); count None: for ever (only the last run)


def check_value(channel: str, value: Any, where: str) -> Any:
    """The channel value as a plain int/float/bool, or a ValueError naming the fix
    (``where`` places the value in the argument, e.g. ``"[3]"``)."""
    is_bool = isinstance(value, bool) or type(value).__name__ == "bool_"
    if channel == "dropped":
        if not is_bool:
            raise ValueError(f"Schedule: dropped{where} must be True or False, got {value!r}")
        return bool(value)
    if is_bool or (not hasattr(value, "__index__") and not hasattr(value, "__float__")):
        raise ValueError(f"Schedule: {channel}{where} must be a number, got {value!r}")
    if channel in ("speed", "delay"):
        if not hasattr(value, "__index__"):
            raise ValueError(f"Schedule: {channel}{where} must be an integer, got {value!r}")
        value = int(value)
        low = 1 if channel == "speed" else 0
        if value < low:
            raise ValueError(f"Schedule: {channel}{where} must be >= {low}, got {value}")
        return value
    value = float(value)
    if not (value >= 0.0 and value != float("inf")):  # also rejects NaN
        raise ValueError(f"Schedule: {channel}{where} must be a finite number >= 0, got {value}")
    return value


def parse_runs(channel: str, spec: Any) -> tuple[Run, ...]:
    """Parse one channel argument into canonical runs (see the module docstring)."""
    if spec is None:
        return ()
    if isinstance(spec, (str, bytes, Mapping)):
        raise ValueError(f"Schedule: {channel} must be a number or a list of per-step values, "
                         f"got {spec!r}")
    if not isinstance(spec, Iterable):
        values, hold = [check_value(channel, spec, "")], True
    else:
        values = list(spec)
        hold = bool(values) and values[-1] is Ellipsis
        if hold:
            values.pop()
            if not values:
                raise ValueError(f"Schedule: {channel}=[...] needs a value before the '...' "
                                 "(the value that holds for ever)")
        values = [check_value(channel, v, f"[{i}]") for i, v in enumerate(values)]
    runs: list[list[Any]] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return canonical(channel, [(v, n) for v, n in runs], hold)


def canonical(channel: str, runs: Sequence[Run], hold: bool) -> tuple[Run, ...]:
    """Merge equal neighbours; a held last run counts as one step held for ever; trailing
    nominal steps are dropped (they change nothing)."""
    merged: list[list[Any]] = []
    for v, n in runs:
        if merged and merged[-1][0] == v:
            merged[-1][1] = None if n is None or merged[-1][1] is None else merged[-1][1] + n
        else:
            merged.append([v, n])
    nominal = NOMINAL_SETTINGS[channel]
    if hold and merged:
        merged[-1][1] = None
    while merged and merged[-1][0] == nominal:
        merged.pop()
    return tuple((v, n) for v, n in merged)


def check_settings(settings: Mapping[str, Any], shape: str) -> dict[str, Any]:
    """The settings a shape (``Schedule.step``, ``.spike``, ...) was given, each value
    checked; none, or an unknown channel, is a ValueError naming the channels."""
    if not settings:
        raise ValueError(f"Schedule.{shape} needs at least one setting, e.g. speed=4; "
                         f"channels: {', '.join(CHANNELS)}")
    unknown = [c for c in settings if c not in CHANNELS]
    if unknown:
        raise ValueError(f"Schedule.{shape}: unknown channel(s) {', '.join(map(repr, unknown))}; "
                         f"channels: {', '.join(CHANNELS)}")
    return {c: check_value(c, v, "") for c, v in settings.items()}


def check_count(owner: str, name: str, value: Any, *, minimum: int) -> int:
    """``value`` as an int of at least ``minimum``; an error names ``owner: name``."""
    return integer(f"{owner}: {name}", value, minimum=minimum)
