"""``probability_of_improvement(a, b, scenario)``: how likely a training run of recipe A
keeps more of its return under a scenario than a run of recipe B (rliable's probability
of improvement, on the runs' return ratios).

>>> import numpy as np
>>> from pytest_rlaudit import audit_runs, probability_of_improvement
>>> def controller(gain):
...     return lambda obs: (obs[:, 2] + gain * obs[:, 3] > 0).astype(np.int64)
>>> a = audit_runs([controller(g) for g in (0.1, 0.15, 0.2, 0.25, 0.3)], "CartPole-v1",
...                scenarios="jitter", episodes=3, name="light gain")
>>> b = audit_runs([controller(g) for g in (0.5, 0.6, 0.7, 0.8, 1.0)], "CartPole-v1",
...                scenarios="jitter", episodes=3, name="heavy gain")
>>> p = probability_of_improvement(a, b, "jitter")
>>> p.point, p.runs
(1.0, (5, 5))
>>> print(p)  # doctest: +NORMALIZE_WHITESPACE
P(light gain more robust than heavy gain under jitter) = 1.000 (95% CI 0.643 to 1.000);
IQM ratio 0.936 over 5 runs vs 0.552 over 5
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._checks import confidence as check_confidence
from .._format import fixed, interval
from ..errors import InvalidArgumentError
from ..stats.runs import improvement_ci
from ..stats.runs import probability_of_improvement as mann_whitney
from .comparison import scenario_difference
from .runs import RunsResult, RunsScenario

__all__ = ["probability_of_improvement", "Improvement"]


@dataclass(frozen=True)
class Improvement:
    """P(a run of A keeps more of its return under ``scenario`` than a run of B): the
    Mann-Whitney estimate over the two recipes' per-run ratios (``point``; ties count
    half) and its interval at ``confidence`` (:func:`~pytest_rlaudit.stats.runs.improvement_ci`).
    0.5: neither is more robust; above it, A is. ``a`` and ``b``: the scenario across
    each recipe's runs (their IQMs, intervals, per-run ratios)."""

    scenario: str
    point: float
    ci: tuple[float, float]
    confidence: float
    a: RunsScenario
    b: RunsScenario
    a_name: str = "A"
    b_name: str = "B"

    @property
    def runs(self) -> tuple[int, int]:
        """How many runs each recipe has."""
        return (self.a.runs, self.b.runs)

    def to_dict(self) -> dict[str, Any]:
        """Plain types. Keys: ``scenario``, ``point``, ``ci_low``, ``ci_high``,
        ``confidence``, ``a_name``, ``b_name``, ``a`` and ``b``
        (:meth:`RunsScenario.to_dict`)."""
        return {"scenario": self.scenario, "point": float(self.point),
                "ci_low": float(self.ci[0]), "ci_high": float(self.ci[1]),
                "confidence": float(self.confidence), "a_name": self.a_name,
                "b_name": self.b_name, "a": self.a.to_dict(), "b": self.b.to_dict()}

    def __str__(self) -> str:
        level = f"{self.confidence * 100:.4g}% CI"
        return (f"P({self.a_name} more robust than {self.b_name} under {self.scenario}) = "
                f"{fixed(self.point)} ({level} {interval(*self.ci)}); "
                f"IQM ratio {fixed(self.a.iqm)} over {self.a.runs} runs vs "
                f"{fixed(self.b.iqm)} over {self.b.runs}")


def probability_of_improvement(a: RunsResult, b: RunsResult, scenario: str, *,
                               confidence: float | None = None) -> Improvement:
    """The probability that a run of recipe ``a`` keeps more of its return under
    ``scenario`` than a run of recipe ``b``, with its interval (at ``confidence``,
    default ``a``'s).

    Both must be :func:`~pytest_rlaudit.audit_runs` results on the same env, seed,
    episodes and reference, under the same scenario (its name and chosen parameters: the
    default ``jitter`` and ``preset('severe')``'s are two scenarios), so their ratios
    measure the same thing on the same episodes; else an
    :class:`~pytest_rlaudit.errors.InvalidArgumentError` says which differs and how to
    audit them alike. The interval is Newcombe's score interval for a Mann-Whitney
    estimate (:func:`~pytest_rlaudit.stats.runs.improvement_ci`: why not rliable's
    bootstrap is said there), in closed form, so the same results give the same interval.
    """
    for given, label in ((a, "a"), (b, "b")):
        if not isinstance(given, RunsResult):
            raise InvalidArgumentError(
                f"{label} must be a RunsResult (what audit_runs returns), got "
                f"{type(given).__name__}; audit each recipe's runs with audit_runs first")
    _check_alike(a, b)
    level = a.confidence if confidence is None else check_confidence(confidence)
    x, y = a[scenario], b[scenario]
    differ = scenario_difference(scenario, a.runs[0][scenario].params, scenario,
                                 b.runs[0][scenario].params, sides=(a.name, b.name))
    if differ:
        raise InvalidArgumentError(
            f"the two recipes were not audited under the same scenario ({differ}), so their "
            "ratios measure two different perturbations, not the recipes: audit both with "
            "audit_runs under the same scenario (both scenarios='jitter', or both the same "
            "Scenario, e.g. from preset('severe'))")
    point = mann_whitney(x.per_run, y.per_run)
    ci = improvement_ci(x.per_run, y.per_run, confidence=level)
    return Improvement(scenario, point, ci, level, x, y, a.name, b.name)


def _check_alike(a: RunsResult, b: RunsResult) -> None:
    """Two runs audits measure the same thing on the same episodes, or an error naming
    what differs."""
    differ = [(what, getattr(a, what), getattr(b, what))
              for what in ("env", "seed", "episodes", "reference")
              if getattr(a, what) != getattr(b, what)]
    if differ:
        said = "; ".join(f"{what} {x!r} vs {y!r}" for what, x, y in differ)
        raise InvalidArgumentError(
            f"the two recipes were not audited alike ({said}), so their ratios are not "
            "comparable run for run: audit both with audit_runs on the same env, with the "
            "same seed, episodes and reference")
