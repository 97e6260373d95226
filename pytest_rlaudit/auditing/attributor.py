"""The runs of an attribution and the searches over them (see :mod:`.attribution`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..stats.paired import degradation_p_value, holm, paired_ratio_ci, ratio
from ..stats.ratings import RATINGS, rating
from ..world.observation_groups import Groups
from ..world.perturbations import OnPart
from ..world.scenarios import NOMINAL, Scenario
from .attribution_result import Attribution, Contrast, diagnosis, words
from .engine import Engine
from .reference import reference_score
from .shapley import shapley_shares

__all__ = ["Attributor", "EXACT_GROUPS", "PERMUTATIONS", "SEARCH_RUNS"]

#: Up to this many groups, every coalition is run and the Shapley shares are exact.
EXACT_GROUPS = 8
#: Permutations sampled for the Shapley shares beyond :data:`EXACT_GROUPS` groups.
PERMUTATIONS = 16
#: At most this many runs for each delta debugging search (each ``episodes`` long).
SEARCH_RUNS = 40


class Attributor:
    """One attribution: ``engine``'s agent and env under ``scenario`` (calibrated here if
    it is sized by the observations' spread), split among ``groups``."""

    def __init__(self, engine: Engine, scenario: Scenario, groups: Groups, method: str) -> None:
        self.engine, self.groups, self.s = engine, groups, engine.settings
        self.indices = range(self.s.episodes)
        self.nominal = engine.nominal(self.indices).returns
        self.scenario = engine.calibrated(scenario)
        self.names = groups.names
        self.method = method if method != "auto" else (
            "exact" if len(self.names) <= EXACT_GROUPS else "sampled")
        self.values: dict[frozenset[str], np.ndarray] = {frozenset(): self.nominal}
        self.seen: dict[tuple[Any, ...], np.ndarray] = {}
        self.runs = 1  # nominal's
        self.reference = 0.0
        self.alpha = 1.0 - self.s.confidence

    # runs -------------------------------------------------------------------------
    def on(self, part: tuple[Any, ...], indices: range | None = None) -> np.ndarray:
        """Returns of the scenario seen on ``part`` (elements or keys) only; on every part,
        the scenario itself. Under the scenario's own name: its own draws."""
        indices = indices or self.indices
        key = (part, indices.start, indices.stop)
        if key not in self.seen:
            sc = self.scenario
            if part != self.groups.union(self.names):
                sc = Scenario(sc.name, sc.category, OnPart,
                              {"perturbation": sc.perturbation, "params": dict(sc.params),
                               "part": part}, sc.description)
            self.runs += 1
            self.seen[key] = self.engine.run([sc], indices)[sc.name].returns
        return self.seen[key]

    def value(self, coalition: frozenset[str] | Sequence[str]) -> np.ndarray:
        coalition = frozenset(coalition)
        if coalition not in self.values:
            self.values[coalition] = self.on(self.groups.union(sorted(coalition)))
        return self.values[coalition]

    def ratio_of(self, returns: np.ndarray, nominal: np.ndarray | None = None) -> float:
        return ratio(self.nominal if nominal is None else nominal, returns, self.reference)

    # the attribution ----------------------------------------------------------------
    def run(self) -> Attribution:
        everyone = frozenset(self.names)
        random = (self.engine.random(self.s.episodes) if self.s.reference == "random"
                  else np.zeros(1))
        self.reference = reference_score(self.s.reference, random)
        full = self.value(everyone)
        if self.method == "exact":
            for size in range(1, len(self.names)):
                for combo in itertools.combinations(self.names, size):
                    self.value(combo)
        family = {(kind, g): self.value([g] if kind == "only" else everyone - {g})
                  for kind in ("only", "all_but") for g in self.names}
        contrasts = self.contrasts(family)
        full_c = self.contrast(tuple(self.names), full, 1)
        orders = None
        if self.method == "sampled":
            rng = np.random.default_rng(np.random.SeedSequence([self.s.seed, 0x0DE5]))
            orders = [tuple(rng.permutation(self.names).tolist()) for _ in range(PERMUTATIONS)]
            for order in orders:
                for k in range(1, len(order)):
                    self.value(order[:k])
        shapley = shapley_shares(self.values, self.names, reference=self.reference,
                                 confidence=self.s.confidence, seed=self.s.seed, orders=orders)
        interactions = self.interactions()
        only = {g: contrasts[("only", g)] for g in self.names}
        all_but = {g: contrasts[("all_but", g)] for g in self.names}
        notes: list[str] = []
        groups, culprits, confirmed = self.culprits(full_c, bool(interactions), notes)
        kept = self.ratio_of(self.on(self._part(culprits))) if culprits else None
        together = self.ratio_of(self.value(groups)) if groups else None
        line = diagnosis(self.scenario.name, full_c, only, all_but, groups, culprits, kept,
                         confirmed, interactions, together)
        return Attribution(
            agent=self.engine.name, env=self.engine.env.name, scenario=self.scenario.name,
            episodes=self.s.episodes, seed=self.s.seed, confidence=self.s.confidence,
            reference=self.reference, groups=self.groups, full=full_c, only=only,
            all_but=all_but, shapley=shapley, shapley_method=self.method,
            culprit_groups=groups, culprits=culprits, culprits_ratio=kept,
            confirmed=confirmed, interactions=interactions, notes=tuple(notes),
            runs=self.runs, diagnosis=line)

    def contrast(self, groups: tuple[str, ...], returns: np.ndarray, family: int,
                 p_value: float | None = None) -> Contrast:
        """``returns`` against nominal, its interval at the Bonferroni level of a
        ``family`` of contrasts."""
        value = self.ratio_of(returns)
        ci = paired_ratio_ci(self.nominal, returns, reference=self.reference,
                             confidence=1.0 - self.alpha / family, seed=self.s.seed)
        if p_value is None:
            p_value = degradation_p_value(self.nominal, returns, seed=self.s.seed)
        return Contrast(groups, value, ci, p_value, rating(value, self.s.thresholds))

    def contrasts(self, family: dict[tuple[str, str], np.ndarray]
                  ) -> dict[tuple[str, str], Contrast]:
        """The one-group and all-but contrasts, their p-values Holm-adjusted together."""
        adjusted = holm({f"{kind}:{g}": degradation_p_value(self.nominal, r, seed=self.s.seed)
                         for (kind, g), r in family.items()})
        return {(kind, g): self.contrast(
            (g,) if kind == "only" else tuple(n for n in self.names if n != g), r,
            len(family), adjusted[f"{kind}:{g}"]) for (kind, g), r in family.items()}

    def interactions(self) -> tuple[str, ...]:
        """Where one group more made it significantly milder: every run coalition S and
        S + g both run, tested paired (H0: S is no worse), Holm-adjusted across them."""
        pairs = [(small, small | {g}) for small in list(self.values) if small
                 for g in self.names if g not in small and small | {g} in self.values]
        if not pairs:
            return ()
        adjusted = holm({str(i): degradation_p_value(self.values[b], self.values[s],
                                                     seed=self.s.seed)
                         for i, (s, b) in enumerate(pairs)})
        return tuple(
            f"perturbing {words(sorted(b))} keeps {self.ratio_of(self.values[b]):.0%}, more "
            f"than {words(sorted(s))} alone ({self.ratio_of(self.values[s]):.0%}; "
            f"p = {adjusted[str(i)]:.3g}, Holm-adjusted)"
            for i, (s, b) in enumerate(pairs) if adjusted[str(i)] < self.alpha)

    # culprits -----------------------------------------------------------------------
    def reproduces(self, returns: np.ndarray, target: str,
                   nominal: np.ndarray | None = None) -> bool:
        """Whether ``returns`` show the failure: rated ``target`` or worse, and below
        nominal by the paired test at the audit's level."""
        nominal = self.nominal if nominal is None else nominal
        worse = RATINGS.index(rating(self.ratio_of(returns, nominal), self.s.thresholds)
                              ) >= RATINGS.index(target)
        return worse and degradation_p_value(nominal, returns, seed=self.s.seed) < self.alpha

    def culprits(self, full: Contrast, interacting: bool, notes: list[str]
                 ) -> tuple[tuple[str, ...], tuple[str, ...], bool | None]:
        """The culprit groups, the culprits refined to elements, and whether fresh seeds
        confirmed them."""
        target = full.rating
        if target == "PASS" or not self.reproduces(self.values[frozenset(self.names)], target):
            notes.append(f"the scenario does not clearly break the agent (rated {full.rating}, "
                         f"ratio {full.ratio:.3f}): nothing to attribute")
            return (), (), None
        if self.method == "exact":  # every coalition ran: the smallest, by size
            found = next((c for size in range(1, len(self.names) + 1)
                          for c in itertools.combinations(self.names, size)
                          if self.reproduces(self.values[frozenset(c)], target)),
                         tuple(self.names))
        else:
            found = tuple(self.ddmin(list(self.names), lambda part: self.reproduces(
                self.value(part), target), notes))
            if interacting:
                notes.append("perturbing more groups was milder somewhere, so delta debugging's "
                             "assumption (a set that breaks it still does with more groups) "
                             "does not hold: a smaller set elsewhere may break it too")
        groups = tuple(g for g in self.names if g in found)
        elements = [f"{g}[{i}]" for g in groups if len(self.groups.parts[g]) > 1
                    and not isinstance(self.groups.parts[g][0], str)
                    for i in range(len(self.groups.parts[g]))]
        culprits = groups
        if elements:  # finer: which elements of the culprit groups (the others clean)
            whole = [g for g in groups if f"{g}[0]" not in elements]
            fine = self.ddmin(elements, lambda part: self.reproduces(
                self.on(self._part([*whole, *part])), target), notes)
            if len(fine) < len(elements):
                culprits = tuple([*whole, *fine])
        fresh = range(self.s.episodes, 2 * self.s.episodes)
        nominal = self.engine.run([NOMINAL], fresh)[NOMINAL.name].returns
        self.runs += 1
        confirmed = self.reproduces(self.on(self._part(culprits), fresh), target, nominal)
        if not confirmed:
            notes.append(f"on fresh seeds (episodes {fresh.start}-{fresh.stop - 1}) the "
                         "culprits alone did not reproduce the failure: a lead, not a finding")
        return groups, culprits, confirmed

    def _part(self, names: Sequence[str]) -> tuple[Any, ...]:
        """The elements (or keys) of ``names``: groups, or elements written ``g[i]``."""
        out: list[Any] = []
        for name in names:
            if name in self.groups.parts:
                out += self.groups.parts[name]
            else:
                group, _, i = name[:-1].rpartition("[")
                out.append(self.groups.parts[group][int(i)])
        return tuple(sorted(set(out), key=lambda x: (str(type(x)), x)))

    def ddmin(self, items: list[str], fails: Callable[[list[str]], bool],
              notes: list[str]) -> list[str]:
        """Zeller's delta debugging: a 1-minimal part of ``items`` (which fails) that still
        ``fails``, within :data:`SEARCH_RUNS` runs."""
        n, budget = 2, self.runs + SEARCH_RUNS
        while len(items) >= 2:
            if self.runs >= budget:
                notes.append(f"a culprit search stopped after {SEARCH_RUNS} runs; what it "
                             "found breaks it but may not be the smallest set that does")
                return items
            size = math.ceil(len(items) / n)
            chunks = [items[i:i + size] for i in range(0, len(items), size)]
            smaller = next((c for c in chunks if fails(c)), None)
            if smaller is None and n > 2:
                smaller = next((rest for c in chunks
                                for rest in [[x for x in items if x not in c]] if fails(rest)),
                               None)
                if smaller is not None:
                    items, n = smaller, max(n - 1, 2)
                    continue
            if smaller is not None:
                items, n = smaller, 2
            elif n >= len(items):
                return items
            else:
                n = min(2 * n, len(items))
        return items
