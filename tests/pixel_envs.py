"""A tiny pixel env and a CNN small enough for it, for the image-observation tests.

``CentreDot`` is learnable by a small CNN in a few seconds, and a random policy scores
clearly worse on it. SB3's ``NatureCNN`` needs images of at least 36x36, hence
``TinyCNN`` (one conv layer and a linear one), passed as ``policy_kwargs``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


class CentreDot(gym.Env):
    """Move a white dot into the centre columns of a black 16x16 image.

    The dot is a 2x2 block on an 8x8 grid of cells; reset puts it at a random cell
    (from the reset seed, so an episode is deterministic given it). Actions: 0 left,
    1 stay, 2 right (the dot stops at the edges). Reward 1 for each step that ends in
    the centre columns (cells 3 and 4), else 0; episodes are truncated after ``horizon``
    steps. A random walk spends about a quarter of its steps there; moving straight in
    and staying scores ``horizon`` minus at most 3.

    ``reuse_buffer=True`` renders every frame into one array (as some simulators do),
    so wrappers that hold a frame must copy it.
    """

    CELLS, CELL_PIXELS = 8, 2
    CENTRE = (3, 4)

    def __init__(self, horizon: int = 20, reuse_buffer: bool = False) -> None:
        size = self.CELLS * self.CELL_PIXELS
        self.observation_space = spaces.Box(0, 255, (size, size, 1), dtype=np.uint8)
        self.action_space = spaces.Discrete(3)
        self.horizon = horizon
        self.reuse_buffer = reuse_buffer
        self._buffer = np.zeros(self.observation_space.shape, dtype=np.uint8)
        self.row = self.col = self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.row, self.col = (int(c) for c in self.np_random.integers(self.CELLS, size=2))
        self.t = 0
        return self._render(), {}

    def step(self, action: Any):
        self.col = int(np.clip(self.col + int(action) - 1, 0, self.CELLS - 1))
        self.t += 1
        reward = float(self.col in self.CENTRE)
        return self._render(), reward, False, self.t >= self.horizon, {}

    def _render(self) -> np.ndarray:
        frame = self._buffer if self.reuse_buffer else np.empty_like(self._buffer)
        frame.fill(0)
        p = self.CELL_PIXELS
        frame[self.row * p:(self.row + 1) * p, self.col * p:(self.col + 1) * p] = 255
        return frame


class TinyCNN(BaseFeaturesExtractor):
    """One strided 3x3 conv (8 channels) and a linear layer: enough for ``CentreDot``."""

    def __init__(self, observation_space: spaces.Box, features_dim: int = 32) -> None:
        super().__init__(observation_space, features_dim)
        channels = observation_space.shape[0]  # SB3 hands CNNs channel-first images
        self.conv = nn.Sequential(nn.Conv2d(channels, 8, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Flatten())
        with torch.no_grad():
            flat = self.conv(torch.zeros(1, *observation_space.shape)).shape[1]
        self.linear = nn.Sequential(nn.Linear(flat, features_dim), nn.ReLU())

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.linear(self.conv(observations))
