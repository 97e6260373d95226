"""The plugin's fixtures: ``rl_agent``, ``rl_env``, ``rl_scenario``, ``rl_audit`` and
``rl_replay``.

Override ``rl_agent`` and ``rl_env`` in a conftest.py to audit your own agent and env.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["rl_agent", "rl_env", "rl_scenario", "rl_audit", "rl_replay", "warn_if_overridden"]


def _session(config: pytest.Config) -> Any:
    return config.pluginmanager.get_plugin("rlaudit-session")


@pytest.fixture(scope="session")
def rl_agent(pytestconfig: pytest.Config) -> Any:
    """The agent under audit: --rl-agent, loaded once. It takes an SB3 ``.zip``, a zoo
    folder, ``hf://org/repo``, a deployed ``.onnx`` or TorchScript ``.pt`` / ``.pth`` /
    ``.ts`` file, ``package.module:attribute``, or a glob (``runs/seed_*.zip``: one match
    is that agent, several are training runs audited together), with --rl-algo,
    --rl-vec-normalize, --rl-stochastic, --rl-agent-name and --rl-trusted.

    Override it in conftest.py to audit your own agent object.
    """
    return _session(pytestconfig).audits.default_agent()


@pytest.fixture(scope="session")
def rl_env(pytestconfig: pytest.Config) -> Any:
    """The env under audit: --rl-env (a Gymnasium id). What the agent needs of it (a zoo
    folder's env_kwargs and env_wrapper) is applied when an audit runs. Override it in
    conftest.py."""
    return _session(pytestconfig).audits.default_env()


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
        try:
            return session.audits.run(request.node, rl_scenario, agent, env)
        finally:  # --rl-record: the audited episodes as a dataset, failed or not
            if session.settings.record:
                from .replays import record_safely

                record_safely(request.config, request.node, rl_scenario, lambda: agent,
                              lambda: env)

    return run


@pytest.fixture
def rl_replay(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``rl_replay(candidate=None, dataset=None, **kwargs)``: replay the candidate open loop
    on the recorded episodes of ``dataset`` and return the ReplayResult; recorded for the
    reports (the last call of a test).

    Defaults from the test's ``@pytest.mark.rl_replay(dataset, ...)``; the candidate then
    defaults to rl_agent. It is ``assert_replay_close``: a ReplayError fails the test
    beyond ``max_disagreement`` or ``max_divergence`` and, limit or not, on an episode the
    candidate raised on (without a limit the record says "report only"); the other
    keyword arguments (``mode``, ``tolerance``, ``episodes``, ``state``, ``action``,
    ``confidence``, ``name``) are its. A recording that cannot be read is an ERROR
    (DatasetError), not a failure. Replay measures action agreement only, never return.
    """
    from .replays import replay_runner

    return replay_runner(request)


def warn_if_overridden(settings: Any, warned: set[str], fixturedef: Any, outcome: Any) -> None:
    """Say so when a conftest fixture overrides rl_agent or rl_env although --rl-agent or
    --rl-env was given, and returns something else: the option would otherwise be ignored
    without a word. Once per fixture name (``warned`` keeps them); ``outcome`` is the
    fixture's setup result, from the session's ``pytest_fixture_setup`` wrapper."""
    name = fixturedef.argname
    if name not in ("rl_agent", "rl_env") or name in warned:
        return
    given = getattr(settings, name.removeprefix("rl_"))
    func = getattr(fixturedef, "func", None)
    if not given or getattr(func, "__module__", None) == __name__:
        return
    try:
        if outcome.get_result() == given:  # the fixture passes the option on
            return
    except BaseException:  # the fixture failed: pytest reports that
        return
    warned.add(name)
    import contextlib
    import inspect
    import warnings

    where = getattr(func, "__qualname__", "a fixture of the repo's own")
    if func is not None:
        with contextlib.suppress(TypeError, OSError):
            where = f"{inspect.getsourcefile(func)}:{inspect.getsourcelines(func)[1]}"
    flag = "--" + name.replace("_", "-")
    warnings.warn(pytest.PytestConfigWarning(
        f"{flag} {given} is not used: the {name} fixture at {where} overrides it, and the "
        f"audit tests use what that fixture returns. To audit {given} with these tests, "
        f"make that fixture take pytestconfig and return "
        f"pytestconfig.getoption({name!r}) when it is set."), stacklevel=1)
