"""Tolerance curves: how much of a disturbance an agent tolerates, not just whether it
survives one size of it.

>>> import numpy as np
>>> from pytest_rlaudit import tolerance
>>> def controller(obs):  # a hand-tuned CartPole controller
...     return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)
>>> curve = tolerance(controller, "CartPole-v1", "spike", values=[2, 3, 5], episodes=4)
>>> curve.tolerated, curve.breaks_at
(3, 5)
>>> print(curve)
spike: tolerates k 3, breaks at 5
  controller on CartPole-v1: ratio >= 0.8 tolerated; 4 paired episodes per value, seed 0
  k  ratio          95% CI
  2  0.913  0.654 to 1.000  tolerated
  3  0.837  0.346 to 1.000  tolerated
  5  0.457  0.162 to 1.000  breaks     (the scenario's own value)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .._format import fixed, interval
from ..stats.ratings import check_threshold
from ..world import scenarios as registry
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, ScenarioLike
from ..world.schedules import Schedule
from .ladders import LADDERS, ladder, point_name, tolerance_sentence, value_text
from .outcomes import AuditResult, ScenarioResult
from .results import run_audit
from .settings import AuditSettings

__all__ = ["ToleranceCurve", "tolerance", "tolerance_curve"]

Value = int | float


@dataclass(frozen=True)
class ToleranceCurve:
    """The outcome of :func:`tolerance`: each tested value's ratio and interval.

    ``curve`` is ``[(value, ratio, (low, high)), ...]`` in increasing severity;
    ``tolerated`` the largest tested value whose ratio is at least ``min_ratio`` (None if
    none), ``breaks_at`` the smallest whose ratio is below it (None if none). ``default``
    is the scenario's own value of ``param`` (what a single-point audit tests);
    ``result`` the audit of every point, each a scenario named by
    :func:`~pytest_rlaudit.auditing.ladders.point_name` (``result.nominal``: the shared
    nominal episodes); :meth:`at` gives one point's :class:`ScenarioResult`.
    ``reference`` is the audit's reference argument (0, a number or ``"random"``).
    """

    scenario: str
    param: str
    default: Value
    min_ratio: float
    curve: list[tuple[Value, float, tuple[float, float]]]
    reference: float | str = 0
    result: AuditResult | None = field(default=None, repr=False, compare=False)

    @property
    def values(self) -> tuple[Value, ...]:
        """The tested values, mildest first."""
        return tuple(v for v, _, _ in self.curve)

    @property
    def tolerated(self) -> Value | None:
        """The largest tested value whose ratio is at least ``min_ratio`` (None if none)."""
        kept = [v for v, r, _ in self.curve if r >= self.min_ratio]
        return max(kept) if kept else None

    @property
    def breaks_at(self) -> Value | None:
        """The smallest tested value whose ratio is below ``min_ratio`` (None if none)."""
        broken = [v for v, r, _ in self.curve if not r >= self.min_ratio]
        return min(broken) if broken else None

    def at(self, value: Value) -> ScenarioResult:
        """The full result (returns, diagnosis, ...) of the tested ``value``."""
        if self.result is None or value not in self.values:
            raise KeyError(f"{self.param}={value!r} was not tested; tested: "
                           f"{', '.join(map(value_text, self.values))}")
        return self.result[point_name(self.scenario, self.param, value, self.default)]

    def to_dict(self) -> dict[str, Any]:
        """JSON types only: ``{param, default, min_ratio, tolerated, breaks_at, curve:
        [[value, ratio, ci_low, ci_high], ...]}`` (a record's ``tolerance``)."""
        return {"param": self.param, "default": self.default, "min_ratio": self.min_ratio,
                "tolerated": self.tolerated, "breaks_at": self.breaks_at,
                "curve": [[v, float(r), float(lo), float(hi)] for v, r, (lo, hi) in self.curve]}

    def __str__(self) -> str:
        lines = [tolerance_sentence(self.scenario, self.param, self.tolerated, self.breaks_at)]
        if self.result is not None:
            r = self.result
            lines.append(f"  {r.agent} on {r.env}: ratio >= {self.min_ratio:g} tolerated; "
                         f"{r.episodes} paired episodes per value, seed {r.seed}")
        level = f"{self.result.confidence:.0%} CI" if self.result is not None else "CI"
        rows = [(self.param, "ratio", level, "", "")]
        for v, ratio, (lo, hi) in self.curve:
            rows.append((value_text(v), fixed(ratio), interval(lo, hi),
                         "tolerated" if ratio >= self.min_ratio else "breaks",
                         "(the scenario's own value)" if v == self.default else ""))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        for row in rows:
            cells = [row[0].rjust(widths[0]), row[1].rjust(widths[1]), row[2].rjust(widths[2]),
                     row[3].ljust(widths[3]), row[4]]
            lines.append(("  " + "  ".join(cells)).rstrip())
        return "\n".join(lines)


def tolerance(
    agent: Any,
    env: EnvLike,
    scenario: ScenarioLike,
    *,
    param: str | None = None,
    values: Any = None,
    min_ratio: float = 0.8,
    episodes: int = 30,
    seed: int = 0,
    **audit_kwargs: Any,
) -> ToleranceCurve:
    """The tolerance curve of ``agent`` on ``env`` under ``scenario``: the return ratio at
    each of ``values`` of the scenario's parameter ``param``.

    ``param`` defaults to the scenario's main parameter and ``values`` to its ladder (both
    in :data:`~pytest_rlaudit.auditing.ladders.LADDERS`: ``delay`` varies ``steps``);
    ``values`` must increase strictly (mildest first) and be integers for an integer
    parameter. ``min_ratio`` is the line a value's ratio must reach to be tolerated.

    All values are audited together by :func:`audit` (the remaining keyword arguments go
    to it: ``reference``, ``confidence``, ``batch_size``, ``thresholds``, ``max_steps``,
    ``workers``, ``backend``, ``timeout``: seconds for the whole curve, which is one audit),
    so they share one set of nominal episodes, and the same ``seed`` gives the same
    curve. Each value is its own scenario,
    ``"delay[steps=2]"``, since a scenario's name keys its random streams; the scenario's
    own value keeps its name, so that point repeats ``audit(agent, env, scenario)``.
    Bad arguments are a ValueError that says what to pass.

    >>> import numpy as np
    >>> def controller(obs):
    ...     return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
    >>> curve = tolerance(controller, "CartPole-v1", "delay", values=[1, 2], episodes=3)
    >>> [(v, round(r, 3)) for v, r, _ in curve.curve]
    [(1, 1.0), (2, 1.0)]
    >>> curve.tolerated, curve.breaks_at
    (2, None)
    """
    __tracebackhide__ = True
    settings = AuditSettings(episodes=episodes, seed=seed, **audit_kwargs)
    return tolerance_curve(agent, env, scenario, settings, param=param, values=values,
                           min_ratio=min_ratio)


def tolerance_curve(agent: Any, env: EnvLike, scenario: ScenarioLike, settings: AuditSettings,
                    *, param: str | None = None, values: Any = None,
                    min_ratio: float = 0.8) -> ToleranceCurve:
    """:func:`tolerance` with its settings made: one audit of every value's scenario."""
    __tracebackhide__ = True
    if isinstance(scenario, Schedule):
        raise ValueError("a Schedule has no parameter to vary: give a registered scenario "
                         "and its parameter, e.g. tolerance(agent, env, 'spike', param='k')")
    chosen = registry.as_scenario(scenario)
    if chosen.name == NOMINAL.name:
        raise ValueError("the nominal scenario has nothing to vary: name a perturbation "
                         f"scenario, e.g. one of {', '.join(LADDERS)}")
    steps = ladder(chosen, param, values)
    min_ratio = check_threshold("min_ratio", min_ratio)
    points = [dataclasses.replace(
        chosen, name=point_name(chosen.name, steps.param, v, steps.default),
        params={**chosen.params, steps.param: v},
        description=f"{chosen.name} with {steps.param}={value_text(v)}") for v in steps.values]
    result = run_audit(agent, env, points, settings)
    curve = []
    for v, p in zip(steps.values, points, strict=True):
        r = result[p.name]
        curve.append((v, float(r.ratio), (float(r.ci[0]), float(r.ci[1]))))
    return ToleranceCurve(chosen.name, steps.param, steps.default, min_ratio, curve,
                          reference=settings.reference, result=result)
