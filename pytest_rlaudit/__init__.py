"""pytest-rlaudit: robustness audits of RL agents as pytest tests.

>>> import pytest_rlaudit
>>> pytest_rlaudit.scenarios.DEPLOYMENT
('jitter', 'delay', 'spike', 'obs_noise')

(``audit()`` lives in ``pytest_rlaudit.auditing``: a submodule named ``audit`` would
replace the function on the package as soon as it is imported.)

Public names are imported on first use (PEP 562), so loading the pytest plugin costs
every other test run nothing: no gymnasium, scipy, torch, stable-baselines3 or
hypothesis until an audit runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "audit": "auditing",
    "AuditResult": "auditing",
    "ScenarioResult": "auditing",
    "Scenario": "scenarios",
    "Schedule": "schedules",
    "find_breaking_schedule": "falsify",
    "assert_robust": "assertions",
    "check_robust": "assertions",
    "assert_no_regression": "regression",
    "assert_deterministic": "determinism",
    "assert_no_policy_collapse": "collapse",
    "RobustnessError": "assertions",
    "Diagnosis": "diagnosis",
    "as_policy": "policies",
    "Policy": "policies",
    "RLAuditError": "errors",
    "UnknownEnvError": "errors",
    "UnknownScenarioError": "errors",
    "PerturbationError": "errors",
    "PolicyError": "errors",
    "ReferenceScoreError": "errors",
    "BaselineError": "errors",
    "RolloutError": "errors",
    "RolloutCapWarning": "errors",
}
_SUBMODULES = ("scenarios", "schedules", "strategies", "falsify", "perturbations", "policies",
               "envs", "rollout", "auditing", "stats", "diagnosis", "assertions", "errors",
               "comparison", "baselines", "tolerances", "regression", "determinism", "collapse")

__all__ = sorted([*_EXPORTS, "scenarios", "__version__"])

if TYPE_CHECKING:  # pragma: no cover
    from . import scenarios
    from .assertions import RobustnessError, assert_robust, check_robust
    from .auditing import AuditResult, ScenarioResult, audit
    from .collapse import assert_no_policy_collapse
    from .determinism import assert_deterministic
    from .diagnosis import Diagnosis
    from .errors import (
        BaselineError,
        PerturbationError,
        PolicyError,
        ReferenceScoreError,
        RLAuditError,
        RolloutCapWarning,
        RolloutError,
        UnknownEnvError,
        UnknownScenarioError,
    )
    from .falsify import find_breaking_schedule
    from .policies import Policy, as_policy
    from .regression import assert_no_regression
    from .scenarios import Scenario
    from .schedules import Schedule


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'pytest_rlaudit' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_SUBMODULES})
