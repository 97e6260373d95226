"""A history folder (pytest_rlaudit.auditing.history): numbering that two savers at once
cannot break, what names a run's commit without git, files that are not runs, and every
way --rl-compare's reference can fail to name a run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rlaudit.auditing.baselines import baseline_document
from pytest_rlaudit.auditing.history import (
    Commit,
    Run,
    commit_of,
    pairing_key,
    read_runs,
    resolve,
    save_run,
)
from pytest_rlaudit.auditing.trend import trends
from pytest_rlaudit.errors import BaselineError
from pytest_rlaudit.reports.history import trend_lines

OPTIONS = {"rl_seed": 0, "rl_episodes": 6, "rl_env": "CartPole-v1"}


def document(**options) -> dict:
    return baseline_document([], version="0.1.0", options={**OPTIONS, **options})


#: One saver: 5 runs into the folder argv[1], named by the commit argv[2].
SAVER = """
import sys
from pytest_rlaudit.auditing.baselines import baseline_document
from pytest_rlaudit.auditing.history import Commit, save_run
doc = baseline_document([], version="0.1.0", options={"rl_seed": 0})
for _ in range(5):
    save_run(doc, sys.argv[1], Commit(sys.argv[2], "git"))
"""


def test_savers_at_once_get_distinct_numbers_and_whole_files(tmp_path):
    # processes of their own, waited for: a multiprocessing pool would leave its resource
    # tracker running in this process (tests/rollout/test_bounds_processes.py counts them)
    savers = [subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), f"{tag:040x}"])
              for tag in range(4)]
    assert [saver.wait(timeout=120) for saver in savers] == [0] * 4
    numbers = sorted(int(path.name[:4]) for path in tmp_path.glob("*.json"))
    assert numbers == list(range(1, 21))  # none lost, none shared
    runs = read_runs(tmp_path)
    assert not runs.skipped and [r.number for r in runs.runs] == numbers
    for run in runs.runs:  # each file is its own run, whole
        assert run.path.name.endswith(f"_{run.commit[:12]}.json")
    assert sorted(r.commit[-1] for r in runs.runs) == sorted("0123" * 5)
    assert not list(tmp_path.glob(".run.*"))  # no temporary file left behind


def test_without_git_the_commit_comes_from_ci_or_the_time(tmp_path):
    assert commit_of(tmp_path, environ={"CI_COMMIT_SHA": "feedface"}) == Commit(
        "feedface", "CI_COMMIT_SHA")
    # the first variable set wins, in the documented order
    assert commit_of(tmp_path, environ={"GIT_COMMIT": "b", "GITHUB_SHA": "a"}).name == "a"
    when = commit_of(tmp_path, environ={})
    assert when.source == "time" and re.fullmatch(r"\d{8}T\d{6}Z", when.name)
    path = save_run(document(), tmp_path, when)
    assert path.name == f"0001_{when.name}.json"
    assert read_runs(tmp_path).runs[0].commit == when.name


def test_files_that_are_not_runs_are_skipped_with_why(tmp_path):
    save_run(document(), tmp_path, Commit("a" * 40, "git"))
    (tmp_path / "0002_bad.json").write_text("{")
    (tmp_path / "0003_foreign.json").write_text(json.dumps({"kind": "something else"}))
    plain = document()
    (tmp_path / "0004_plain.json").write_text(json.dumps(plain))  # an --rl-save baseline
    (tmp_path / "readme.json").write_text("{}")
    runs = read_runs(tmp_path)
    assert [r.number for r in runs.runs] == [1]
    why = dict(line.split(": ", 1) for line in runs.skipped)
    assert "not valid JSON" in why["0002_bad.json"]
    assert "is not a pytest-rlaudit baseline" in why["0003_foreign.json"]
    assert why["0004_plain.json"].startswith("a baseline without a run block")
    assert why["readme.json"].startswith("not named as a run")
    # numbers stay taken by files that are not runs: never reused
    assert save_run(document(), tmp_path, Commit("b" * 40, "git")).name.startswith("0005_")


def test_references_that_name_no_pairable_run_say_what_the_folder_holds(tmp_path):
    key = pairing_key(OPTIONS)
    with pytest.raises(BaselineError, match="no earlier run with this run's settings"):
        resolve(tmp_path, "last", key)
    save_run(document(), tmp_path, Commit("abc1" + "0" * 36, "git"))
    save_run(document(), tmp_path, Commit("abc2" + "0" * 36, "git"))
    save_run(document(rl_episodes=4), tmp_path, Commit("ffff" + "0" * 36, "git"))
    with pytest.raises(BaselineError, match=r"no run number 9 \(the last ones: 1, 2, 3\)"):
        resolve(tmp_path, "9", key)
    with pytest.raises(BaselineError, match="'abc' starts several commits"):
        resolve(tmp_path, "abc", key)
    with pytest.raises(BaselineError, match="no run of a commit starting '12ab'"):
        resolve(tmp_path, "12ab", key)
    with pytest.raises(BaselineError, match="made with other settings"):
        resolve(tmp_path, "ffff", key)
    assert resolve(tmp_path, "abc2", key).name.startswith("0002_")
    assert resolve(tmp_path, "last", key).name.startswith("0002_")  # not 0003: 4 episodes
    assert resolve(tmp_path, "last", pairing_key({**OPTIONS, "rl_episodes": 4})).name \
        .startswith("0003_")


def test_a_short_hash_of_digits_names_its_commit_unless_it_is_also_a_run_number(tmp_path):
    key = pairing_key(OPTIONS)
    save_run(document(), tmp_path, Commit("3131757606d4" + "0" * 28, "git"))
    save_run(document(), tmp_path, Commit("0002" + "a" * 36, "git"))
    assert resolve(tmp_path, "3131757", key).name == "0001_3131757606d4.json"
    assert resolve(tmp_path, "1", key).name == "0001_3131757606d4.json"
    with pytest.raises(BaselineError, match=r"'0002' is both run number 2 and the start of "
                                            r"commit 0002aaaaaaaa; give more of the hash, or "
                                            r"the run's file \(.*0002_0002aaaaaaaa.json\)"):
        resolve(tmp_path, "0002", key)
    assert resolve(tmp_path, "0002aa", key).name == "0002_0002aaaaaaaa.json"
    with pytest.raises(BaselineError, match=r"no run number 4444 \(the last ones: 1, 2\)"):
        resolve(tmp_path, "4444", key)

def _run(number: int, returns: list[float]) -> Run:
    rec = {"nodeid": "t::spike", "scenario": "spike", "agent": "a", "env": "e",
           "returns": returns, "nominal_returns": [500.0] * 8, "seeds": list(range(8)),
           "ratio": sum(returns) / 4000, "ci_low": 0.0, "ci_high": 1.0, "rating": "PASS"}
    return Run(Path(f"{number:04d}_c{number}.json"), number, f"c{number}", False, True, {},
               doc={"results": [rec]})


def test_a_trend_over_the_latest_runs_never_calls_a_drop_the_first():
    runs = [_run(1, [500.0] * 8), _run(2, [100.0] * 8), _run(3, [100.0] * 8),
            _run(4, [20.0] * 8)]
    (whole,) = trends(runs)
    assert [p.drop is not None for p in whole.points] == [False, True, False, True]
    assert whole.first_drop.run.number == 2 and whole.earlier == 0
    (latest,) = trends(runs, last=2)  # runs 3 and 4, run 3 compared with run 2
    assert [p.run.number for p in latest.points] == [3, 4] and latest.earlier == 2
    assert latest.points[1].drop is not None and latest.first_drop is None
    text = "\n".join("".join(t for t, _ in line) for line in trend_lines([latest]))
    assert "(2 earlier run(s) not shown)" in text
    assert "<- significant drop against the run before" in text and "first" not in text
    text = "\n".join("".join(t for t, _ in line) for line in trend_lines([whole], last=2))
    assert "(2 earlier run(s) not shown)" in text  # run 2's first drop is among them
    assert "<- significant drop against the run before" in text
