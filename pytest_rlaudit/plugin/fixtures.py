"""The plugin's fixtures: ``rl_agent``, ``rl_env``, ``rl_scenario`` and ``rl_audit``.

Override ``rl_agent`` and ``rl_env`` in a conftest.py to audit your own agent and env.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["rl_agent", "rl_env", "rl_scenario", "rl_audit"]


def _session(config: pytest.Config) -> Any:
    return config.pluginmanager.get_plugin("rlaudit-session")


@pytest.fixture(scope="session")
def rl_agent(pytestconfig: pytest.Config) -> Any:
    """The agent under audit: --rl-agent (a .zip, a zoo folder, hf://org/repo or
    module:attribute, with --rl-algo, --rl-vec-normalize, --rl-stochastic and
    --rl-agent-name), loaded once.

    Override it in conftest.py to audit your own agent object.
    """
    return _session(pytestconfig).default_agent()


@pytest.fixture(scope="session")
def rl_env(pytestconfig: pytest.Config) -> Any:
    """The env under audit: --rl-env (a Gymnasium id). What the agent needs of it (a zoo
    folder's env_kwargs and env_wrapper) is applied when an audit runs. Override it in
    conftest.py."""
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
    With @pytest.mark.rl_tolerance it measures the scenario's tolerance curve instead and
    returns the ToleranceCurve (see :mod:`pytest_rlaudit.plugin.curves` for its verdict).
    """
    session = _session(request.config)

    def run(agent: Any = None, env: Any = None) -> Any:
        __tracebackhide__ = True
        agent = request.getfixturevalue("rl_agent") if agent is None else agent
        env = request.getfixturevalue("rl_env") if env is None else env
        return session.run(request.node, rl_scenario, agent, env)

    return run
