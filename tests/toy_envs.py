"""Tiny deterministic envs whose every number can be computed by hand."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class CounterEnv(gym.Env):
    """obs = [t] (env steps since reset); reward of step t is t; terminates at t == horizon.

    Executed actions are recorded in ``self.executed``, so action wrappers can be pinned.
    """

    def __init__(self, horizon: int = 1000, box_actions: bool = False) -> None:
        self.horizon = horizon
        self.observation_space = spaces.Box(0.0, float(horizon), (1,), dtype=np.float32)
        self.action_space = (spaces.Box(-1.0, 1.0, (2,), dtype=np.float32) if box_actions
                             else spaces.Discrete(2))
        self.t = 0
        self.executed: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.executed = []
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action: Any):
        self.executed.append(action)
        self.t += 1
        return (np.array([self.t], dtype=np.float32), float(self.t), self.t >= self.horizon,
                False, {})


class FaultyEnv(CounterEnv):
    """Misbehaves at env step ``at``: raises, or returns NaN observations or rewards."""

    def __init__(self, fault: str, at: int = 3) -> None:
        super().__init__(horizon=50)
        self.fault, self.at = fault, at

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.t == self.at:
            if self.fault == "raise":
                raise RuntimeError("simulator exploded")
            if self.fault == "nan_obs":
                obs = np.array([np.nan], dtype=np.float32)
            if self.fault == "nan_reward":
                reward = float("nan")
        return obs, reward, terminated, truncated, info


def counter(horizon: int = 1000, limit: int | None = None, **kwargs: Any) -> gym.Env:
    env: gym.Env = CounterEnv(horizon, **kwargs)
    if limit is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=limit)
    return env


def drive(env: gym.Env, actions: list[Any], seed: int = 0) -> list[tuple[Any, float, bool, bool]]:
    """Reset with ``seed`` and step ``actions``; return (obs[0], reward, term, trunc) per step."""
    env.reset(seed=seed)
    out = []
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        out.append((float(np.asarray(obs).ravel()[0]), float(reward), terminated, truncated))
        if terminated or truncated:
            break
    return out
