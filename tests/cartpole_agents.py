"""Cheap batched CartPole agents for the tests, and their source for pytester directories.

``robust`` is the example agent's linear controller; ``fragile`` balances nominally but
falls over under timing faults. Plugin tests write this file into each pytester directory
(as ``agents.py``, or another name where module names must differ), so ``agents:robust``
works as an ``--rl-agent`` import string there.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

W = np.array([0.02, 0.0, 1.0, 0.2])


def robust(obs):
    return (np.asarray(obs) @ W > 0).astype(np.int64)


def fragile(obs):
    obs = np.asarray(obs)
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def cartpole():
    return gym.make("CartPole-v1")


def source() -> str:
    """This module's text, to write into a pytester directory."""
    return Path(__file__).read_text(encoding="utf-8")
