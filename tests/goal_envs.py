"""A tiny goal-conditioned env (the ``observation`` / ``achieved_goal`` / ``desired_goal``
Dict of gymnasium-robotics' goal envs) for HER agents trained in the tests, and the
helpers the goal tests share.

``ReachEnv``: a point on a plane moves by its action (a velocity, at most 0.2 a step)
toward a goal drawn at reset from the env's seeded generator; the reward is
``max(0, 1 - distance)`` (not negative, so return ratios are defined; dense, so a few hundred
steps of SAC + HER beat random actions). ``compute_reward`` is vectorised, as HER needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_ID = "ReachGoal-v0"
HORIZON = 20


class ReachEnv(gym.Env):
    """observation = (position, last velocity), achieved_goal = position, desired_goal =
    the goal: fixed for the episode, or with ``drift`` a moving target (each step it moves
    by ``drift`` in both coordinates), so that a stale goal differs from the current one."""

    def __init__(self, drift: float = 0.0) -> None:
        self.drift = np.float32(drift)
        self.observation_space = spaces.Dict({
            "observation": spaces.Box(-2.0, 2.0, (4,), np.float32),
            "achieved_goal": spaces.Box(-2.0, 2.0, (2,), np.float32),
            "desired_goal": spaces.Box(-1.0, 1.0, (2,), np.float32),
        })
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.position = np.zeros(2, np.float32)
        self.velocity = np.zeros(2, np.float32)
        self.goal = np.zeros(2, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": np.concatenate([self.position, self.velocity]).astype(np.float32),
                "achieved_goal": self.position.copy(), "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return np.maximum(0.0, 1.0 - distance).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        self.velocity = np.zeros(2, np.float32)
        self.goal = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self._obs(), {}

    def step(self, action: Any):
        self.velocity = 0.2 * np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.position = np.clip(self.position + self.velocity, -2.0, 2.0).astype(np.float32)
        self.goal = np.clip(self.goal + self.drift, -1.0, 1.0).astype(np.float32)
        reward = float(self.compute_reward(self.position, self.goal, None))
        return self._obs(), reward, False, False, {}


class TupleEnv(gym.Env):
    """A Tuple observation (position, goal): what the runner cannot batch."""

    def __init__(self) -> None:
        self.observation_space = spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), np.float32),
                                               spaces.Box(-1.0, 1.0, (2,), np.float32)))
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return self._obs(), {}

    def _obs(self) -> tuple[np.ndarray, np.ndarray]:
        return tuple(self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32) for _ in "ab")

    def step(self, action: Any):
        return self._obs(), 0.0, False, True, {}


def register() -> None:
    """``ReachGoal-v0`` (a ``HORIZON``-step ``ReachEnv``) in gymnasium's registry."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=f"{__name__}:ReachEnv", max_episode_steps=HORIZON)


def train_her(algo: str = "SAC", steps: int = 300, seed: int = 0) -> Any:
    """A tiny SAC (or TQC) + HerReplayBuffer trained on ``ReachGoal-v0``: plumbing, not
    performance (it beats random actions, which is all an audit asks)."""
    from stable_baselines3 import SAC, HerReplayBuffer

    register()
    cls: Any = SAC
    if algo == "TQC":
        from sb3_contrib import TQC

        cls = TQC
    model = cls("MultiInputPolicy", gym.make(ENV_ID), replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={"n_sampled_goal": 2, "goal_selection_strategy": "future"},
                learning_starts=40, buffer_size=1000, batch_size=32, seed=seed,
                learning_rate=3e-3, gamma=0.8, tau=0.05, ent_coef=0.01,
                policy_kwargs={"net_arch": [16, 16]}, device="cpu")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only contend (5 ms a torch.min)
    try:
        model.learn(steps)
    finally:
        torch.set_num_threads(threads)
    return model


def save_zoo_folder(model: Any, root: Path, algo: str = "sac") -> Path:
    """``model`` saved in rl-baselines3-zoo's layout, ``<root>/<algo>/<Env>_1/``, with the
    config.yml and args.yml the zoo writes for a HER run; the run's folder."""
    folder = root / algo / f"{ENV_ID}_1"
    (folder / ENV_ID).mkdir(parents=True)
    model.save(folder / f"{ENV_ID}.zip")
    (folder / ENV_ID / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n"
        "- - - policy\n    - MultiInputPolicy\n"
        "  - - replay_buffer_class\n    - HerReplayBuffer\n"
        "  - - replay_buffer_kwargs\n"
        "    - dict( goal_selection_strategy='future', n_sampled_goal=2 )\n"
        "  - - policy_kwargs\n    - dict(net_arch=[16, 16])\n")
    (folder / ENV_ID / "args.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n"
        f"- - - algo\n    - {algo}\n  - - env\n    - {ENV_ID}\n  - - env_kwargs\n    - null\n")
    return folder
