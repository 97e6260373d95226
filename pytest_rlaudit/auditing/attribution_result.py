"""What :func:`~pytest_rlaudit.attribute` returns: each contrast, the Shapley shares, the
culprits, and the one-line diagnosis that names them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._format import share
from ..world.observation_groups import Groups
from .shapley import Share

__all__ = ["Contrast", "Attribution", "diagnosis"]


@dataclass(frozen=True)
class Contrast:
    """The scenario seen on ``groups`` only (the full scenario: on the whole observation,
    ``groups`` empty): its return ratio to nominal, the interval, the p-value (H0: no
    loss) and the rating. ``only`` and ``all_but`` contrasts: interval and p-value
    adjusted over their family (see :mod:`.attribution`); ``full``: unadjusted."""

    groups: tuple[str, ...]
    ratio: float
    ci: tuple[float, float]
    p_value: float
    rating: str

    def to_dict(self) -> dict[str, Any]:
        return {"groups": list(self.groups), "ratio": self.ratio, "ci_low": self.ci[0],
                "ci_high": self.ci[1], "p_value": self.p_value, "rating": self.rating}


@dataclass(frozen=True)
class Attribution:
    """What :func:`~pytest_rlaudit.attribute` found (see :mod:`.attribution` and the how-to
    "Which sensor breaks it").

    ``only[g]`` / ``all_but[g]``: the scenario on group g alone / on every group but g.
    ``family``: how many distinct runs ``only`` and ``all_but`` hold (two groups: 2, as
    ``only[a]`` is ``all_but[b]``), the family their intervals and p-values are adjusted
    over. ``shapley[g]``: g's share of the ratio lost. ``culprit_groups``: the smallest set of
    groups whose perturbation alone reproduces the failure; ``culprits``: the same, refined
    to elements (``qvel[2]``) where fewer elements do; ``culprits_ratio``: the ratio with
    the culprits alone perturbed; ``confirmed``: whether they reproduced it again on fresh
    seeds (a significant loss there, its interval reaching the failure's rating; None:
    nothing to confirm). ``interactions``: where perturbing one group more was
    significantly milder, and pairs of groups whose losses compound; ``notes``: what the
    groups leave out, and what the search could not assume or did not finish; ``runs``:
    the runs of ``episodes`` episodes it took, nominal's included.
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
    family: int
    shapley: dict[str, Share]
    shapley_method: str
    culprit_groups: tuple[str, ...]
    culprits: tuple[str, ...]
    culprits_ratio: float | None
    confirmed: bool | None
    interactions: tuple[str, ...]
    notes: tuple[str, ...]
    runs: int
    diagnosis: str

    def to_dict(self) -> dict[str, Any]:
        """The record of kind ``"attribution"``: a failing record's ``attribution`` in
        ``summary.json`` (its keys: :data:`~.records.ATTRIBUTION_KEYS`)."""
        return {
            "kind": "attribution", "agent": self.agent, "env": self.env,
            "scenario": self.scenario, "episodes": self.episodes, "seed": self.seed,
            "confidence": self.confidence, "reference": self.reference,
            "groups": {n: list(p) for n, p in self.groups.parts.items()},
            "groups_source": self.groups.source,
            "full": self.full.to_dict(),
            "only": {g: c.to_dict() for g, c in self.only.items()},
            "all_but": {g: c.to_dict() for g, c in self.all_but.items()},
            "family": self.family,
            "shapley": {g: s.to_dict() for g, s in self.shapley.items()},
            "shapley_method": self.shapley_method,
            "culprit_groups": list(self.culprit_groups), "culprits": list(self.culprits),
            "culprits_ratio": self.culprits_ratio, "confirmed": self.confirmed,
            "interactions": list(self.interactions), "notes": list(self.notes),
            "runs": self.runs, "diagnosis": self.diagnosis,
        }

    def __str__(self) -> str:
        return self.diagnosis


def words(names: Sequence[str]) -> str:
    """Names as a sentence lists them.

    >>> words(["qvel"]), words(["qpos", "qvel"]), words(["a", "b", "c"])
    ('qvel', 'qpos and qvel', 'a, b and c')
    """
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def diagnosis(scenario: str, full: Contrast, only: dict[str, Contrast],
              all_but: dict[str, Contrast], culprit_groups: Sequence[str],
              culprits: Sequence[str], culprits_ratio: float | None, confirmed: bool | None,
              interactions: Sequence[str], together: float | None = None,
              level: float = 0.95) -> str:
    """The one line that names the culprits with the numbers that make them so
    (``together``: the ratio with every culprit group perturbed, or with every group when
    none is a culprit; ``culprits_ratio``: with the culprits, refined to elements,
    perturbed; ``level``: the confidence the tests were at).

    >>> c = lambda g, r: Contrast((g,), r, (r, r), 0.01, "FAIL")
    >>> diagnosis("delay", c("qpos", 0.02), {"qpos": c("qpos", 0.97), "qvel": c("qvel", 0.03)},
    ...           {"qpos": c("qvel", 0.03), "qvel": c("qpos", 0.97)}, ["qvel"], ["qvel"], 0.03,
    ...           True, [])
    'delay breaks it through qvel: qvel alone keeps 3%, everything but qvel keeps 97%'
    """
    if not culprit_groups and full.rating != "PASS" and full.p_value < 1 - level:
        line = (f"{scenario} breaks it (keeps {share(full.ratio)}), but not through the groups "
                f"given: on all of them it keeps {share(together or 1.0)}; the elements "
                "they leave out carry it")
    elif not culprit_groups:
        line = f"{scenario} does not clearly break it (keeps {share(full.ratio)}): nothing to attribute"
    elif len(culprit_groups) == len(only) > 1:
        line = (f"{scenario} breaks it only through all its groups together "
                f"({words(culprit_groups)}, {share(together or 0.0)} kept): no smaller set alone "
                "does")
    elif len(culprit_groups) == 1:
        g = culprit_groups[0]
        line = (f"{scenario} breaks it through {g}: {g} alone keeps {share(only[g].ratio)}, "
                f"everything but {g} keeps {share(all_but[g].ratio)}")
    else:
        alone = ", ".join(f"{g} {share(only[g].ratio)}" for g in culprit_groups)
        line = (f"{scenario} breaks it through {words(culprit_groups)} together: "
                f"{share(together or 0.0)} kept with them perturbed; alone: {alone}")
    if culprit_groups and list(culprits) != list(culprit_groups):
        verb = "keeps" if len(culprits) == 1 else "keep"
        line += f"; within them, {words(culprits)} alone {verb} {share(culprits_ratio or 0.0)}"
    if confirmed is False:
        line += " (not confirmed on fresh seeds: a lead, not a finding)"
    if interactions:
        line += f"; {len(interactions)} interaction(s) between groups (see interactions)"
    return line
