"""Statistics of paired episodes: ratio intervals, p-values, ratings, verdicts.

Episode ``i`` of a scenario and episode ``i`` of the nominal env share their env seed,
so the analysis is paired: resampling and permuting act on episode indices, keeping
each nominal/perturbed pair together. That removes the variance the two share (the
initial state, the env's own randomness), so the same number of episodes gives much
tighter intervals than treating the scenarios as independent samples.

>>> import numpy as np
>>> from pytest_rlaudit.stats import paired_ratio_ci, rating, ratio
>>> nominal = np.array([500.0, 480, 500, 470, 500, 490])
>>> perturbed = np.array([400.0, 380, 450, 300, 420, 410])
>>> low, high = paired_ratio_ci(nominal, perturbed)
>>> bool(low < ratio(nominal, perturbed) < high)
True
>>> rating(0.83)
'MILD'
"""

from __future__ import annotations

import importlib
from typing import Any

# Names are loaded on first use (PEP 562): ``stats.ratings`` needs only the standard
# library, and the plugin imports it on every pytest run; scipy comes with the first statistic.
_HOMES = {
    "RATINGS": "ratings",
    "INCONCLUSIVE": "ratings",
    "ALL_RATINGS": "ratings",
    "Margin": "paired",
    "PRECISION": "paired",
    "reference_margin": "paired",
    "check_threshold": "ratings",
    "ratio_change_ci": "paired",
    "MODES": "ratings",
    "Thresholds": "ratings",
    "DEFAULT_THRESHOLDS": "ratings",
    "rating": "ratings",
    "rating_floor": "ratings",
    "ratio": "paired",
    "paired_ratio_ci": "paired",
    "degradation_p_value": "paired",
    "holm": "paired",
    "check_returns": "paired",
    "check_reference": "paired",
    "verdict": "ratings",
    "Verdict": "ratings",
    "AdaptiveResult": "sequential",
    "adaptive_sample": "sequential",
    "AdaptiveRuns": "sequential",
    "adaptive_decisions": "sequential",
    "look_bounds": "sequential",
    "SPENDING_GAMMA": "sequential",
    "FAIL_MARGIN_SHARE": "sequential",
    "iqm": "runs",
    "run_ratios": "runs",
    "runs_ratio_ci": "runs",
    "iqm_ci": "runs",
    "probability_of_improvement": "runs",
    "improvement_ci": "runs",
    "performance_profile": "runs",
    "expanded_level": "runs",
    "RUNS_RESAMPLES": "runs",
}
__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'pytest_rlaudit.stats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
