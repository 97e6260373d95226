"""Hypothesis strategies over perturbations: ``schedules()`` and ``scenarios()``.

A property test states that no disturbance in a family breaks the agent; hypothesis
searches the family and, on a failure, shrinks it to the smallest disturbance that
still breaks the agent::

    from hypothesis import given
    from pytest_rlaudit import assert_robust
    from pytest_rlaudit.strategies import audit_settings, schedules

    @audit_settings(max_examples=25)
    @given(schedule=schedules(max_steps=100))
    def test_survives_timing_disturbances(rl_agent, rl_env, schedule):
        assert_robust(rl_agent, rl_env, schedule, min_ratio=0.8, episodes=10)

A schedule is drawn as a short list of *events*, each one disturbance (a kind, a start
step, a duration and a magnitude level). Hypothesis shrinks lists by dropping elements
and integers toward their lower bound, so a failing schedule shrinks toward fewer
events, then shorter ones, then smaller magnitudes, then earlier starts; the empty list
is the nominal schedule. Magnitudes come from a grid (noise in steps of 0.05), so a falsifying
example reads ``Schedule(speed=[1]*20 + [4]*3)``, not ``sigma=0.3183...``.

Everything random in a schedule-driven rollout is derived from the audit seed, so the
test is a deterministic function of the drawn schedule, which hypothesis needs to
replay and shrink. This module imports hypothesis, an optional dependency
(``pip install 'pytest-rlaudit[hypothesis]'``); nothing else in the package does until
it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

try:
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import strategies as st
except ModuleNotFoundError as exc:  # an optional dependency
    if exc.name != "hypothesis":
        raise
    from .._optional import missing

    raise ImportError(missing("hypothesis", "pytest_rlaudit.strategies")) from exc  # the public name

from .._checks import integer, number
from . import scenarios as registry
from .scenarios import Scenario
from .schedules import CHANNELS, NOMINAL_SETTINGS, Schedule

__all__ = ["schedules", "scenarios", "audit_settings", "SCENARIO_RANGES"]

_NOISE_STEP = 0.05


def _grid(step: float, low: float, high: float) -> tuple[float, ...]:
    """``low, low+step, ..., high`` as short decimals (0.15, not 0.15000000000000002)."""
    n = round((high - low) / step)
    return tuple(round(low + i * step, 10) for i in range(n + 1))


#: Parameter values ``scenarios()`` draws for each built-in scenario, nominal first, so
#: shrinking moves toward the unperturbed env. Override per call with ``ranges=``.
SCENARIO_RANGES: dict[str, dict[str, Sequence[Any]]] = {
    "speed_5x": {"k": tuple(range(1, 9))},
    "jitter": {"base": (1, 2, 3, 4), "jitter": (0, 1, 2, 3)},
    "delay": {"steps": (0, 1, 2, 3, 4)},
    "spike": {"start": tuple(range(0, 101, 10)), "duration": (1, 2, 3, 5, 10, 20, 40),
              "k": tuple(range(1, 9))},
    "obs_noise": {"sigma": _grid(0.05, 0.0, 0.5)},
    "action_noise": {"sigma": _grid(0.05, 0.0, 0.3)},
    "sticky_actions": {"p": _grid(0.05, 0.0, 0.5)},
    "action_delay": {"steps": (0, 1, 2, 3)},
    "dropped_obs": {"p": _grid(0.05, 0.0, 0.5)},
}


def audit_settings(max_examples: int = 25, **kwargs: Any) -> settings:
    """Hypothesis settings for property tests over audits (use as a decorator).

    An example runs whole episodes, far beyond hypothesis' 200 ms deadline, so the
    deadline is off and the too-slow health check is suppressed; ``max_examples``
    defaults to 25 (each example is an audit). The *explain* phase is left out: after a
    failure it traces every line the shrinking examples run (``sys.settrace`` before
    Python 3.12), which makes rollouts 4-5x slower. Other keyword arguments pass through
    to ``hypothesis.settings`` (e.g. ``derandomize=True`` for the same examples every run).

    >>> audit_settings().deadline is None
    True
    >>> Phase.explain in audit_settings().phases
    False
    """
    suppress = [HealthCheck.too_slow, *kwargs.pop("suppress_health_check", ())]
    phases = kwargs.pop("phases", [p for p in Phase if p is not Phase.explain])
    return settings(max_examples=max_examples, deadline=kwargs.pop("deadline", None),
                    suppress_health_check=suppress, phases=phases, **kwargs)


def _positive_int(name: str, value: Any, minimum: int) -> int:
    return integer(f"schedules(): {name}", value, minimum=minimum)


def schedules(
    *,
    max_steps: int = 100,
    speeds: Iterable[int] = (2, 3, 4, 5),
    max_delay: int = 3,
    max_noise: float = 0.5,
    kinds: Iterable[str] = CHANNELS,
    max_events: int = 3,
) -> st.SearchStrategy[Schedule]:
    """Schedules of up to ``max_events`` disturbances within the first ``max_steps`` agent steps.

    ``kinds``: the channels to disturb (``speed``, ``delay``, ``obs_noise``,
    ``action_noise``, ``dropped``). ``speeds``: the speeds a slowdown may take (1 is
    nominal and ignored); ``max_delay``: the largest observation delay in agent steps;
    ``max_noise``: the largest noise sigma (drawn in steps of 0.05; for Discrete actions
    action noise is the probability of a random action). Overlapping events of one kind
    take the larger value. Shrinks toward the nominal schedule; see the module docstring.

    >>> from hypothesis import find
    >>> find(schedules(kinds=["speed"]), lambda s: s.max_value("speed") >= 4)
    Schedule(speed=[4])
    """
    # The nested strategy and builder close over the validated bounds below, hence the length.
    max_steps = _positive_int("max_steps", max_steps, 1)
    max_delay = _positive_int("max_delay", max_delay, 0)
    max_events = _positive_int("max_events", max_events, 1)
    kinds = tuple(kinds)
    unknown = [k for k in kinds if k not in CHANNELS]
    if unknown or not kinds:
        raise ValueError(f"schedules(): kinds must name channels among {', '.join(CHANNELS)}, "
                         f"got {list(kinds)!r}")
    speed_levels = sorted({_positive_int("speeds", k, 1) for k in speeds} - {1})
    max_noise = number("schedules(): max_noise", max_noise, low=0)
    steps = int(max_noise / _NOISE_STEP + 1e-9)
    noise_levels = [round(i * _NOISE_STEP, 10) for i in range(1, steps + 1)] or (
        [float(max_noise)] if max_noise > 0 else [])
    levels: dict[str, list[Any]] = {
        "speed": speed_levels,
        "delay": list(range(1, max_delay + 1)),
        "obs_noise": noise_levels,
        "action_noise": noise_levels,
        "dropped": [True],
    }
    usable = [k for k in kinds if levels[k]]
    if not usable:
        raise ValueError("schedules(): nothing to draw: every kind asked for has no "
                         "non-nominal value (speeds only 1, max_delay 0 or max_noise 0)")

    @st.composite
    def event(draw: Callable[..., Any]) -> tuple[str, int, int, Any]:
        # Hypothesis minimises earlier draws first: duration before magnitude before
        # start, so a failure shrinks to the shortest, then the smallest disturbance.
        kind = draw(st.sampled_from(usable))
        duration = draw(st.integers(1, max_steps))
        value = draw(st.sampled_from(levels[kind]))  # smallest first: shrinks to it
        start = draw(st.integers(0, max_steps - duration))
        return kind, start, duration, value

    def build(events: list[tuple[str, int, int, Any]]) -> Schedule:
        timelines: dict[str, Any] = {}  # channel: its per-step list (keywords of Schedule)
        for kind, start, duration, value in events:
            line = timelines.setdefault(kind, [NOMINAL_SETTINGS[kind]] * max_steps)
            for t in range(start, start + duration):
                line[t] = max(line[t], value)
        return Schedule(**timelines)

    return st.lists(event(), max_size=max_events).map(build)


def scenarios(
    names: Iterable[str] | None = None,
    *,
    ranges: Mapping[str, Mapping[str, Sequence[Any] | st.SearchStrategy[Any]]] | None = None,
) -> st.SearchStrategy[Scenario]:
    """Registered scenarios with parameters drawn from ranges (see ``SCENARIO_RANGES``).

    ``names`` defaults to every registered scenario but nominal and ``adversarial_obs``
    (which needs a torch-backed agent; name it to draw it). ``ranges`` overrides or
    adds the values of a scenario's parameters: a sequence (drawn from, shrinking to its
    first element: put the mildest first) or a hypothesis strategy. A scenario without
    ranges keeps its registered parameters.

    >>> from hypothesis import find
    >>> find(scenarios(["obs_noise"]), lambda s: s.params["sigma"] >= 0.2).params
    mappingproxy({'sigma': 0.2, 'scale': 'relative'})
    """
    chosen = [n for n in (registry.names() if names is None else names)
              if n != registry.NOMINAL.name and (names is not None or n != "adversarial_obs")]
    for name in chosen:
        registry.get(name)  # an unknown name fails here, with suggestions
    if not chosen:
        raise ValueError("scenarios(): no scenarios to draw from")
    table: dict[str, dict[str, Any]] = {n: dict(SCENARIO_RANGES.get(n, {})) for n in chosen}
    for name, params in (ranges or {}).items():
        if name not in table:
            raise ValueError(f"scenarios(): ranges names {name!r}, which is not drawn from "
                             f"({', '.join(chosen)})")
        registry.get(name).check_names(params)  # unknown names fail here
        table[name].update(params)

    def params_of(name: str) -> st.SearchStrategy[Scenario]:
        scenario = registry.get(name)
        drawn = {p: v if isinstance(v, st.SearchStrategy) else st.sampled_from(list(v))
                 for p, v in table[name].items()}
        return st.fixed_dictionaries(drawn).map(lambda p: scenario.with_params(**p))

    return st.sampled_from(chosen).flatmap(params_of)
