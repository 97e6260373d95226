"""The pytest face: options, markers, fixtures and hook forwarding.

Thin by design: option parsing lives in ``options.py``, the run's state and reports in
``session.py``. Loading it imports nothing heavy, so installing the plugin costs test
runs that never audit nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .options import MarkerError, add_options, episodes_marker, scenario_marker, threshold_marker
from .session import AuditSession, XdistHooks

_MARKERS = (
    "rl_audit: an RL robustness audit test; runs only with --rl-audit.",
    "rl_scenario(*names, **params): run the test once per named perturbation scenario "
    "(ids are the scenario names); params override the scenarios' defaults.",
    "rl_threshold(min_ratio=None, min_rating=None, mode='point'): the pass condition of "
    "the scenario's return ratio; mode is point, confident or not_worse.",
    "rl_episodes(n, max_n=None, target_ci_width=None): paired episodes per scenario, "
    "optionally adaptive up to max_n until the interval is narrower than target_ci_width.",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    session = AuditSession(config)
    config.pluginmanager.register(session, "rlaudit-session")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(session), "rlaudit-xdist")


def _session(config: pytest.Config) -> AuditSession:
    return config.pluginmanager.get_plugin("rlaudit-session")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    definition = metafunc.definition
    try:
        threshold_marker(definition.get_closest_marker("rl_threshold"))
        episodes_marker(definition.get_closest_marker("rl_episodes"))
        marker = definition.get_closest_marker("rl_scenario")
        if marker is None:
            return
        if "rl_scenario" not in metafunc.fixturenames:
            raise MarkerError("@pytest.mark.rl_scenario parametrizes the rl_scenario fixture: "
                              "use the rl_audit (or rl_scenario) fixture in the test")
        if _session(metafunc.config).enabled:
            values: list[Any] = scenario_marker(marker)
            ids = [s.name for s in values]
        else:  # skipped anyway: keep collection light (the registry imports gymnasium)
            values = list(marker.args)
            ids = [name if isinstance(name, str) else getattr(name, "name", "schedule")
                   for name in marker.args]
    except MarkerError as exc:
        error = f"{metafunc.definition.nodeid}: {exc}"
    else:
        error = None
    if error is not None:  # outside the except block: no "During handling of ..." chain
        pytest.fail(error, pytrace=False)
    metafunc.parametrize("rl_scenario", values, ids=ids, scope="function")


@pytest.fixture(scope="session")
def rl_agent(pytestconfig: pytest.Config) -> Any:
    """The agent under audit: --rl-agent (a .zip or module:attribute), loaded once.

    Override it in conftest.py to audit your own agent object.
    """
    return _session(pytestconfig).default_agent()


@pytest.fixture(scope="session")
def rl_env(pytestconfig: pytest.Config) -> Any:
    """The env under audit: --rl-env (a Gymnasium id). Override it in conftest.py."""
    return _session(pytestconfig).default_env()


@pytest.fixture
def rl_scenario(request: pytest.FixtureRequest) -> Any:
    """The item's Scenario, from @pytest.mark.rl_scenario(...)."""
    scenario = getattr(request, "param", None)
    if scenario is None:
        pytest.fail("the rl_scenario fixture needs @pytest.mark.rl_scenario('jitter', ...) on "
                    "the test", pytrace=False)
    return scenario


@pytest.fixture
def rl_audit(request: pytest.FixtureRequest, rl_scenario: Any) -> Callable[..., Any]:
    """``rl_audit(agent=None, env=None)``: audit the item's scenario, record and return it.

    Uses rl_agent / rl_env unless given, the item's rl_threshold and rl_episodes markers
    over the command line and ini, and raises RobustnessError when a threshold is missed.
    """
    session = _session(request.config)

    def run(agent: Any = None, env: Any = None) -> Any:
        __tracebackhide__ = True
        agent = request.getfixturevalue("rl_agent") if agent is None else agent
        env = request.getfixturevalue("rl_env") if env is None else env
        return session.run(request.node, rl_scenario, agent, env)

    return run
