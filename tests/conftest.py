from __future__ import annotations

import numpy as np
import pytest
from cartpole_agents import source


def balance(obs: np.ndarray) -> np.ndarray:
    """A good batched CartPole controller (the example agent's weights)."""
    return (np.asarray(obs) @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)


@pytest.fixture(scope="session")
def controller():
    return balance


@pytest.fixture
def tester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester directory with ``agents.py`` (``cartpole_agents``) importable, no CI
    step summary, and pytest-randomly (in the dev extra, for the tests that run beside it)
    off unless a test asks for it with ``-p randomly``: the inner runs assert an order."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    pytester.makepyfile(agents=source())
    pytester.syspathinsert()
    return pytester
