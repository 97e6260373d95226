from __future__ import annotations

import numpy as np
import pytest


def balance(obs: np.ndarray) -> np.ndarray:
    """A good batched CartPole controller (the example agent's weights)."""
    return (np.asarray(obs) @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)


@pytest.fixture(scope="session")
def controller():
    return balance
