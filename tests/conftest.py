from __future__ import annotations

import gc
import getpass
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import inner_runs
import numpy as np
import pytest
import registries
import torch_free
from cartpole_agents import source

# Before any test module imports: without torch (the other Pythons' stage of .ci/run),
# what needs it is skipped and the rest runs.
torch_free.install()


def _end_rerunfailures_busy_loop() -> None:
    """pytest-rerunfailures before 16.7 (the lowest this project admits is 14) reads its
    xdist status socket one byte at a time and never stops when the peer closes it: after
    every in-process pytester run with ``-n``, a thread of this process spun at full CPU
    for the rest of the session, which made CI's lowest-versions stage 2-3x slower than
    the newest. Its 16.7 ends the connection instead; older versions get that fix here."""
    try:
        import pytest_rerunfailures as rerunfailures
    except ImportError:
        return
    db = getattr(rerunfailures, "SocketDB", None)
    if db is None or hasattr(db, "_sock_recv_bytes"):  # 16.7 and later: fixed there
        return

    def _sock_recv(self, conn) -> str:  # 16.7's, with its ConnectionError at a closed peer
        buf = b""
        while True:
            b = conn.recv(1)
            if not b:
                raise ConnectionError("StatusDB connection closed unexpectedly")
            if b == self.delim:
                break
            buf += b
        return buf.decode()

    db._sock_recv = _sock_recv


_end_rerunfailures_busy_loop()


def _memoize_hypothesis_local_constants() -> None:
    """hypothesis 6.131 (the lowest this project admits) collects the constants of every
    local module in sys.modules for every example it draws, walking the syntax tree of
    each (the pytest_rlaudit package, and more of it mid-suite) every time: some 35 ms an
    example once the package is imported. Newer versions (6.170) only read modules they
    have not seen. The same here: the constants of one set of module objects are computed
    once (hypothesis caches their trees by module object, so they cannot differ)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return
    if not hasattr(providers, "_local_constants_hash"):  # newer: already incremental
        return
    computed: dict[tuple[int, ...], object] = {}
    local_constants = providers.local_constants

    def memoized():
        # every module object (kept below, so that no id is reused): a cheap key, where
        # listing the local ones walks sys.modules asking each for its file
        modules = tuple(sys.modules.values())
        key = tuple(map(id, modules))
        if key not in computed:
            computed.clear()
            computed[key] = (modules, local_constants())
        return computed[key][1]

    providers.local_constants = memoized


_memoize_hypothesis_local_constants()


def balance(obs: np.ndarray) -> np.ndarray:
    """A good batched CartPole controller (the example agent's weights)."""
    return (np.asarray(obs) @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)


@pytest.fixture(scope="session")
def controller():
    return balance


def _children_keep_bytecode() -> None:
    """Where the environment says not to write bytecode beside the sources
    (PYTHONDONTWRITEBYTECODE, as here and in many container images), the processes this
    suite starts (xdist's workers, which this runs before they start, pytester
    subprocesses and their workers, ``python -m pytest`` runs) keep it in the temporary
    directory instead, across runs (PYTHONPYCACHEPREFIX). Otherwise each of them compiles
    the package afresh and pytest rewrites the assertions of every module of its plugins'
    distributions (all of hypothesis) again: about 40% of an ``-n 2`` pytester run's CPU
    time, and 3 of the 7.5 CPU seconds of collecting the suite. This process is not
    affected (Python reads both at start), nor is a run where the variable is unset."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        os.environ["PYTHONPYCACHEPREFIX"] = str(
            Path(tempfile.gettempdir()) / f"pytest-rlaudit-pycache-{getpass.getuser()}")


_children_keep_bytecode()


@pytest.fixture(autouse=True)
def _registrations_undone() -> Iterator[None]:
    """Scenarios and env ids a test (or its pytester conftest) registers are gone after it
    (tests/registries.py says why)."""
    with registries.restored():
        yield


@pytest.fixture(scope="session", autouse=True)
def _sb3_logs_in_pytest_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """SB3's ``learn()`` makes a ``SB3-<date>`` folder in the system temp directory unless
    ``SB3_LOGDIR`` names one (``stable_baselines3.common.logger.configure``): 26 were left
    after one run of the suite. Here they go to pytest's temporary paths, which pytest
    prunes; the subprocesses the suite starts inherit the variable."""
    kept = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-logs"))
    yield
    if kept is None:
        del os.environ["SB3_LOGDIR"]
    else:
        os.environ["SB3_LOGDIR"] = kept


@pytest.fixture(autouse=True)
def _local_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests read what a user sees at a local terminal. On CI (``CI`` or ``BUILD_NUMBER``
    set) pytest prints every failure's whole message in the short summary too, so the
    messages the tests count would appear twice."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Ray tests first. Their module starts one local Ray instance (3-7 s of waiting
    and CPU), but under xdist's worksteal the tests at the end of a worker's share are
    handed out again in pieces: test_ray.py, mid-suite, ran in three pieces on two
    workers, each starting Ray anew, in the last minute of the run. At the front of the
    first worker's share nothing is taken from them."""
    items.sort(key=lambda item: item.path.name != "test_ray.py")  # stable: the rest keep their order
    torch_free.skip_marked(items)


def _keep_scipy_stats_across_pytester_tests() -> None:
    """The package imports scipy.stats at its first statistic (``stats.scipy_lazy``), but
    pytester takes a snapshot of ``sys.modules`` for each test that uses it and restores
    it after: every plugin test whose inner run computed a statistic imported scipy.stats
    afresh (1.6-2 s of CPU each time), over 60 s of CPU in all. Imported here, it is in
    every snapshot (and frozen out of the garbage collector with the rest below)."""
    import scipy.stats  # noqa: F401


_keep_scipy_stats_across_pytester_tests()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (the test modules, torch, SB3, hypothesis, every item) lives to
    the end of the session: frozen out of the cyclic garbage collector, whose full
    collections then walk only what the tests allocate. They walked it all, 100-250 ms
    each in an xdist worker, some 20 times a run."""
    gc.freeze()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", torch_free.MARKER)
    config.addinivalue_line(
        "markers", "inner_plugins(*names): plugins of the dev extra this test's inner pytest "
        "runs load, and \"rewrite\" for assertion rewriting (tests/inner_runs.py leaves them "
        "out otherwise)")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
             request: pytest.FixtureRequest) -> pytest.Pytester:
    """pytest's own, with the unrelated plugins of the dev extra left out of its runs and of
    the subprocesses that inherit this environment (tests/inner_runs.py)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", inner_runs.addopts(inner_runs.kept(request)))
    return pytester


@pytest.fixture
def tester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester directory with ``agents.py`` (``cartpole_agents``) importable, and no CI
    step summary."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makepyfile(agents=source())
    pytester.syspathinsert()
    return pytester


@pytest.fixture(scope="session")
def her_run(tmp_path_factory: pytest.TempPathFactory):
    """A tiny SAC + HerReplayBuffer agent trained on ``ReachGoal-v0`` (goal_envs) and saved
    as an rl-baselines3-zoo folder: ``(folder, model)``. A few hundred steps: plumbing."""
    from goal_envs import save_zoo_folder, train_her

    model = train_her("SAC")
    return save_zoo_folder(model, tmp_path_factory.mktemp("zoo")), model
