"""What the deployed-artifact adapters share (ONNX in :mod:`.onnx`, TorchScript in
:mod:`.torchscript`): the model's output is the action, read the same way for both.

- ``Discrete(n)``: a float output of shape ``(batch, n)`` holds per-action scores (logits
  or Q-values) and the action is their argmax; an integer output of shape ``(batch,)`` or
  ``(batch, 1)`` is the action itself.
- ``Box``: the output, reshaped to ``(batch, *shape)``, is the action, clipped to the
  action space's bounds. Deployed controllers clip before sending an action to the
  actuators, and SB3's exported actors give the mean action, which for PPO and A2C is
  the mean of an unbounded Gaussian (SAC and TD3 squash into the bounds already, where
  clipping changes nothing).
- ``MultiDiscrete`` and ``MultiBinary``: an integer output of the space's size per row.

Anything else (a wrong width, a Dict action space) is a :class:`PolicyError` that names
the format and the space. An output holding NaN or infinity is an error in every call
(:func:`~.base.check_finite`; in an audit, one naming the step and the observation): an
argmax would quietly turn NaN scores into action 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from ...errors import PolicyError
from .base import BasePolicy, check_finite

__all__ = ["ExportedPolicy", "actions_from_output"]


def actions_from_output(out: np.ndarray, space: spaces.Space[Any], what: str) -> np.ndarray:
    """The actions of ``space`` that a deployed model's raw output ``out`` (first axis:
    one row per observation) stands for; ``what`` names the model in errors.

    >>> logits = np.array([[0.1, 2.0], [3.0, -1.0]], dtype=np.float32)
    >>> actions_from_output(logits, spaces.Discrete(2), "policy.onnx").tolist()
    [1, 0]
    >>> actions_from_output(np.array([[1], [0]]), spaces.Discrete(2), "policy.onnx").tolist()
    [1, 0]
    >>> actions_from_output(np.array([[3.0], [-0.5]]), spaces.Box(-2, 2, (1,)), "p").tolist()
    [[2.0], [-0.5]]
    >>> actions_from_output(np.zeros((2, 3)), spaces.Discrete(2), "policy.onnx")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PolicyError: policy.onnx outputs shape (2, 3) (float64), which ... cannot take: ...
    """
    n = out.shape[0] if out.ndim else 0
    integer = np.issubdtype(out.dtype, np.integer) or out.dtype == np.bool_
    per_row = int(np.prod(out.shape[1:])) if out.ndim else 0
    if isinstance(space, spaces.Discrete):
        if not integer and out.ndim == 2 and out.shape[1] == space.n:
            chosen: np.ndarray = out.argmax(axis=1).astype(np.int64) + int(space.start)
            return chosen
        if integer and out.ndim in (1, 2) and per_row == 1:
            return out.reshape(n).astype(np.int64)
        expected = (f"per-action scores of shape (batch, {space.n}) (argmax taken), or "
                    "integer actions of shape (batch,) or (batch, 1)")
    elif isinstance(space, spaces.Box):
        size = int(np.prod(space.shape))
        if out.ndim and per_row == size and not integer:
            box = out.reshape((n, *space.shape)).astype(space.dtype, copy=False)
            clipped: np.ndarray = np.clip(box, space.low, space.high)
            return clipped
        expected = f"float actions of {size} value(s) per row, shape (batch, *{space.shape})"
    elif isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
        shape = tuple(space.shape)
        if integer and out.ndim and per_row == int(np.prod(shape)):
            return out.reshape((n, *shape)).astype(space.dtype, copy=False)
        expected = f"integer actions of shape (batch, *{shape})"
    else:
        raise PolicyError(f"{what}: a deployed model's output cannot be read as an action of "
                          f"{space}; only Discrete, Box, MultiDiscrete and MultiBinary action "
                          "spaces are supported")
    raise PolicyError(
        f"{what} outputs shape {tuple(out.shape)} ({out.dtype}), which the env's action space "
        f"{space} cannot take: it needs {expected}. Export the policy for this env (its first "
        "output must be the action, or the per-action scores)"
    )


class ExportedPolicy(BasePolicy):
    """A policy whose actions come from a model file's forward pass (:mod:`.onnx`,
    :mod:`.torchscript`): stateless, deterministic, checked against the env's spaces by
    one call on a zero observation when bound."""

    #: The format's name in messages ("ONNX", "TorchScript").
    format = "model"

    def __init__(self, path: str, name: str | None = None) -> None:
        self.path = path
        self.name = name or f"{self.format}({path.replace(chr(92), '/').rsplit('/', 1)[-1]})"

    def _run(self, rows: np.ndarray) -> np.ndarray:
        """The model's first output for a batch of observations."""
        raise NotImplementedError

    def _check_observations(self, observation_space: spaces.Space[Any]) -> None:
        """Refuse an observation space the model does not take (before any call)."""
        if not isinstance(observation_space, spaces.Box):
            raise PolicyError(
                f"{self.name}: a {self.format} policy takes one array of observations; the "
                f"env's observation space is {observation_space}. Flatten the observations "
                "(gymnasium.wrappers.FlattenObservation) in the env and in the export"
            )

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        super().bind(observation_space, action_space)
        self._check_observations(observation_space)
        probe = np.zeros((1, *(observation_space.shape or ())), dtype=np.float32)
        self._bound = False  # a failure of the probe is the file's misfit to the env
        actions_from_output(self._run(probe), action_space, self.name)
        self._bound = True

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        assert self.action_space is not None, "bind() comes before act()"
        out = self._run(np.asarray(obs, dtype=np.float32))
        check_finite(out, self.name)
        if isinstance(self.action_space, spaces.Box) and out.ndim:
            self.unclipped = out.reshape((out.shape[0], *self.action_space.shape))
        return actions_from_output(out, self.action_space, self.name), None

    #: Whether the model ran on the env's (zero) probe observation at :meth:`bind`: a
    #: failure after that is the model raising on some observations, not a misfit.
    _bound = False

    def _raised(self, exc: BaseException, rows: np.ndarray) -> PolicyError:
        """The error for a model that raised on the env's observations ``rows``: the
        file, and the model's own message (the runner adds the step)."""
        after = ", after it had run on the env's probe observation" if self._bound else ""
        return PolicyError(
            f"{self.name}: the {self.format} model {self.path} raised on the env's observations "
            f"(a batch of shape {tuple(rows.shape)}){after}: {type(exc).__name__}: {exc}. "
            "The model's own code failed on these inputs; fix the model (or the observations "
            "it is given)")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} from {self.path}>"
