"""A CartPole stepped as one batch of torch tensors, in the style of Isaac Lab's direct
envs, behind the :class:`pytest_rlaudit.BatchedEnv` protocol.

GPU simulators keep every env's state in one tensor, return observations in a dict
(``obs["policy"]``, shape ``(num_envs, obs_dim)``) and reset envs that end inside
``step`` from one shared generator. This one does the same on the CPU, so the audit's
handling of such a simulator is tested without a GPU. What the protocol adds is
``reset(env_ids, seeds)``: each env's start state drawn from its own seed, which makes
the audit's episodes paired and reproducible.

>>> import numpy as np
>>> env = BatchedCartPole(num_envs=4)
>>> obs = env.reset(np.array([0, 1, 2, 3]), [0, 1, 2, 3])
>>> tuple(obs["policy"].shape)
(4, 4)
>>> obs, rewards, terminated, truncated, extras = env.step(np.ones(4, dtype=np.int64))
>>> rewards.tolist()
[1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces


class BatchedCartPole:
    """``num_envs`` cart-poles in float32 tensors on ``device`` (classic control's
    physics and limits: 12 degrees, 2.4 m, 500 steps)."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_limit = 12 * 2 * np.pi / 360
    x_limit = 2.4
    max_episode_length = 500

    def __init__(self, num_envs: int, device: str = "cpu") -> None:
        self.num_envs = num_envs
        self.device = torch.device(device)
        high = np.array([4.8, np.inf, 0.42, np.inf], dtype=np.float32)
        self.single_observation_space = spaces.Dict({"policy": spaces.Box(-high, high)})
        self.single_action_space = spaces.Discrete(2)
        self.state = torch.zeros((num_envs, 4), device=self.device)
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(0)  # shared, as a simulator's

    def _obs(self) -> dict[str, torch.Tensor]:
        return {"policy": self.state.clone()}

    def reset(self, env_ids: np.ndarray, seeds: Sequence[int]) -> dict[str, torch.Tensor]:
        """Reset ``env_ids``, each from its own seed; their observations, in that order."""
        ids = torch.as_tensor(np.asarray(env_ids), device=self.device)
        for env_id, seed in zip(ids.tolist(), seeds, strict=True):
            own = torch.Generator(device=self.device).manual_seed(int(seed))
            self.state[env_id] = (torch.rand(4, generator=own, device=self.device) - 0.5) * 0.1
        self.episode_length[ids] = 0
        return {"policy": self.state[ids].clone()}

    def step(self, actions: Any) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor,
                                          torch.Tensor, dict[str, Any]]:
        """Step every env; envs that end are reset at once (Isaac Lab's way), unseeded."""
        act = torch.as_tensor(np.asarray(actions), device=self.device)
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = torch.where(act == 1, self.force_mag, -self.force_mag)
        cos, sin = torch.cos(theta), torch.sin(theta)
        total = self.masspole + self.masscart
        temp = (force + self.masspole * self.length * theta_dot**2 * sin) / total
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos**2 / total))
        x_acc = temp - self.masspole * self.length * theta_acc * cos / total
        self.state = torch.stack([x + self.tau * x_dot, x_dot + self.tau * x_acc,
                                  theta + self.tau * theta_dot,
                                  theta_dot + self.tau * theta_acc], dim=1)
        self.episode_length += 1
        x, theta = self.state[:, 0], self.state[:, 2]
        terminated = (x.abs() > self.x_limit) | (theta.abs() > self.theta_limit)
        truncated = self.episode_length >= self.max_episode_length
        rewards = torch.ones(self.num_envs, device=self.device)
        obs = self._obs()  # the observation the step ended in, before any reset
        done = terminated | truncated
        if done.any():  # as a GPU simulator does: reset inside step, from its own generator
            n = int(done.sum())
            self.state[done] = (torch.rand((n, 4), generator=self.generator,
                                           device=self.device) - 0.5) * 0.1
            self.episode_length[done] = 0
        return obs, rewards, terminated, truncated, {}
