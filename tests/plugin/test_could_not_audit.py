"""Could-not-audit is not not-robust (issue 42, point 3): a missing agent file, an unknown
env id, an agent for another env's spaces are usage or collection errors (pytest's ERROR,
exit 4 or 2), never failed robustness tests (exit 1); forgetting --rl-audit never passes a
gate: --rl-agent, --rl-save, --rl-report and --rl-videos on the command line turn auditing
on, and the audit tests skipped for want of it are counted in one line."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
from inner_runs import without_figures

# An unknown env id makes the plugin look for it among ALE's (Atari) ids, importing ale_py
# in the inner run; pytester drops what an inner run imported, and importing that C
# extension a second time in one process aborts it: imported here, it is kept.
with contextlib.suppress(ImportError):
    import ale_py  # noqa: F401

EXAMPLES = Path(__file__).parents[2] / "examples"
USAGE = pytest.ExitCode.USAGE_ERROR
SKIPPED_LINE = ("rl audit: 3 tests skipped: auditing is off; run with --rl-audit "
                "(or ini rl_audit = true)")

AUDIT_TEST = """
import pytest

@pytest.mark.rl_scenario("jitter", "delay")
def test_audit(rl_audit):
    rl_audit()

def test_plain():
    pass
"""


@pytest.fixture
def here(tester: pytest.Pytester) -> pytest.Pytester:
    """``tester`` with an ini of its own (this repo's sets rl_audit = true)."""
    tester.makeini("[pytest]\n")
    return tester


@pytest.fixture(scope="module")
def sb3() -> None:
    """stable-baselines3 (and torch) imported before pytester's snapshot of sys.modules:
    imported in a test, pytester would drop them after it, and torch cannot be imported
    twice in one process. A model loaded in full (``PPO.load``: SB3 builds its optimizer,
    which imports torch._dynamo and torch._inductor) once here keeps what that imports too:
    imported a second time, torch registers its operator libraries twice and every later
    SB3 load in this process fails."""
    sb3 = pytest.importorskip("stable_baselines3")
    sb3.PPO.load(EXAMPLES / "ppo_cartpole.zip")


def _text(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


def test_a_missing_agent_file_is_a_usage_error_naming_the_folder_and_close_matches(
        here: pytest.Pytester):
    (here.path / "ppo_cartpole.zip").write_bytes(b"not read: the name is misspelt")
    result = here.runpytest("--rl-audit", "--rl-agent=ppo_cartpol.zip", "--rl-env=CartPole-v1")
    assert result.ret == USAGE
    text = _text(result)
    assert f"resolved against {here.path}" in text
    assert "did you mean 'ppo_cartpole.zip'" in text
    assert "failed" not in text and "passed" not in text  # nothing ran


def test_a_missing_agent_folder_says_which_folder_is_missing(here: pytest.Pytester):
    result = here.runpytest("--rl-audit", "--rl-agent=models/ppo.zip", "--rl-env=CartPole-v1")
    assert result.ret == USAGE
    assert f"its folder '{here.path / 'models'}' does not exist either" in _text(result)


def test_an_unknown_env_id_is_a_collection_error_with_close_ids(here: pytest.Pytester):
    result = here.runpytest("--rl-audit", "--rl-agent=agents:robust", "--rl-env=CartPol-v1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*ERROR collecting rl-audit*",
        "--rl-env: unknown Gymnasium environment id 'CartPol-v1'. Did you mean 'CartPole-v1'*"])
    assert " failed" not in _text(result)


def test_an_unknown_env_id_of_a_test_of_the_repo_is_a_collection_error_too(
        here: pytest.Pytester):
    here.makepyfile(test_inner_audits=AUDIT_TEST)
    result = here.runpytest("--rl-audit", "--rl-agent=agents:robust", "--rl-env=CartPol-v1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)  # the audits did not run


def test_an_unknown_env_id_is_reported_by_xdist_workers(here: pytest.Pytester):
    pytest.importorskip("xdist")
    result = here.runpytest("-n", "1", "--rl-audit", "--rl-agent=agents:robust",
                            "--rl-env=CartPol-v1")
    assert result.ret == USAGE  # not "no tests ran" (exit 5) with no word, as it was
    result.stdout.fnmatch_lines(["*ERROR collecting rl-audit*",
                                 "*--rl-env: unknown Gymnasium environment id 'CartPol-v1'*"])


def test_an_agent_for_other_spaces_is_a_collection_error(sb3: None, here: pytest.Pytester):
    shutil.copy(EXAMPLES / "ppo_cartpole.zip", here.path / "ppo.zip")
    result = here.runpytest("--rl-audit", "--rl-agent=ppo.zip", "--rl-env=MountainCar-v0",
                            "--rl-episodes=2")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting rl-audit*",
                                 "*--rl-agent ppo.zip on --rl-env MountainCar-v0: *is this the "
                                 "env it was trained on?*"])
    assert " failed" not in _text(result)


def test_a_model_for_other_spaces_found_at_the_first_episode_is_an_error(
        sb3: None, here: pytest.Pytester):
    here.makepyfile(test_mine=f"""
import pytest
from stable_baselines3 import PPO

@pytest.mark.rl_scenario("jitter")
def test_audit(rl_audit):
    rl_audit(agent=PPO.load({str(EXAMPLES / "ppo_cartpole.zip")!r}), env="MountainCar-v0")
""")
    result = here.runpytest("--rl-audit", "--rl-episodes=2")
    result.assert_outcomes(errors=1)
    assert result.ret == USAGE
    result.stdout.fnmatch_lines(["ERROR test_mine.py::test_audit[[]jitter[]] - agent PPO*"])
    assert "agent PPO expects observations Box(4,) but the env gives Box(2,)" in _text(result)


def test_a_test_whose_agent_is_missing_is_an_error_not_a_failure(here: pytest.Pytester):
    (here.path / "ppo_cartpole.zip").write_bytes(b"")
    here.makepyfile(test_mine="""
import pytest

@pytest.mark.rl_scenario("jitter", "delay")
def test_audit(rl_audit):
    rl_audit(agent="ppo_cartpol.zip", env="CartPole-v1")
""")
    result = here.runpytest("--rl-audit", "--rl-episodes=2")
    result.assert_outcomes(errors=2)
    assert result.ret == USAGE
    result.stdout.fnmatch_lines(["ERROR test_mine.py::test_audit[[]jitter[]] - agent path*",
                                 "ERROR test_mine.py::test_audit[[]delay[]] - the same "
                                 "AgentNotFoundError*"])
    assert "did you mean 'ppo_cartpole.zip'" in _text(result)


def test_rl_agent_on_the_command_line_turns_auditing_on(here: pytest.Pytester):
    result = here.runpytest("--rl-agent=agents:robust", "--rl-env=CartPole-v1",
                            "--rl-scenarios=jitter", "--rl-episodes=2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= rl audit =*", "*robust*CartPole-v1*jitter*"])


def test_rl_agent_in_the_ini_file_does_not(here: pytest.Pytester):
    here.makeini("[pytest]\nrl_agent = agents:robust\nrl_env = CartPole-v1\n")
    here.makepyfile(test_inner_audits=AUDIT_TEST)
    result = here.runpytest()
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.OK


def test_a_test_taking_rl_agent_runs_alone_when_rl_agent_turns_auditing_on(
        here: pytest.Pytester):
    here.makepyfile(test_fixtures="""
def test_fixtures(rl_agent, rl_env):
    assert rl_agent.name == "robust"
""")
    result = here.runpytest("--rl-agent=agents:robust", "--rl-env=CartPole-v1")
    result.assert_outcomes(passed=1)  # no zero-config items beside the repo's own test


@pytest.mark.parametrize("args", [("--rl-save=baseline.json",), ("--rl-report=out",),
                                  ("--rl-report=out", "--rl-videos")])
def test_a_destination_on_the_command_line_turns_auditing_on(
        here: pytest.Pytester, args: tuple[str, ...]):
    here.makeconftest("""
import pytest
import agents

@pytest.fixture(scope="session")
def rl_agent():
    return agents.robust

@pytest.fixture(scope="session")
def rl_env():
    return agents.cartpole
""")
    here.makepyfile(test_inner_audits=AUDIT_TEST)
    with without_figures():  # no assertion reads them
        result = here.runpytest(*args, "--rl-episodes=2")
    result.assert_outcomes(passed=3)  # the audits ran, not skipped
    assert not [line for line in result.outlines if line.startswith("rl audit:")]
    if "--rl-save=baseline.json" in args:
        saved = json.loads((here.path / "baseline.json").read_text())
        assert sorted(r["scenario"] for r in saved["results"]) == ["delay", "jitter"]
    else:
        assert (here.path / "out" / "summary.json").is_file()


def test_skipped_audit_tests_are_counted_in_one_line(here: pytest.Pytester):
    here.makepyfile(test_inner_audits=AUDIT_TEST, test_more="""
def test_uses_the_fixture(rl_audit):
    pass
""")
    result = here.runpytest()
    result.assert_outcomes(passed=1, skipped=3)
    assert result.ret == pytest.ExitCode.OK
    assert result.outlines.count(SKIPPED_LINE) == 1


def test_no_line_when_nothing_was_skipped_for_want_of_auditing(here: pytest.Pytester):
    here.makepyfile(test_plain="""
import pytest

def test_plain():
    pass

@pytest.mark.skip(reason="not now")
def test_other():
    pass
""")
    result = here.runpytest()
    result.assert_outcomes(passed=1, skipped=1)
    assert not [line for line in result.outlines if line.startswith("rl audit:")]


def test_an_agent_file_that_does_not_load_is_an_error_not_a_failure(
        sb3: None, here: pytest.Pytester):
    # a zip cut short in transfer: an AgentFileError, could not audit
    (here.path / "ppo.zip").write_bytes((EXAMPLES / "ppo_cartpole.zip").read_bytes()[:5000])
    result = here.runpytest("--rl-audit", "--rl-agent=ppo.zip", "--rl-env=CartPole-v1",
                            "--rl-scenarios=jitter", "--rl-episodes=2")
    assert result.ret in (USAGE, pytest.ExitCode.INTERRUPTED)
    assert "ppo.zip" in _text(result) and "is it truncated" in _text(result)
    assert " failed" not in _text(result)


def test_any_agent_that_does_not_load_in_a_test_of_the_repo_is_an_error(
        sb3: None, here: pytest.Pytester):
    # statistics that are another kind of pickle: a plain PolicyError from the loader
    shutil.copy(EXAMPLES / "ppo_cartpole.zip", here.path / "ppo.zip")
    (here.path / "stats.pkl").write_bytes(__import__("pickle").dumps({"not": "VecNormalize"}))
    here.makepyfile(test_inner_audits=AUDIT_TEST)
    result = here.runpytest("--rl-audit", "--rl-agent=ppo.zip", "--rl-env=CartPole-v1",
                            "--rl-vec-normalize=stats.pkl", "--rl-episodes=2")
    result.assert_outcomes(passed=1, errors=2)  # test_plain passes; the audits could not run
    assert result.ret == USAGE
    result.stdout.fnmatch_lines(["ERROR test_inner_audits.py::test_audit[[]jitter[]] - "
                                 "'stats.pkl' does not hold a*"])
