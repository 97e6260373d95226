"""``--rl-videos`` end to end, with ``pytester``: the GIF of each failing scenario in the
report folder, its ``video`` field in summary.json, the notes of what cannot be filmed, the
usage error without ``--rl-report``, and a plugin that loads without Pillow.

Agents are the cheap numpy controllers of ``cartpole_agents`` (``agents.py`` in each
pytester directory); runs are in-process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

# Loaded here so that in-process pytester runs, which drop the modules they import, reuse
# them (compiled modules such as pygame's cannot be loaded twice in one process).
import gymnasium  # noqa: F401
import numpy as np
import PIL.Image
import pygame  # noqa: F401
import pytest

import pytest_rlaudit.auditing.videos
import pytest_rlaudit.plugin.videos
import pytest_rlaudit.reports.gif
import pytest_rlaudit.reports.summary
import pytest_rlaudit.verdicts.assertions
from pytest_rlaudit.auditing.records import validate

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


def test_own_assert():
    assert_robust(agents.fragile, "CartPole-v1", "speed_5x", min_ratio=0.9, episodes=3)
"""


def test_what_cannot_be_filmed_is_noted_in_the_record(tester: pytest.Pytester):
    tester.makepyfile(test_unfilmed=UNFILMED)
    result = tester.runpytest("--rl-audit", "--rl-report=out", "--rl-videos")
    result.assert_outcomes(failed=2)
    recs = summary(result, tester.path / "out")
    factory = recs["test_unfilmed.py::test_factory[speed_5x]"]["video"]
    assert factory == {"skipped": "the env factory 'plain_cartpole' makes envs with "
                                  "render_mode=None; to film it, make the factory pass "
                                  "render_mode='rgb_array' to gymnasium.make (or to the env)"}
    own = recs["test_unfilmed.py::test_own_assert"]["video"]
    assert own == {"skipped": pytest_rlaudit.plugin.videos.NOT_FILMED}
    assert not (tester.path / "out" / "videos").exists()


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
