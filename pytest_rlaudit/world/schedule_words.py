"""A :class:`~pytest_rlaudit.world.schedules.Schedule` in words: the expression its repr
writes for each channel, and the plain-language clauses of ``Schedule.describe()``.

Both read a channel's canonical runs (``(value, count)``, a last count of ``None`` held
for ever; see :mod:`pytest_rlaudit.world.schedule_channels`):

>>> channel_expr(((1, 20), (5, 20)))
'[1]*20 + [5]*20'
>>> channel_expr(((1, 5), (2, 1), (3, None)))
'[1]*5 + [2, 3, ...]'
>>> describe({"speed": ((1, 20), (5, 20))}, period=None)
'speed goes 1 -> 5 for 20 steps at step 20'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .schedule_channels import CHANNELS, NOMINAL_SETTINGS, Run

__all__ = ["channel_expr", "describe"]

_LABELS = {"speed": "speed", "delay": "observation delay", "obs_noise": "observation noise",
           "action_noise": "action noise"}

#: A maximal stretch of non-nominal runs: (start step, values, counts).
Block = tuple[int, list[Any], list[int | None]]


def channel_expr(runs: tuple[Run, ...]) -> str:
    """``[1]*20 + [2, 3] + [5, ...]``, or a bare number for a value held throughout."""
    if len(runs) == 1 and runs[0][1] is None:
        return repr(runs[0][0])
    terms: list[str] = []
    singles: list[str] = []
    for v, n in runs:
        if n == 1 or n is None:
            singles.append(repr(v))
            if n is None:
                singles.append("...")
            continue
        if singles:
            terms.append(f"[{', '.join(singles)}]")
            singles = []
        terms.append(f"[{v!r}]*{n}")
    if singles:
        terms.append(f"[{', '.join(singles)}]")
    return " + ".join(terms)


def describe(runs: Mapping[str, tuple[Run, ...]], period: int | None) -> str:
    """The timeline of ``runs`` (by channel; a channel left out is nominal) in plain
    words, one clause per disturbance, in ``CHANNELS`` order."""
    clauses = []
    for c in CHANNELS:
        clauses += [_block_words(c, start, values, counts)
                    for start, values, counts in _blocks(c, runs.get(c, ()))]
    if not clauses:
        return "nothing changes (nominal)"
    text = " and ".join(clauses)
    if period is not None:
        text += f", repeating every {period} steps"
    return text


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _blocks(channel: str, runs: tuple[Run, ...]) -> list[Block]:
    """Maximal stretches of non-nominal runs: (start step, values, counts)."""
    out: list[Block] = []
    t = 0
    current: Block | None = None
    for v, n in runs:
        if v == NOMINAL_SETTINGS[channel]:
            current = None
        else:
            if current is None:
                current = (t, [], [])
                out.append(current)
            current[1].append(v)
            current[2].append(n)
        t += n or 0
    return out


def _block_words(channel: str, start: int, values: list[Any], counts: list[int | None]) -> str:
    forever = counts[-1] is None
    steps = sum(n for n in counts if n is not None)
    if forever and start == 0 and len(values) == 1:
        if channel == "dropped":
            return "observations never arrive after reset"
        return f"{_LABELS[channel]} is {_fmt(values[0])} throughout"
    if forever:
        when = f"at step {start} and stays" if len(values) == 1 else f"from step {start} on"
    elif len(values) == 1:
        when = f"for {steps} step{'s' if steps != 1 else ''} at step {start}"
    else:
        when = f"over steps {start}-{start + steps - 1}"
    if channel == "dropped":
        if forever:
            return f"observations stop arriving at step {start}"
        return f"observations are dropped {when}"
    path = " -> ".join(_fmt(v) for v in [NOMINAL_SETTINGS[channel], *values])
    return f"{_LABELS[channel]} goes {path} {when}"
