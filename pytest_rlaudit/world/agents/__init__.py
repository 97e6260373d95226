"""Agents: adapt what a user passes as ``agent`` to one batched policy protocol.

:func:`as_policy` accepts a stable-baselines3 model (PPO, A2C, DQN, SAC, TD3, and
sb3-contrib's RecurrentPPO), a path to an SB3 ``.zip``, a deployed ``.onnx`` or
TorchScript file (:mod:`.exported`), a torch ``nn.Module``, any
callable ``obs_batch -> action_batch``, ``"random"`` (a uniform random policy), a
``"package.module:attribute"`` string naming one of these (or a zero-argument factory of
one), or an object that already implements :class:`Policy`.

>>> import numpy as np
>>> policy = as_policy(lambda obs: (obs[:, 2] > 0).astype(np.int64))
>>> actions, _ = policy.act(np.array([[0, 0, 0.1, 0], [0, 0, -0.1, 0]]), None)
>>> actions.tolist()
[1, 0]

Batch invariance. Torch's CPU matrix kernels round a row differently depending on the
number of rows in the call (measured here: calls under 16 rows use other kernels, and
in larger calls the last ``n % 4`` rows differ in the last bits). The torch-backed
adapters therefore pad every policy call to a multiple of :data:`MIN_TORCH_ROWS` rows,
so an action depends only on its observation, never on how many other episodes share
the call: results are identical for any audit batch size.

Threads. Torch-backed policy calls run with one intra-op thread by default
(``torch_threads=1``; the setting is restored after each call). The small MLPs of RL
gain nothing from more, and on a small, busy CI machine torch's thread pool stalls:
measured here on 2 shared cores, up to 48 ms per call instead of 0.2 ms. Pass
``torch_threads=None`` to keep torch's own setting (large CNN policies).

torch, stable-baselines3 and sb3-contrib are imported only when an agent needs them.
"""

from __future__ import annotations

from .adapt import as_policy, env_for
from .base import BasePolicy, Policy
from .callables import CallablePolicy, RandomPolicy
from .checkpoints import load_checkpoint
from .needs import EnvNeeds
from .preprocess import FrameStackPolicy, NormalizedPolicy, PolicyWrapper, normalizes
from .sb3 import SB3Policy
from .sb3_load import load_sb3
from .torch import MIN_TORCH_ROWS, TorchPolicy

__all__ = [
    "Policy",
    "BasePolicy",
    "CallablePolicy",
    "RandomPolicy",
    "TorchPolicy",
    "SB3Policy",
    "PolicyWrapper",
    "FrameStackPolicy",
    "NormalizedPolicy",
    "normalizes",
    "EnvNeeds",
    "as_policy",
    "env_for",
    "load_sb3",
    "load_checkpoint",
    "MIN_TORCH_ROWS",
]
