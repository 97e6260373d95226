"""Torch ``nn.Module`` agents, and the batch-invariant, single-thread policy call that
every torch-backed adapter (SB3 too) makes; see the package docstring."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from gymnasium import spaces

from .base import BasePolicy

__all__ = ["TorchPolicy", "MIN_TORCH_ROWS"]

#: Torch-backed policy calls are padded to a multiple of this many rows (batch invariance).
MIN_TORCH_ROWS = 16


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run torch with ``threads`` intra-op threads, restoring the setting afterwards."""
    if threads is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    if old == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _pad_rows(obs: np.ndarray, rows: int) -> np.ndarray:
    """Pad ``obs`` with copies of its first row up to a multiple of ``rows`` rows."""
    n = obs.shape[0]
    target = -(-n // rows) * rows
    if n == target:
        return obs
    return np.concatenate([obs, np.repeat(obs[:1], target - n, axis=0)])


class TorchPolicy(BasePolicy):
    """A torch ``nn.Module`` mapping a float32 observation batch to an action batch.

    For Discrete actions the output is either one integer per row or a row of
    scores/logits per action (argmax is taken). For Box actions the output is reshaped
    to the action shape. Runs in eval mode under ``torch.no_grad()``.
    """

    def __init__(self, module: Any, name: str | None = None, *,
                 torch_threads: int | None = 1) -> None:
        self.module = module
        self.name = name or type(module).__name__
        self.torch_threads = torch_threads

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, None]:
        import torch

        n = obs.shape[0]
        x = torch.as_tensor(_pad_rows(np.asarray(obs, dtype=np.float32), MIN_TORCH_ROWS))
        was_training = self.module.training
        if was_training:
            self.module.eval()
        try:
            with torch.no_grad(), _torch_threads(self.torch_threads):
                out = self.module(x)
        finally:
            if was_training:
                self.module.train()
        out = np.asarray(out.detach().cpu().numpy())[:n]
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            if out.ndim == 2 and out.shape[1] == space.n:
                return out.argmax(axis=1) + space.start, None
            if out.ndim == 2 and out.shape[1] == 1:
                out = out[:, 0]
            return out, None
        if isinstance(space, spaces.Box):
            return out.reshape((n, *space.shape)), None
        return out, None


def _is_torch_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)
