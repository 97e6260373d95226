"""Which sensor: an observation scenario's damage attributed to named observation groups.

The scenario runs on one group only, on every group but one, and (for the Shapley
shares) on every coalition of groups, each paired on the seeds of the nominal episodes
and drawing the scenario's own noise (common random numbers: see
:mod:`pytest_rlaudit.world.perturbations.groups`). So two runs differ only in where the
perturbation is seen, and the scenario on the whole observation (``full``) is the
scenario itself, bit for bit; on every group, it is the same when the groups cover the
observation.

Intervals and tests. ``only[g]`` and ``all_but[g]`` are one family of the m distinct runs
among them (2G for G groups; 2 for two groups, as ``only[a]`` is ``all_but[b]``): each
p-value (one-sided, H0: no loss against nominal; a paired sign-flip test) is
Holm-adjusted across the family, and each interval is at the Bonferroni level
``1 - (1 - confidence) / m``, simultaneous for the family (Holm's step-down procedure has
no intervals of its own; these contain what it decides). ``full`` is one contrast, at
``confidence``, unadjusted. Shapley shares get paired bootstrap intervals over episodes
(and, when sampled, over permutations too). Interactions are two families of their own:
"more is milder" (paired tests, Holm) and "losses compound" (bootstrap intervals,
Bonferroni); neither is looked for when too few episodes could make anything significant.

The culprit search looks for the smallest set of groups whose perturbation alone
reproduces the failure (the full scenario's rating or worse, and a significant loss
against nominal at the raw level: a search, not a family of claims): every coalition in
order of size when all were run (up to 8 groups), else delta debugging over groups; then
the same inside the culprit groups, element by element. Fresh seeds are the guard: the
culprits run again on the next block of episodes, and count as confirmed when their loss
there is significant and its interval reaches the failure's rating (consistent with the
failure; the search stops at the set that just crosses the rating's edge, so the rating
itself would be a coin toss).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..errors import PerturbationError
from ..rollout.runner import DEFAULT_MAX_STEPS
from ..stats import DEFAULT_THRESHOLDS, Thresholds
from ..world import scenarios as registry
from ..world.envs import EnvLike
from ..world.observation_groups import observation_groups
from ..world.perturbations import (
    DroppedObservation,
    ObservationDelay,
    ObservationNoise,
    Perturbation,
    Scheduled,
)
from ..world.scenarios import Scenario, ScenarioLike
from .attribution_result import Attribution, Contrast
from .attributor import EXACT_GROUPS, PERMUTATIONS, Attributor
from .engine import Engine
from .outcomes import ScenarioResult
from .settings import AuditSettings, check_episodes
from .shapley import Share

__all__ = ["attribute", "attribute_with", "observation_only", "Attribution", "Contrast",
           "Share", "METHODS", "EXACT_GROUPS", "PERMUTATIONS"]

#: How the Shapley shares are computed: every coalition run (exact), permutations
#: sampled, or exact up to :data:`EXACT_GROUPS` groups (auto).
METHODS = ("auto", "exact", "sampled")
_OBSERVATION_CHANNELS = {"obs_noise", "delay", "dropped"}


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
              groups: Mapping[str, Any] | str | os.PathLike[str] | None = None,
              episodes: int = 30, seed: int = 0,
              confidence: float = 0.95, method: str = "auto", reference: float | str = 0,
              thresholds: Thresholds | None = None, max_steps: int = DEFAULT_MAX_STEPS,
              workers: int | str | None = None) -> Attribution:
    """Attribute an observation scenario's damage to named observation groups.

    ``groups`` maps names to slices or element indices (keys, for a Dict observation), or
    is the folder of a LeRobot dataset whose state's element names are the observation's;
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
        return attribute_with(Engine(agent, env, settings, cache={}), base, groups, method)


def attribute_with(engine: Engine, scenario: Scenario,
                   groups: Mapping[str, Any] | str | os.PathLike[str] | None = None,
                   method: str = "auto", known: ScenarioResult | None = None) -> Attribution:
    """:func:`attribute` with the engine made (the plugin's, which keeps the nominal
    episodes it already ran) and ``scenario`` checked to act on observations only.
    ``known``: the audit's own result of ``scenario`` on this engine's agent, env and seed,
    whose first episodes are the attribution's run of the whole scenario (not run again)."""
    engine.check([scenario])
    given = engine.env.batch.given if engine.env.batch is not None else None
    if given is not None:
        found = observation_groups(given.observation_space, groups, engine.policy)
    else:
        probe = engine.env.make()
        try:
            found = observation_groups(probe, groups, engine.policy)
        finally:
            probe.close()
    return Attributor(engine, scenario, found, method, known).run()
