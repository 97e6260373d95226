"""``--rl-progress`` (pytest_rlaudit.plugin.progress): a running audit's episodes done of total
and the time left on pytest's terminal line, under a pseudo-terminal; none when the output
is not a terminal (unless ``yes``), under xdist workers, with rl_progress = no or -qq;
pytest's own output unchanged once the line is erased; the hint of --rl-workers after the
summary.

Two runs are subprocesses under a pseudo-terminal, a real one; their conftest.py shows
progress at once and every 50 ms, rather than after 2 s and every 250 ms, so that a 1-2 s
audit shows several updates. The others run in-process, told their output is a terminal.
"""

from __future__ import annotations

import os
import re
import sys
import time

import inner_runs
import pytest

import pytest_rlaudit.verdicts.assertions  # noqa: F401  (the engine, imported here: see below)
from pytest_rlaudit.rollout import progress as progress_module

# pytester's in-process runs remove the modules they imported first when they end, and
# numpy's extension modules cannot load twice in one process: the engine is imported here.

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

AGENTS = """
import time

import numpy as np


def balance(obs):
    return (np.asarray(obs) @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)


def slow():  # a 500-step episode takes 0.15 s or more
    def act(obs):
        time.sleep(0.0003)
        return balance(obs)
    return act


def fast():
    return balance
"""

CONFTEST = """
import pytest_rlaudit.rollout.progress as progress

progress.DELAY = 0.0
progress.INTERVAL = 0.05
"""

ARGS = ("--rl-audit", "--rl-env", "CartPole-v1", "--rl-episodes", "4", "--rl-scenarios", "jitter",
        "-p", "no:cacheprovider", "-p", "no:randomly")

COUNTS = re.compile(r"\((\d+)/(\d+) episodes(?:, ~([^)]*) left)?")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "agents.py").write_text(AGENTS)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def environment(**more: str) -> dict[str, str]:
    """This environment without the outer pytest's variables (xdist's PYTEST_XDIST_WORKER),
    and without the unrelated plugins (tests/inner_runs.py)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
            "PYTEST_ADDOPTS": inner_runs.addopts(), **more}


def in_a_terminal(folder, *args: str, timeout: float = 90.0) -> str:
    """The output of ``python -m pytest ARGS`` run in ``folder`` under a pseudo-terminal."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.chdir(folder)
            os.execve(sys.executable, [sys.executable, "-m", "pytest", *args],
                      environment(COLUMNS="120", LINES="40"))
        finally:
            os._exit(127)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        else:
            os.kill(pid, 9)
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def screen(raw: str) -> list[str]:
    """What a terminal shows of ``raw``: colours dropped, carriage returns, backspaces and
    newlines applied."""
    lines, row, col = [[]], 0, 0
    for ch in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", raw):
        if ch == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append([])
        elif ch == "\r":
            col = 0
        elif ch == "\b":
            col = max(col - 1, 0)
        else:
            line = lines[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = ch
            col += 1
    return ["".join(line).rstrip() for line in lines]


def updates(raw: str) -> list[tuple[int, int, str | None]]:
    return [(int(done), int(total), left) for done, total, left in COUNTS.findall(raw)]


def test_a_running_audit_shows_episodes_done_of_total_and_the_time_left(project):
    raw = in_a_terminal(project, *ARGS, "--rl-agent", "agents:slow",
                        "--rl-scenarios", "jitter,delay", "-v")
    assert "2 passed" in raw, raw
    seen = updates(raw)
    first = [u for u in seen if u[1] == 12]  # the first audit: reference, nominal, jitter
    second = [u for u in seen if u[1] == 4]  # the second: delay (the others are cached)
    assert first and second and len(first) + len(second) == len(seen), seen
    assert len(set(first)) >= 3, seen  # several distinct updates
    assert [d for d, _, _ in first] == sorted(d for d, _, _ in first)
    assert first[-1][0] > first[0][0]
    assert any(left is not None for _, _, left in seen)
    # erased before pytest writes the outcome: the terminal shows pytest's lines alone
    # (without -v, test_rl_progress_yes_shows_it_where_the_output_is_not_a_terminal)
    shown = screen(raw)
    for scenario, at in (("jitter", "50"), ("delay", "100")):
        line = next(s for s in shown if s.startswith(f"rl-audit::{scenario}"))
        assert re.fullmatch(rf"rl-audit::{scenario} PASSED +\[ *{at}%\]", line), shown


def test_no_progress_under_xdist_workers(project):
    """The controller's output is a terminal; the workers, which run the audits, show
    nothing (one worker: what a worker does is the same with more, and cheaper)."""
    raw = in_a_terminal(project, *ARGS, "--rl-agent", "agents:fast", "-n", "1")
    assert "1 passed" in raw, raw
    assert not updates(raw) and "\b" not in raw, raw


# In-process runs from here: cheaper than a subprocess. pytester's output is not a
# terminal; the ``terminal`` fixture makes it say it is (what pytest asks of its output).


@pytest.fixture
def at_once(monkeypatch):
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    monkeypatch.setattr(progress_module, "INTERVAL", 0.01)


@pytest.fixture
def terminal(monkeypatch):
    from _pytest.capture import CaptureIO

    monkeypatch.setattr(CaptureIO, "isatty", lambda self: True, raising=False)


ZERO_CONFIG = ("--rl-audit", "--rl-agent", "agents:robust", "--rl-env", "CartPole-v1",
               "--rl-episodes", "3", "--rl-scenarios", "jitter")


def test_on_a_terminal_auto_shows_it_without_v_too(tester, at_once, terminal):
    result = tester.runpytest(*ZERO_CONFIG)
    result.assert_outcomes(passed=1)
    assert updates(result.stdout.str())
    # erased before pytest writes the outcome
    assert any(re.fullmatch(r"rl-audit \. +\[100%\]", line)
               for line in screen(result.stdout.str())), result.stdout.str()


class Config:
    """What shows_progress reads of pytest's config."""

    def __init__(self, tty: bool, verbose: int, capture: str, worker: bool) -> None:
        import io

        class Out(io.StringIO):
            def isatty(self) -> bool:
                return tty

        reporter = type("Reporter", (), {"_tw": type("Writer", (), {"_file": Out()})()})()
        self.pluginmanager = type("Plugins", (), {"get_plugin": staticmethod(
            lambda name: reporter if name == "terminalreporter" else None)})()
        self.options = {"verbose": verbose, "capture": capture}
        if worker:
            self.workerinput = {}

    def getoption(self, name, default=None):
        return self.options.get(name, default)


@pytest.mark.parametrize(("when", "tty", "verbose", "capture", "worker", "shown"), [
    ("auto", True, 0, "fd", False, True),
    ("auto", True, -1, "sys", False, True),  # -q
    ("auto", False, 0, "fd", False, False),  # not a terminal
    ("auto", True, -2, "fd", False, False),  # -qq: the least output was asked for
    ("auto", True, 0, "no", False, False),  # -s: the test's own output shares the line
    ("auto", True, 0, "tee-sys", False, False),
    ("yes", False, -2, "no", False, True),
    ("yes", True, 0, "fd", True, False),  # an xdist worker
    ("auto", True, 0, "fd", True, False),
    ("no", True, 0, "fd", False, False),
])
def test_when_progress_shows(when, tty, verbose, capture, worker, shown):
    from pytest_rlaudit.plugin.progress import shows_progress

    assert shows_progress(Config(tty, verbose, capture, worker), when) is shown


def test_rl_progress_yes_shows_it_where_the_output_is_not_a_terminal(tester, at_once):
    result = tester.runpytest(*ZERO_CONFIG, "--rl-progress", "yes")
    result.assert_outcomes(passed=1)
    assert updates(result.stdout.str())
    assert any(re.fullmatch(r"rl-audit \. +\[100%\]", line)
               for line in screen(result.stdout.str())), result.stdout.str()


def test_a_long_env_bound_audit_ends_the_run_with_one_line_on_workers(tester, at_once,
                                                                      terminal, monkeypatch):
    """Any audit is long and env-bound here: one line after the summary, once per run (not
    per audit), where no progress is shown too (here rl_progress = no on a terminal).
    (Not under --rl-workers: tests/rollout/test_rollout_progress.py.)"""
    monkeypatch.setattr(progress_module, "SUGGEST_SECONDS", 0.0)
    monkeypatch.setattr(progress_module, "POLICY_SHARE", 1.01)
    monkeypatch.setattr(progress_module, "ENV_STEP_SECONDS", 0.0)
    monkeypatch.setattr("pytest_rlaudit.rollout.workers.usable_cores", lambda: 4)
    tester.makeini("[pytest]\nrl_progress = no\n")
    result = tester.runpytest(*ZERO_CONFIG[:-1], "jitter,delay")
    result.assert_outcomes(passed=2)
    assert not updates(result.stdout.str())
    hint = [line for line in result.outlines if "--rl-workers auto runs" in line]
    assert len(hint) == 1, result.outlines
    assert re.fullmatch(r"rl audit: an audit ran \d+ s in one process: --rl-workers auto runs "
                        r"its episodes in 4 processes, each with its own copy of the agent "
                        r"\(the numbers do not change\)", hint[0]), hint


def test_rl_progress_takes_auto_yes_or_no(tester):
    result = tester.runpytest("--rl-progress", "maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rl-progress: must be one of auto, yes, no, got 'maybe'*"])
    tester.makeini("[pytest]\nrl_progress = sometimes\n")
    result = tester.runpytest()
    result.stderr.fnmatch_lines(["*ini option rl_progress = 'sometimes': must be one of auto, "
                                 "yes, no*"])

