"""The demo's agents and env: what a repo's conftest.py gives the rl_audit fixture.

``rl_agent`` defaults to --rl-agent; here it is the bundled PPO, so ``pytest --rl-audit
examples/`` needs no other option. ``sys.path`` gets this folder so the test modules can
import ``numpy_agent`` as a plain module, as they would in a repo of their own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: The bundled PPO: perfect at its training speed, fragile when timing changes.
PPO_ZIP = HERE / "ppo_cartpole.zip"
#: The same recipe trained under a randomised control period (train_cartpole.py --robust).
ROBUST_PPO_ZIP = HERE / "robust_ppo_cartpole.zip"


@pytest.fixture(scope="session")
def rl_agent() -> str:
    return str(PPO_ZIP)


@pytest.fixture(scope="session")
def rl_env() -> str:
    return "CartPole-v1"
