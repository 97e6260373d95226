"""``Schedule``: a per-agent-step timeline of perturbation settings.

A schedule says, for every agent step ``t`` (0 is the first step after reset), the
speed ``k`` (the action is held for ``k`` env steps), the observation delay (in agent
steps), the observation-noise and action-noise sigmas, and whether the observation is
dropped. Each channel is given as

* nothing: nominal throughout (speed 1, no delay, no noise, nothing dropped);
* a number: that value throughout (``speed=3``);
* a list: one value per agent step, nominal after the list ends
  (``speed=[1]*20 + [5]*20``: a latency spike at agent steps 20-39);
* a list ending in ``...``: the last value holds for ever (``speed=[1]*20 + [4, ...]``).

``period=P`` repeats the first ``P`` steps for ever. The repr collapses runs and is a
valid expression, so a falsifying example can be pasted back into a test:

>>> s = Schedule.spike(at=20, duration=3, speed=4)
>>> s
Schedule(speed=[1]*20 + [4]*3)
>>> s.describe()
'speed goes 1 -> 4 for 3 steps at step 20'
>>> [s.settings(t)["speed"] for t in (19, 20, 22, 23)]
[1, 4, 4, 1]
>>> Schedule.from_dict(s.to_dict()) == s
True

A schedule runs through :class:`pytest_rlaudit.perturbations.Scheduled` and goes
wherever a scenario does: ``audit(agent, env, [schedule])``, ``assert_robust(agent,
env, schedule, ...)``. The ``spike`` scenario is a schedule
(``scenarios.get("spike").schedule``). This module is plain data: it imports neither
gymnasium nor numpy. How a channel's argument is read is in
:mod:`~pytest_rlaudit.world.schedule_channels`; the repr's expressions and
``describe()``'s words are in :mod:`~pytest_rlaudit.world.schedule_words`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import schedule_words as words
from .schedule_channels import (
    CHANNELS,
    NOMINAL_SETTINGS,
    Run,
    canonical,
    check_count,
    check_settings,
    check_value,
    parse_runs,
)

__all__ = ["Schedule", "CHANNELS", "NOMINAL_SETTINGS"]

#: ``Scenario.from_schedule``, set by :mod:`.scenario` as it is imported: a schedule is
#: data that scenarios build on, so this module never imports that one (no circle through
#: the timing wrappers, which read schedules); :meth:`Schedule.as_scenario` calls it.
scenario_of: Callable[..., Any] | None = None


class Schedule:
    """A per-agent-step timeline of perturbation settings; see the module docstring.

    Equal timelines are equal and hash alike however they were written:

    >>> Schedule(speed=[1, 1, 3, 3, 1, 1]) == Schedule(speed=[1]*2 + [3]*2)
    True
    >>> Schedule(speed=2, obs_noise=[0.0]*5 + [0.1]*5)
    Schedule(speed=2, obs_noise=[0.0]*5 + [0.1]*5)
    """

    __slots__ = ("_key", "_runs", "period")

    def __init__(self, speed: Any = None, delay: Any = None, obs_noise: Any = None,
                 action_noise: Any = None, dropped: Any = None, *,
                 period: int | None = None) -> None:
        given = {"speed": speed, "delay": delay, "obs_noise": obs_noise,
                 "action_noise": action_noise, "dropped": dropped}
        runs = {c: parse_runs(c, given[c]) for c in CHANNELS}
        self._init(runs, period)

    def _init(self, runs: dict[str, tuple[Run, ...]], period: int | None) -> None:
        if period is not None:
            if isinstance(period, bool) or not hasattr(period, "__index__") or int(period) < 1:
                raise ValueError(f"Schedule: period must be an integer >= 1, got {period!r}")
            period = int(period)
            for c, rs in runs.items():
                if rs and rs[-1][1] is None:
                    raise ValueError(f"Schedule: {c} holds its last value for ever ('...'), "
                                     "which a periodic schedule cannot; drop the '...' or "
                                     "the period")
                length = sum(n for _, n in rs if n is not None)
                if length > period:
                    raise ValueError(f"Schedule: {c} has {length} steps, more than the period "
                                     f"({period}); a period repeats the first {period} steps")
            if not any(runs.values()):
                period = None  # a nominal schedule has no period to speak of
        self._runs = {c: rs for c, rs in runs.items() if rs}
        self.period = period
        self._key = (tuple(sorted(self._runs.items())), period)

    # ----------------------------------------------------------------- shapes

    @classmethod
    def constant(cls, **settings: Any) -> Schedule:
        """The given settings throughout: ``Schedule.constant(speed=3)``."""
        return cls(**check_settings(settings, "constant"))

    @classmethod
    def step(cls, at: int, **settings: Any) -> Schedule:
        """Nominal until agent step ``at``, then the settings for ever.

        >>> Schedule.step(at=10, delay=2)
        Schedule(delay=[0]*10 + [2, ...])
        """
        at = check_count("step", "at", at, minimum=0)
        channels: dict[str, Any] = {c: [NOMINAL_SETTINGS[c]] * at + [v, ...]
                                    for c, v in check_settings(settings, "step").items()}
        return cls(**channels)

    @classmethod
    def spike(cls, at: int, duration: int, **settings: Any) -> Schedule:
        """The settings for ``duration`` agent steps from step ``at``, nominal otherwise.

        >>> Schedule.spike(at=20, duration=20, speed=5)  # the 'spike' scenario
        Schedule(speed=[1]*20 + [5]*20)
        """
        at = check_count("spike", "at", at, minimum=0)
        duration = check_count("spike", "duration", duration, minimum=1)
        channels: dict[str, Any] = {c: [NOMINAL_SETTINGS[c]] * at + [v] * duration
                                    for c, v in check_settings(settings, "spike").items()}
        return cls(**channels)

    @classmethod
    def ramp(cls, at: int, duration: int, **settings: Any) -> Schedule:
        """From nominal at step ``at`` linearly to the settings over ``duration`` steps
        (reached at the last one), then held. Integer channels are rounded.

        >>> Schedule.ramp(at=5, duration=4, speed=5)
        Schedule(speed=[1]*5 + [2, 3, 4, 5, ...])
        """
        at = check_count("ramp", "at", at, minimum=0)
        duration = check_count("ramp", "duration", duration, minimum=1)
        out: dict[str, Any] = {}
        for c, v in check_settings(settings, "ramp").items():
            if c == "dropped":
                raise ValueError("Schedule.ramp: dropped is on or off and cannot ramp; use "
                                 "Schedule.step(at=..., dropped=True)")
            base = NOMINAL_SETTINGS[c]
            steps = [base + (v - base) * (i + 1) / duration for i in range(duration)]
            if isinstance(base, int):
                steps = [int(s + 0.5) for s in steps]  # round half up, like a human would
            else:
                steps = [round(s, 12) for s in steps]
            out[c] = [base] * at + steps + [...]
        return cls(**out)

    @classmethod
    def periodic(cls, period: int, duration: int, at: int = 0, **settings: Any) -> Schedule:
        """The settings for ``duration`` steps from step ``at`` of every ``period`` steps.

        >>> Schedule.periodic(period=50, duration=5, speed=3)
        Schedule(speed=[3]*5, period=50)
        """
        period = check_count("periodic", "period", period, minimum=1)
        at = check_count("periodic", "at", at, minimum=0)
        duration = check_count("periodic", "duration", duration, minimum=1)
        if at + duration > period:
            raise ValueError(f"Schedule.periodic: at + duration ({at + duration}) must fit in "
                             f"the period ({period})")
        return cls(**{c: [NOMINAL_SETTINGS[c]] * at + [v] * duration
                      for c, v in check_settings(settings, "periodic").items()}, period=period)

    # ------------------------------------------------------------------ access

    @property
    def channels(self) -> tuple[str, ...]:
        """The channels that leave nominal somewhere, in ``CHANNELS`` order."""
        return tuple(c for c in CHANNELS if c in self._runs)

    @property
    def is_nominal(self) -> bool:
        return not self._runs

    def runs(self, channel: str) -> tuple[Run, ...]:
        """The channel's runs ``(value, count)``; a last count of None holds for ever."""
        if channel not in CHANNELS:
            raise ValueError(f"unknown schedule channel {channel!r}; channels: "
                             f"{', '.join(CHANNELS)}")
        return self._runs.get(channel, ())

    def horizon(self) -> int:
        """Agent steps until the settings stop changing (the period, for a periodic one)."""
        if self.period is not None:
            return self.period
        return max((sum(n or 1 for _, n in rs) for rs in self._runs.values()), default=0)

    def values(self, channel: str, steps: int) -> list[Any]:
        """The channel's value at agent steps ``0 .. steps-1``.

        >>> Schedule(delay=[0, 2]).values("delay", 4)
        [0, 2, 0, 0]
        """
        return [self.value(channel, t) for t in range(steps)]

    def value(self, channel: str, t: int) -> Any:
        """The channel's value at agent step ``t``."""
        runs = self.runs(channel)
        if self.period is not None:
            t %= self.period
        for v, n in runs:
            if n is None or t < n:
                return v
            t -= n
        return NOMINAL_SETTINGS[channel]

    def settings(self, t: int) -> dict[str, Any]:
        """Every channel's value at agent step ``t``."""
        return {c: self.value(c, t) for c in CHANNELS}

    def max_value(self, channel: str) -> Any:
        """The largest value the channel takes (its nominal value if it never leaves it)."""
        return max([NOMINAL_SETTINGS[channel], *(v for v, _ in self.runs(channel))])

    # ----------------------------------------------------------------- identity

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        parts = [f"{c}={words.channel_expr(self._runs[c])}" for c in self.channels]
        if self.period is not None:
            parts.append(f"period={self.period}")
        return f"Schedule({', '.join(parts)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis (and IPython) print through this: without it, a failing example made
        # by a strategy's .map() prints as the mapping call, not as this readable repr.
        printer.text(repr(self))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"speed": [[1, 20], [5, 20]], ...}``; a last count of null holds
        for ever; ``"period"`` only when periodic."""
        out: dict[str, Any] = {c: [[v, n] for v, n in self._runs[c]] for c in self.channels}
        if self.period is not None:
            out["period"] = self.period
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schedule:
        """The inverse of :meth:`to_dict`; a malformed document is a ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a schedule document is a JSON object, got {data!r}")
        unknown = sorted(set(data) - {*CHANNELS, "period"})
        if unknown:
            raise ValueError(f"schedule document: unknown key(s) {', '.join(unknown)}; "
                             f"known: {', '.join(CHANNELS)}, period")
        runs: dict[str, tuple[Run, ...]] = {}
        for c in CHANNELS:
            parsed: list[Run] = []
            for i, pair in enumerate(data.get(c) or ()):
                if not (isinstance(pair, Sequence) and len(pair) == 2):
                    raise ValueError(f"schedule document: {c}[{i}] must be [value, count], "
                                     f"got {pair!r}")
                value, count = pair
                last = i == len(data[c]) - 1
                if count is None and not last:
                    raise ValueError(f"schedule document: only the last run of {c} may hold "
                                     "for ever (count null)")
                if count is not None:
                    count = check_count("schedule document", f"{c}[{i}] count", count, minimum=1)
                parsed.append((check_value(c, value, f"[{i}]"), count))
            hold = bool(parsed) and parsed[-1][1] is None
            runs[c] = canonical(c, parsed, hold)
        schedule = cls.__new__(cls)
        schedule._init(runs, data.get("period"))
        return schedule

    # ---------------------------------------------------------------- in words

    def describe(self) -> str:
        """The timeline in plain words, one clause per disturbance.

        >>> Schedule.step(at=10, delay=2).describe()
        'observation delay goes 0 -> 2 at step 10 and stays'
        >>> Schedule(dropped=[False]*30 + [True]*2, obs_noise=0.05).describe()
        'observation noise is 0.05 throughout and observations are dropped for 2 steps at step 30'
        """
        return words.describe(self._runs, self.period)

    def as_scenario(self, name: str = "schedule", category: str = "custom") -> Any:
        """``Scenario.from_schedule(self, name, category)``: this schedule as a scenario.

        >>> Schedule(speed=3).as_scenario("slow").name
        'slow'
        """
        if scenario_of is None:  # only this module imported so far: bring the scenarios in
            importlib.import_module(__package__ + ".scenario")
        assert scenario_of is not None  # registered by that import
        return scenario_of(self, name, category)
