"""A goal-conditioned (HER) agent's zoo folder audited from the command line, with the
env registered in the project's conftest.py, as a user's own goal env would be. (The
trusted load of the same agent is tested through the API, tests/world/test_agents_goal.py,
and --rl-trusted itself in test_plugin_agents.py: one in-process run costs a second.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from goal_envs import ENV_ID
from inner_runs import without_figures

import pytest_rlaudit.reports.summary
import pytest_rlaudit.verdicts.assertions  # noqa: F401
from pytest_rlaudit.world.agents import as_policy

TESTS = Path(__file__).parents[1]


@pytest.fixture
def goal_project(pytester: pytest.Pytester, her_run) -> pytest.Pytester:
    """A project whose conftest.py registers ReachGoal-v0; the agent loaded once outside
    pytester first (see test_plugin_agents: torch does not survive a second import)."""
    as_policy(her_run[0], env=ENV_ID)
    pytester.syspathinsert(TESTS)
    pytester.makeconftest("import goal_envs\n\ngoal_envs.register()\n")
    return pytester


OPTIONS = ("--rl-audit", "--rl-env", ENV_ID, "--rl-episodes", "4", "-p", "no:cacheprovider")


def test_a_her_zoo_folder_is_audited_from_the_command_line(goal_project, her_run):
    # its report without matplotlib: summary.json is what is read, the figures are not
    with without_figures():
        result = goal_project.runpytest(
            *OPTIONS, f"--rl-agent={her_run[0]}", "--rl-scenarios",
            "delay,obs_noise,dropped_obs", "--rl-report", "out")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"*SAC({ENV_ID}_1)*{ENV_ID}*delay*"])
    records = json.loads((goal_project.path / "out" / "summary.json").read_text())["results"]
    assert {r["scenario"] for r in records} == {"delay", "obs_noise", "dropped_obs"}
    (noise,) = [r for r in records if r["scenario"] == "obs_noise"]
    assert len(noise["params"]["spread"]) == 2 + 4  # achieved_goal and observation only

