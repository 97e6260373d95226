"""``--rl-timeout`` and the plugins that end tests (issue 23, points 4, 5 and 10): an env
step that never returns fails its item with RolloutTimeoutError and the run ends, with and
without xdist; pytest-timeout keeps working beside it; its ``thread`` method, which ends
pytest with ``os._exit``, leaves no worker process behind holding the run's output open.

Runs that could hang are subprocesses with a timeout, so that a regression fails here
instead of hanging the suite.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers")

PROJECT = """
import multiprocessing
import os
import time

import gymnasium as gym
import numpy as np
import pytest


class Hangs(gym.Wrapper):
    '''Agent step 3 of episode 2 never returns (or of every episode in the processes named
    HANG_IN, such as rlaudit-shard: worker processes, each writing its pid to children.txt).'''

    def reset(self, *, seed=None, options=None):
        self.seed_, self.t = seed, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        where = os.environ.get("HANG_IN")
        name = multiprocessing.current_process().name
        if where and name == where and self.t == 0:
            with open("children.txt", "a") as f:
                f.write(f"{os.getpid()}\\n")
        if self.t == 3 and (name == where if where else self.seed_ == 2):
            time.sleep(10**6)
        self.t += 1
        return self.env.step(action)


@pytest.fixture(scope="session")
def rl_agent():
    return lambda obs: (np.asarray(obs) @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)


@pytest.fixture(scope="session")
def rl_env():
    return lambda: Hangs(gym.make("CartPole-v1"))


@pytest.mark.rl_scenario("delay")
@pytest.mark.rl_episodes(4)
def test_hangs(rl_audit):
    rl_audit()
"""

# imported by the test module at collection, before pytest-timeout's timer starts: the
# test then reaches its hang at once (some 0.03 s in, where importing it in the audit
# takes 1-1.5 s on a loaded machine), so the timeouts below can be short
ENGINE = "import pytest_rlaudit.verdicts.assertions  # noqa: F401\n"

BASE = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark", "--rl-audit")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_hang=ENGINE + PROJECT)
    return pytester


def start(cwd: Path, *args: str, hang_in: str = "") -> subprocess.Popen:
    """``python -m pytest`` in ``cwd``, as CI runs it: its output read through pipes,
    which a process left behind would hold open (so a leak hangs :func:`finish`, bounded)."""
    return subprocess.Popen([sys.executable, "-m", "pytest", *BASE, *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HANG_IN": hang_in})


def finish(process: subprocess.Popen, began: float) -> tuple[subprocess.CompletedProcess, float]:
    """The run's output once it ends (60 s from ``began`` at most), and how long it took."""
    try:
        out, err = process.communicate(timeout=max(1.0, 60 - (time.monotonic() - began)))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return (subprocess.CompletedProcess(process.args, process.returncode, out, err),
            time.monotonic() - began)


def run(project: pytest.Pytester, *args: str, hang_in: str = "") -> tuple[subprocess.CompletedProcess,
                                                                           float]:
    """One run of :func:`start` in the project, to its end."""
    began = time.monotonic()
    return finish(start(project.path, *args, hang_in=hang_in), began)


def test_an_env_step_that_never_returns_fails_its_item_and_the_run_ends_under_xdist(project):
    # one worker: the one test runs in a worker process all the same (a second would idle)
    out, took = run(project, "--rl-timeout", "1", "-n", "1")
    assert took < 60
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed" in out.stdout
    # the random policy meets the stuck step first: check_robust runs the reference first
    assert "RolloutTimeoutError: during the random-policy reference: the audit ran past its " \
           "timeout of 1 s: it was stuck in the env's step at scenario '" in out.stdout
    assert "episode 2 (env seed 2), agent step 3" in out.stdout


def test_the_ini_key_bounds_an_audit_in_process(project, monkeypatch):
    # In-process (no new interpreter): the alarm interrupts the step in this main thread,
    # as test_bounds_timeouts' audits show; a regression would hang them all alike.
    monkeypatch.delenv("HANG_IN", raising=False)
    project.makeini("[pytest]\nrl_timeout = 1\n")
    result = project.runpytest(*BASE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*RolloutTimeoutError: during the random-policy reference: the audit ran past its "
        "timeout of 1 s: it was stuck in the env's step at scenario '*', episode 2 (env seed "
        "2), agent step 3*"])


def test_pytest_timeouts_thread_method_during_rl_workers_leaves_nothing_behind(project):
    pytest.importorskip("pytest_timeout")
    # Without xdist and under xdist, in two directories at once: each run mostly waits for
    # its timeout, so side by side they take the time of one. -n 1: the one test runs in a
    # worker process all the same (a second worker would idle).
    # The worker processes must have started (and written children.txt) before
    # pytest-timeout fires, also on a loaded machine: at 3 s, a CI run at lowest versions
    # under load timed out while the audit was still importing. The test module imports
    # the engine at collection (ENGINE): the workers (forked) write children.txt some
    # 0.03 s into the test, so 3 s leaves a wide margin.
    runs = {}
    began = time.monotonic()
    for name, xdist in {"no-xdist": (), "n1": ("-n", "1")}.items():
        where = project.mkdir(name)
        (where / "test_hang.py").write_text((project.path / "test_hang.py").read_text())
        runs[name] = (where, xdist, start(where, "--rl-workers", "2", "--timeout", "3",
                                          "--timeout-method", "thread", *xdist,
                                          hang_in="rlaudit-shard"))
    for name, (where, xdist, process) in runs.items():
        out, took = finish(process, began)
        assert took < 60, name
        assert out.returncode != 0, name
        # pytest-timeout ended pytest, or the xdist worker (which the controller reports)
        assert ("crashed while running" if xdist else "Timeout") in out.stdout + out.stderr, name
        children = {int(pid) for pid in (where / "children.txt").read_text().split()}
        assert children, name
        waited = time.monotonic()  # killed with pytest: dead within moments (5 s at most)
        while any(_alive(pid) for pid in children) and time.monotonic() - waited < 5:
            time.sleep(0.05)
        left = [pid for pid in children if _alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert left == [], f"{name}: worker processes outlived pytest: {left}"


def test_pytest_timeouts_signal_method_still_fires_first_beside_rl_timeout(project):
    pytest.importorskip("pytest_timeout")
    out, took = run(project, "--rl-timeout", "60", "--timeout", "1", "--timeout-method", "signal")
    assert took < 60
    assert out.returncode == 1
    # pytest-timeout 2.4 says "Timeout (>1.0s) from pytest-timeout", 2.3 "Timeout >1.0s"
    assert re.search(r"Failed: Timeout \(?>1\.0s", out.stdout), out.stdout
    assert "RolloutTimeoutError" not in out.stdout


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "inf", "1e10"])
def test_bad_rl_timeouts_are_usage_errors(pytester: pytest.Pytester, bad):
    result = pytester.runpytest("--rl-timeout", bad)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --rl-timeout: must be a finite number in "
                                 "(0, 3.1536e+07] (seconds for the whole audit, at most a "
                                 "year), got *: pass *, or leave the option out for no limit"])


def test_a_bad_rl_timeout_ini_key_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nrl_timeout = 0\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--rl-audit")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option rl_timeout = '0': must be a finite number in "
                                 "(0, 3.1536e+07] (seconds for the whole audit, at most a "
                                 "year), got 0.0: pass a number of seconds above 0*"])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in "ZX"


# ------------------------------------------------ the bound on one call (issue 42, 2)


@pytest.mark.parametrize("how", ["option", "ini"])
def test_rl_call_timeout_bounds_one_step_with_no_rl_timeout(project, monkeypatch, how):
    monkeypatch.delenv("HANG_IN", raising=False)
    if how == "ini":
        project.makeini("[pytest]\nrl_call_timeout = 0.5\n")
    result = project.runpytest(*BASE, *(["--rl-call-timeout", "0.5"] if how == "option" else []))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*RolloutTimeoutError: env.step did not return within 0.5 s (the bound on one env "
        "step, reset or policy call), at scenario '*', episode 2 (env seed 2), agent step 3. "
        "If it is only slow, raise the bound (--rl-call-timeout SECONDS, rl_call_timeout in "
        "the ini file, call_timeout= in the call) or remove it with 0*"])


@pytest.mark.parametrize("text, seconds", [("none", 0.0), ("0", 0.0), (" None ", 0.0),
                                           ("2.5", 2.5)])
def test_rl_call_timeout_zero_or_none_removes_the_bound(text, seconds):
    from pytest_rlaudit.auditing.settings import AuditSettings
    from pytest_rlaudit.plugin.options import _call_timeout

    assert _call_timeout(text) == seconds
    assert AuditSettings(call_timeout=seconds).call_timeout == (seconds or None)


@pytest.mark.parametrize("bad", ["-1", "abc", "inf", "1e10"])
def test_bad_rl_call_timeouts_are_usage_errors(pytester: pytest.Pytester, bad):
    result = pytester.runpytest("--rl-call-timeout", bad)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --rl-call-timeout: must be a finite number in "
                                 "(0, 3.1536e+07] (seconds one env step, reset or policy call "
                                 "may take, at most a year), got *: pass *, or 0 or none for "
                                 "no bound"])


def test_the_option_says_the_default_bound_and_mark_the_core_uses():
    # kept as text in the option table, which loads without the core (as BACKENDS)
    from pytest_rlaudit.plugin.options import _BY_DEST
    from pytest_rlaudit.rollout.calls import CALL_TIMEOUT, WAIT_MARK

    option = _BY_DEST["rl_call_timeout"]
    assert option.default == CALL_TIMEOUT
    assert f"Default: {CALL_TIMEOUT:g}." in option.help and f"past {WAIT_MARK:g} s" in option.help
