"""The plugin's options written as two words (``--rl-agent ../x.zip``): pytest reads an
existing value as a test path too when it chooses its rootdir and ini file, before it
loads the plugin. One that moved them is a usage error naming the one-word form; the
one-word form, a value inside the folder and one that moves nothing run as usual; and
zero-config items are shown as ``rl-audit::<scenario>`` from wherever pytest runs.

Runs are in-process and mostly collect only: the rootdir, the ini file and the node ids
are settled by then (a zero-config item id is rootdir-relative, so ``rl-audit::jitter``
means the rootdir is the project, and two items mean its ini file's rl_scenarios held).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from inner_runs import without_figures

AGENT = Path(__file__).parents[2] / "examples" / "ppo_cartpole.zip"

INI = "[pytest]\nrl_scenarios = jitter,delay\nrl_episodes = 2\n"
COLLECT = ("--rl-audit", "--rl-env", "CartPole-v1", "--co", "-q")


@pytest.fixture(scope="module")
def sb3_loaded() -> None:
    """For a run that collects: the zero-config collection loads the agent (an agent that
    does not load is a collection error). Torch and SB3 imported, and a model loaded in
    full, before pytester's snapshot of sys.modules, since torch cannot be imported twice
    in one process (see test_could_not_audit's sb3 fixture); skipped without torch."""
    pytest.importorskip("stable_baselines3").PPO.load(AGENT)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester's folder holds files outside the project (x.zip, base.json, stats.pkl, out/)
    and the project, proj/ (pytest.ini, models/y.zip), where the runs start."""
    for name in ("base.json", "stats.pkl"):
        (pytester.path / name).write_bytes(b"")
    shutil.copy(AGENT, pytester.path / "x.zip")  # an agent that loads
    (pytester.path / "out").mkdir()
    proj = pytester.mkdir("proj")
    (proj / "pytest.ini").write_text(INI)
    (proj / "models").mkdir()
    shutil.copy(AGENT, proj / "models" / "y.zip")
    monkeypatch.chdir(proj)
    return pytester


@pytest.mark.parametrize(("option", "value"), [
    ("--rl-agent", "../x.zip"), ("--rl-compare", "../base.json"), ("--rl-save", "../base.json"),
    ("--rl-vec-normalize", "../stats.pkl"), ("--rl-report", "../out")])
def test_a_two_word_option_that_moved_the_rootdir_is_a_usage_error_naming_the_fix(
        project: pytest.Pytester, option: str, value: str):
    agent = () if option == "--rl-agent" else ("--rl-agent=../x.zip",)
    result = project.runpytest(*COLLECT, *agent, option, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    proj = project.path / "proj"
    result.stderr.fnmatch_lines([
        f"ERROR: pytest read '{option} {value}' as a test path too when it chose its rootdir "
        f"and ini file (it does so before it loads this plugin), so it took the rootdir "
        f"{project.path} instead of {proj} and no ini file instead of {proj / 'pytest.ini'}: "
        "the settings of pytest.ini (rl_ options, addopts) would not apply and every test "
        "id would change. Write the option and its value as one word, which pytest never "
        f"takes for a test path: {option}={value}"])


def test_with_rootdir_given_the_lost_ini_file_alone_is_named(project: pytest.Pytester):
    # --rootdir keeps the rootdir, but pytest still looks for the ini file from ../
    result = project.runpytest(*COLLECT, "--rl-agent", "../x.zip", "--rootdir=.")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest read '--rl-agent ../x.zip' as a test path too *, so it took no ini file "
        f"instead of {project.path / 'proj' / 'pytest.ini'}: the settings of pytest.ini (rl_ "
        "options, addopts) would not apply. Write * --rl-agent=../x.zip"])


@pytest.mark.parametrize("agent", [
    ("--rl-agent=../x.zip",), ("--rl-agent", "models/y.zip"),
    ("--rl-agent", "../x.zip", "-c", "pytest.ini")], ids=["one-word", "inside", "ini-given"])
def test_the_one_word_form_and_a_value_inside_the_folder_keep_rootdir_ini_and_ids(
        sb3_loaded: None, project: pytest.Pytester, agent: tuple[str, ...]):
    result = project.runpytest(*COLLECT, *agent)
    assert result.ret == pytest.ExitCode.OK
    assert result.stdout.lines[:3] == ["rl-audit::jitter", "rl-audit::delay", ""]


def test_from_a_folder_below_the_rootdir_items_show_as_rl_audit_and_nothing_moves(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    from cartpole_agents import source

    project.makepyfile(agents=source())
    project.syspathinsert()
    sub = project.path / "proj" / "sub"
    sub.mkdir()
    (project.path / "proj" / "out").mkdir()
    monkeypatch.chdir(sub)
    # ../out is outside this folder but inside the rootdir: as a test path it moves nothing
    # (the report without matplotlib: its summary.json's node ids are read, not its figures)
    with without_figures():
        result = project.runpytest("--rl-audit", "--rl-agent", "agents:robust", "--rl-env",
                                   "CartPole-v1", "-v", "--rl-report", "../out")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"rootdir: {project.path / 'proj'}", "configfile: pytest.ini",
                                 "rl-audit::jitter PASSED*", "rl-audit::delay PASSED*"])
    assert "../rl-audit" not in result.stdout.str()
    doc = json.loads((project.path / "proj" / "out" / "summary.json").read_text())
    assert [r["nodeid"] for r in doc["results"]] == ["sub/rl-audit::jitter", "sub/rl-audit::delay"]


def test_without_an_ini_file_the_moved_rootdir_alone_is_named(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch):
    (pytester.path / "x.zip").write_bytes(b"")
    monkeypatch.chdir(pytester.mkdir("proj"))
    result = pytester.runpytest(*COLLECT, "--rl-agent", "../x.zip")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: * so it took the rootdir {pytester.path} instead of {pytester.path / 'proj'}: "
        "every test id would change. Write * --rl-agent=../x.zip"])
