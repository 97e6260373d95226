"""The :class:`BatchedEnv` protocol: what a batched simulator gives an audit (see the
class)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["BatchedEnv", "POLICY_KEY"]

#: The key of a Dict observation that holds what the policy sees (Isaac Lab's group name).
POLICY_KEY = "policy"


@runtime_checkable
class BatchedEnv(Protocol):
    """A batched simulator as an audit drives it: ``audit(agent, env)`` takes any object
    with these members (a thin adapter around Isaac Lab, mjlab, MuJoCo Playground, Brax).

    - ``num_envs``: the number of envs the simulator steps together;
    - ``single_observation_space`` and ``single_action_space``: the spaces of ONE env (a
      ``Dict`` observation space with a ``"policy"`` key is read at that key, as Isaac
      Lab's ``obs["policy"]``);
    - ``reset(env_ids, seeds)``: reset the envs ``env_ids`` (an int array), env
      ``env_ids[i]`` with seed ``seeds[i]``, and return their first observations, rows in
      the order of ``env_ids``. The seed must fix everything random in that episode's
      start: that is what makes the audit's episodes paired and reproducible;
    - ``step(actions)``: step every env with ``actions`` (a numpy array, one row per env)
      and return ``(obs, rewards, terminated, truncated)`` (a fifth item, such as Isaac
      Lab's ``extras``, is ignored), one row per env. Envs that end may reset themselves
      inside ``step`` as Isaac Lab's do: the audit resets them with its next seed.

    Arrays may be numpy arrays or torch tensors on any device (they are copied to the
    CPU). The audit calls nothing else, and never steps an episode past its end. A
    torch example in Isaac Lab's style: ``examples/batched_cartpole.py`` (how-to "Vector
    envs and GPU simulators"). A minimal one, ten steps an episode, action 1 paying 1:

    >>> import numpy as np
    >>> from gymnasium import spaces
    >>> from pytest_rlaudit import audit
    >>> class Ten:
    ...     num_envs = 4
    ...     single_observation_space = spaces.Box(-1, 1, (1,))
    ...     single_action_space = spaces.Discrete(2)
    ...     t = np.zeros(4, dtype=int)
    ...     def reset(self, env_ids, seeds):
    ...         self.t[env_ids] = 0
    ...         return np.zeros((len(env_ids), 1), np.float32)
    ...     def step(self, actions):
    ...         self.t += 1
    ...         done = self.t >= 10
    ...         return np.zeros((4, 1), np.float32), 1.0 * actions, done, np.zeros(4, bool)
    >>> isinstance(Ten(), BatchedEnv)
    True
    >>> audit(lambda obs: np.ones(len(obs), int), Ten(), scenarios=["delay"],
    ...       episodes=3)["delay"].ratio
    1.0
    """

    num_envs: int
    single_observation_space: Any
    single_action_space: Any

    def reset(self, env_ids: np.ndarray, seeds: Sequence[int]) -> Any:
        """The first observations of the envs ``env_ids``, reset with ``seeds``."""

    def step(self, actions: np.ndarray) -> tuple[Any, ...]:
        """``(obs, rewards, terminated, truncated)`` of every env after ``actions``."""
