"""``audit()``: an agent on the nominal env and on each scenario, paired by seed, with statistics.

>>> import numpy as np
>>> from pytest_rlaudit import audit
>>> def controller(obs):  # a hand-tuned CartPole controller
...     return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)
>>> result = audit(controller, "CartPole-v1", scenarios=["delay", "spike"], episodes=8)
>>> result["delay"].rating, result["spike"].rating
('PASS', 'FAIL')
>>> low, high = result["spike"].ci
>>> bool(low <= result["spike"].ratio <= high)
True
>>> result.deployment.rating    # the worst deployment scenario's rating
'FAIL'

(The module is ``auditing``, not ``audit``: a submodule named ``audit`` would replace the
function ``pytest_rlaudit.audit`` on the package as soon as it was imported.)
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .._checks import confidence as check_confidence
from .._checks import integer
from .._checks import seed as check_seed
from .._format import fixed, interval, p_value
from .._seeding import stable_hash
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
    Margin,
    Thresholds,
    check_reference,
    degradation_p_value,
    holm,
    paired_ratio_ci,
    rating,
    ratio,
    reference_margin,
)
from ..world import scenarios as registry
from ..world.agents import as_policy, env_for, normalizes
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, Scenario, ScenarioLike
from .diagnosis import Diagnosis, diagnose, parting_step, unmeasurable
from .progress import showing
from .records import plain
from .reference import check_beats_random, check_reference_arg, random_returns, reference_score

__all__ = ["audit", "AuditResult", "ScenarioResult", "Aggregate", "SCHEMA_VERSION",
           "summarise"]

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


@dataclass(frozen=True)
class AuditResult:
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

    def __getitem__(self, name: str) -> ScenarioResult:
        if name == "nominal":
            return self.nominal
        try:
            return self.scenarios[name]
        except KeyError:
            raise KeyError(
                f"scenario {name!r} was not audited; this result has: "
                f"{', '.join(self.scenarios) or 'no scenarios'}"
            ) from None

    def __iter__(self) -> Iterator[ScenarioResult]:
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

    def to_dict(self) -> dict[str, Any]:
        """A versioned, JSON-serialisable dict (``"schema": 1``) of plain types only."""
        t = self.thresholds
        return {
            "schema": SCHEMA_VERSION,
            "agent": self.agent,
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

    def __str__(self) -> str:
        header = (f"audit of {self.agent} on {self.env}: {self.episodes} paired episodes per "
                  f"scenario, seed {self.seed}; nominal mean return "
                  f"{fixed(self.nominal.mean_return, 1)}, reference {fixed(self.reference, 1)}")
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
        unrated = next((r.diagnosis for r in self if r.rating == INCONCLUSIVE), None)
        if diagnosed or unrated:
            lines.append("")
        if unrated is not None:  # one reason for every scenario: said once
            lines.append(f"every scenario is {INCONCLUSIVE}: {unrated}")
        lines += [f"{r.name}: {r.diagnosis}" for r in diagnosed]
        return "\n".join(lines)


def _stream_seed(seed: int, name: str) -> int:
    """Bootstrap and permutation seed of one scenario: same audit seed, same interval."""
    return int(np.random.SeedSequence([int(seed), stable_hash(name)]).generate_state(1)[0])


def summarise(
    nominal: EpisodeBatch,
    perturbed: dict[Scenario, EpisodeBatch],
    *,
    reference: float,
    confidence: float,
    seed: int,
    thresholds: Thresholds,
    intervals: dict[str, tuple[float, float]] | None = None,
    random: np.ndarray | None = None,
    agent: str = "under audit",
    normalized: bool = False,
    random_reference: bool = False,
) -> tuple[ScenarioResult, dict[str, ScenarioResult], Margin]:
    """Statistics of paired batches: ratios, intervals, Holm-adjusted p-values, ratings and
    diagnoses, and the nominal return's margin over the reference. ``intervals``
    overrides the computed interval of a scenario (adaptive runs report the interval
    their stopping rule used). ``random``: a random policy's returns on the same
    episodes, which the nominal ones must beat (:mod:`.reference`); ``random_reference``:
    the reference is their mean (the margin is then paired with them); ``normalized``:
    the agent normalises its observations (diagnoses do not advise it).

    Every scenario is rated INCONCLUSIVE, with :func:`.diagnosis.unmeasurable` as its
    diagnosis, when the margin is not clearly positive."""
    if random is not None:
        check_beats_random(agent, nominal.returns, random)
    nominal_mean = float(np.mean(nominal.returns))
    check_reference(nominal_mean, reference)
    margin = reference_margin(
        nominal.returns, random if random_reference and random is not None else reference,
        confidence=confidence)
    unclear = None if margin.clear else unmeasurable(
        margin, nominal=nominal_mean, reference=reference, random=random_reference)
    raw_p = {s.name: degradation_p_value(nominal.returns, b.returns, seed=_stream_seed(seed, s.name))
             for s, b in perturbed.items()}
    adjusted = holm(raw_p)
    results = {}
    for s, b in perturbed.items():
        r = ratio(nominal.returns, b.returns, reference)
        ci = (intervals or {}).get(s.name) or paired_ratio_ci(
            nominal.returns, b.returns, reference=reference, confidence=confidence,
            seed=_stream_seed(seed, s.name))
        rated, diagnosis = (INCONCLUSIVE, unclear) if unclear else (rating(r, thresholds), None)
        if rated not in ("PASS", INCONCLUSIVE):
            parting, parted = parting_step(nominal.traces, b.traces, reference=reference)
            diagnosis = diagnose(s, nominal_env_steps=nominal.env_steps,
                                 perturbed_env_steps=b.env_steps, parting=parting,
                                 parted=parted, ratio=r, rating=rated, reference=reference,
                                 normalized=normalized)
        results[s.name] = ScenarioResult(
            s.name, s.category, b.returns, b.lengths, b.env_steps, b.capped, b.seeds, r, ci,
            adjusted[s.name], rated, diagnosis, dict(s.params), b.traces)
    nominal_result = ScenarioResult(
        "nominal", "nominal", nominal.returns, nominal.lengths, nominal.env_steps,
        nominal.capped, nominal.seeds, 1.0, (1.0, 1.0), None, "PASS", None, {}, nominal.traces)
    return nominal_result, results, margin


def check_episodes(episodes: Any, name: str = "episodes") -> int:
    return integer(name, episodes, minimum=2,
                   why=" (a ratio and its interval need paired episodes)")


@bounded
def audit(
    agent: Any,
    env: EnvLike,
    scenarios: ScenarioLike | Iterable[ScenarioLike] | None = None,
    episodes: int = 30,
    seed: int = 0,
    batch_size: int | None = None,
    reference: float | str = 0,
    confidence: float = 0.95,
    *,
    thresholds: Thresholds | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    workers: int | str | None = None,
    backend: str = "local",
    timeout: float | None = None,
    progress: bool | None = None,
) -> AuditResult:
    """Audit ``agent`` on ``env`` under ``scenarios`` (default: the deployment + stress suite).

    Episode ``i`` of every scenario, nominal included, resets with env seed ``seed + i``,
    so returns are paired by episode. ``reference`` is the score a ratio is measured
    from: 0, a number, or ``"random"`` (a uniform random policy on the same seeds);
    ``ratio = (mean(perturbed) - ref) / (mean(nominal) - ref)``. ``thresholds`` sets the
    rating scale (default PASS > 0.95, MILD > 0.80, DEGRADED > 0.50).

    ``workers`` (a count or ``"auto"``) steps the envs in worker processes while this
    process makes the batched policy calls; ``backend="ray"`` runs shards of the episodes
    on Ray actors (``workers`` of them; default: the cluster's CPUs). Neither changes a
    number: see :func:`~pytest_rlaudit.rollout.runner.run_episodes`.

    ``timeout`` (seconds, None: no limit) bounds the whole audit: past it, it stops with
    :class:`~pytest_rlaudit.errors.RolloutTimeoutError` naming the scenario, episode and
    agent step it was stuck in, and its worker processes are killed. An env step that
    never returns is interrupted when the audit runs in the main thread (a ``SIGALRM``
    timer, sharing the signal with pytest-timeout's) and in worker processes; in another
    thread the deadline is checked between decision steps only (see
    :mod:`pytest_rlaudit.rollout.deadline`).

    ``progress``: once the audit has run about 2 s, show its episodes done of total and
    the time left in a tqdm bar (None, the default: when standard error is a terminal or
    this is a notebook, and tqdm is installed; True: always, a plain line without tqdm;
    False: never). See :mod:`pytest_rlaudit.auditing.progress`.

    >>> r = audit("random", "CartPole-v1", scenarios="speed_5x", episodes=2)
    >>> sorted(r.to_dict()["scenarios"])
    ['speed_5x']
    """
    episodes = check_episodes(episodes)
    seed = check_seed(seed, episodes=episodes)
    confidence = check_confidence(confidence)
    check_reference_arg(reference)
    run = partial(run_episodes, seed=seed, batch_size=batch_size, max_steps=max_steps,
                  workers=check_workers(workers), backend=check_backend(backend))
    chosen = [s for s in registry.resolve(scenarios) if s.name != NOMINAL.name]
    thresholds = thresholds or DEFAULT_THRESHOLDS
    policy = as_policy(agent, env=env)
    spec = env_for(policy, env)
    registry.check_applicable(chosen, spec.make)  # before any rollout, not after nominal
    check_replay(policy, spec, seed=seed)  # the seeds fix the episodes: else no pairing
    name = getattr(policy, "name", type(policy).__name__)
    started = time.perf_counter()
    with showing(progress, expected=(len(chosen) + 2) * episodes):  # + nominal and random
        batches = run(policy, spec, [NOMINAL, *chosen], episodes)
        # as run: a scenario sized by the observations' spread with the spread calibrated
        chosen = [s.with_params(**batches[s.name].params) for s in chosen]
        random = random_returns(spec, episodes, run=run)
    ref = reference_score(reference, random)
    nominal, results, margin = summarise(
        batches["nominal"], {s: batches[s.name] for s in chosen}, reference=ref,
        confidence=confidence, seed=seed, thresholds=thresholds, random=random, agent=name,
        normalized=normalizes(policy), random_reference=reference == "random")
    return AuditResult(
        agent=name,
        env=spec.name,
        seed=int(seed),
        episodes=episodes,
        reference=ref,
        confidence=float(confidence),
        thresholds=thresholds,
        nominal=nominal,
        scenarios=results,
        seconds=time.perf_counter() - started,
        margin=margin,
    )
