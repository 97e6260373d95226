"""Assertion helpers for ordinary unit tests: ``assert_robust`` and ``RobustnessError``.

>>> import numpy as np
>>> from pytest_rlaudit import assert_robust
>>> def controller(obs):
...     return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
>>> assert_robust(controller, "CartPole-v1", "delay", min_ratio=0.9, episodes=5).rating
'PASS'
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .._capture import notify, shared_cache
from .._checks import confidence as check_confidence
from .._checks import number
from .._format import fixed, interval
from ..auditing.reference import check_reference_arg, random_returns, reference_score
from ..auditing.results import (
    ScenarioResult,
    _stream_seed,
    check_episodes,
    summarise,
)
from ..rollout.deadline import bounded
from ..rollout.replay import check_replay
from ..rollout.runner import (
    DEFAULT_MAX_STEPS,
    EpisodeBatch,
    check_backend,
    check_workers,
    run_episodes,
)
from ..stats import (
    DEFAULT_THRESHOLDS,
    INCONCLUSIVE,
    MODES,
    RATINGS,
    Thresholds,
    Verdict,
    adaptive_sample,
    check_threshold,
    rating_floor,
    verdict,
)
from ..world import scenarios as registry
from ..world.agents import as_policy, env_for, normalizes
from ..world.calibration import definition, observation_spread
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, Scenario, ScenarioLike

__all__ = ["RobustnessError", "RobustnessCheck", "assert_robust", "check_robust"]


class RobustnessError(AssertionError):
    """An agent missed a robustness threshold. ``result`` holds the scenario's numbers."""

    def __init__(self, message: str, result: ScenarioResult | None = None) -> None:
        super().__init__(message)
        self.result = result


def _scenario(scenario: ScenarioLike) -> Scenario:
    resolved = registry.as_scenario(scenario)
    if resolved.name == NOMINAL.name:
        raise ValueError("assert_robust compares a scenario with nominal; name a perturbation "
                         f"scenario, for example one of {', '.join(registry.DEFAULT)}")
    return resolved


def _message(result: ScenarioResult, failed: list[tuple[Verdict, str | None]], *, env_name: str,
             seed: int, episodes: int, confidence: float, stopped: str | None,
             call: dict[str, Any], nominal: float, reference: float) -> str:
    """A failed check's message. Its first line is what pytest's short summary and JUnit's
    failure message show, so it starts with the essence: the rating, the scenario, the
    ratio, what was required. Then each part once, on its own line: the diagnosis, the
    episodes, what the ratio is a ratio of, and the call that reproduces it."""
    lo, hi = result.ci
    seeds = result.seeds
    numbers = f"ratio {fixed(result.ratio)} ({confidence * 100:.4g}% CI {interval(lo, hi)})"
    schedule = result.params.get("schedule")
    timeline = schedule is not None and hasattr(schedule, "describe")
    where = f"when {schedule.describe()}" if timeline else f"under {result.name}"
    d = result.diagnosis
    if result.rating == INCONCLUSIVE and d is not None:  # the numbers are noise: say why
        lines = [f"{INCONCLUSIVE} {where}: {d.pattern}", f"  measured anyway: {numbers}"]
    else:
        verdict_, band = failed[0]
        need = f"{band} or better" if band else f"ratio >= {verdict_.threshold:g}"
        lines = [f"{result.rating} {where}: {numbers}; required {need}"]
    if d is not None:  # early: JUnit keeps the first 500 characters of the message
        lines += diagnosis_lines(d, pattern=result.rating != INCONCLUSIVE)
    for v, band in failed:
        need = (f"rating {band} or better (ratio > {v.threshold:g})" if band
                else f"ratio >= {v.threshold:g}")
        lines.append(f"  required: {need} in {v.mode!r} mode; {v.reason}")
    if timeline:
        lines.append(f"  schedule: {schedule!r}")
    p = "n/a" if result.p_value is None else f"{result.p_value:.3g}"
    adaptive = f", adaptive sampling stopped: {stopped}" if stopped else ""
    lines.append(f"  episodes: {result.episodes} paired (env seeds {seeds[0]}-{seeds[-1]}){adaptive}; "
                 f"p = {p} (one-sided, H0: no degradation)")
    lines.append(f"  ratios of: nominal mean return {fixed(nominal, 1)}, reference "
                 f"{fixed(reference, 1)}")
    extra = "".join(f", {k}={v!r}" for k, v in call.items())
    lines.append(f"  reproduce: assert_robust(agent, {env_name!r}, {_scenario_expr(result)}"
                 f"{extra}, episodes={episodes}, seed={seed})")
    return "\n".join(lines)


def diagnosis_lines(d: Any, *, pattern: bool = True) -> list[str]:
    """A diagnosis in a failure message, each part on its own line, the fix first: JUnit
    keeps the whole lines of a message that fit in 500 characters, so after the first
    line (the rating and ratio) comes what to do. ``pattern``: with what broke; leave it
    out where the first line already says it.

    >>> from pytest_rlaudit.auditing.diagnosis import Diagnosis
    >>> diagnosis_lines(Diagnosis("p", "c", "f"))
    ['  fix: f', '  what broke: p', '  likely cause: c']
    """
    return [f"  fix: {d.fix}", *([f"  what broke: {d.pattern}"] if pattern else []),
            f"  likely cause: {d.cause}"]


def _scenario_expr(result: ScenarioResult) -> str:
    """The scenario argument that reproduces ``result``: its name, or the registered
    scenario with the parameters that differ from its defaults, or the schedule."""
    schedule = result.params.get("schedule")
    if schedule is not None and hasattr(schedule, "as_scenario"):
        return repr(schedule) if result.name == "schedule" else (
            f"{schedule!r}.as_scenario({result.name!r})")
    try:
        registered = registry.get(result.name)
    except LookupError:
        return "scenario"
    # a calibrated spread is measured again, the same, on the same seeds: not an argument
    changed = {k: v for k, v in definition(result.params).items()
               if registered.params.get(k) != v}
    if not changed:
        return repr(result.name)
    args = ", ".join(f"{k}={v!r}" for k, v in changed.items())
    return f"scenarios.get({result.name!r}).with_params({args})"


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

    def __init__(self, policy: Any, env: Any, scenario: Scenario) -> None:
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
    env: str = ""
    seed: int = 0
    reference: float | str = 0
    gate: dict[str, Any] | None = None  # {min_ratio, min_rating, mode}; None: not gated
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
    check in seconds, as there (:class:`~pytest_rlaudit.errors.RolloutTimeoutError`). Raises
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
        timeout=timeout)
    if not check.passed:
        raise RobustnessError(check.message, check.result)
    return check.result


@bounded
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
) -> RobustnessCheck:
    """:func:`assert_robust` without the raise: the numbers and the verdict.

    With neither ``min_ratio`` nor ``min_rating`` nothing is gated (the result is only
    measured). ``cache``: a mapping in which policy adapters and the nominal and
    random-reference rollouts are kept, keyed by the agent and env objects, seed and
    episode range, so that several scenarios of one agent share them (the pytest plugin
    keeps one per process, and one per hypothesis test for the examples to share).
    Only share a cache while the agent does not change: it is keyed by identity.
    ``timeout``: seconds for the whole check, rollouts cached or not (None: no limit).

    >>> check = check_robust("random", "CartPole-v1", "delay", min_ratio=0.5, episodes=8)
    >>> check.passed, check.result.name
    (True, 'delay')
    """
    # One function on purpose: validate, resolve (through the cache), run (fixed or in
    # adaptive rounds), summarise and judge share the resolved arguments and the cache.
    min_ratio, episodes, max_episodes = _checked_arguments(
        mode, min_ratio, min_rating, episodes, max_episodes, target_ci_width, confidence)
    thresholds = thresholds or DEFAULT_THRESHOLDS
    rollout = partial(run_episodes, seed=seed, batch_size=batch_size, max_steps=max_steps,
                      workers=check_workers(workers), backend=check_backend(backend))
    chosen = _scenario(scenario)
    if cache is None:
        cache = shared_cache()
    check_reference_arg(reference)
    # Adapters are kept with their agent (alive, so its id is not reused) for the cache;
    # the env is the agent's (a zoo folder's wrappers and env_kwargs applied to it).
    policy = _cached(cache, ("policy", agent if isinstance(agent, str) else id(agent)),
                     lambda: (agent, as_policy(agent, env=env)))[1]
    spec = _cached(cache, ("env", env if isinstance(env, str) else id(env), id(policy)),
                   lambda: (env, env_for(policy, env)))[1]
    # Before any rollout (not after the cached nominal ones); once per scenario and env.
    _cached(cache, ("applicable", repr(chosen), id(spec)),
            lambda: registry.check_applicable([chosen], spec.make))
    # The seeds fix the episodes (else no pairing), before any rollout; once per agent and env.
    _cached(cache, ("replay", id(policy), id(spec), seed),
            lambda: check_replay(policy, spec, seed=seed))
    # The random policy runs on every episode the reference may need, else on the first
    # round's, which the agent must beat.
    n_random = max_episodes or episodes if reference == "random" else episodes
    random = _cached(cache, ("random", id(spec), seed, n_random, max_steps),
                     lambda: random_returns(spec, n_random, run=rollout))
    ref = reference_score(reference, random)
    # (threshold, strict, rating band): rating bands are strict (PASS means ratio > 0.95)
    gates: list[tuple[float, bool, str | None]] = []
    if min_ratio is not None:
        gates.append((min_ratio, False, None))
    if min_rating is not None and min_rating != "FAIL":
        gates.append((rating_floor(min_rating, thresholds), True, min_rating))

    if chosen.needs_spread and cache is None:
        cache = {}  # the calibration's nominal episodes are the audit's own: run them once

    def nominal_of(indices: range) -> EpisodeBatch:
        """The nominal episodes (recorded: the spread is calibrated on them), cached."""
        key = ("nominal", id(policy), id(spec), seed, indices.start, indices.stop, max_steps)
        return _cached(cache, key, lambda: rollout(
            policy, spec, [NOMINAL], indices, record=["nominal"])["nominal"])

    if chosen.needs_spread:
        chosen = chosen.calibrated(observation_spread(nominal_of(range(episodes)).observations))

    def run(indices: range) -> dict[str, EpisodeBatch]:
        if cache is None:  # nominal and scenario share one pool
            return rollout(policy, spec, [NOMINAL, chosen], indices)
        out = rollout(policy, spec, [chosen], indices)
        return {"nominal": nominal_of(indices), chosen.name: out[chosen.name]}

    intervals, stopped, level = None, None, confidence
    if max_episodes is None or (not gates and target_ci_width is None):
        batches = run(range(episodes))  # min_rating="FAIL" alone sets nothing to stop on
    else:
        parts: list[dict[str, EpisodeBatch]] = []

        def more(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
            parts.append(run(range(start, stop)))
            return parts[-1]["nominal"].returns, parts[-1][chosen.name].returns

        binding = max(gates, default=(None, False, None))
        outcome = adaptive_sample(
            more, episodes=episodes, max_episodes=max_episodes, threshold=binding[0],
            target_ci_width=target_ci_width, reference=ref, confidence=confidence,
            seed=_stream_seed(seed, chosen.name), strict=binding[1], mode=mode)
        batches = {name: EpisodeBatch.concat([p[name] for p in parts])
                   for name in ("nominal", chosen.name)}
        intervals, stopped = {chosen.name: outcome.ci}, outcome.stopped
        level = outcome.look_confidence  # the level the stopping rule used at each look
    nominal_result, results, _ = summarise(
        batches["nominal"], {chosen: batches[chosen.name]}, reference=ref, confidence=confidence,
        seed=seed, thresholds=thresholds, intervals=intervals, random=random,
        agent=getattr(policy, "name", type(policy).__name__), normalized=normalizes(policy),
        random_reference=reference == "random")
    result = results[chosen.name]
    checked = [(verdict(result.ratio, result.ci, t, mode, strict=strict, rated=result.rating),
                band) for t, strict, band in gates]
    failed = [(v, band) for v, band in checked if not v.passed]
    message = ""
    if failed:
        given = {"min_ratio": min_ratio, "min_rating": min_rating, "mode": mode,
                 "reference": reference, "confidence": confidence, "max_episodes": max_episodes,
                 "target_ci_width": target_ci_width, "thresholds": thresholds,
                 "max_steps": max_steps}
        defaults = {"mode": "point", "reference": 0, "confidence": 0.95,
                    "thresholds": DEFAULT_THRESHOLDS, "max_steps": DEFAULT_MAX_STEPS}
        call = {k: v for k, v in given.items()
                if v is not None and not (k in defaults and v == defaults[k])}
        message = _message(result, failed, env_name=spec.name, seed=seed, episodes=episodes,
                           confidence=level, stopped=stopped, call=call,
                           nominal=nominal_result.mean_return, reference=float(ref))
    check = RobustnessCheck(result, not failed, message, tuple(gates), level,
                            agent=getattr(policy, "name", type(policy).__name__),
                            env=spec.name, seed=int(seed), reference=reference,
                            gate={"min_ratio": min_ratio, "min_rating": min_rating,
                                  "mode": mode} if gates else None,
                            nominal=nominal_result, reference_score=float(ref),
                            thresholds=thresholds, replay=Replay(policy, spec, chosen))
    notify(check)
    return check


def _checked_arguments(mode: str, min_ratio: Any, min_rating: Any, episodes: Any,
                       max_episodes: Any, target_ci_width: Any,
                       confidence: Any) -> tuple[float | None, int, int | None]:
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
    check_confidence(confidence)
    if target_ci_width is not None:
        number("target_ci_width", target_ci_width, low=0, low_open=True)
    return min_ratio, episodes, max_episodes


def _cached(cache: MutableMapping[Hashable, Any] | None, key: Hashable,
            compute: Callable[[], Any]) -> Any:
    if cache is None:
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]
