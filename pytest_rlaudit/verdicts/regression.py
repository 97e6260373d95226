"""``assert_no_regression``: a candidate agent against a baseline agent, ship or hold.

>>> import numpy as np
>>> def controller(obs):
...     return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
>>> assert_no_regression(controller, controller, "CartPole-v1", scenarios=["delay"],
...                      episodes=6).decision
'ship'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._checks import number
from ..auditing.comparison import Comparison, blind_tolerances, compare_audits, too_few_episodes
from ..auditing.results import AuditResult, audit
from ..auditing.settings import check_episodes
from ..auditing.tolerances import Tolerance
from ..errors import InvalidArgumentError
from ..rollout.runner import DEFAULT_MAX_STEPS
from ..world import scenarios as registry
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, ScenarioLike
from .assertions import RobustnessError

__all__ = ["assert_no_regression"]


def assert_no_regression(
    candidate: Any,
    baseline: Any,
    env: EnvLike,
    *,
    scenarios: ScenarioLike | Iterable[ScenarioLike] | None = None,
    episodes: int = 30,
    seed: int = 0,
    margin: float = 0.05,
    alpha: float = 0.05,
    reference: float | str = 0,
    batch_size: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Comparison:
    """Audit ``candidate`` and ``baseline`` on the same seeds and say *ship* or *hold*.

    Per scenario (nominal included) the mean returns are compared episode by episode,
    and per perturbation scenario the return ratios. *Hold* when any of them drops
    significantly (one-sided paired tests at ``alpha``, corrected for the number of
    comparisons; see :mod:`pytest_rlaudit.auditing.comparison`) and by more than ``margin``:
    a fraction of the baseline's mean return, or an absolute drop of the ratio. Returns
    the :class:`~pytest_rlaudit.auditing.comparison.Comparison` (``.decision == "ship"``, with the
    improvements) or raises :class:`RobustnessError` whose message says "hold" and why.
    A comparison that could not have failed (too few ``episodes`` for a drop beyond
    ``margin`` to be significant: the decision "inconclusive", as the pytest gate words it)
    raises :class:`~pytest_rlaudit.errors.InvalidArgumentError` naming the episodes needed,
    before either agent is audited.
    """
    number("margin", margin, low=0, high=1, high_open=True)
    number("alpha", alpha, low=0, high=1, low_open=True, high_open=True)
    check_episodes(episodes)
    tolerances = (Tolerance("return", float(margin), True), Tolerance("ratio", float(margin), False))
    # the mean-return rows: nominal's and each scenario's. Too few episodes for any of
    # them to fail is known before auditing (too_few_episodes), so it is said first.
    rows = 1 + len({s.name for s in registry.resolve(scenarios) if s.name != NOMINAL.name})
    blind = blind_tolerances(tolerances, too_few_episodes(episodes, rows, alpha))
    if blind:
        raise InvalidArgumentError(f"assert_no_regression: {blind}")

    def run(agent: Any) -> AuditResult:  # both on the same seeds and settings
        return audit(agent, env, scenarios=scenarios, episodes=episodes, seed=seed,
                     batch_size=batch_size, reference=reference, max_steps=max_steps)

    base = run(baseline)
    cand = run(candidate)
    comparison = compare_audits(base, cand, tolerances, alpha=alpha)
    if comparison.decision == "inconclusive":  # a gate that could not fail never says "ship"
        raise InvalidArgumentError(f"assert_no_regression: {comparison.inconclusive}")
    if comparison.decision == "hold":
        seeds = cand.nominal.seeds
        chosen = "" if scenarios is None else f"scenarios={list(cand.scenarios)!r}, "
        error = RobustnessError(
            f"{comparison}\n  candidate {cand.agent} against baseline {base.agent} on {cand.env}: "
            f"{cand.episodes} paired episodes (env seeds {seeds[0]}-{seeds[-1]}), margin "
            f"{margin:g}\n  reproduce: assert_no_regression(candidate, baseline, {cand.env!r}, "
            f"{chosen}episodes={episodes}, seed={seed}, margin={margin:g})")
        error.comparison = comparison  # type: ignore[attr-defined]
        raise error
    return comparison
