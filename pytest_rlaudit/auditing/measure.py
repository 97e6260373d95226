"""The statistics of paired batches: each scenario's ratio, interval, Holm-adjusted
p-value, rating and diagnosis, and the nominal return's margin over the reference.

One function for every verb, so a scenario's numbers do not depend on which verb asked.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._seeding import stable_hash
from ..rollout.runner import EpisodeBatch
from ..stats import (
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
from ..world.scenarios import Scenario
from .diagnosis import diagnose, parting_step, unmeasurable
from .outcomes import ScenarioResult
from .reference import check_beats_random

__all__ = ["Measured", "summarise", "stream_seed"]


class Measured(NamedTuple):
    """What :func:`summarise` found: the nominal result, each scenario's, and the nominal
    return's margin over the reference."""

    nominal: ScenarioResult
    scenarios: dict[str, ScenarioResult]
    margin: Margin


def stream_seed(seed: int, name: str) -> int:
    """The seed of one scenario's bootstrap interval and permutation test: the same audit
    seed gives the same interval.

    >>> stream_seed(0, "jitter") == stream_seed(0, "jitter") != stream_seed(1, "jitter")
    True
    """
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
) -> Measured:
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
    raw_p = {s.name: degradation_p_value(nominal.returns, b.returns, seed=stream_seed(seed, s.name))
             for s, b in perturbed.items()}
    adjusted = holm(raw_p)
    results = {}
    for s, b in perturbed.items():
        r = ratio(nominal.returns, b.returns, reference)
        ci = (intervals or {}).get(s.name) or paired_ratio_ci(
            nominal.returns, b.returns, reference=reference, confidence=confidence,
            seed=stream_seed(seed, s.name))
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
    return Measured(nominal_result, results, margin)
