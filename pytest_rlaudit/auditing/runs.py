"""``audit_runs()``: several training runs of one recipe, audited on the same episodes,
summarised as rliable does: the interquartile mean (IQM) of the runs' return ratios and
its interval (:mod:`pytest_rlaudit.stats.runs`).

A recipe's robustness is a claim about its training runs, not one checkpoint: one seed
of PPO may keep 95% of its return under jitter and the next 60%. Every run is audited
exactly as :func:`~pytest_rlaudit.audit` audits it (each run's numbers equal a plain
audit's), on the same episode seeds, so runs are paired with each other too.

>>> import numpy as np
>>> from pytest_rlaudit import audit_runs
>>> def controller(gain):  # three "runs": the same controller, differently tuned
...     return lambda obs: (obs[:, 2] + gain * obs[:, 3] > 0).astype(np.int64)
>>> runs = audit_runs([controller(g) for g in (0.3, 0.5, 0.7)], "CartPole-v1",
...                   scenarios=["delay"], episodes=4)
>>> delay = runs["delay"]
>>> len(delay.per_run), delay.rating
(3, 'PASS')
>>> bool(delay.ci[0] <= delay.iqm <= delay.ci[1])
True
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._format import fixed, interval
from ..errors import InvalidArgumentError
from ..rollout.calls import CALL_TIMEOUT
from ..rollout.runner import DEFAULT_MAX_STEPS
from ..stats import DEFAULT_THRESHOLDS, INCONCLUSIVE, Thresholds, rating
from ..stats.runs import iqm, iqm_ci, performance_profile
from ..world.agents import EnvNeeds
from ..world.envs import EnvLike
from ..world.scenarios import ScenarioLike
from .engine import Engine
from .measure import stream_seed
from .outcomes import SCHEMA_VERSION, AuditResult, ScenarioTable
from .results import run_audit
from .settings import AuditSettings

__all__ = ["audit_runs", "RunsResult", "RunsScenario", "resolve_runs"]


@dataclass(frozen=True)
class RunsScenario:
    """One scenario across the runs: each run's ratio (``per_run[j]``, equal to a plain
    audit of run ``j``) and nominal mean return, their IQMs, the IQM's interval (at
    ``confidence``: :func:`~pytest_rlaudit.stats.runs.iqm_ci`) and its rating.

    ``rating`` rates the IQM on the same scale and by the same rule as a single audit
    rates its ratio (the point estimate: :func:`~pytest_rlaudit.stats.rating`), so PASS
    means the same in both; INCONCLUSIVE when any run's ratio is (its nominal return is
    not clearly above the reference, so its ratio is noise, and an IQM with it may be).
    """

    name: str
    category: str
    labels: tuple[str, ...]
    per_run: np.ndarray
    per_run_ci: tuple[tuple[float, float], ...]
    per_run_ratings: tuple[str, ...]
    nominal: np.ndarray
    iqm: float
    ci: tuple[float, float]
    rating: str
    confidence: float = 0.95

    @property
    def runs(self) -> int:
        return len(self.per_run)

    @property
    def ratio(self) -> float:
        """The ratio the scenario is rated on (and a row shows): the IQM."""
        return self.iqm

    @property
    def nominal_iqm(self) -> float:
        """The IQM of the runs' nominal mean returns: what the ratios are ratios of."""
        return iqm(self.nominal)

    def profile(self, taus: Sequence[float] | np.ndarray) -> np.ndarray:
        """The fraction of runs whose ratio exceeds each of ``taus`` (a performance
        profile: :func:`~pytest_rlaudit.stats.runs.performance_profile`)."""
        return performance_profile(self.per_run, taus)

    def to_dict(self) -> dict[str, Any]:
        """Plain types only. Keys: ``name``, ``category``, ``runs`` (count), ``labels``,
        ``per_run`` (ratios, in the order of ``labels``), ``per_run_ci`` (each run's own
        interval, ``[low, high]``), ``per_run_ratings``, ``nominal_means`` (each run's
        nominal mean return), ``iqm``, ``ci_low``, ``ci_high``, ``rating``,
        ``nominal_iqm``."""
        return {
            "name": self.name,
            "category": self.category,
            "runs": self.runs,
            "labels": list(self.labels),
            "per_run": [float(r) for r in self.per_run],
            "per_run_ci": [[float(lo), float(hi)] for lo, hi in self.per_run_ci],
            "per_run_ratings": list(self.per_run_ratings),
            "nominal_means": [float(m) for m in self.nominal],
            "iqm": float(self.iqm),
            "ci_low": float(self.ci[0]),
            "ci_high": float(self.ci[1]),
            "rating": self.rating,
            "nominal_iqm": float(self.nominal_iqm),
        }


@dataclass(frozen=True)
class RunsResult(ScenarioTable[RunsScenario]):
    """The outcome of :func:`audit_runs`: ``result[name]`` per scenario (a
    :class:`RunsScenario`), ``result.runs`` the runs' own :class:`AuditResult`, in the
    order of ``labels``."""

    name: str
    env: str
    seed: int
    episodes: int
    reference: float
    confidence: float
    thresholds: Thresholds
    labels: tuple[str, ...]
    scenarios: dict[str, RunsScenario]
    runs: tuple[AuditResult, ...]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A versioned, JSON-serialisable dict of plain types. Keys: ``schema``, ``kind``
        (``"runs"``: tells it from a single audit's record), ``name``, ``env``, ``seed``,
        ``episodes`` (per run and scenario), ``reference``, ``confidence``,
        ``thresholds``, ``seconds``, ``labels`` (the runs, in order), ``deployment`` and
        ``stress`` (``{"score", "rating", "scenario"}`` over IQMs, or None),
        ``scenarios`` (name: :meth:`RunsScenario.to_dict`) and ``runs`` (each run's
        :meth:`AuditResult.to_dict`, in the order of ``labels``)."""
        t = self.thresholds
        return {
            "schema": SCHEMA_VERSION,
            "kind": "runs",
            "name": self.name,
            "env": self.env,
            "seed": self.seed,
            "episodes": self.episodes,
            "reference": float(self.reference),
            "confidence": float(self.confidence),
            "thresholds": {"pass": t.pass_, "mild": t.mild, "degraded": t.degraded},
            "seconds": float(self.seconds),
            "labels": list(self.labels),
            "deployment": None if self.deployment is None else self.deployment.to_dict(),
            "stress": None if self.stress is None else self.stress.to_dict(),
            "scenarios": {name: s.to_dict() for name, s in self.scenarios.items()},
            "runs": [r.to_dict() for r in self.runs],
        }

    def __str__(self) -> str:
        header = (f"runs audit of {self.name} on {self.env}: {len(self.runs)} runs, "
                  f"{self.episodes} paired episodes per scenario each, seed {self.seed}; "
                  f"reference {fixed(self.reference, 1)}")
        level = f"{self.confidence:.0%} CI"
        rows = [("scenario", "category", "IQM ratio", level, "runs (min to max)", "rating",
                 "nominal IQM")]
        for s in self:
            rows.append((s.name, s.category, fixed(s.iqm), interval(*s.ci),
                         f"{s.runs} ({interval(float(s.per_run.min()), float(s.per_run.max()))})",
                         s.rating, fixed(s.nominal_iqm, 1)))
        lines = [header, "", *_table(rows, left=(0, 1, 5))]
        summary = [f"{label} {agg.rating}" + ("" if agg.rating == INCONCLUSIVE else
                                               f" (min IQM ratio {fixed(agg.score)}, {agg.scenario})")
                   for label, agg in (("deployment", self.deployment), ("stress", self.stress))
                   if agg is not None]
        if summary:
            lines += ["", "; ".join(summary)]
        per_run = [("run", "nominal", *self.scenarios)]
        for j, label in enumerate(self.labels):
            per_run.append((label, fixed(self.runs[j].nominal.mean_return, 1),
                            *(fixed(s.per_run[j]) for s in self)))
        lines += ["", "ratio of each run:", *_table(per_run, left=(0,))]
        return "\n".join(lines)


def _table(rows: Sequence[tuple[str, ...]], left: tuple[int, ...]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                      for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in rows]


def resolve_runs(agents: Any) -> tuple[list[Any], str | None]:
    """The runs ``agents`` names, and the glob pattern if it is one: a string (or path)
    is a glob, its matches sorted (so run order, and every number, does not depend on
    the file system's), unless it is a path that exists, taken as it is (one run: a
    folder named ``run[1]`` is not a pattern); anything else an iterable of agents. At
    least 2 runs.

    >>> resolve_runs("no/such/run_*")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.InvalidArgumentError: no file or folder matches the agents pattern ...
    """
    pattern = None
    if isinstance(agents, (str, os.PathLike)):
        pattern = os.fspath(agents)
        runs: list[Any] = [pattern] if os.path.exists(pattern) else sorted(glob.glob(pattern))
        if not runs:
            raise InvalidArgumentError(
                f"no file or folder matches the agents pattern {pattern!r} (relative to "
                f"{os.getcwd()}); give a glob of the runs' models, such as "
                "'logs/ppo/CartPole-v1_*', or a list of agents")
    else:
        try:
            runs = list(agents)
        except TypeError:
            raise InvalidArgumentError(
                "agents must be a list of agents (one per training run) or a glob string "
                f"matching their files, got {type(agents).__name__}") from None
    if len(runs) < 2:
        got = "" if not (pattern and runs) else (
            f" ({pattern!r} is an existing path, one run)" if runs[0] == pattern
            else f" ({pattern!r} matches {runs[0]!r} only)")
        raise InvalidArgumentError(
            f"audit_runs needs at least 2 runs to say anything across runs, got {len(runs)}"
            f"{got}; audit one agent with audit(), or give every training run of the recipe")
    return runs, pattern


def audit_runs(
    agents: str | os.PathLike[str] | Iterable[Any],
    env: EnvLike,
    *,
    scenarios: ScenarioLike | Iterable[ScenarioLike] | None = None,
    episodes: int = 30,
    seed: int = 0,
    reference: float | str = 0,
    confidence: float = 0.95,
    thresholds: Thresholds | None = None,
    batch_size: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    workers: int | str | None = None,
    backend: str = "local",
    timeout: float | None = None,
    progress: bool | None = None,
    name: str | None = None,
    call_timeout: float | None = CALL_TIMEOUT,
) -> RunsResult:
    """Audit every training run of a recipe on the same episodes; summarise across runs.

    ``agents``: a list of agents (anything :func:`~pytest_rlaudit.audit` takes), one per
    run, or a glob string matching their files or zoo folders (sorted matches), at least
    2. Each run is audited as ``audit(agent, env, scenarios, episodes, seed, ...)``
    would, on episode seeds ``seed + i``, the same in every run; ``result.runs[j]`` equals
    that audit. The random policy's returns (``reference="random"``) depend only on the
    env and the seeds: they are run once and shared by runs on the same env. Per
    scenario, ``result[name]`` (a :class:`RunsScenario`) has each run's ratio, their IQM,
    the IQM's interval (runs resampled with replacement: see
    :func:`~pytest_rlaudit.stats.runs.runs_ratio_ci` for why that counts the episode
    noise too, and the measured coverage) and its rating. Fewer than 5 runs give wide
    intervals. ``timeout`` bounds all the runs together (``call_timeout`` each call, as in
    :func:`~pytest_rlaudit.audit`); ``name`` labels the recipe in
    reports (default: the glob, else the runs' name if they share one, else the first
    run's and how many more). The other arguments are :func:`~pytest_rlaudit.audit`'s.
    A run that a plain audit refuses (one that does not beat the random policy, say)
    stops this one with that error, which names the run.
    """
    __tracebackhide__ = True
    settings = AuditSettings(
        episodes=episodes, seed=seed, reference=reference, confidence=confidence,
        thresholds=thresholds or DEFAULT_THRESHOLDS, batch_size=batch_size,
        max_steps=max_steps, workers=workers, backend=backend, timeout=timeout,
        progress=progress, call_timeout=call_timeout)
    runs, pattern = resolve_runs(agents)
    started = time.perf_counter()
    each = settings.but(timeout=None)  # the deadline is the whole audit's, below
    randoms: list[tuple[EnvNeeds | None, np.ndarray]] = []
    results: list[AuditResult] = []
    with settings.limits():
        for j, agent in enumerate(runs):
            engine: Engine | None = None
            try:
                engine = Engine(agent, env, each)
                needs = engine.policy.env_needs
                needs = needs if isinstance(needs, EnvNeeds) else None  # else: env unchanged
                random = next((r for n, r in randoms if n == needs), None)
                results.append(run_audit(agent, env, scenarios, each, random=random,
                                         engine=engine))
                if random is None:
                    randoms.append((needs, engine.random(settings.episodes)))  # kept: no rerun
            except Exception as exc:
                if hasattr(exc, "add_note"):  # Python 3.11+
                    named = engine.name if engine is not None else _label(agent, None)
                    exc.add_note(f"(in run {j} of audit_runs: {named})")
                raise
    labels = _labels(runs, results)
    raw = {_label(a, r) for a, r in zip(runs, results, strict=True)}
    default = raw.pop() if len(raw) == 1 else f"{labels[0]} and {len(labels) - 1} more"
    return RunsResult(
        name=name or pattern or default,
        env=results[0].env, seed=settings.seed, episodes=settings.episodes,
        reference=results[0].reference, confidence=settings.confidence,
        thresholds=settings.thresholds, labels=labels,
        scenarios=summarise_runs(results, labels, settings),
        runs=tuple(results), seconds=time.perf_counter() - started)


def summarise_runs(results: Sequence[AuditResult], labels: tuple[str, ...],
                   settings: AuditSettings) -> dict[str, RunsScenario]:
    """Each scenario across the runs' results: per-run ratios, IQM, interval, rating."""
    nominal = np.array([r.nominal.mean_return for r in results])
    out = {}
    for name, first in results[0].scenarios.items():
        members = [r[name] for r in results]
        per_run = np.array([m.ratio for m in members], dtype=np.float64)
        ratings = tuple(m.rating for m in members)
        centre = iqm(per_run)
        ci = iqm_ci(per_run, confidence=settings.confidence,
                    seed=stream_seed(settings.seed, name))
        rated = INCONCLUSIVE if INCONCLUSIVE in ratings else rating(centre, settings.thresholds)
        out[name] = RunsScenario(name, first.category, labels, per_run,
                                 tuple(m.ci for m in members), ratings, nominal, centre, ci,
                                 rated, settings.confidence)
    return out


def _label(agent: Any, result: AuditResult | None) -> str:
    if isinstance(agent, (str, os.PathLike)) and os.path.exists(agent):
        return os.fspath(agent)
    return result.agent if result is not None else (
        agent if isinstance(agent, str) else type(agent).__name__)


def _labels(runs: Sequence[Any], results: Sequence[AuditResult]) -> tuple[str, ...]:
    """Each run's label (its path, else its agent's name), made unique by its index."""
    raw = [_label(a, r) for a, r in zip(runs, results, strict=True)]
    return tuple(label if raw.count(label) == 1 else f"{label} [{j}]"
                 for j, label in enumerate(raw))
