"""Assertion helpers for ordinary unit tests: ``assert_robust`` and ``RobustnessError``.

>>> import numpy as np
>>> from pytest_rlaudit import assert_robust
>>> def controller(obs):
...     return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
>>> assert_robust(controller, "CartPole-v1", "delay", min_ratio=0.9, episodes=5).rating
'PASS'
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .._capture import notify, shared_cache
from .._checks import number
from ..auditing.engine import Engine
from ..auditing.outcomes import ScenarioResult
from ..auditing.records import Gate
from ..auditing.reference import reference_score
from ..auditing.settings import AuditSettings, check_episodes
from ..errors import RobustnessError
from ..rollout.calls import CALL_TIMEOUT
from ..rollout.runner import DEFAULT_MAX_STEPS
from ..stats import (
    DEFAULT_THRESHOLDS,
    MODES,
    RATINGS,
    Thresholds,
    check_threshold,
    rating_floor,
    verdict,
)
from ..world import scenarios as registry
from ..world.agents import Policy
from ..world.envs import AuditEnv, EnvLike
from ..world.scenarios import NOMINAL, Scenario, ScenarioLike
from .messages import diagnosis_lines, failure_message, scenario_expr

__all__ = ["RobustnessError", "RobustnessCheck", "assert_robust", "check_robust",
           "robustness_check", "diagnosis_lines", "scenario_expr"]

#: (threshold, strict, rating band): rating bands are strict (PASS means ratio > 0.95)
Threshold = tuple[float, bool, str | None]


def _scenario(scenario: ScenarioLike) -> Scenario:
    resolved = registry.as_scenario(scenario)
    if resolved.name == NOMINAL.name:
        raise ValueError("assert_robust compares a scenario with nominal; name a perturbation "
                         f"scenario, for example one of {', '.join(registry.DEFAULT)}")
    return resolved


def _dropped() -> None:
    return None


class Replay:
    """What replaying a check's episodes needs: the policy adapter and env it ran (the
    agent's env needs applied) and the scenario as run (calibrated); ``--rl-videos`` films
    a check a test made itself from it, in the process that made it.

    These are that process's objects (a lambda agent does not even pickle), so a Replay
    pickles and deep-copies as None: a check travels with its numbers alone.

    >>> import copy, pickle
    >>> replay = Replay(lambda obs: obs, "CartPole-v1", "jitter")
    >>> pickle.loads(pickle.dumps(replay)) is None, copy.deepcopy(replay) is None
    (True, True)
    """

    __slots__ = ("env", "policy", "scenario")

    def __init__(self, policy: Policy, env: AuditEnv, scenario: Scenario) -> None:
        self.policy, self.env, self.scenario = policy, env, scenario

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _dropped, ()


@dataclass(frozen=True)
class RobustnessCheck:
    """The outcome of :func:`check_robust`: the numbers, whether every threshold held, and
    the failure message (empty when passed)."""

    result: ScenarioResult
    passed: bool
    message: str
    gates: tuple[tuple[float, bool, str | None], ...]
    level: float = 0.95  # confidence of result.ci (higher after adaptive looks)
    agent: str = ""  # the policy's name, as reports show it
    agent_details: tuple[str, ...] = ()  # what it says of itself beyond its name
    env: str = ""
    seed: int = 0
    reference: float | str = 0
    gate: Gate | None = None  # None: not gated
    nominal: ScenarioResult | None = None  # the paired nominal episodes
    reference_score: float = 0.0  # the reference as a number (``"random"`` resolved)
    thresholds: Thresholds = DEFAULT_THRESHOLDS  # the rating scale of result.rating
    # what filming the check replays (this process's objects): not compared, not shown
    replay: Replay | None = field(default=None, compare=False, repr=False)


def assert_robust(
    agent: Any,
    env: EnvLike,
    scenario: ScenarioLike,
    *,
    min_ratio: float | None = None,
    min_rating: str | None = None,
    mode: str = "point",
    episodes: int = 30,
    seed: int = 0,
    reference: float | str = 0,
    confidence: float = 0.95,
    max_episodes: int | None = None,
    target_ci_width: float | None = None,
    batch_size: int | None = None,
    thresholds: Thresholds | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    workers: int | str | None = None,
    backend: str = "local",
    timeout: float | None = None,
    call_timeout: float | None = CALL_TIMEOUT,
) -> ScenarioResult:
    """Assert that ``agent`` keeps its return on ``env`` under ``scenario``; return its numbers.

    ``scenario`` is a registered name, a :class:`~pytest_rlaudit.scenarios.Scenario` or a
    :class:`~pytest_rlaudit.world.schedules.Schedule` (as drawn by
    ``pytest_rlaudit.strategies.schedules()`` in a hypothesis test).

    The threshold is ``min_ratio`` (ratio >= it), ``min_rating`` (the rating must be at
    least it: ``"MILD"`` means ratio > 0.80), or both; with neither, ``min_rating="MILD"``.
    ``mode``: ``"point"`` judges the ratio itself; ``"confident"`` passes only when the
    interval's low end meets the threshold (use it to *prove* robustness); ``"not_worse"``
    fails only when the interval's high end is below it (a CI gate that never fails on
    noise). With ``max_episodes``, episodes are added in rounds of ``episodes`` until the
    verdict is decided, in point mode settled to within what ``max_episodes`` could
    resolve, the interval is narrower than ``target_ci_width``, or ``max_episodes`` is
    reached (a group-sequential design: see :func:`pytest_rlaudit.stats.adaptive_sample`
    for the error control). ``workers`` and ``backend`` say where episodes run, as in
    :func:`~pytest_rlaudit.audit` (never changing a number); ``timeout`` bounds the whole
    check in seconds, as there (:class:`~pytest_rlaudit.errors.RolloutTimeoutError`), and
    ``call_timeout`` each env step, reset and policy call (default 60 s; 0: none). Raises
    :class:`RobustnessError` with the numbers, the seed to reproduce and the diagnosis.
    """
    __tracebackhide__ = True  # pytest shows the test's line, then this message
    if min_ratio is None and min_rating is None:
        min_rating = "MILD"
    check = check_robust(
        agent, env, scenario, min_ratio=min_ratio, min_rating=min_rating, mode=mode,
        episodes=episodes, seed=seed, reference=reference, confidence=confidence,
        max_episodes=max_episodes, target_ci_width=target_ci_width, batch_size=batch_size,
        thresholds=thresholds, max_steps=max_steps, workers=workers, backend=backend,
        timeout=timeout, call_timeout=call_timeout)
    if not check.passed:
        raise RobustnessError(check.message, check.result)
    return check.result


def check_robust(
    agent: Any,
    env: EnvLike,
    scenario: ScenarioLike,
    *,
    min_ratio: float | None = None,
    min_rating: str | None = None,
    mode: str = "point",
    episodes: int = 30,
    seed: int = 0,
    reference: float | str = 0,
    confidence: float = 0.95,
    max_episodes: int | None = None,
    target_ci_width: float | None = None,
    batch_size: int | None = None,
    thresholds: Thresholds | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    workers: int | str | None = None,
    backend: str = "local",
    cache: MutableMapping[Hashable, Any] | None = None,
    timeout: float | None = None,
    call_timeout: float | None = CALL_TIMEOUT,
) -> RobustnessCheck:
    """:func:`assert_robust` without the raise: the numbers and the verdict.

    With neither ``min_ratio`` nor ``min_rating`` nothing is gated (the result is only
    measured). ``cache``: a mapping in which policy adapters and the nominal and
    random-reference rollouts are kept, keyed by the agent and env objects, seed and
    episode range, so that several scenarios of one agent share them (the pytest plugin
    keeps one per process, and one per hypothesis test for the examples to share).
    Only share a cache while the agent does not change: it is keyed by identity.
    ``timeout``: seconds for the whole check, rollouts cached or not (None: no limit);
    ``call_timeout``: seconds each env step, reset or policy call may take (0: no bound).

    >>> check = check_robust("random", "CartPole-v1", "delay", min_ratio=0.5, episodes=8)
    >>> check.passed, check.result.name
    (True, 'delay')
    """
    __tracebackhide__ = True
    min_ratio, episodes, max_episodes = _checked_arguments(
        mode, min_ratio, min_rating, episodes, max_episodes, target_ci_width)
    settings = AuditSettings(
        episodes=episodes, seed=seed, reference=reference, confidence=confidence,
        thresholds=thresholds or DEFAULT_THRESHOLDS, batch_size=batch_size,
        max_steps=max_steps, workers=workers, backend=backend, timeout=timeout,
        call_timeout=call_timeout)
    gate: Gate | None = None
    if min_ratio is not None or min_rating is not None:
        gate = {"min_ratio": min_ratio, "min_rating": min_rating, "mode": mode}
    return robustness_check(agent, env, scenario, settings, gate=gate,
                            max_episodes=max_episodes, target_ci_width=target_ci_width,
                            cache=cache)


def robustness_check(agent: Any, env: EnvLike, scenario: ScenarioLike, settings: AuditSettings,
                     *, gate: Gate | None = None, max_episodes: int | None = None,
                     target_ci_width: float | None = None,
                     cache: MutableMapping[Hashable, Any] | None = None,
                     shown_as: Any = None) -> RobustnessCheck:
    """:func:`check_robust` with its settings made and its arguments checked: the engine
    measures ``scenario`` (adaptively with ``max_episodes``), then each threshold of
    ``gate`` judges it (None: only measured). ``shown_as``: how the failure's reproduce
    line names the agent, where ``agent`` is already loaded (the plugin's --rl-agent)."""
    __tracebackhide__ = True
    given: Gate = gate or {"min_ratio": None, "min_rating": None, "mode": "point"}
    _checked_arguments(given["mode"], given["min_ratio"], given["min_rating"],
                       settings.episodes, max_episodes, target_ci_width)
    with settings.limits():
        chosen = _scenario(scenario)
        engine = Engine(agent, env, settings, cache if cache is not None else shared_cache())
        engine.check([chosen])
        # The random policy runs on every episode the reference may need, else on the
        # first round's, which the agent must beat.
        n_random = ((max_episodes or settings.episodes) if settings.random_reference
                    else settings.episodes)
        random = engine.random(n_random)
        ref = reference_score(settings.reference, random)
        thresholds = _thresholds(gate, settings.thresholds)
        mode = given["mode"]
        binding = max(thresholds, default=(None, False, None))
        chosen = engine.calibrated(chosen)
        sampled = engine.sample(chosen, max_episodes=max_episodes, threshold=binding[0],
                                strict=binding[1], mode=mode, target_ci_width=target_ci_width,
                                reference=ref)
        measured = engine.measure(sampled.batches, [chosen], random=random, reference=ref,
                                  intervals=sampled.intervals)
        result = measured.scenarios[chosen.name]
        checked = [(verdict(result.ratio, result.ci, t, mode, strict=strict,
                            rated=result.rating), band) for t, strict, band in thresholds]
        failed = [(v, band) for v, band in checked if not v.passed]
        message = ""
        if failed:
            message = failure_message(
                result, failed, env_name=engine.env.name, seed=settings.seed,
                episodes=settings.episodes, confidence=sampled.level, stopped=sampled.stopped,
                call=_call(settings, gate, max_episodes, target_ci_width),
                nominal=measured.nominal.mean_return, reference=float(ref),
                agent=agent if shown_as is None else shown_as)
        check = RobustnessCheck(result, not failed, message, tuple(thresholds), sampled.level,
                                agent=engine.name, agent_details=engine.details,
                                env=engine.env.name, seed=settings.seed,
                                reference=settings.reference, gate=gate if thresholds else None,
                                nominal=measured.nominal, reference_score=float(ref),
                                thresholds=settings.thresholds,
                                replay=Replay(engine.policy, engine.env, chosen))
    notify(check)
    return check


def _thresholds(gate: Gate | None, scale: Thresholds) -> list[Threshold]:
    """The thresholds ``gate`` sets on the rating ``scale``."""
    out: list[Threshold] = []
    if gate is None:
        return out
    if gate["min_ratio"] is not None:
        out.append((gate["min_ratio"], False, None))
    if gate["min_rating"] is not None and gate["min_rating"] != "FAIL":
        out.append((rating_floor(gate["min_rating"], scale), True, gate["min_rating"]))
    return out


def _call(settings: AuditSettings, gate: Gate | None, max_episodes: int | None,
          target_ci_width: float | None) -> dict[str, Any]:
    """The keyword arguments of the call that reproduces a check, but for episodes and
    seed and those left at their defaults."""
    given = {**(gate or {}), "reference": settings.reference,
             "confidence": settings.confidence, "max_episodes": max_episodes,
             "target_ci_width": target_ci_width, "thresholds": settings.thresholds,
             "max_steps": settings.max_steps}
    defaults = {"mode": "point", "reference": 0, "confidence": 0.95,
                "thresholds": DEFAULT_THRESHOLDS, "max_steps": DEFAULT_MAX_STEPS}
    return {k: v for k, v in given.items()
            if v is not None and not (k in defaults and v == defaults[k])}


def _checked_arguments(mode: str, min_ratio: Any, min_rating: Any, episodes: Any,
                       max_episodes: Any,
                       target_ci_width: Any) -> tuple[float | None, int, int | None]:
    """check_robust's arguments validated: (min_ratio, episodes, max_episodes), or a
    ValueError naming the argument."""
    if mode not in MODES:
        raise ValueError(f"unknown verdict mode {mode!r}; modes are {', '.join(MODES)}")
    if min_ratio is not None:
        min_ratio = check_threshold("min_ratio", min_ratio)
    if min_rating is not None and min_rating not in RATINGS:
        raise ValueError(f"unknown min_rating {min_rating!r}; ratings are {', '.join(RATINGS)}")
    episodes = check_episodes(episodes)
    if max_episodes is not None:
        max_episodes = check_episodes(max_episodes, "max_episodes")
        if max_episodes < episodes:
            raise ValueError(f"max_episodes ({max_episodes}) must be >= episodes ({episodes})")
    elif target_ci_width is not None:
        raise ValueError("target_ci_width needs max_episodes: the most episodes to spend on it")
    if target_ci_width is not None:
        number("target_ci_width", target_ci_width, low=0, low_open=True)
    return min_ratio, episodes, max_episodes
