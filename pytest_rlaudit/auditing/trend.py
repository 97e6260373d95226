"""Robustness over a history of runs: each audited scenario's ratio and interval run by
run, and the first run whose paired drop against the run before is significant.

Runs are read from a history folder (:mod:`.history`) and taken only among runs of one
pairing key, so consecutive runs ran the same episodes: each run is compared with the
one before it as ``--rl-compare`` would (:func:`~.comparison.compare_records`: paired
episode by episode, a ratio drop significant when its whole interval of change is below
0). A slide made of steps none of which is significant marks nothing; the table shows it.

>>> import numpy as np
>>> from pathlib import Path
>>> from pytest_rlaudit.auditing.history import Run
>>> def run(number, returns):
...     rec = {"nodeid": "t::spike", "scenario": "spike", "agent": "a", "env": "e",
...            "returns": returns, "nominal_returns": [500.0] * 8, "seeds": list(range(8)),
...            "ratio": float(np.mean(returns)) / 500, "ci_low": 0.0, "ci_high": 1.0,
...            "rating": "PASS"}
...     return Run(Path(f"{number:04d}_c{number}.json"), number, f"c{number}", False, True, {},
...                doc={"results": [rec]})
>>> (trend,) = trends([run(1, [500.0] * 8), run(2, [500.0] * 8), run(3, [100.0] * 8)])
>>> [point.run.number for point in trend.points], trend.first_drop.run.number
([1, 2, 3], 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .comparison import Change, compare_records
from .history import Run

__all__ = ["Point", "Trend", "trends"]


@dataclass(frozen=True)
class Point:
    """One scenario in one run: its ratio, interval and rating, and ``drop``: its ratio's
    change against the run before when that was a significant drop (else None)."""

    run: Run
    ratio: float
    ci_low: float
    ci_high: float
    rating: str
    drop: Change | None = None


@dataclass
class Trend:
    """One audited test (``key``: its node id) across runs; ``agent`` and ``env`` as its
    latest run names them."""

    key: str
    scenario: str
    agent: str
    env: str
    points: list[Point] = field(default_factory=list)
    #: the rating thresholds of its latest run (``degraded``, ``mild``, ``pass``)
    thresholds: dict[str, float] = field(default_factory=dict)
    #: runs of these settings before :attr:`points` that were not looked at (``last``)
    earlier: int = 0

    @property
    def first_drop(self) -> Point | None:
        """The first run whose ratio fell significantly against the run before, where
        every run was looked at (:attr:`earlier` is 0); else None: a drop among the
        latest runs may not be the first."""
        if self.earlier:
            return None
        return next((point for point in self.points if point.drop is not None), None)


def trends(runs: Sequence[Run], last: int | None = None) -> list[Trend]:
    """The trend of every test the ``runs`` audited (runs of one pairing key, in order),
    in the order the tests first appear; with ``last``, over the latest ``last`` runs only
    (each comparison costs a paired bootstrap per scenario: a long history is read in a
    window), each compared with the run before it."""
    earlier = max(0, len(runs) - last) if last is not None else 0
    out: dict[str, Trend] = {}
    before: Run | None = runs[earlier - 1] if earlier else None
    for run in runs[earlier:]:
        results = run.doc.get("results", [])
        drops: dict[str, Change] = {}
        if before is not None:
            comparison = compare_records(before.doc.get("results", []), results)
            drops = {c.key: c for c in comparison.drops if c.metric == "ratio"}
        for rec in results:
            trend = out.setdefault(rec["nodeid"], Trend(rec["nodeid"], rec["scenario"],
                                                        rec["agent"], rec["env"]))
            trend.points.append(Point(run, float(rec["ratio"]), float(rec["ci_low"]),
                                      float(rec["ci_high"]), str(rec["rating"]),
                                      drops.get(rec["nodeid"])))
            # the latest run's names and bands: the agent may be renamed along the way
            trend.agent, trend.env = rec["agent"], rec["env"]
            trend.thresholds = dict(rec.get("thresholds") or {})
        before = run
    for trend in out.values():
        trend.earlier = earlier
    return list(out.values())
