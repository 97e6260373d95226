"""Scenarios: named perturbations with their parameters, and the registry of them.

>>> from pytest_rlaudit import scenarios
>>> scenarios.get("jitter")
Scenario('jitter', deployment, Jitter(base=2, jitter=1))
>>> scenarios.DEPLOYMENT
('jitter', 'delay', 'spike', 'obs_noise')
>>> scenarios.get("jitter").with_params(jitter=2).params["jitter"]
2

The six names of the established timing audit (deltatau-audit: ``nominal``,
``speed_5x``, ``jitter``, ``delay``, ``spike``, ``obs_noise``) keep its parameters, with
one difference: ``obs_noise`` here is 0.1 of each element's spread in the nominal
episodes, where the peer's is 0.1 in raw units (``with_params(scale="absolute")`` is the
peer's), so that it means the same on every env. The peer also samples its agents'
actions and leaves its scenarios unpaired, so its numbers do not carry over as they are;
the extras (``action_noise``, ``sticky_actions``, ``action_delay``, ``dropped_obs``,
``dynamics``, ``push``) are audited when asked for by name.

The :class:`Scenario` class itself is in :mod:`pytest_rlaudit.world.scenario`; it is
re-exported here, so ``pytest_rlaudit.world.scenarios.Scenario`` (and pickles that name
it) still work.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

import gymnasium as gym

from ..errors import InvalidArgumentError, PerturbationError, RolloutError, UnknownScenarioError
from . import perturbations as P
from .scenario import Category, Scenario
from .schedules import Schedule

__all__ = [
    "Scenario",
    "Category",
    "NOMINAL",
    "DEPLOYMENT",
    "STRESS",
    "EXTRAS",
    "DEFAULT",
    "get",
    "check_unique",
    "names",
    "register",
    "resolve",
    "as_scenario",
    "check_applicable",
    "preset",
    "SEVERITIES",
    "noop_message",
]


_REGISTRY: dict[str, Scenario] = {}


def register(scenario: Scenario, *, replace: bool = False) -> Scenario:
    """Add ``scenario`` to the registry, so audits and markers can name it.

    >>> from pytest_rlaudit.perturbations import ObservationNoise
    >>> _ = register(Scenario("doc_noise", "custom", ObservationNoise, {"sigma": 0.5}))
    >>> get("doc_noise").params["sigma"]
    0.5
    >>> del _REGISTRY["doc_noise"]  # (this example's own: later tests read the registry)
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"register() takes a Scenario, got {type(scenario).__name__}")
    if scenario.name in _REGISTRY and not replace and _REGISTRY[scenario.name] != scenario:
        raise ValueError(
            f"a different scenario named {scenario.name!r} is already registered; "
            "pick another name or pass replace=True"
        )
    _REGISTRY[scenario.name] = scenario
    return scenario


def names() -> tuple[str, ...]:
    """The registered scenario names, in registration order."""
    return tuple(_REGISTRY)


def get(name: str) -> Scenario:
    """The registered scenario called ``name``; an unknown name lists the known ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownScenarioError(
            f"unknown scenario {name!r}.{hint} Known scenarios: {', '.join(_REGISTRY)}. "
            "Register your own with pytest_rlaudit.scenarios.register(Scenario(...))."
        ) from None


ScenarioLike = str | Scenario | Schedule


def noop_message(scenario: Scenario) -> str:
    """Why ``scenario`` (whose :attr:`~Scenario.noop` is set) measures nothing, and what
    to give instead: its registered value where it has one.

    >>> print(noop_message(get("delay").with_params(steps=0)))  # doctest: +NORMALIZE_WHITESPACE
    scenario 'delay' with steps=0 leaves the env unperturbed, so it would pass as the
    nominal does: give steps a value that perturbs (default: steps=1)
    """
    values = scenario.noop or {}
    given = ", ".join(f"{k}={v!r}" for k, v in values.items())
    known = _REGISTRY.get(scenario.name)
    defaults = [f"{k}={known.params[k]!r}" for k in values
                if known is not None and k in known.params and known.params[k] != values[k]]
    hint = f" (default: {', '.join(defaults)})" if defaults else ""
    return (f"scenario {scenario.name!r} with {given} leaves the env unperturbed, so it would "
            f"pass as the nominal does: give {' or '.join(values)} a value that perturbs{hint}")


def as_scenario(item: ScenarioLike) -> Scenario:
    """A scenario name, Scenario or Schedule as a Scenario (a Schedule is named
    ``"schedule"``; see :meth:`Schedule.as_scenario`).

    >>> as_scenario(Schedule(speed=2)).perturbation.__name__
    'Scheduled'
    """
    if isinstance(item, Scenario):
        return item
    if isinstance(item, Schedule):
        return Scenario.from_schedule(item)
    if isinstance(item, str):
        return get(item)
    raise TypeError(f"a scenario is a registered name, a Scenario or a Schedule, got {item!r} "
                    f"({type(item).__name__})")


def resolve(items: ScenarioLike | Iterable[ScenarioLike] | None) -> tuple[Scenario, ...]:
    """Scenario names, Scenarios or Schedules (``None``: the default suite) as Scenarios.

    >>> [s.name for s in resolve(["delay", "spike"])]
    ['delay', 'spike']
    """
    if items is None:
        items = DEFAULT
    if isinstance(items, (str, Scenario, Schedule)):
        items = [items]
    return check_unique([as_scenario(item) for item in items])


def check_unique(scenarios: Iterable[Scenario]) -> tuple[Scenario, ...]:
    """``scenarios`` if no name appears twice (results are keyed by name, so a repeat would
    run twice and report once), else an :class:`~pytest_rlaudit.errors.InvalidArgumentError`.

    >>> check_unique(resolve(["jitter"]) * 2)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.InvalidArgumentError: scenario 'jitter' is listed twice; each name may appear once.
    """
    out = tuple(scenarios)
    seen: set[str] = set()
    for s in out:
        if s.name in seen:
            hint = (" Name each schedule: schedule.as_scenario('a_name')."
                    if s.schedule is not None else "")
            raise InvalidArgumentError(f"scenario {s.name!r} is listed twice; each name may "
                                       f"appear once.{hint}")
        seen.add(s.name)
    return out


def check_applicable(scenarios: Iterable[Scenario], make_env: Callable[[], gym.Env]) -> None:
    """Raise a :class:`~pytest_rlaudit.errors.PerturbationError` now if a scenario cannot
    wrap this env, before any episode runs (the runner would only find out when it first
    wraps the scenario's env, after the nominal episodes).

    Each scenario wraps one fresh probe env (``make_env()``), closed afterwards: a
    perturbation may change its env (``dynamics`` shifts the model), so probes are not
    shared. A scenario still to be calibrated on the nominal episodes is probed in raw
    units. Every scenario that fails is named, with its wrapper's cause and fix.

    >>> import gymnasium as gym
    >>> check_applicable(resolve(["jitter", "dynamics"]), lambda: gym.make("CartPole-v1"))
    >>> check_applicable(resolve(["dynamics"]), lambda: gym.make("FrozenLake-v1"))
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PerturbationError: scenario 'dynamics' cannot run on this env: ...
    """
    problems = []
    for scenario in scenarios:
        if scenario.perturbation is None:
            continue
        probe = scenario.calibrated(None) if scenario.needs_spread else scenario
        try:
            env = make_env()
        except RolloutError as exc:  # the env's factory failed, making this scenario's probe
            exc.scenario = exc.scenario or scenario.name
            raise
        try:
            env = probe.wrap(env)
        except PerturbationError as exc:
            named = str(exc).startswith(f"scenario {scenario.name!r}")  # says so itself
            problems.append(str(exc) if named else
                            f"scenario {scenario.name!r} cannot run on this env: {exc}")
        finally:
            env.close()
    if problems:
        raise PerturbationError("; ".join(problems))


NOMINAL = register(Scenario("nominal", "nominal", None, {}, "the env as made"))
register(Scenario("speed_5x", "stress", P.Speed, {"k": 5},
                  "every action held for 5 env steps (a 5x slower controller)"))
register(Scenario("jitter", "deployment", P.Jitter, {"base": 2, "jitter": 1},
                  "control period drawn from {1, 2, 3} env steps each agent step"))
register(Scenario("delay", "deployment", P.ObservationDelay, {"steps": 1},
                  "the agent sees the observation of one step earlier"))
def _spike_timeline(start: int = 20, duration: int = 20, k: int = 5) -> Schedule:
    return Schedule.spike(at=start, duration=duration, speed=k)


register(Scenario("spike", "deployment", P.spike, {"start": 20, "duration": 20, "k": 5},
                  "speed 5 for agent steps 20-39, else 1 (a latency spike)", _spike_timeline))
register(Scenario("obs_noise", "deployment", P.ObservationNoise,
                  {"sigma": 0.1, "scale": "relative"},
                  "Gaussian noise on every step observation, std 0.1 x each element's spread "
                  "in the nominal episodes (scale='absolute': 0.1 in raw units)"))
register(Scenario("action_noise", "deployment", P.ActionNoise, {"sigma": 0.1},
                  "noisy actuators: Gaussian noise on Box actions, 10% random Discrete ones"))
register(Scenario("sticky_actions", "deployment", P.StickyAction, {"p": 0.25},
                  "with probability 0.25 the previous action is repeated (on Atari: at every "
                  "emulator frame, as ALE's sticky actions)"))
register(Scenario("action_delay", "deployment", P.ActionDelay, {"steps": 1},
                  "the env executes the action of one step earlier"))
register(Scenario("dropped_obs", "deployment", P.DroppedObservation, {"p": 0.1},
                  "with probability 0.1 a frame is dropped and the observation stays frozen"))
register(Scenario("dynamics", "stress", P.Dynamics, {},
                  "a heavier robot: the env's default physical parameter shift"))
# Stress, not deployment: a deployed robot is bumped now and then, but a shove of half its
# weight every 50 steps is a margin test of our choosing (as the dynamics shift is), and
# the deployment score stays about timing and sensing.
register(Scenario("push", "stress", P.Push, {"strength": 0.5, "duration": 5, "interval": 50},
                  "a shove of half the robot's weight for 5 env steps every 50, in a random "
                  "horizontal direction"))
# Worst case of obs_noise's size (epsilon = its sigma, in the same calibrated units): the
# gap between the two is what a worst-case sensor error costs beyond a typical one. It
# needs a torch-backed agent, so it is in no suite (not even EXTRAS): audited when named.
register(Scenario("adversarial_obs", "stress", P.AdversarialObservation,
                  {"epsilon": 0.1, "scale": "relative"},
                  "the worst observation within 0.1 x each element's spread of the true one "
                  "(gradient attack on a torch-backed agent)"))

#: The deployment suite: timing and sensing disturbances a deployed agent meets.
DEPLOYMENT: tuple[str, ...] = ("jitter", "delay", "spike", "obs_noise")
#: The stress suite: disturbances beyond normal deployment, reported to show margins.
STRESS: tuple[str, ...] = ("speed_5x",)
#: Registered extras, audited only when named.
EXTRAS: tuple[str, ...] = ("action_noise", "sticky_actions", "action_delay", "dropped_obs",
                           "dynamics", "push")
#: What ``audit()`` runs when no scenarios are given.
DEFAULT: tuple[str, ...] = DEPLOYMENT + STRESS

#: Severity levels of :func:`preset`, mildest first.
SEVERITIES: tuple[str, ...] = ("mild", "moderate", "severe")

# Each deployment scenario's parameters per severity. "mild" is the default suite (the
# established timing audit's sizes). The harsher levels follow the real-world RL suite's
# combined challenges (Dulac-Arnold et al. 2021, realworldrl_suite combined_challenge
# "easy" / "medium" / "hard") where it has a counterpart:
# - obs_noise sigma 0.1 / 0.3 / 1.0: its Gaussian observation noise of the three levels,
#   here as fractions of each element's spread (its observations are of unit scale);
# - delay 1 / 3 / 6 steps: its observation delays of easy (3) and medium (6); its hard 9
#   steps is left out, several tenths of a second at gymnasium's control rates;
# - jitter up to 3 / 4 / 5 env steps per action: its action repetition (each action for
#   1, 2, 3 extra steps) on top of the nominal base period of 2;
# - spike: no counterpart; the latency spike lasts 20 / 30 / 40 agent steps at speed 5.
# speed_5x, the stress scenario, keeps k=5 at every level (its name says it).
_LEVELS: dict[str, dict[str, dict[str, Any]]] = {
    "mild": {},
    "moderate": {"jitter": {"base": 2, "jitter": 2}, "delay": {"steps": 3},
                 "spike": {"duration": 30}, "obs_noise": {"sigma": 0.3}},
    "severe": {"jitter": {"base": 3, "jitter": 2}, "delay": {"steps": 6},
               "spike": {"duration": 40}, "obs_noise": {"sigma": 1.0}},
}


def preset(severity: str) -> tuple[Scenario, ...]:
    """The default suite at a severity: ``"mild"`` (the default suite itself),
    ``"moderate"`` or ``"severe"`` (sizes after the real-world RL suite's combined
    challenges; the origin of each is in this module's ``_LEVELS`` comment).

    >>> [s.params.get("steps") for s in preset("moderate") if s.name == "delay"]
    [3]
    >>> preset("extreme")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.UnknownScenarioError: unknown severity 'extreme'; severities: mild, moderate, severe
    """
    if severity not in _LEVELS:
        raise UnknownScenarioError(
            f"unknown severity {severity!r}; severities: {', '.join(SEVERITIES)}")
    changes = _LEVELS[severity]
    return tuple(get(name).with_params(**changes.get(name, {})) for name in DEFAULT)
