"""What an audit measured: :class:`ScenarioResult` per scenario, :class:`Aggregate` per
category, :class:`AuditResult` for the whole audit (what :func:`~.results.audit` returns;
built by :func:`.measure.summarise`).

>>> import numpy as np
>>> r = ScenarioResult("jitter", "deployment", np.array([90.0, 110.0]), np.array([9, 11]),
...                    np.array([9, 11]), np.array([False, False]), np.array([0, 1]),
...                    ratio=0.9, ci=(0.8, 1.0), p_value=0.2, rating="MILD")
>>> r.mean_return, r.episodes
(100.0, 2)
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from .._format import fixed, interval, p_value
from ..stats import INCONCLUSIVE, Margin, Thresholds, rating
from .diagnosis import Diagnosis
from .records import plain

__all__ = ["AuditResult", "ScenarioResult", "Aggregate", "ScenarioTable", "SCHEMA_VERSION"]

#: Version of the ``to_dict()`` layout; bumped on any incompatible change.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario's paired episodes and their statistics.

    ``returns[i]`` is episode ``i`` (env seed ``seeds[i]``), paired with the nominal
    episode ``i``. ``ratio``, ``ci`` (at the audit's confidence), ``p_value`` (one-sided,
    H0: no degradation; Holm-adjusted across the audit's scenarios), ``rating`` and
    ``diagnosis`` (None when PASS). For the nominal result ratio is 1 and p is None.
    """

    name: str
    category: str
    returns: np.ndarray
    lengths: np.ndarray
    env_steps: np.ndarray
    capped: np.ndarray
    seeds: np.ndarray
    ratio: float
    ci: tuple[float, float]
    p_value: float | None
    rating: str
    diagnosis: Diagnosis | None = None
    params: dict[str, Any] = field(default_factory=dict)
    traces: tuple[np.ndarray, ...] = field(default=(), repr=False, compare=False)

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def episodes(self) -> int:
        return len(self.returns)

    def to_dict(self) -> dict[str, Any]:
        """Plain floats, ints and strings only (JSON and xdist safe)."""
        return {
            "name": self.name,
            "category": self.category,
            "params": {k: plain(v) for k, v in self.params.items()},
            "episodes": self.episodes,
            "mean_return": self.mean_return,
            "ratio": float(self.ratio),
            "ci_low": float(self.ci[0]),
            "ci_high": float(self.ci[1]),
            "p_value": None if self.p_value is None else float(self.p_value),
            "rating": self.rating,
            "diagnosis": None if self.diagnosis is None else self.diagnosis.to_dict(),
            "returns": [float(r) for r in self.returns],
            "lengths": [int(x) for x in self.lengths],
            "env_steps": [int(x) for x in self.env_steps],
            "capped": int(np.sum(self.capped)),
            "seeds": [int(s) for s in self.seeds],
        }


@dataclass(frozen=True)
class Aggregate:
    """A category's score (the minimum ratio over its scenarios), its rating and the worst
    scenario. Unpacks as ``score, rating = result.deployment``."""

    score: float
    rating: str
    scenario: str

    def __iter__(self) -> Iterator[Any]:
        return iter((self.score, self.rating))

    def to_dict(self) -> dict[str, Any]:
        return {"score": float(self.score), "rating": self.rating, "scenario": self.scenario}


class Rated(Protocol):
    """A scenario's row of a result: its name and category, the ratio it is rated on and
    the rating."""

    @property
    def name(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def ratio(self) -> float: ...
    @property
    def rating(self) -> str: ...


RowT = TypeVar("RowT", bound=Rated)


class ScenarioTable(Generic[RowT]):
    """What the results with scenarios by name share (:class:`AuditResult`, and
    :class:`~.runs.RunsResult` across training runs): ``result[name]``, iteration in
    audit order, and each category's worst ratio (``.deployment``, ``.stress``)."""

    scenarios: dict[str, RowT]
    thresholds: Thresholds

    def __getitem__(self, name: str) -> RowT:
        try:
            return self.scenarios[name]
        except KeyError:
            raise KeyError(
                f"scenario {name!r} was not audited; this result has: "
                f"{', '.join(self.scenarios) or 'no scenarios'}"
            ) from None

    def __iter__(self) -> Iterator[RowT]:
        return iter(self.scenarios.values())

    def __len__(self) -> int:
        return len(self.scenarios)

    def _aggregate(self, category: str) -> Aggregate | None:
        members = [r for r in self if r.category == category]
        if not members:
            return None
        worst = min(members, key=lambda r: r.ratio)
        if any(r.rating == INCONCLUSIVE for r in members):
            return Aggregate(worst.ratio, INCONCLUSIVE, worst.name)
        return Aggregate(worst.ratio, rating(worst.ratio, self.thresholds), worst.name)

    @property
    def deployment(self) -> Aggregate | None:
        """Min ratio over the deployment scenarios audited, and its rating (None if none)."""
        return self._aggregate("deployment")

    @property
    def stress(self) -> Aggregate | None:
        """Min ratio over the stress scenarios audited, and its rating (None if none)."""
        return self._aggregate("stress")


@dataclass(frozen=True)
class AuditResult(ScenarioTable[ScenarioResult]):
    """The outcome of :func:`audit`: ``result.nominal`` and ``result[name]`` per scenario."""

    agent: str
    env: str
    seed: int
    episodes: int
    reference: float
    confidence: float
    thresholds: Thresholds
    nominal: ScenarioResult
    scenarios: dict[str, ScenarioResult]
    seconds: float = 0.0
    #: the nominal mean return's margin over the reference; not clearly positive: every
    #: scenario is rated INCONCLUSIVE
    margin: Margin | None = None
    #: what the agent says of itself beyond its name (an exported robot policy: how it
    #: runs batches, its joint names and action scale), a line each
    agent_details: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> ScenarioResult:
        if name == "nominal":
            return self.nominal
        return super().__getitem__(name)

    def to_dict(self) -> dict[str, Any]:
        """A versioned, JSON-serialisable dict (``"schema": 1``) of plain types only."""
        t = self.thresholds
        return {
            "schema": SCHEMA_VERSION,
            "agent": self.agent,
            "agent_details": list(self.agent_details),
            "env": self.env,
            "seed": self.seed,
            "episodes": self.episodes,
            "reference": float(self.reference),
            "nominal_mean": self.nominal.mean_return,
            "reference_margin": None if self.margin is None else {
                "mean": self.margin.mean, "ci_low": self.margin.low,
                "ci_high": self.margin.high, "clear": self.margin.clear},
            "confidence": float(self.confidence),
            "thresholds": {"pass": t.pass_, "mild": t.mild, "degraded": t.degraded},
            "seconds": float(self.seconds),
            "deployment": None if self.deployment is None else self.deployment.to_dict(),
            "stress": None if self.stress is None else self.stress.to_dict(),
            "nominal": self.nominal.to_dict(),
            "scenarios": {name: r.to_dict() for name, r in self.scenarios.items()},
        }

    @property
    def inconclusive(self) -> str | None:
        """Why the scenarios are rated INCONCLUSIVE (the agent does not clearly beat its
        reference: one reason for all), or None when they are rated.

        >>> import numpy as np
        >>> from pytest_rlaudit import audit
        >>> balance = lambda obs: (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)
        >>> audit(balance, "CartPole-v1", ["delay"], episodes=2).inconclusive is None
        True
        """
        unrated = next((r.diagnosis for r in self if r.rating == INCONCLUSIVE), None)
        return None if unrated is None else f"every scenario is {INCONCLUSIVE}: {unrated}"

    def __str__(self) -> str:
        header = (f"audit of {self.agent} on {self.env}: {self.episodes} paired episodes per "
                  f"scenario, seed {self.seed}\nratios of: nominal mean return "
                  f"{fixed(self.nominal.mean_return, 1)}, reference {fixed(self.reference, 1)}"
                  + "".join(f"\nagent: {line}" for line in self.agent_details))
        level = f"{self.confidence:.0%} CI"
        rows = [("scenario", "category", "mean return", "ratio", level, "rating", "p",
                 "env steps")]
        for r in (self.nominal, *self.scenarios.values()):
            nominal = r is self.nominal
            rows.append((
                r.name, r.category, f"{r.mean_return:.1f}",
                "-" if nominal else fixed(r.ratio),
                "-" if nominal else interval(*r.ci),
                "-" if nominal else r.rating,
                p_value(r.p_value),
                f"{np.median(r.env_steps):.0f}",
            ))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [header, ""]
        for row in rows:
            lines.append("  ".join(c.ljust(w) if i in (0, 1, 5) else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(row, widths, strict=True))
                                   ).rstrip())
        summary = [f"{label} {agg.rating}" + ("" if agg.rating == INCONCLUSIVE else
                                               f" (min ratio {fixed(agg.score)}, {agg.scenario})")
                   for label, agg in (("deployment", self.deployment), ("stress", self.stress))
                   if agg is not None]
        if summary:
            lines += ["", "; ".join(summary)]
        diagnosed = [r for r in self if r.diagnosis is not None and r.rating != INCONCLUSIVE]
        unrated = self.inconclusive
        if diagnosed or unrated:
            lines.append("")
        if unrated is not None:  # one reason for every scenario: said once
            lines.append(_wrapped(unrated))
        lines += [_wrapped(f"{r.name}: {r.diagnosis}") for r in diagnosed]
        return "\n".join(lines)


def _wrapped(paragraph: str) -> str:
    """A diagnosis paragraph in lines of at most 90 characters, as wide as the table
    above it (one line of 600 characters ran off a notebook's cell and a docs page)."""
    return textwrap.fill(paragraph, width=90, break_long_words=False, break_on_hyphens=False)
