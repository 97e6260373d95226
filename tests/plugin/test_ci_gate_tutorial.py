"""The CI-gate tutorial (docs/tutorials/ci-gate.md) works on day one, as written.

Its "Day one" commands run in a git repository made here: main with an agent that misses a
threshold, a pull request with a worse agent, one with the same agent. The test file, the
commands, the agent of each step, the exit codes (``# exit N``) and the quoted lines are
all read from the page, so page and test cannot drift apart. Its workflow is parsed too:
the baseline is uploaded whatever the thresholds say, the pull request takes the newest
baseline that exists, and torch comes from PyTorch's CPU index.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import cartpole_agents
import pytest
from doc_blocks import BLOCK

PAGE = Path(__file__).parents[2] / "docs" / "tutorials" / "ci-gate.md"


def _section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 3)
    return text[start:end if end > 0 else None]


def _steps() -> tuple[str, list[tuple[str, str, int, list[str]]]]:
    """The day-one test file, and each step: (agent, command, exit code, quoted lines)."""
    section = _section("Day one, step by step")
    blocks = [(m.start(), m.group(1), m.group(2)) for m in BLOCK.finditer(section)]
    test_file = next(body for _, kind, body in blocks if kind == "python")
    steps = []
    for i, (at, kind, body) in enumerate(blocks):
        if kind != "bash":
            continue
        agent = re.findall(r"`policy = (\w+)`", section[:at])[-1]
        command, _, comment = body.replace("\\\n", " ").strip().partition("#")
        code = int(re.search(r"exit (\d)", comment).group(1))
        quoted = blocks[i + 1][2].strip().splitlines() if blocks[i + 1][1] == "text" else []
        steps.append((agent, " ".join(command.split()), code, quoted))
    return test_file, steps


def _seen(line: str, output: str) -> bool:
    """Whether the quoted ``line`` is in ``output`` (``...``: anything, as in the page)."""
    pattern = ".*".join(map(re.escape, line.split("...")))
    return re.search(pattern, output) is not None


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=rlaudit", "-c", "user.email=rlaudit@example.invalid",
                    *args], cwd=repo, check=True, capture_output=True)


def test_the_tutorial_gets_a_baseline_on_day_one_and_gates_pull_requests(tmp_path):
    test_file, steps = _steps()
    assert [code for *_, code, _ in steps] == [1, 1, 1]  # what the page says, checked below
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_robustness.py").write_text(test_file, encoding="utf-8")
    _git(repo, "init", "-q", "-b", "main")
    baseline = None
    for n, (agent, command, code, quoted) in enumerate(steps):
        if n:  # each pull request: a branch of main, with the baseline main saved
            _git(repo, "checkout", "-q", "main")
            _git(repo, "checkout", "-q", "-b", f"pr-{n}")
            (repo / "rl-baseline.json").write_text(baseline, encoding="utf-8")
        (repo / "agents.py").write_text(f"{cartpole_agents.source()}\n\npolicy = {agent}\n",
                                        encoding="utf-8")
        _git(repo, "add", "agents.py", "test_robustness.py")
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"step {n}: policy = {agent}")
        argv = shlex.split(command)
        assert argv[0] == "pytest"
        run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv[1:]],
                             cwd=repo, capture_output=True, text=True, timeout=300)
        output = run.stdout + run.stderr
        assert run.returncode == code, output
        missing = [line for line in quoted if not _seen(line, output)]
        assert missing == [], output
        if n == 0:  # main missed its threshold, and its baseline is saved, complete
            saved = json.loads((repo / "rl-baseline.json").read_text())
            assert saved["complete"] is True and len(saved["results"]) == 2
            baseline = (repo / "rl-baseline.json").read_text()
            (repo / "rl-baseline.json").unlink()  # CI's artifact, not a file of the repo
    assert "HOLD" in steps[1][3][-1] and "SHIP" in steps[2][3][1]


def test_the_tutorial_workflow_saves_the_baseline_whatever_the_thresholds_say():
    yaml = pytest.importorskip("yaml")
    block = next(m.group(2) for m in BLOCK.finditer(_section("The workflow"))
                 if m.group(1) == "yaml")
    steps = yaml.safe_load(block)["jobs"]["audit"]["steps"]
    runs = [" ".join(step.get("run", "").replace("\\\n", " ").split()) for step in steps]
    save = next(i for i, run in enumerate(runs) if "--rl-save=" in run)
    upload = next(i for i, step in enumerate(steps)
                  if step.get("with", {}).get("name") == "rl-baseline")
    assert upload > save and "always()" in steps[upload]["if"]
    assert steps[upload]["with"]["if-no-files-found"] == "error"
    # the pull request's baseline: the newest one main uploaded, not the newest green run's
    compare = next(run for run in runs if "--rl-compare=" in run)
    assert "--status success" not in compare and "name=rl-baseline" in compare
    # the commands the day-one steps run are the workflow's
    _, day_one = _steps()
    assert runs[save] == day_one[0][1]
    assert compare.endswith(day_one[1][1]) and day_one[1][1] == day_one[2][1]
    # torch's CPU build, before anything that would pull torch from PyPI
    cpu = next(i for i, run in enumerate(runs) if "download.pytorch.org/whl/cpu" in run)
    assert cpu < next(i for i, run in enumerate(runs) if "pytest-rlaudit[" in run)


def test_the_pages_code_blocks_need_no_horizontal_scroll():
    text = PAGE.read_text(encoding="utf-8")
    long = [line for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
            for line in block.splitlines() if len(line) > 100]
    assert long == []


def test_every_upload_on_the_page_runs_when_the_audit_failed():
    """An artifact step after a failed step is skipped unless it says always(): the report
    of a failed audit, or main's baseline, would never be uploaded."""
    yaml = pytest.importorskip("yaml")
    blocks = [m.group(2) for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))
              if m.group(1) == "yaml"]
    steps = []
    for block in blocks:  # a whole workflow, or a list of steps
        doc = yaml.safe_load(block)
        steps += doc["jobs"]["audit"]["steps"] if isinstance(doc, dict) else doc
    uploads = [step for step in steps if "upload-artifact" in step.get("uses", "")]
    assert len(uploads) >= 3 and all("always()" in step.get("if", "") for step in uploads)
