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
gymnasium nor numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._checks import integer

__all__ = ["Schedule", "CHANNELS", "NOMINAL_SETTINGS"]

#: The channels of a schedule, in the order the repr and ``describe()`` use.
CHANNELS: tuple[str, ...] = ("speed", "delay", "obs_noise", "action_noise", "dropped")
#: The nominal value of each channel: what a schedule reverts to.
NOMINAL_SETTINGS: Mapping[str, Any] = {
    "speed": 1, "delay": 0, "obs_noise": 0.0, "action_noise": 0.0, "dropped": False}

_LABELS = {"speed": "speed", "delay": "observation delay", "obs_noise": "observation noise",
           "action_noise": "action noise"}

Run = tuple[Any, int | None]  # (value, count); count None: for ever (only the last run)


def _check_value(channel: str, value: Any, where: str) -> Any:
    """The channel value as a plain int/float/bool, or a ValueError naming the fix."""
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


def _runs(channel: str, spec: Any) -> tuple[Run, ...]:
    """Parse one channel argument into canonical runs (see the module docstring)."""
    if spec is None:
        return ()
    if isinstance(spec, (str, bytes, Mapping)):
        raise ValueError(f"Schedule: {channel} must be a number or a list of per-step values, "
                         f"got {spec!r}")
    if not isinstance(spec, Iterable):
        values, hold = [_check_value(channel, spec, "")], True
    else:
        values = list(spec)
        hold = bool(values) and values[-1] is Ellipsis
        if hold:
            values.pop()
            if not values:
                raise ValueError(f"Schedule: {channel}=[...] needs a value before the '...' "
                                 "(the value that holds for ever)")
        values = [_check_value(channel, v, f"[{i}]") for i, v in enumerate(values)]
    runs: list[list[Any]] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return _canonical(channel, [(v, n) for v, n in runs], hold)


def _canonical(channel: str, runs: Sequence[Run], hold: bool) -> tuple[Run, ...]:
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


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


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
        runs = {c: _runs(c, given[c]) for c in CHANNELS}
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
                length = sum(n for _, n in rs)
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
        return cls(**_settings(settings, "constant"))

    @classmethod
    def step(cls, at: int, **settings: Any) -> Schedule:
        """Nominal until agent step ``at``, then the settings for ever.

        >>> Schedule.step(at=10, delay=2)
        Schedule(delay=[0]*10 + [2, ...])
        """
        at = _count("step", "at", at, minimum=0)
        return cls(**{c: [NOMINAL_SETTINGS[c]] * at + [v, ...]
                      for c, v in _settings(settings, "step").items()})

    @classmethod
    def spike(cls, at: int, duration: int, **settings: Any) -> Schedule:
        """The settings for ``duration`` agent steps from step ``at``, nominal otherwise.

        >>> Schedule.spike(at=20, duration=20, speed=5)  # the 'spike' scenario
        Schedule(speed=[1]*20 + [5]*20)
        """
        at = _count("spike", "at", at, minimum=0)
        duration = _count("spike", "duration", duration, minimum=1)
        return cls(**{c: [NOMINAL_SETTINGS[c]] * at + [v] * duration
                      for c, v in _settings(settings, "spike").items()})

    @classmethod
    def ramp(cls, at: int, duration: int, **settings: Any) -> Schedule:
        """From nominal at step ``at`` linearly to the settings over ``duration`` steps
        (reached at the last one), then held. Integer channels are rounded.

        >>> Schedule.ramp(at=5, duration=4, speed=5)
        Schedule(speed=[1]*5 + [2, 3, 4, 5, ...])
        """
        at = _count("ramp", "at", at, minimum=0)
        duration = _count("ramp", "duration", duration, minimum=1)
        out = {}
        for c, v in _settings(settings, "ramp").items():
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
        period = _count("periodic", "period", period, minimum=1)
        at = _count("periodic", "at", at, minimum=0)
        duration = _count("periodic", "duration", duration, minimum=1)
        if at + duration > period:
            raise ValueError(f"Schedule.periodic: at + duration ({at + duration}) must fit in "
                             f"the period ({period})")
        return cls(**{c: [NOMINAL_SETTINGS[c]] * at + [v] * duration
                      for c, v in _settings(settings, "periodic").items()}, period=period)

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
        parts = [f"{c}={_channel_expr(self._runs[c])}" for c in self.channels]
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
                    count = _count("schedule document", f"{c}[{i}] count", count, minimum=1)
                parsed.append((_check_value(c, value, f"[{i}]"), count))
            hold = bool(parsed) and parsed[-1][1] is None
            runs[c] = _canonical(c, parsed, hold)
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
        clauses = []
        for c in self.channels:
            clauses += [_block_words(c, start, values, counts)
                        for start, values, counts in _blocks(c, self._runs[c])]
        if not clauses:
            return "nothing changes (nominal)"
        text = " and ".join(clauses)
        if self.period is not None:
            text += f", repeating every {self.period} steps"
        return text

    def as_scenario(self, name: str = "schedule", category: str = "custom") -> Any:
        """``Scenario.from_schedule(self, name, category)``: this schedule as a scenario.

        >>> Schedule(speed=3).as_scenario("slow").name
        'slow'
        """
        from .scenarios import Scenario  # a schedule is data: scenarios build on it

        return Scenario.from_schedule(self, name, category)


def _settings(settings: Mapping[str, Any], shape: str) -> dict[str, Any]:
    if not settings:
        raise ValueError(f"Schedule.{shape} needs at least one setting, e.g. speed=4; "
                         f"channels: {', '.join(CHANNELS)}")
    unknown = [c for c in settings if c not in CHANNELS]
    if unknown:
        raise ValueError(f"Schedule.{shape}: unknown channel(s) {', '.join(map(repr, unknown))}; "
                         f"channels: {', '.join(CHANNELS)}")
    return {c: _check_value(c, v, "") for c, v in settings.items()}


def _count(owner: str, name: str, value: Any, *, minimum: int) -> int:
    return integer(f"{owner}: {name}", value, minimum=minimum)


def _channel_expr(runs: tuple[Run, ...]) -> str:
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


def _blocks(channel: str, runs: tuple[Run, ...]) -> list[tuple[int, list[Any], list[int | None]]]:
    """Maximal stretches of non-nominal runs: (start step, values, counts)."""
    out: list[tuple[int, list[Any], list[int | None]]] = []
    t, current = 0, None
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
