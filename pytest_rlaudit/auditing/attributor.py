"""The runs of an attribution and the searches over them (see :mod:`.attribution`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._format import share
from ..stats.paired import degradation_p_value, holm, paired_ratio_ci, ratio
from ..stats.ratings import RATINGS, rating
from ..world.observation_groups import Groups, ordered
from ..world.perturbations import OnPart
from ..world.scenarios import NOMINAL, Scenario
from .attribution_result import Attribution, Contrast, diagnosis, words
from .engine import Engine
from .outcomes import ScenarioResult
from .reference import reference_score
from .shapley import pair_synergy, shapley_shares

__all__ = ["Attributor", "EXACT_GROUPS", "PERMUTATIONS", "SEARCH_RUNS"]

#: Up to this many groups, every coalition is run and the Shapley shares are exact.
EXACT_GROUPS = 8
#: Permutations sampled for the Shapley shares beyond :data:`EXACT_GROUPS` groups.
PERMUTATIONS = 16
#: Runs of each delta debugging search (each ``episodes`` long): it stops at the first
#: round that starts past them, so a round under way may take a few more.
SEARCH_RUNS = 40


class Attributor:
    """One attribution: ``engine``'s agent and env under ``scenario`` (calibrated here if
    it is sized by the observations' spread), split among ``groups``."""

    def __init__(self, engine: Engine, scenario: Scenario, groups: Groups, method: str,
                 known: ScenarioResult | None = None) -> None:
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
        n = self.s.episodes
        if (known is not None and known.name == scenario.name and len(known.returns) >= n
                and np.array_equal(known.seeds[:n], self.s.seed + np.arange(n))):
            # the same episodes of the same scenario: the audit that failed ran them
            self.seen[(ordered(groups.whole), 0, n)] = np.asarray(known.returns[:n])
        self.reference = 0.0
        self.alpha = 1.0 - self.s.confidence

    # runs -------------------------------------------------------------------------
    def on(self, part: tuple[Any, ...], indices: range | None = None) -> np.ndarray:
        """Returns of the scenario seen on ``part`` (elements or keys) only; on the whole
        observation, the scenario itself. Under the scenario's own name: its own draws."""
        indices = indices or self.indices
        part = ordered(part)
        key = (part, indices.start, indices.stop)
        if key not in self.seen:
            sc = self.scenario
            if set(part) != set(self.groups.whole):
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

    def ratio_of(self, returns: np.ndarray) -> float:
        return ratio(self.nominal, returns, self.reference)

    # the attribution ----------------------------------------------------------------
    def run(self) -> Attribution:
        everyone = frozenset(self.names)
        random = (self.engine.random(self.s.episodes) if self.s.reference == "random"
                  else np.zeros(1))
        self.reference = reference_score(self.s.reference, random)
        notes: list[str] = []
        if 0.5 ** self.s.episodes >= self.alpha:  # the sign-flip test's smallest p
            notes.append(f"with {self.s.episodes} episodes the paired test's smallest p-value "
                         f"is 2^-{self.s.episodes} = {0.5 ** self.s.episodes:.3g}, not below "
                         f"{self.alpha:g}: nothing can be found significant; use at least "
                         f"{math.floor(math.log2(1 / self.alpha)) + 1} episodes, more with "
                         "several groups")
        whole = self.on(tuple(self.groups.whole))  # the scenario itself
        full_c = self.contrast((), whole, 1)
        if self.method == "exact":
            for size in range(1, len(self.names) + 1):
                for combo in itertools.combinations(self.names, size):
                    self.value(combo)
        if not self.groups.covers:
            left = [x for x in self.groups.whole if x not in set(self.groups.union(self.names))]
            notes.append(f"the groups leave out {len(left)} of the observation's "
                         f"{len(self.groups.whole)} elements ({_listed(left)}): the scenario on "
                         f"every group keeps {share(self.ratio_of(self.value(everyone)))}, on "
                         f"the whole observation {share(full_c.ratio)}; the Shapley shares "
                         "split the first's loss")
        only, all_but, family = self.contrasts()
        orders = None
        if self.method == "sampled":
            rng = np.random.default_rng(np.random.SeedSequence([self.s.seed, 0x0DE5]))
            orders = [tuple(rng.permutation(self.names).tolist()) for _ in range(PERMUTATIONS)]
            for order in orders:
                for k in range(1, len(order) + 1):
                    self.value(order[:k])
        shapley = shapley_shares(self.values, self.names, reference=self.reference,
                                 confidence=self.s.confidence, seed=self.s.seed, orders=orders)
        few = 0.5 ** self.s.episodes >= self.alpha  # nothing could be significant
        milder = () if few else self.milder()
        interactions = () if few else (*milder, *self.synergy())
        groups, culprits, confirmed = self.culprits(full_c, bool(milder), notes)
        kept = self.ratio_of(self.on(self._part(culprits))) if culprits else None
        together = self.ratio_of(self.value(groups or self.names))
        line = diagnosis(self.scenario.name, full_c, only, all_but, groups, culprits, kept,
                         confirmed, interactions, together, self.s.confidence)
        return Attribution(
            agent=self.engine.name, env=self.engine.env.name, scenario=self.scenario.name,
            episodes=self.s.episodes, seed=self.s.seed, confidence=self.s.confidence,
            reference=self.reference, groups=self.groups, full=full_c, only=only,
            all_but=all_but, family=family, shapley=shapley, shapley_method=self.method,
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

    def contrasts(self) -> tuple[dict[str, Contrast], dict[str, Contrast], int]:
        """The one-group and all-but contrasts: one family of the distinct runs among them
        (two groups: ``only[a]`` is ``all_but[b]``), p-values Holm-adjusted together."""
        everyone = frozenset(self.names)
        wanted = {(kind, g): frozenset([g]) if kind == "only" else everyone - {g}
                  for kind in ("only", "all_but") for g in self.names}
        family = sorted(set(wanted.values()), key=lambda c: (len(c), sorted(c)))
        adjusted = holm({",".join(sorted(c)): degradation_p_value(
            self.nominal, self.value(c), seed=self.s.seed) for c in family})
        made = {c: self.contrast(tuple(n for n in self.names if n in c), self.value(c),
                                 len(family), adjusted[",".join(sorted(c))]) for c in family}
        return ({g: made[wanted[("only", g)]] for g in self.names},
                {g: made[wanted[("all_but", g)]] for g in self.names}, len(family))

    def milder(self) -> tuple[str, ...]:
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
            f"perturbing {words(sorted(b))} keeps {share(self.ratio_of(self.values[b]))}, more "
            f"than {words(sorted(s))} alone ({share(self.ratio_of(self.values[s]))}; "
            f"p = {adjusted[str(i)]:.3g}, Holm-adjusted)"
            for i, (s, b) in enumerate(pairs) if adjusted[str(i)] < self.alpha)

    def synergy(self) -> tuple[str, ...]:
        """Pairs of groups whose losses compound: together they lose more than their
        losses alone add up to, by an interval that excludes it."""
        found = pair_synergy(self.values, reference=self.reference,
                             confidence=self.s.confidence, seed=self.s.seed)
        return tuple(
            f"{a} and {b} together lose {share(1 - self.ratio_of(self.value([a, b])))} of the "
            f"return, more than their losses alone add up to "
            f"({share(1 - self.ratio_of(self.value([a])))} + "
            f"{share(1 - self.ratio_of(self.value([b])))}; excess {gap:.2f}, "
            f"{self.s.confidence:.0%} CI {ci[0]:.2f} to {ci[1]:.2f}): they compound"
            for a, b, gap, ci in found if ci[0] > 0)

    # culprits -----------------------------------------------------------------------
    def reproduces(self, returns: np.ndarray, target: str) -> bool:
        """Whether ``returns`` show the failure: rated ``target`` or worse, and below
        nominal by the paired test at the audit's level."""
        worse = RATINGS.index(rating(self.ratio_of(returns), self.s.thresholds)
                              ) >= RATINGS.index(target)
        p = degradation_p_value(self.nominal, returns, seed=self.s.seed)
        return worse and p < self.alpha

    def culprits(self, full: Contrast, interacting: bool, notes: list[str]
                 ) -> tuple[tuple[str, ...], tuple[str, ...], bool | None]:
        """The culprit groups, the culprits refined to elements, and whether fresh seeds
        confirmed them."""
        target = full.rating
        if target == "PASS" or not (full.p_value < self.alpha):
            notes.append(f"the scenario does not clearly break the agent (rated {full.rating}, "
                         f"ratio {full.ratio:.3f}, p = {full.p_value:.3g}): nothing to "
                         "attribute")
            return (), (), None
        if not self.reproduces(self.value(self.names), target):
            notes.append("the scenario on every group does not reproduce the failure: the "
                         "elements the groups leave out carry it; give groups that cover them")
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
        return groups, culprits, self.confirm(culprits, target, notes)

    def confirm(self, culprits: tuple[str, ...], target: str, notes: list[str]) -> bool:
        """Whether ``culprits`` alone break the agent on fresh seeds (the next block of
        episodes, nominal's too): significantly below nominal, with an interval that
        reaches the failure's rating (the search stops at the smallest set that just
        crosses the rating's edge, so its own rating on new seeds is a coin toss)."""
        fresh = range(self.s.episodes, 2 * self.s.episodes)
        nominal = self.engine.run([NOMINAL], fresh)[NOMINAL.name].returns
        self.runs += 1
        returns = self.on(self._part(culprits), fresh)
        value = ratio(nominal, returns, self.reference)
        low, _ = paired_ratio_ci(nominal, returns, reference=self.reference,
                                 confidence=self.s.confidence, seed=self.s.seed)
        edge = self.s.thresholds.band(RATINGS[RATINGS.index(target) - 1]) if target != "PASS" \
            else math.inf
        significant = degradation_p_value(nominal, returns, seed=self.s.seed) < self.alpha
        confirmed = significant and low <= edge
        notes.append(f"on fresh seeds (episodes {fresh.start}-{fresh.stop - 1}) "
                     f"{words(culprits)} alone {'keeps' if len(culprits) == 1 else 'keep'} "
                     f"{share(value)} (interval from {low:.3f}): "
                     + ("confirmed" if confirmed else "not confirmed, a lead rather than a "
                        "finding"))
        return confirmed

    def _part(self, names: Sequence[str]) -> tuple[Any, ...]:
        """The elements (or keys) of ``names``: groups, or elements written ``g[i]``."""
        out: list[Any] = []
        for name in names:
            if name in self.groups.parts:
                out += self.groups.parts[name]
            else:
                group, _, i = name[:-1].rpartition("[")
                out.append(self.groups.parts[group][int(i)])
        return ordered(out)

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


def _listed(items: Sequence[Any], shown: int = 6) -> str:
    head = ", ".join(map(str, items[:shown]))
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")
