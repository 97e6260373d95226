"""What a failed robustness check says: its first line the essence (the rating, the
scenario, the ratio, what was required), then each part once, on its own line.

>>> from pytest_rlaudit.auditing.diagnosis import Diagnosis
>>> diagnosis_lines(Diagnosis("p", "c", "f"))
['  fix: f', '  what broke: p', '  likely cause: c']
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._format import fixed, interval
from ..auditing.diagnosis import Diagnosis
from ..auditing.outcomes import ScenarioResult
from ..stats import INCONCLUSIVE, Verdict
from ..world import scenarios as registry
from ..world.calibration import definition
from ..world.scenarios import Scenario

__all__ = ["failure_message", "diagnosis_lines", "scenario_expr", "agent_expr"]


def failure_message(result: ScenarioResult, failed: list[tuple[Verdict, str | None]], *,
                    env_name: str, seed: int, episodes: int, confidence: float,
                    stopped: str | None, call: Mapping[str, Any], nominal: float,
                    reference: float, agent: Any = None) -> str:
    """A failed check's message. Its first line is what pytest's short summary and JUnit's
    failure message show, so it starts with the essence: the rating, the scenario, the
    ratio, what was required. Then each part once, on its own line: the diagnosis, the
    episodes, what the ratio is a ratio of, and the call that reproduces it."""
    lo, hi = result.ci
    seeds = result.seeds
    numbers = f"ratio {fixed(result.ratio)} ({confidence * 100:.4g}% CI {interval(lo, hi)})"
    schedule = result.params.get("schedule")
    timeline = schedule is not None and hasattr(schedule, "describe")
    where = f"when {schedule.describe()}" if schedule is not None and timeline else (
        f"under {result.name}")
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
    lines.append(f"  reproduce: assert_robust({agent_expr(agent)}, {env_name!r}, {scenario_expr(result)}"
                 f"{extra}, episodes={episodes}, seed={seed})")
    return "\n".join(lines)


def agent_expr(agent: Any) -> str:
    """The agent as a reproduce line can name it: a path or ``module:attribute`` as the
    string it was given, so that the line can be pasted; ``agent`` for an object.

    >>> agent_expr("models/ppo.zip"), agent_expr(object())
    ("'models/ppo.zip'", 'agent')
    """
    if isinstance(agent, os.PathLike):
        agent = os.fspath(agent)
    return repr(agent) if isinstance(agent, str) else "agent"


def diagnosis_lines(d: Diagnosis, *, pattern: bool = True) -> list[str]:
    """A diagnosis in a failure message, each part on its own line, the fix first: JUnit
    keeps the whole lines of a message that fit in 500 characters, so after the first
    line (the rating and ratio) comes what to do. ``pattern``: with what broke; leave it
    out where the first line already says it."""
    return [f"  fix: {d.fix}", *([f"  what broke: {d.pattern}"] if pattern else []),
            f"  likely cause: {d.cause}"]


def scenario_expr(scenario: ScenarioResult | Scenario) -> str:
    """The scenario argument that reproduces a result (or a scenario): its name, or the
    registered scenario with the parameters that differ from its defaults, or the
    schedule.

    >>> scenario_expr(registry.get("spike").with_params(k=3))
    "scenarios.get('spike').with_params(k=3)"
    """
    schedule = scenario.params.get("schedule")
    if schedule is not None and hasattr(schedule, "as_scenario"):
        return repr(schedule) if scenario.name == "schedule" else (
            f"{schedule!r}.as_scenario({scenario.name!r})")
    try:
        registered = registry.get(scenario.name)
    except LookupError:
        return "scenario"
    # a calibrated spread is measured again, the same, on the same seeds: not an argument
    changed = {k: v for k, v in definition(dict(scenario.params)).items()
               if registered.params.get(k) != v}
    if not changed:
        return repr(scenario.name)
    args = ", ".join(f"{k}={v!r}" for k, v in changed.items())
    return f"scenarios.get({scenario.name!r}).with_params({args})"
