"""docs/tutorials/ci-gate.md works on day one: its workflow's commands, taken from the page,
run in a git repository made here, with a main whose agent misses a threshold, then a pull
request with a worse agent and one with the same agent; the words and exit codes the page
quotes are asserted. Also: the workflow uploads main's baseline whatever the tests say, and
the pull request looks for main's newest baseline, not main's newest successful run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "ci-gate.md"
AGENTS = Path(__file__).with_name("cartpole_agents.py")

# main's agent (robust) keeps 0.878 of its return under a spike over these 10 episodes:
# the threshold 0.9 is one a first agent misses; fragile keeps 0.434 (a clear regression)
TEST_FILE = '''
import pytest
from agents import {agent} as agent


@pytest.mark.rl_scenario("spike")
@pytest.mark.rl_threshold(min_ratio=0.9)
@pytest.mark.rl_episodes(10)
def test_spike(rl_audit):
    rl_audit(agent=agent, env="CartPole-v1")
'''


def workflow() -> dict:
    """The page's GitHub Actions workflow, parsed."""
    text = PAGE.read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S)
                 if "jobs:" in b and "rl-baseline" in b)
    return yaml.safe_load(block)


def steps() -> list[dict]:
    return workflow()["jobs"]["audit"]["steps"]


def pytest_commands(script: str) -> list[list[str]]:
    """The pytest commands of a step's shell script, continuation lines joined."""
    joined = script.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip().startswith("pytest ")]


def main_command() -> list[str]:
    (step,) = [s for s in steps() if s.get("if") == "github.event_name == 'push'" and "run" in s]
    (command,) = pytest_commands(step["run"])
    return command


def pr_command() -> list[str]:
    (step,) = [s for s in steps()
               if s.get("if") == "github.event_name == 'pull_request'" and "run" in s]
    (command,) = pytest_commands(step["run"])
    return command


def test_the_workflow_uploads_the_baseline_always_and_the_pr_needs_no_successful_main():
    all_steps = steps()
    (upload,) = [s for s in all_steps if s.get("with", {}).get("name") == "rl-baseline"]
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert upload["if"].startswith("always()") and "push" in upload["if"]
    assert upload["with"]["if-no-files-found"] == "error"
    (pr,) = [s for s in all_steps
             if s.get("if") == "github.event_name == 'pull_request'" and "run" in s]
    assert "--status" not in pr["run"] and "success" not in pr["run"]
    assert "actions/artifacts?name=rl-baseline" in pr["run"]
    assert "gh run download" in pr["run"] and "--name rl-baseline" in pr["run"]
    # the workflow's commands are the ones the Baselines section shows
    text = PAGE.read_text(encoding="utf-8")
    assert shlex.join(main_command()) in text
    bash = [b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "--rl-compare=" in b]
    assert pr_command() in [c for b in bash for c in pytest_commands(b)]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                    "-c", "commit.gpgsign=false", *args], cwd=repo, check=True,
                   capture_output=True)


def _run(repo: Path, command: list[str]) -> subprocess.CompletedProcess:
    assert command[0] == "pytest"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "RLAUDIT_")) and k != "GITHUB_STEP_SUMMARY"}
    return subprocess.run([sys.executable, "-m", "pytest", *command[1:], "-p", "no:cacheprovider"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def _commit_agent(repo: Path, agent: str, message: str) -> None:
    (repo / "test_agent.py").write_text(TEST_FILE.format(agent=agent))
    _git(repo, "add", "test_agent.py", "agents.py")
    _git(repo, "commit", "-q", "-m", message)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_tutorial_works_on_day_one(tmp_path):
    page = " ".join(PAGE.read_text(encoding="utf-8").split())  # prose wraps anywhere
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shutil.copy(AGENTS, repo / "agents.py")
    _commit_agent(repo, "robust", "an agent that misses the spike threshold")

    # main: the threshold is missed (exit 1), and the baseline is saved all the same, complete
    main = _run(repo, main_command())
    assert main.returncode == 1, main.stdout
    saved = "rl audit baseline: saved 1 results to rl-baseline.json"
    assert saved in main.stdout and saved in page


    baseline = json.loads((repo / "rl-baseline.json").read_text())
    assert baseline["complete"] is True and len(baseline["results"]) == 1
    assert len(baseline["results"][0]["returns"]) == 10
    # the artifact the pull request downloads: outside the checkout, as gh run download puts it
    artifact = (repo / "rl-baseline.json").read_bytes()
    (repo / "rl-baseline.json").unlink()

    # a pull request with a worse agent: REGRESSED rows, HOLD, exit 1
    _git(repo, "checkout", "-q", "-b", "worse")
    _commit_agent(repo, "fragile", "a worse agent")
    (repo / "rl-baseline.json").write_bytes(artifact)
    worse = _run(repo, pr_command())
    assert worse.returncode == 1, worse.stdout
    section = worse.stdout.split("rl audit comparison", 1)[1]
    assert re.search(r"^REGRESSED  ", section, re.M) and "`REGRESSED`" in page
    hold = [line for line in section.splitlines() if line.startswith("HOLD: ")]
    assert hold == ["HOLD: 2 significant regressions beyond return:5%, ratio:0.05 "
                    "(marked regressed)"]
    assert len(hold[0]) <= 100 and hold[0] in page
    assert (repo / "rl-audit" / "summary.md").exists() and (repo / "rl-audit.xml").exists()

    # a pull request with main's agent: SHIP, and main's missed threshold still fails the run
    _git(repo, "checkout", "-q", "main")
    _git(repo, "checkout", "-q", "-b", "same")
    (repo / "test_agent.py").write_text(TEST_FILE.format(agent="robust") + "\n# a comment\n")
    _git(repo, "commit", "-q", "-am", "the same agent")
    same = _run(repo, pr_command())
    assert same.returncode == 1, same.stdout
    lines = same.stdout.split("rl audit comparison", 1)[1].splitlines()
    ship = next(i for i, line in enumerate(lines) if line.startswith("SHIP: "))
    assert lines[ship + 1].startswith("the run fails all the same: 1 test(s) failed")
    assert lines[ship + 1].endswith("SHIP judges the comparison with the baseline only")
    assert "the run fails all the same: 1 test(s) failed" in page
    assert "SHIP judges the comparison with the baseline only" in page


def test_the_pages_code_blocks_need_no_horizontal_scroll():
    text = PAGE.read_text(encoding="utf-8")
    long = [line for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
            for line in block.splitlines() if len(line) > 100]
    assert long == []
