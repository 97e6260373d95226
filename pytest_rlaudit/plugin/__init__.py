"""The pytest face: the plugin that the entry point (``pytest11: rlaudit``,
:mod:`pytest_rlaudit._entry`) registers, once it has imported on this Python.

Thin by design: options live in :mod:`.options`, markers in :mod:`.markers`, fixtures in
:mod:`.fixtures`, the run's state in :mod:`.session`, baselines in :mod:`.baselines`,
JUnit in :mod:`.junit`, xdist in :mod:`.xdist`, the reporting boundary (destinations
checked at start, reporting errors that never cost pytest's summary) in :mod:`.reporting`.
Loading it imports nothing heavy, so installing the plugin costs test runs that never
audit nothing.

PYTEST_DONT_REWRITE: the entry module imports this package before it names it in
``pytest_plugins`` (to catch what importing it raises), and pytest would otherwise warn in
every run that a module already imported cannot have its asserts rewritten; it has none a
test reads.
"""

from __future__ import annotations

from typing import cast

import pytest

from .baselines import BaselineGate
from .fixtures import (  # registered as the plugin's
    rl_agent,
    rl_audit,
    rl_env,
    rl_replay,
    rl_scenario,
)
from .markers import MARKERS, parametrize
from .options import add_options
from .progress import ProgressHooks
from .replays import ReplayHooks
from .reporting import check_destinations
from .rootdir import check_path_options
from .session import AuditSession
from .xdist import XdistHooks, is_worker

__all__ = ["rl_agent", "rl_env", "rl_scenario", "rl_audit", "rl_replay"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    check_path_options(config)  # --rl-agent ../x.zip: pytest took ../x.zip for a test path
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    session = AuditSession(config)
    if not is_worker(config):  # before any audit runs: the controller alone writes
        check_destinations(session.settings)
    config.pluginmanager.register(session, "rlaudit-session")
    config.pluginmanager.register(BaselineGate(session), "rlaudit-baselines")
    config.pluginmanager.register(ReplayHooks(session), "rlaudit-replays")
    config.pluginmanager.register(ProgressHooks(config, session.settings.progress),
                                  "rlaudit-progress")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(session), "rlaudit-xdist")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # registered in pytest_configure, before any collection
    session = cast(AuditSession, metafunc.config.pluginmanager.get_plugin("rlaudit-session"))
    parametrize(metafunc, session.enabled)
