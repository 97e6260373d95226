"""``assert_more_robust(a, b, scenario)``: a test that one training recipe is more robust
than another, across their runs.

The name says the claim a test makes: ``assert_robust`` asserts an agent keeps its
return, this asserts recipe ``a`` keeps more of it than recipe ``b`` (return ratios, not
returns: a recipe may score higher nominally and still lose more under a perturbation).

>>> import numpy as np
>>> from pytest_rlaudit import assert_more_robust, audit_runs
>>> def controller(gain):
...     return lambda obs: (obs[:, 2] + gain * obs[:, 3] > 0).astype(np.int64)
>>> a = audit_runs([controller(g) for g in (0.1, 0.15, 0.2, 0.25, 0.3)], "CartPole-v1",
...                scenarios="jitter", episodes=3, name="light gain")
>>> b = audit_runs([controller(g) for g in (0.5, 0.6, 0.7, 0.8, 1.0)], "CartPole-v1",
...                scenarios="jitter", episodes=3, name="heavy gain")
>>> assert_more_robust(a, b, "jitter").point
1.0
>>> assert_more_robust(b, a, "jitter")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pytest_rlaudit.errors.RobustnessError: heavy gain is not shown more robust than light gain under jitter: ...
"""

from __future__ import annotations

from .._checks import number
from .._format import fixed, interval
from ..auditing.improvement import Improvement, probability_of_improvement
from ..auditing.runs import RunsResult, RunsScenario
from ..errors import RobustnessError
from ..stats import MODES, verdict

__all__ = ["assert_more_robust", "improvement_message"]


def assert_more_robust(a: RunsResult, b: RunsResult, scenario: str, *,
                       min_probability: float = 0.5, mode: str = "confident",
                       confidence: float | None = None) -> Improvement:
    """Assert that a run of recipe ``a`` is likely to keep more of its return under
    ``scenario`` than a run of recipe ``b``; return the :class:`Improvement`.

    The probability of improvement (:func:`~pytest_rlaudit.probability_of_improvement`)
    must exceed ``min_probability`` (0.5: more likely better than not) in ``mode``, the
    modes of :func:`~pytest_rlaudit.assert_robust`: ``"confident"`` (the default: its
    interval's low end exceeds it), ``"point"`` (the estimate does), ``"not_worse"`` (fails
    only when the interval's high end does not). The default differs from
    ``assert_robust``'s ``"point"`` because the claims differ: a ratio's estimate is a
    measurement with its own meaning, but "A beats B" judged on the estimate passes half
    the time for two identical recipes (the estimate is as often above 0.5 as below): a
    flaky test. "Confident" passes them about 2.5% of the time at 95%. Over 5 runs each
    it passes when ``a`` wins at least 22 of the 25 pairs of runs (the interval's low end
    is 0.505 then, 0.643 at 25); more runs narrow the interval.

    Raises :class:`~pytest_rlaudit.errors.RobustnessError` with a message that stands on
    its own: both recipes' IQM ratios and runs, the probability and its interval, what
    would pass.
    """
    __tracebackhide__ = True
    if mode not in MODES:
        raise ValueError(f"unknown verdict mode {mode!r}; modes are {', '.join(MODES)}")
    threshold = number("min_probability", min_probability, low=0, high=1, high_open=True,
                       why=" (a probability: 0.5 is a coin toss between the recipes)")
    found = probability_of_improvement(a, b, scenario, confidence=confidence)
    judged = verdict(found.point, found.ci, threshold, mode, strict=True)
    if not judged.passed:
        raise RobustnessError(improvement_message(found, threshold, mode, a), found)
    return found


def improvement_message(found: Improvement, threshold: float, mode: str,
                        a: RunsResult) -> str:
    """A failed :func:`assert_more_robust`'s message: its first line the essence (who was
    not shown more robust than whom, the probability and its interval, what was
    required), then each recipe's numbers, the episodes and what would pass."""
    level = f"{found.confidence * 100:.4g}% CI"
    need = {"point": f"the estimate above {threshold:g}",
            "confident": f"the interval's low end above {threshold:g}",
            "not_worse": f"the interval's high end above {threshold:g}"}[mode]
    lines = [f"{found.a_name} is not shown more robust than {found.b_name} under "
             f"{found.scenario}: P(a run of it keeps more of its return than a run of "
             f"{found.b_name}) = {fixed(found.point)} "
             f"({level} {interval(*found.ci)}); required {need} ({mode!r} mode)"]
    for name, side in ((found.a_name, found.a), (found.b_name, found.b)):
        lines.append(f"  {name}: {_recipe(side, level)}")
    seeds = a.runs[0][found.scenario].seeds
    lines.append(f"  episodes: {a.episodes} paired per run (env seeds {seeds[0]}-{seeds[-1]}) "
                 f"on {a.env}, reference {fixed(a.reference, 1)}")
    if mode == "confident" and found.point > threshold:
        fix = (f"the estimate is above {threshold:g} but the interval is not: more runs of "
               f"each recipe narrow it ({found.a.runs} and {found.b.runs} now), or "
               "mode='point' judges the estimate alone")
    elif mode == "not_worse":
        fix = f"{found.a_name} is confidently no more robust; nothing but a better recipe passes"
    else:
        fix = (f"{found.a_name}'s runs must keep more of their return than "
               f"{found.b_name}'s: compare their per-run ratios above")
    lines.append(f"  to pass: {fix}")
    return "\n".join(lines)


def _recipe(side: RunsScenario, level: str) -> str:
    ratios = ", ".join(fixed(r) for r in side.per_run)
    return (f"IQM ratio {fixed(side.iqm)} ({level} {interval(*side.ci)}) over {side.runs} "
            f"runs [{ratios}], {side.rating}; nominal IQM return {fixed(side.nominal_iqm, 1)}")
