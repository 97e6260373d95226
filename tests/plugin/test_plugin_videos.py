"""``--rl-videos`` end to end, with ``pytester``: the GIF of each failing scenario in the
report folder (zero-config items, and tests that call ``assert_robust`` themselves, under
xdist too), its ``video`` field in summary.json, the notes of what cannot be filmed, the
usage error without ``--rl-report``, and a plugin that loads without Pillow.

Agents are the cheap numpy controllers of ``cartpole_agents`` (``agents.py`` in each
pytester directory); runs are in-process.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import cartpole_agents

# Loaded here so that in-process pytester runs, which drop the modules they import, reuse
# them (compiled modules such as pygame's cannot be loaded twice in one process).
import gymnasium  # noqa: F401
import hypothesis  # noqa: F401
import numpy as np
import PIL.Image
import pygame  # noqa: F401
import pytest
from inner_runs import without_figures

import pytest_rlaudit.auditing.videos
import pytest_rlaudit.plugin.videos
import pytest_rlaudit.reports.gif
import pytest_rlaudit.reports.summary
import pytest_rlaudit.verdicts.assertions
from pytest_rlaudit import check_robust
from pytest_rlaudit.auditing.records import record_of, validate

FRAGILE = ("--rl-audit", "--rl-agent", "agents:fragile", "--rl-env", "CartPole-v1",
           "--rl-episodes", "3")


def summary(result: pytest.RunResult, folder: Any) -> dict[str, dict[str, Any]]:
    doc = json.loads((folder / "summary.json").read_text())
    return {rec["nodeid"]: rec for rec in doc["results"]}


def test_each_failing_scenario_gets_a_gif_of_its_worst_episode_in_the_report(
        tester: pytest.Pytester):
    # jitter breaks the fragile agent (DEGRADED, below the default MILD gate); delay does not
    result = tester.runpytest(*FRAGILE, "--rl-scenarios=jitter,delay", "--rl-report=out",
                              "--rl-videos")
    result.assert_outcomes(passed=1, failed=1)
    recs = summary(result, tester.path / "out")
    failed, passed = recs["rl-audit::jitter"], recs["rl-audit::delay"]
    assert passed["passed"] and passed["video"] is None
    video = validate(failed)["video"]
    assert not failed["passed"]
    assert video["file"] == "videos/" + pytest_rlaudit.reports.gif.video_name("rl-audit::jitter")
    drops = np.subtract(failed["nominal_returns"], failed["returns"])
    assert failed["returns"][video["episode"]] == min(failed["returns"])  # the worst one
    assert drops[video["episode"]] == drops.max() and video["seed"] == video["episode"]
    assert video["start"] <= video["parting_step"] < video["stop"]
    with PIL.Image.open(tester.path / "out" / video["file"]) as gif:
        assert gif.is_animated and gif.n_frames == video["stop"] - video["start"]
    assert sorted(p.name for p in (tester.path / "out" / "videos").iterdir()) == [
        video["file"].removeprefix("videos/")]  # one GIF, no temporary file left
    # the report line names the folder of the GIFs too
    result.stdout.re_match_lines([r"-+ rl audit report: out.*index\.html.*, out/videos -+"])


UNFILMED = """
import gymnasium as gym
import pytest
import agents
from pytest_rlaudit import assert_robust


def plain_cartpole():
    return gym.make("CartPole-v1")


@pytest.mark.rl_threshold(min_ratio=0.9)
@pytest.mark.rl_scenario("speed_5x")
@pytest.mark.rl_episodes(3)
def test_factory(rl_audit):
    rl_audit(agent=agents.fragile, env=plain_cartpole)


def test_own_assert_of_a_factory():
    assert_robust(agents.fragile, plain_cartpole, "speed_5x", min_ratio=0.9, episodes=3)
"""


def test_what_cannot_be_filmed_is_noted_in_the_record(tester: pytest.Pytester):
    tester.makepyfile(test_unfilmed=UNFILMED)
    result = tester.runpytest("--rl-audit", "--rl-report=out", "--rl-videos")
    result.assert_outcomes(failed=2)
    recs = summary(result, tester.path / "out")
    why = {"skipped": "the env factory 'plain_cartpole' makes envs with render_mode=None; to "
                      "film it, make the factory pass render_mode='rgb_array' to "
                      "gymnasium.make (or to the env)"}
    assert recs["test_unfilmed.py::test_factory[speed_5x]"]["video"] == why
    assert recs["test_unfilmed.py::test_own_assert_of_a_factory"]["video"] == why
    assert not (tester.path / "out" / "videos").exists()
    # the terminal says why too (pygame missing is such a reason), once for both
    lines = [line for line in result.outlines if line.startswith("rl audit: no video")]
    assert lines == [f"rl audit: no video of 2 failing audit(s): {why['skipped']}"]
    assert "out/videos" not in result.stdout.str()


OWN = """
import pytest
from hypothesis import given, settings, strategies as st
import {agents} as agents
from pytest_rlaudit import assert_robust, check_robust, scenarios


def test_own_assert():
    assert_robust(agents.fragile, "CartPole-v1", "speed_5x", min_ratio=0.9, episodes=3)


def test_own_check_passes():
    assert check_robust(agents.robust, "CartPole-v1", "delay", min_ratio=0.5, episodes=3).passed


@settings(max_examples=8, derandomize=True, database=None, deadline=None)
@given(k=st.integers(2, 7))
def test_property(k):
    # fragile falls at k >= 4: hypothesis shrinks to k = 4, which the record reports
    speed = scenarios.get("speed_5x").with_params(k=k)
    assert_robust(agents.fragile, "CartPole-v1", speed, min_ratio=0.9, episodes=3)
"""


def _own_tests_filmed(result: pytest.RunResult, folder: Any) -> None:
    """The checks of OWN's run: both failing tests filmed (the property test at its minimal
    example), the passing one not; each GIF in the report folder and on the HTML page."""
    result.assert_outcomes(passed=1, failed=2)
    recs = summary(result, folder)
    assert recs["test_own.py::test_own_check_passes"]["video"] is None
    assert recs["test_own.py::test_property"]["params"]["k"] == 4
    page = (folder / "index.html").read_text()
    assert "No video" not in page
    for nodeid in ("test_own.py::test_own_assert", "test_own.py::test_property"):
        rec = validate(recs[nodeid])
        video = rec["video"]
        assert video["file"] == "videos/" + pytest_rlaudit.reports.gif.video_name(nodeid)
        assert rec["returns"][video["episode"]] == min(rec["returns"])  # the worst one
        assert video["start"] <= video["parting_step"] < video["stop"]
        with PIL.Image.open(folder / video["file"]) as gif:
            assert gif.is_animated and gif.n_frames == video["stop"] - video["start"]
        caption = (f"episode {video['episode']}, seed {video['seed']}, env steps "
                   f"{video['start']} to {video['stop'] - 1}")
        assert caption in page  # the page shows it (inline, beside the record)
    assert len(list((folder / "videos").iterdir())) == 2


_OWN_RUNS: dict[str, tuple[pytest.RunResult, Path]] = {}


def _own_runs(tester: pytest.Pytester, tmp_path: Path) -> dict[str, tuple[pytest.RunResult, Path]]:
    """OWN's run in this process and at -n 2, each with its report folder, made once per
    process: each of the two tests below reads its own. Their summary.json is the same
    (checked below), so only the first draws the page's figures from it: the -n 2 run,
    whose controller is this process, writes its report without matplotlib (the videos and
    their captions are on its page all the same; some 1.5 CPU s less)."""
    if not _OWN_RUNS:
        tester.makepyfile(test_own=OWN.format(agents="agents"))
        out = tmp_path / "in-process"
        _OWN_RUNS["in-process"] = tester.runpytest(f"--rl-report={out}", "--rl-videos"), out
        # a module name of its own: workers import it afresh, the controller never does
        tester.makepyfile(videos_agents=cartpole_agents.source(),
                          test_own=OWN.format(agents="videos_agents"))
        out = tmp_path / "n2"
        with without_figures():
            _OWN_RUNS["n2"] = tester.runpytest("-n", "2", "-p", "no:benchmark",
                                               f"--rl-report={out}", "--rl-videos"), out
    return _OWN_RUNS


def test_a_test_that_calls_assert_robust_itself_is_filmed_when_it_fails(
        tester: pytest.Pytester, tmp_path):
    result, out = _own_runs(tester, tmp_path)["in-process"]
    assert "created: 2/2 workers" not in result.stdout.str()
    _own_tests_filmed(result, out)


def test_own_assert_robust_tests_are_filmed_by_the_xdist_workers_that_ran_them(
        tester: pytest.Pytester, tmp_path):
    runs = _own_runs(tester, tmp_path)
    result, out = runs["n2"]
    assert "created: 2/2 workers" in result.stdout.str()
    _own_tests_filmed(result, out)
    assert (out / "summary.json").read_text() == (
        runs["in-process"][1] / "summary.json").read_text()


def test_a_check_that_kept_only_its_numbers_is_noted_as_not_filmed(tmp_path):
    check = check_robust(cartpole_agents.fragile, "CartPole-v1", "speed_5x", min_ratio=0.9,
                         episodes=2)
    copied = pickle.loads(pickle.dumps(check))  # a check travels without its replay
    assert repr(copied) == repr(check) and copied.replay is None and check.replay is not None
    record = record_of("t::x", copied, copied.gate)
    assert pytest_rlaudit.plugin.videos.film_check(str(tmp_path), record, copied) == {
        "skipped": pytest_rlaudit.plugin.videos.NOT_FILMED}
    assert not (tmp_path / "videos").exists()


@pytest.mark.parametrize("ini", [False, True])
def test_videos_without_a_report_folder_is_a_usage_error_naming_the_fix(
        pytester: pytest.Pytester, ini: bool):
    pytester.makepyfile("def test_plain():\n    pass\n")
    if ini:
        pytester.makeini("[pytest]\nrl_videos = true\n")
    result = pytester.runpytest(*(() if ini else ("--rl-videos",)))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rl-videos writes its GIFs into the report folder, and no "
                                 "--rl-report is given: add --rl-report DIR*"])


def test_loading_the_plugin_imports_neither_pillow_nor_the_video_modules():
    code = ("import sys, pytest_rlaudit.plugin\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PIL', 'pygame') "
            "or m.endswith(('.videos', '.gif'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
