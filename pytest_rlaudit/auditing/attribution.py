"""Which sensor: an observation scenario's damage attributed to named observation groups.

The scenario runs on one group only, on every group but one, and (for the Shapley
shares) on every coalition of groups, each paired on the seeds of the nominal episodes
and of the full scenario, and drawing the full scenario's own noise (common random
numbers: see :mod:`pytest_rlaudit.world.perturbations.groups`). So "the scenario on every
group" is the scenario itself, bit for bit, and two groups' runs differ only in where
the perturbation is seen.

Intervals and tests. ``only[g]`` and ``all_but[g]`` are a family of 2G contrasts with
the nominal episodes: each p-value (one-sided, H0: no degradation; a paired sign-flip
test) is Holm-adjusted across the family, and each interval is at the Bonferroni level
``1 - (1 - confidence) / 2G``, simultaneous for the family (Holm's step-down procedure has
no intervals of its own; these contain what it decides). Shapley shares get paired
bootstrap intervals over episodes (and, when sampled, over permutations too).

The culprit search looks for the smallest set of groups whose perturbation alone
reproduces the failure (the full scenario's rating or worse, and a significant loss
against nominal): every coalition in order of size when all were run (up to 8 groups),
else delta debugging over groups; then the same inside the culprit groups, element by
element; then the culprits are run again on fresh seeds to confirm them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import PerturbationError
from ..rollout.runner import DEFAULT_MAX_STEPS
from ..stats import DEFAULT_THRESHOLDS, Thresholds
from ..stats.paired import degradation_p_value, holm, paired_ratio_ci, ratio
from ..stats.ratings import RATINGS, rating
from ..world import scenarios as registry
from ..world.envs import EnvLike
from ..world.observation_groups import Groups, observation_groups
from ..world.perturbations import (
    DroppedObservation,
    ObservationDelay,
    ObservationNoise,
    OnPart,
    Perturbation,
    Scheduled,
)
from ..world.scenarios import Scenario, ScenarioLike
from .engine import Engine
from .reference import reference_score
from .settings import AuditSettings, check_episodes

__all__ = ["attribute", "Attribution", "Contrast", "Share", "EXACT_GROUPS", "METHODS"]

#: Up to this many groups, every coalition is run and the Shapley shares are exact.
EXACT_GROUPS = 8
#: Permutations sampled for Shapley shares beyond :data:`EXACT_GROUPS` groups.
PERMUTATIONS = 16
#: At most this many runs in the culprit search's delta debugging (each ``episodes``).
SEARCH_RUNS = 40
METHODS = ("auto", "exact", "sampled")
_OBSERVATION_CHANNELS = {"obs_noise", "delay", "dropped"}


@dataclass(frozen=True)
class Contrast:
    """The scenario on ``groups`` only: its return ratio to nominal, the interval (at the
    family's level), the Holm-adjusted p-value (H0: no degradation) and the rating."""

    groups: tuple[str, ...]
    ratio: float
    ci: tuple[float, float]
    p_value: float
    rating: str

    def to_dict(self) -> dict[str, Any]:
        return {"groups": list(self.groups), "ratio": self.ratio, "ci_low": self.ci[0],
                "ci_high": self.ci[1], "p_value": self.p_value, "rating": self.rating}


@dataclass(frozen=True)
class Share:
    """A group's Shapley share of the ratio lost (they sum to ``1 - full ratio``), with
    its bootstrap interval."""

    value: float
    ci: tuple[float, float]

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "ci_low": self.ci[0], "ci_high": self.ci[1]}


@dataclass(frozen=True)
class Attribution:
    """What :func:`attribute` found: see the module and the how-to "Which sensor breaks it".

    ``culprits``: the smallest set of groups (or, refined, elements such as ``qvel[2]``)
    whose perturbation alone reproduces the failure; ``confirmed``: whether it did again
    on fresh seeds; ``interactions``: where perturbing more groups was milder than fewer;
    ``notes``: what the culprit search could not assume or did not finish.
    """

    agent: str
    env: str
    scenario: str
    episodes: int
    seed: int
    confidence: float
    reference: float
    groups: Groups
    full: Contrast
    only: dict[str, Contrast]
    all_but: dict[str, Contrast]
    shapley: dict[str, Share]
    shapley_method: str
    culprits: tuple[str, ...]
    confirmed: bool | None
    interactions: tuple[str, ...]
    notes: tuple[str, ...]
    runs: int
    diagnosis: str = field(default="")

    def to_dict(self) -> dict[str, Any]:
        """The record of kind ``"attribution"`` (summary.json's, validated there)."""
        return {
            "kind": "attribution", "agent": self.agent, "env": self.env,
            "scenario": self.scenario, "episodes": self.episodes, "seed": self.seed,
            "confidence": self.confidence, "reference": self.reference,
            "groups": {n: list(p) for n, p in self.groups.parts.items()},
            "groups_source": self.groups.source,
            "full": self.full.to_dict(),
            "only": {g: c.to_dict() for g, c in self.only.items()},
            "all_but": {g: c.to_dict() for g, c in self.all_but.items()},
            "shapley": {g: s.to_dict() for g, s in self.shapley.items()},
            "shapley_method": self.shapley_method,
            "culprits": list(self.culprits), "confirmed": self.confirmed,
            "interactions": list(self.interactions), "notes": list(self.notes),
            "runs": self.runs, "diagnosis": self.diagnosis,
        }


def observation_only(scenario: Scenario) -> bool:
    """Whether ``scenario`` changes only what the agent sees (noise, delay, dropped
    frames, a schedule of them, an observation wrapper of one's own): what attribution
    to observation groups needs."""
    made = scenario.perturbation
    if not (isinstance(made, type) and issubclass(made, Perturbation)):
        return False
    if issubclass(made, Scheduled):
        schedule = scenario.schedule
        return schedule is not None and set(schedule.channels) <= _OBSERVATION_CHANNELS
    if issubclass(made, (ObservationDelay, ObservationNoise, DroppedObservation)):
        return True
    return bool(made.LOCKSTEP and not made.TIMING and made.decide is Perturbation.decide
                and getattr(made, "attach_policy", None) is None)


def attribute(agent: Any, env: EnvLike, scenario: ScenarioLike, *,
              groups: Mapping[str, Any] | None = None, episodes: int = 30, seed: int = 0,
              confidence: float = 0.95, method: str = "auto", reference: float | str = 0,
              thresholds: Thresholds | None = None, max_steps: int = DEFAULT_MAX_STEPS,
              workers: int | str | None = None) -> Attribution:
    """Attribute an observation scenario's damage to named observation groups.

    ``groups`` maps names to slices or element indices (keys, for a Dict observation);
    without it they come from the env and the agent (see
    :func:`~pytest_rlaudit.world.observation_groups.observation_groups`). ``method``:
    ``"exact"`` runs every coalition of groups (Shapley shares exact; the smallest culprit
    set found by size), ``"sampled"`` runs ``only``/``all_but`` and
    :data:`PERMUTATIONS` permutations, ``"auto"`` is exact up to :data:`EXACT_GROUPS`
    groups. Episode ``i`` of every run resets with seed ``seed + i``.

    >>> from pytest_rlaudit.auditing.attribution import attribute
    >>> pole = lambda obs: (obs[:, 2] + obs[:, 3] > 0).astype(int)  # reads the pole only
    >>> a = attribute(pole, "CartPole-v1", "obs_noise", episodes=4,
    ...               groups={"cart": [0, 1], "pole": [2, 3]})
    >>> a.only["cart"].ratio
    1.0
    """
    if method not in METHODS:
        raise ValueError(f"attribute: method must be one of {', '.join(METHODS)}, got {method!r}")
    check_episodes(episodes)
    chosen = registry.resolve(scenario)
    if len(chosen) != 1:
        raise ValueError(f"attribute takes one scenario, got {len(chosen)}")
    base = chosen[0]
    if not observation_only(base):
        raise PerturbationError(
            f"attribute: scenario {base.name!r} does not act on observations only "
            "(noise, delay, dropped frames, a schedule of them), so it cannot be split "
            "among observation groups. Attribute an observation scenario (obs_noise, delay, "
            "dropped_obs, or Schedule(delay=...)).")
    settings = AuditSettings(episodes=episodes, seed=seed, reference=reference,
                             confidence=confidence, thresholds=thresholds or DEFAULT_THRESHOLDS,
                             max_steps=max_steps, workers=workers)
    with settings.limits():
        engine = Engine(agent, env, settings, cache={})
        engine.check([base])
        probe = engine.env.make()
        try:
            found = observation_groups(probe, groups, engine.policy)
        finally:
            probe.close()
        return _Attributor(engine, base, found, method).run()


class _Attributor:
    def __init__(self, engine: Engine, base: Scenario, groups: Groups, method: str) -> None:
        self.engine, self.groups = engine, groups
        self.s = engine.settings
        self.indices = range(self.s.episodes)
        self.nominal = engine.nominal(self.indices).returns
        self.scenario = engine.calibrated(base)
        self.names = groups.names
        self.method = method if method != "auto" else (
            "exact" if len(self.names) <= EXACT_GROUPS else "sampled")
        self.values: dict[frozenset[str], np.ndarray] = {frozenset(): self.nominal}
        self.runs = 0
        self.reference = 0.0

    # --- runs -----------------------------------------------------------------------
    def on(self, part: tuple[Any, ...], indices: range | None = None) -> np.ndarray:
        """Returns of the scenario seen on ``part`` (elements or keys) only."""
        indices = indices or self.indices
        sc = self.scenario
        if part != self.groups.union(self.names) or indices != self.indices:
            sc = Scenario(sc.name, sc.category, OnPart,
                          {"perturbation": sc.perturbation, "params": dict(sc.params),
                           "part": part}, sc.description)
        self.runs += 1
        return self.engine.run([sc], indices)[sc.name].returns

    def value(self, coalition: frozenset[str]) -> np.ndarray:
        if coalition not in self.values:
            self.values[coalition] = self.on(self.groups.union(sorted(coalition)))
        return self.values[coalition]

    def ratio_of(self, returns: np.ndarray, nominal: np.ndarray | None = None) -> float:
        return ratio(self.nominal if nominal is None else nominal, returns, self.reference)

    # --- the attribution ------------------------------------------------------------
    def run(self) -> Attribution:
        everyone = frozenset(self.names)
        if self.s.reference == "random":
            self.reference = reference_score("random", self.engine.random(self.s.episodes))
        else:
            self.reference = reference_score(self.s.reference, np.zeros(1))
        full = self.value(everyone)
        if self.method == "exact":
            for size in range(1, len(self.names)):
                for combo in itertools.combinations(self.names, size):
                    self.value(frozenset(combo))
        only = {g: self.value(frozenset([g])) for g in self.names}
        all_but = {g: self.value(everyone - {g}) for g in self.names}
        family = {("only", g): r for g, r in only.items()}
        family.update({("all_but", g): r for g, r in all_but.items()})
        contrasts = self.contrasts(family)
        full_c = self.contrast(tuple(self.names), full, 1)
        shapley = self.shapley()
        interactions = self.interactions()
        culprits, confirmed, notes = self.culprits(full_c, bool(interactions))
        result = Attribution(
            agent=self.engine.name, env=self.engine.env.name, scenario=self.scenario.name,
            episodes=self.s.episodes, seed=self.s.seed, confidence=self.s.confidence,
            reference=self.reference, groups=self.groups, full=full_c,
            only={g: contrasts[("only", g)] for g in self.names},
            all_but={g: contrasts[("all_but", g)] for g in self.names},
            shapley=shapley, shapley_method=self.method, culprits=culprits,
            confirmed=confirmed, interactions=interactions, notes=notes, runs=self.runs)
        return _with_diagnosis(result)

    def contrast(self, groups: tuple[str, ...], returns: np.ndarray, family: int,
                 p_value: float | None = None) -> Contrast:
        level = 1.0 - (1.0 - self.s.confidence) / family
        value = self.ratio_of(returns)
        ci = paired_ratio_ci(self.nominal, returns, reference=self.reference,
                             confidence=level, seed=self.s.seed)
        p = degradation_p_value(self.nominal, returns, seed=self.s.seed) if p_value is None \
            else p_value
        return Contrast(groups, value, ci, p, rating(value, self.s.thresholds))

    def contrasts(self, family: dict[tuple[str, str], np.ndarray]) -> dict[tuple[str, str], Contrast]:
        raw = {f"{kind}:{g}": degradation_p_value(self.nominal, r, seed=self.s.seed)
               for (kind, g), r in family.items()}
        adjusted = holm(raw)
        out = {}
        for (kind, g), r in family.items():
            shown = (g,) if kind == "only" else tuple(n for n in self.names if n != g)
            out[(kind, g)] = self.contrast(shown, r, len(family), adjusted[f"{kind}:{g}"])
        return out

    def shapley(self) -> dict[str, Share]:
        """Each group's share of the ratio lost, ``1 - v(S)`` being coalition S's loss."""
        names, n = self.names, len(self.nominal)
        rng = np.random.default_rng(np.random.SeedSequence([self.s.seed, 0x5A4B]))
        if self.method == "exact":
            orders: list[tuple[str, ...]] | None = None
        else:
            orders = [tuple(rng.permutation(names).tolist()) for _ in range(PERMUTATIONS)]
            for order in orders:
                for k in range(1, len(order)):
                    self.value(frozenset(order[:k]))
        coalitions = list(self.values)
        table = np.array([self.values[c] for c in coalitions])  # coalitions x episodes
        index = {c: i for i, c in enumerate(coalitions)}
        draws = 2000
        picks = rng.integers(0, n, size=(draws, n))
        means = np.concatenate([table.mean(axis=1)[:, None], table[:, picks].mean(axis=2)], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = 1.0 - (means - self.reference) / (means[index[frozenset()]] - self.reference)
        perm_picks = None if orders is None else rng.integers(0, len(orders), (draws, len(orders)))
        out = {}
        for g in names:
            if orders is None:
                others = [x for x in names if x != g]
                share = np.zeros(draws + 1)
                for size in range(len(others) + 1):
                    weight = (math.factorial(size) * math.factorial(len(names) - size - 1)
                              / math.factorial(len(names)))
                    for combo in itertools.combinations(others, size):
                        s = frozenset(combo)
                        share += weight * (loss[index[s | {g}]] - loss[index[s]])
                point, boot = share[0], share[1:]
            else:
                gains = np.array([loss[index[frozenset(o[:o.index(g) + 1])]]
                                  - loss[index[frozenset(o[:o.index(g)])]] for o in orders])
                point = float(gains[:, 0].mean())
                assert perm_picks is not None
                boot = gains[perm_picks, np.arange(1, draws + 1)[:, None]].mean(axis=1)
            alpha = 1.0 - self.s.confidence
            low, high = np.nanquantile(boot, [alpha / 2, 1 - alpha / 2]) if np.isfinite(
                boot).any() else (point, point)
            out[g] = Share(float(point), (float(min(low, point)), float(max(high, point))))
        return out

    def interactions(self) -> tuple[str, ...]:
        """Pairs of runs where perturbing one group more made it significantly milder."""
        pairs = []
        for small in list(self.values):
            if not small:
                continue
            for g in self.names:
                big = small | {g}
                if g in small or big not in self.values:
                    continue
                pairs.append((small, big))
        if not pairs:
            return ()
        raw = {f"{i}": degradation_p_value(self.values[b], self.values[s], seed=self.s.seed)
               for i, (s, b) in enumerate(pairs)}
        adjusted = holm(raw)
        alpha = 1.0 - self.s.confidence
        found = []
        for i, (s, b) in enumerate(pairs):
            if adjusted[f"{i}"] < alpha:
                found.append(f"perturbing {_words(b)} keeps {self.ratio_of(self.values[b]):.0%}, "
                             f"more than {_words(s)} alone ({self.ratio_of(self.values[s]):.0%}; "
                             f"p = {adjusted[f'{i}']:.3g}, Holm-adjusted)")
        return tuple(found)

    # --- culprits ---------------------------------------------------------------------
    def reproduces(self, returns: np.ndarray, target: str,
                   nominal: np.ndarray | None = None) -> bool:
        nominal = self.nominal if nominal is None else nominal
        value = self.ratio_of(returns, nominal)
        worse = RATINGS.index(rating(value, self.s.thresholds)) >= RATINGS.index(target)
        alpha = 1.0 - self.s.confidence
        return worse and degradation_p_value(nominal, returns, seed=self.s.seed) < alpha

    def culprits(self, full: Contrast, interacting: bool
                 ) -> tuple[tuple[str, ...], bool | None, tuple[str, ...]]:
        notes: list[str] = []
        target = full.rating
        if target == "PASS" or not self.reproduces(self.values[frozenset(self.names)], target):
            return (), None, ("the scenario does not clearly break the agent (rated "
                              f"{full.rating}, ratio {full.ratio:.3f}): nothing to attribute",)
        if self.method == "exact":
            found = next((set(c) for size in range(1, len(self.names) + 1)
                          for c in itertools.combinations(self.names, size)
                          if self.reproduces(self.values[frozenset(c)], target)), set(self.names))
        else:
            found = set(self.ddmin(list(self.names), lambda part: self.reproduces(
                self.value(frozenset(part)), target), notes))
            if interacting:
                notes.append("perturbing more groups was milder somewhere, so delta "
                             "debugging's assumption (a set that breaks it keeps breaking "
                             "it with more groups) does not hold: a smaller set elsewhere "
                             "may break it too")
        culprits = tuple(g for g in self.names if g in found)
        # finer: inside the culprit groups, element by element (the rest perturbed as found)
        fine = Groups({}, self.groups.source, {})
        for g in culprits:
            split = self.groups.split(g)
            fine = Groups({**fine.parts, **split.parts}, fine.source, {**fine.sizes, **split.sizes})
        if len(fine.parts) > len(culprits):
            elements = self.ddmin(list(fine.parts), lambda part: self.reproduces(
                self.on(fine.union(part)), target), notes)
            if len(elements) < len(fine.parts):
                culprits = tuple(elements)
                self.groups = Groups({**self.groups.parts, **{e: fine.parts[e] for e in elements}},
                                     self.groups.source, {**self.groups.sizes,
                                                          **{e: 1 for e in elements}})
        # confirmed on fresh seeds: the next block of episodes, nominal too
        fresh = range(self.s.episodes, 2 * self.s.episodes)
        nominal = self.engine.run([registry.NOMINAL], fresh)["nominal"].returns
        self.runs += 1
        returns = self.on(self.groups.union(list(culprits)), fresh)
        confirmed = self.reproduces(returns, target, nominal)
        if not confirmed:
            notes.append(f"on fresh seeds ({fresh.start}-{fresh.stop - 1}) the culprits alone "
                         "did not reproduce the failure: treat them as a lead, not a finding")
        return culprits, confirmed, tuple(notes)

    def ddmin(self, items: list[str], fails: Callable[[list[str]], bool],
              notes: list[str]) -> list[str]:
        """Zeller's delta debugging: a 1-minimal part of ``items`` that still ``fails``
        (``items`` itself failing), within :data:`SEARCH_RUNS` runs."""
        n, budget = 2, self.runs + SEARCH_RUNS
        while len(items) >= 2:
            if self.runs >= budget:
                notes.append(f"the culprit search stopped after {SEARCH_RUNS} runs; the set "
                             "found breaks it but may not be the smallest")
                return items
            size = math.ceil(len(items) / n)
            chunks = [items[i:i + size] for i in range(0, len(items), size)]
            for chunk in chunks:
                if fails(chunk):
                    items, n = chunk, 2
                    break
            else:
                for chunk in chunks if n > 2 else []:
                    rest = [x for x in items if x not in chunk]
                    if fails(rest):
                        items, n = rest, max(n - 1, 2)
                        break
                else:
                    if n >= len(items):
                        return items
                    n = min(2 * n, len(items))
        return items


def _words(groups: Sequence[str] | frozenset[str]) -> str:
    names = sorted(groups)
    return names[0] if len(names) == 1 else " and ".join([", ".join(names[:-1]), names[-1]])


def _with_diagnosis(a: Attribution) -> Attribution:
    sc = a.scenario
    if not a.culprits:
        line = (f"{sc} does not clearly break it (keeps {a.full.ratio:.0%}): nothing to "
                "attribute")
    elif set(a.culprits) == set(a.groups.names) and len(a.culprits) > 1 and all(
            c in a.only for c in a.culprits):
        line = (f"{sc} breaks it only through all its groups together ({_words(a.culprits)}): "
                "no smaller set alone does")
    else:
        culprits = list(a.culprits)
        alone = "; ".join(f"{c} alone keeps {a.only[c].ratio:.0%}" for c in culprits
                          if c in a.only)
        rest = "; ".join(f"everything but {c} keeps {a.all_but[c].ratio:.0%}" for c in culprits
                         if c in a.all_but)
        said = ": " + "; ".join(x for x in (alone, rest) if x) if alone or rest else ""
        line = f"{sc} breaks it through {_words(culprits)}{said}"
        if a.confirmed is False:
            line += " (not confirmed on fresh seeds)"
    if a.interactions:
        line += f"; groups interact ({len(a.interactions)} case(s) where more is milder)"
    return replace(a, diagnosis=line)
