"""The pytest face: ``--rl-audit`` and the markers (DESIGN section 8).

Kept thin and cheap to load: it imports nothing from the audit engine, so installing
the plugin costs test runs that never audit nothing.
"""

from __future__ import annotations

import pytest

_MARKERS = (
    "rl_audit: an RL robustness audit test; runs only with --rl-audit.",
    "rl_scenario(*names, **params): run the test once per named perturbation scenario "
    "(ids are the scenario names); params override the scenario's defaults.",
    "rl_threshold(min_ratio=None, min_rating=None, mode='point'): the pass condition of "
    "the scenario's return ratio; mode is point, confident or not_worse.",
    "rl_episodes(n, max_n=None, target_ci_width=None): paired episodes per scenario, "
    "optionally adaptive up to max_n until the interval is narrower than target_ci_width.",
)
_RL_MARKERS = ("rl_audit", "rl_scenario", "rl_threshold", "rl_episodes")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rlaudit", "RL robustness audits (pytest-rlaudit)")
    group.addoption(
        "--rl-audit", action="store_true", default=None, dest="rl_audit",
        help="run RL robustness audit tests (marked rl_audit / rl_scenario); "
        "without it they are skipped.",
    )
    parser.addini("rl_audit", type="bool", default=False,
                  help="run RL robustness audit tests (as --rl-audit).")


def pytest_configure(config: pytest.Config) -> None:
    for line in _MARKERS:
        config.addinivalue_line("markers", line)


def _audit_enabled(config: pytest.Config) -> bool:
    option = config.getoption("rl_audit")
    return bool(config.getini("rl_audit") if option is None else option)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _audit_enabled(config):
        return
    skip = pytest.mark.skip(reason="RL audit test: run it with --rl-audit (or rl_audit = true in ini)")
    for item in items:
        if any(item.get_closest_marker(name) for name in _RL_MARKERS):
            item.add_marker(skip)
