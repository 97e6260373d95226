"""The plugin's fixtures end to end, with ``pytester``: ``rl_agent`` and ``rl_env`` from
the options or overridden in conftest.py (and the warning that the options went unused),
a missing agent or env, ``rl_audit``'s own arguments and result, and the nominal rollout
cached once per process."""

from __future__ import annotations

import json

import pytest
from audit_records import records
from plugin_cli import CLI, text

from pytest_rlaudit.rollout.replay import PREFIX_STEPS


def test_rl_agent_and_rl_env_default_to_the_options(tester: pytest.Pytester):
    tester.makepyfile(test_fixtures="""
        def test_fixtures(rl_agent, rl_env):
            assert rl_agent.name == "robust"
            assert rl_env.name == "CartPole-v1"
            assert rl_env.make().observation_space.shape == (4,)
    """)
    result = tester.runpytest("--rl-agent", "agents:robust", "--rl-env", "CartPole-v1")
    result.assert_outcomes(passed=1)


def test_conftest_fixtures_override_the_options(tester: pytest.Pytester):
    tester.makeconftest("""
        import pytest
        import agents

        @pytest.fixture(scope="session")
        def rl_agent():
            return agents.fragile

        @pytest.fixture(scope="session")
        def rl_env():
            return agents.cartpole
    """)
    tester.makepyfile(test_override="""
        import pytest

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    # options naming another agent and an env it could not act in: the fixtures win
    result = tester.runpytest("--rl-audit", "--rl-agent", "agents:robust", "--rl-env",
                              "Acrobot-v1", "--rl-episodes", "4")
    result.assert_outcomes(passed=1)
    rec = records(result)["test_override.py::test_x[delay]"]
    assert (rec["agent"], rec["env"]) == ("fragile", "cartpole")
    # ... and the run says that the options went unused, where, and how to use them
    result.stdout.fnmatch_lines([
        "*PytestConfigWarning: --rl-agent agents:robust is not used: the rl_agent fixture at "
        "*conftest.py:4 overrides it*pytestconfig.getoption('rl_agent') when it is set.",
        "*PytestConfigWarning: --rl-env Acrobot-v1 is not used: the rl_env fixture at "
        "*conftest.py:8 overrides it*"], consecutive=False)
    assert text(result).count("is not used") == 2  # once per option, not per test


def test_the_plugins_own_fixtures_use_the_options_without_a_warning(tester: pytest.Pytester):
    tester.makepyfile(test_defaults="""
        import pytest

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:robust", "-W", "error::pytest.PytestConfigWarning")
    result.assert_outcomes(passed=1)
    assert "is not used" not in text(result)


def test_a_fixture_that_reads_the_option_is_not_warned_about(tester: pytest.Pytester):
    tester.makeconftest("""
        import pytest

        @pytest.fixture(scope="session")
        def rl_agent(pytestconfig):
            return pytestconfig.getoption("rl_agent") or "agents:fragile"
    """)
    tester.makepyfile(test_reads="""
        import pytest

        @pytest.mark.rl_threshold(min_rating="FAIL")
        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest(*CLI, "--rl-agent", "agents:robust")
    result.assert_outcomes(passed=1)
    assert records(result)["test_reads.py::test_x[delay]"]["agent"] == "robust"


@pytest.mark.parametrize(("args", "message"), [
    (("--rl-env", "CartPole-v1"),
     "*no agent to audit: pass --rl-agent PATH_OR_IMPORT*override the rl_agent fixture in "
     "conftest.py*"),
    (("--rl-agent", "agents:robust"),
     "*no env to audit on: pass --rl-env ID*override the rl_env fixture in conftest.py*"),
])
def test_a_missing_agent_or_env_is_a_clear_failure(
        tester: pytest.Pytester, args: tuple[str, ...], message: str):
    tester.makepyfile(test_missing="""
        import pytest

        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            rl_audit()
    """)
    result = tester.runpytest("--rl-audit", *args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in text(result)


def test_rl_audit_arguments_override_the_fixtures_and_it_returns_the_result(
        tester: pytest.Pytester):
    tester.makeconftest("""
        import pytest

        @pytest.fixture(scope="session")
        def rl_agent():
            pytest.fail("the rl_agent fixture was used")

        @pytest.fixture(scope="session")
        def rl_env():
            pytest.fail("the rl_env fixture was used")
    """)
    tester.makepyfile(test_args="""
        import pytest
        import agents

        @pytest.mark.rl_scenario("delay")
        def test_x(rl_audit):
            result = rl_audit(agent=agents.robust, env=agents.cartpole)
            assert result.name == "delay"
            assert result.rating in ("PASS", "MILD", "DEGRADED", "FAIL")
            low, high = result.ci
            assert 0.0 <= low <= result.ratio <= high
            assert result.episodes == 4
    """)
    result = tester.runpytest(*CLI)
    result.assert_outcomes(passed=1)
    rec = records(result)["test_args.py::test_x[delay]"]
    assert (rec["agent"], rec["env"], rec["scenario"]) == ("robust", "cartpole", "delay")


CACHE_CONFTEST = """
import json
import numpy as np
import pytest

W = np.array([0.02, 0.0, 1.0, 0.2])
SEEN = {"rows": 0, "deltas": {}}


def counting(obs):
    obs = np.asarray(obs)
    SEEN["rows"] += obs.shape[0]
    return (obs @ W > 0).astype(np.int64)


@pytest.fixture(scope="session")
def rl_agent():
    return counting


@pytest.fixture
def seen():
    return SEEN


def pytest_sessionfinish(session):
    cache = session.config.pluginmanager.get_plugin("rlaudit-session").audits.cache
    SEEN["nominal_keys"] = sum(1 for key in cache if key[0] == "nominal")
    with open("counts.json", "w") as f:
        json.dump(SEEN, f)
"""

CACHE_TESTS = """
import pytest

def _audit(request, rl_audit, seen):
    before = seen["rows"]
    rl_audit()
    seen["deltas"][request.node.name] = seen["rows"] - before

@pytest.mark.rl_scenario("jitter", "delay", "obs_noise")
def test_a(request, rl_audit, seen):
    _audit(request, rl_audit, seen)

@pytest.mark.rl_scenario("delay")
def test_b(request, rl_audit, seen):
    _audit(request, rl_audit, seen)
"""


def test_the_nominal_rollout_runs_once_per_process_across_scenarios_and_tests(
        tester: pytest.Pytester):
    tester.makeconftest(CACHE_CONFTEST)
    tester.makepyfile(test_cache=CACHE_TESTS)
    counts = tester.path / "counts.json"

    tester.runpytest(*CLI, "-k", "test_b").assert_outcomes(passed=1)
    alone = json.loads(counts.read_text())
    tester.runpytest(*CLI).assert_outcomes(passed=4)
    shared = json.loads(counts.read_text())

    assert alone["nominal_keys"] == shared["nominal_keys"] == 1
    d = shared["deltas"]
    # the first audit pays for nominal; the others, in this test and the next, do not
    assert d["test_a[delay]"] == d["test_b[delay]"] == d["test_a[obs_noise]"]
    first_rows = alone["deltas"]["test_b[delay]"] - d["test_b[delay]"]
    # the controller balances all 4 nominal episodes; the seed-replay check (once per
    # process too) runs the first PREFIX_STEPS of the first of them twice, a row a step,
    # and on CartPole's vector env the whole of it once more in a row of the batch (500)
    nominal_rows = first_rows - 2 * PREFIX_STEPS - 500
    assert nominal_rows == 4 * 500
    assert d["test_a[jitter]"] > nominal_rows
    assert shared["rows"] == sum(d.values())
