"""--rl-history end to end, with pytester, in a git repository made in the test: runs
numbered and named by commit, a dirty tree marked, runs of other settings kept and never
paired, an xdist run and a stopped run marked, and --rl-compare last / by number / by
commit prefix resolved against the folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

# In-process pytester runs reuse these instead of importing them afresh on every run.
import gymnasium  # noqa: F401
import pytest

import pytest_rlaudit.verdicts.assertions  # noqa: F401  (the engine, and scipy with it)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

RUN = ("--rl-audit", "--rl-agent", "current:agent", "--rl-env", "CartPole-v1",
       "--rl-episodes", "6", "--rl-scenarios", "spike", "--rl-history", "hist",
       "-p", "no:cacheprovider")


#: Fixed dates make the commit hashes, and so this test, the same on every run.
DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(tester: pytest.Pytester, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=tester.path, check=True, capture_output=True,
                          text=True, env={**os.environ, **DATES}).stdout.strip()


def commit(tester: pytest.Pytester, agent: str) -> str:
    """Commit ``current.py`` choosing ``agent``; the new commit's hash."""
    tester.makepyfile(current=f"from agents import {agent} as agent\n")
    git(tester, "add", "current.py")
    git(tester, "commit", "-q", "-m", f"agent: {agent}")
    return git(tester, "rev-parse", "HEAD")


@pytest.fixture
def repo(tester: pytest.Pytester) -> pytest.Pytester:
    git(tester, "init", "-q")
    git(tester, "config", "user.email", "t@example.com")
    git(tester, "config", "user.name", "t")
    return tester


def runs(tester: pytest.Pytester) -> list[str]:
    return sorted(p.name for p in (tester.path / "hist").glob("*.json"))


#: A conftest that interrupts the run (Ctrl-C) once the audit has its result.
INTERRUPT = """
def pytest_runtest_logfinish(nodeid, location):
    if nodeid.startswith("rl-audit::"):
        raise KeyboardInterrupt
"""


def test_a_history_of_runs_across_commits(repo):
    first = commit(repo, "robust")
    result = repo.runpytest(*RUN)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*rl audit history: run 0001 ({first[:12]}) saved to hist*"])
    assert runs(repo) == [f"0001_{first[:12]}.json"]

    # the agent changed and not committed: the run is marked dirty
    repo.makepyfile(current="from agents import fragile as agent\n")
    result = repo.runpytest(*RUN)
    result.stdout.fnmatch_lines(["*run 0002 (*, uncommitted changes)*"])
    second = commit(repo, "fragile")
    repo.runpytest(*RUN)
    # other settings: kept, numbered on, never paired
    repo.runpytest(*RUN[:5], "--rl-episodes", "4", *RUN[7:])
    # an xdist run, and a run interrupted once its audit had run
    repo.runpytest_subprocess(*RUN, "-n", "2")
    repo.makeconftest(INTERRUPT)
    result = repo.runpytest_subprocess(*RUN)  # in process, pytester passes Ctrl-C on
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*run 0006 (*) saved to hist*; partial: the run was "
                                 "interrupted*"])
    (repo.path / "conftest.py").unlink()
    assert runs(repo) == [f"0001_{first[:12]}.json", f"0002_{first[:12]}_dirty.json",
                          f"0003_{second[:12]}.json", f"0004_{second[:12]}.json",
                          f"0005_{second[:12]}.json", f"0006_{second[:12]}.json"]
    doc = json.loads((repo.path / "hist" / f"0002_{first[:12]}_dirty.json").read_text())
    assert doc["run"]["number"] == 2 and doc["run"]["dirty"] and doc["run"]["source"] == "git"
    assert doc["run"]["commit"] == first and doc["complete"]
    assert doc["run"]["key"]["rl_episodes"] == 6 and doc["results"][0]["scenario"] == "spike"
    xdist = json.loads((repo.path / "hist" / f"0005_{second[:12]}.json").read_text())
    assert xdist["run"]["workers"] == 2 and xdist["complete"]
    stopped = json.loads((repo.path / "hist" / f"0006_{second[:12]}.json").read_text())
    assert not stopped["complete"] and stopped["incomplete"] == "the run was interrupted"
    assert [r["scenario"] for r in stopped["results"]] == ["spike"]  # what it completed

    # last: the newest complete run with this run's settings (0005: not the partial 0006,
    # not 0004 of 4 episodes)
    result = repo.runpytest(*RUN, "--rl-compare=last")
    result.stdout.fnmatch_lines([f"baseline *0005_{second[:12]}.json: *"])
    # a commit prefix: the newest run of that commit with these settings (the dirty one)
    result = repo.runpytest(*RUN, f"--rl-compare={first[:7]}", "--rl-compare-fail=return:5%")
    result.stdout.fnmatch_lines([f"baseline *0002_{first[:12]}_dirty.json: *"])
    # a run number of other settings is refused, never paired
    result = repo.runpytest(*RUN, "--rl-compare=4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rl-compare 4 (history hist): run #0004 (*) was made with "
                                 "other settings (*episodes 4*; this run: *episodes 6*)*"])
    # by number, the robust agent's first run: the fragile one regressed against it
    result = repo.runpytest(*RUN, "--rl-compare=1", "--rl-compare-fail=ratio:0.05")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"baseline *0001_{first[:12]}.json: *", "*HOLD*"])
    # every run that audited was kept, the comparing ones too (not the refused one)
    assert len(runs(repo)) == 9

    # the trend: the fragile agent's first run (uncommitted, #0002) is the first drop
    result = repo.runpytest(*RUN, "--rl-history-show", "--rl-report=out")
    result.stdout.fnmatch_lines([
        "*= rl audit history =*",
        "rl-audit::spike (fragile on CartPole-v1, spike)",
        f"  #0001 {first[:12]:20} ratio 0.904 (0.520 to 1.000) MILD",
        f"  #0002 {first[:12] + ' dirty':20} ratio 0.450 (0.213 to 0.893) FAIL  <- first "
        "significant drop against the run before: -0.454 (CI *)",
        f"  #0003 {second[:12]:20} ratio 0.450 *",
        f"  #0005 {second[:12]:20} ratio 0.450 *",
        f"  #0006 {second[:12] + ' partial':20} ratio 0.450 *",
    ])
    # the later runs repeat run 3: no drop; the run of 4 episodes is not in this trend
    assert result.stdout.str().count("significant drop") == 1
    assert "#0004" not in result.stdout.str()
    check_page(repo.path / "out" / "history.html", repo.path, first)
    index = (repo.path / "out" / "index.html").read_text()
    assert '<a href="history.html">every run kept in hist</a>' in index
    assert json.loads((repo.path / "out" / "summary.json").read_text())["history"] == {
        "folder": "hist", "page": "history.html"}

    # the command, outside a test run
    folder = str(repo.path / "hist")
    listed = cli(folder)
    assert len(listed.splitlines()) == 10 and "#0002 (" + first[:12] + ", dirty)" in listed
    assert "episodes 4" in listed and "episodes 6" in listed and ", 2 workers;" in listed
    trend = cli(folder, "--trend", "spike")
    assert "<- first significant drop" in trend and "#0004" not in trend
    assert "#0004" in cli(folder, "--trend", "--run", "4")  # that run's settings
    compared = cli(folder, "--compare", "1", "2")
    assert compared.startswith(f"#0002 ({first[:12]}, dirty) against #0001 ({first[:12]})")
    assert "WORSE      spike: ratio 0.904 -> 0.450" in compared
    assert "wrote" in cli(folder, "--html", str(repo.path / "cli.html"))
    assert "first significant drop at run #0002" in (repo.path / "cli.html").read_text()


def cli(*args: str) -> str:
    """``python -m pytest_rlaudit history ARGS``, in process: what it printed."""
    import contextlib
    import io

    from pytest_rlaudit.__main__ import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["history", *args]) == 0
    return out.getvalue()


def check_page(page, where, first: str) -> None:
    """The history page, rendered in headless Chromium: its tables, the drop marked at
    its run and commit, the chart drawn, and no console message."""
    from browser import chromium
    from PIL import Image

    dom, console, shot = chromium(page, where, size=(1100, 1400))
    assert console == []
    assert "first significant drop at run #0002 (commit " in dom
    assert f"<code>{first[:12]}</code>): -0.454" in dom
    assert dom.count('<tr class="worse">') == 1 and "<svg" in dom
    with Image.open(shot) as image:  # the chart's FAIL band is drawn
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert sum(n for n, c in colours if max(abs(a - b) for a, b in
                                             zip(c, (0xF4, 0xB6, 0xB6), strict=True)) <= 3) > 500


def test_last_with_no_earlier_run_starts_the_history_and_a_gate_fails(repo):
    commit(repo, "robust")
    result = repo.runpytest(*RUN, "--rl-compare=last")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*rl audit comparison: nothing to compare with: hist holds no "
                                 "earlier run with this run's settings; this run starts its "
                                 "history*"])
    shutil.rmtree(repo.path / "hist")
    result = repo.runpytest(*RUN, "--rl-compare=last", "--rl-compare-fail=return:5%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a gate that could not have failed
    result.stdout.fnmatch_lines(["*--rl-compare-fail gated nothing, so the run fails*"])
    assert len(runs(repo)) == 1  # saved all the same: the next run has its baseline


def test_a_run_stopped_early_keeps_what_it_completed(repo):
    commit(repo, "fragile")
    repo.makeini("[pytest]\nrl_history = hist\n")  # the ini key, as a project sets it
    # -x: spike fails first, and delay never runs
    result = repo.runpytest(*RUN[:8], "spike,delay", "-p", "no:cacheprovider", "-x",
                            "-p", "no:randomly")
    result.stdout.fnmatch_lines(["*rl audit history: run 0001 (*) saved to hist*; partial: the "
                                 "run stopped early*"])
    (stopped,) = runs(repo)
    doc = json.loads((repo.path / "hist" / stopped).read_text())
    assert not doc["complete"] and doc["incomplete"].startswith("the run stopped early")
    assert [r["scenario"] for r in doc["results"]] == ["spike"]


def test_nothing_is_kept_when_no_audit_ran(repo):
    commit(repo, "robust")
    repo.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = repo.runpytest("test_plain.py", "--rl-history", "hist", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*rl audit history: nothing saved to hist: no audit ran*"])
    assert not (repo.path / "hist").exists() or runs(repo) == []


def test_the_command_refuses_what_names_no_run(repo, capsys):
    from pytest_rlaudit.__main__ import main

    assert main(["history", str(repo.path / "nothing")]) == 2
    assert "no run there (save runs with pytest --rl-audit --rl-history" in capsys.readouterr().err
    commit(repo, "robust")
    repo.runpytest(*RUN)
    assert main(["history", str(repo.path / "hist"), "--compare", "1", "7"]) == 2
    assert "no run number 7 (the last ones: 1)" in capsys.readouterr().err
    assert main(["history", str(repo.path / "hist"), "--trend", "jitter"]) == 2
    assert "no test of scenario or node id 'jitter'" in capsys.readouterr().err


def test_foreign_and_corrupt_files_are_named_and_skipped(repo):
    first = commit(repo, "robust")
    repo.runpytest(*RUN)
    folder = repo.path / "hist"
    (folder / "0002_deadbeef.json").write_text("{not json")
    (folder / "notes.json").write_text("{}")
    result = repo.runpytest(*RUN, "--rl-compare=last")
    result.stdout.fnmatch_lines(["*rl audit history: skipped 0002_deadbeef.json: baseline * is "
                                 "not valid JSON*",
                                 "*rl audit history: skipped notes.json: not named as a run*",
                                 f"baseline *0001_{first[:12]}.json: *"])
    # the corrupt file's number stays taken: the run is 0003
    assert f"0003_{first[:12]}.json" in runs(repo)


@pytest.mark.parametrize("args, match", [
    (("--rl-history", "taken.txt"), "*--rl-history taken.txt: is a file; --rl-history takes a "
                                    "folder*"),
    (("--rl-compare=last",), "*--rl-compare last: no such file, and 'last' names a run of a "
                             "history folder only with --rl-history DIR*"),
])
def test_bad_history_options_are_usage_errors(repo, args, match):
    (repo.path / "taken.txt").write_text("")
    result = repo.runpytest("--rl-audit", "--rl-agent", "agents:robust", "--rl-env",
                            "CartPole-v1", *args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([match])
