"""TorchScript policies: a file saved with ``torch.jit.save`` (of ``torch.jit.trace`` or
``torch.jit.script``), loaded with ``torch.jit.load``. How its output becomes an action:
:mod:`.exported`; the call itself is the one every torch agent gets (:mod:`.torch`)."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from ..._optional import TORCH_INSTALL
from ...errors import PolicyError
from .archives import check_archive
from .exported import ExportedPolicy
from .torch import MIN_TORCH_ROWS, _inference, _pad_rows

__all__ = ["TorchScriptPolicy", "is_torchscript"]


def _torch() -> Any:
    try:
        import torch
    except ModuleNotFoundError as exc:
        raise ImportError(
            f"a TorchScript policy needs torch, which is not installed: {TORCH_INSTALL} "
            "(torch's CPU build; from PyPI, Linux gets the CUDA build, several GB)"
        ) from exc
    return torch


def is_torchscript(path: str) -> bool:
    """Whether ``path`` is a TorchScript archive (a zip holding ``constants.pkl`` or
    ``code/``), rather than a state dict or a pickled module saved with ``torch.save``."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.split("/", 1)[-1].startswith(("constants.pkl", "code/"))
                       for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


class TorchScriptPolicy(ExportedPolicy):
    """The policy in a TorchScript file, on the CPU: its ``forward`` takes a float32 batch
    of observations and its output (the first, if it returns a tuple) is the action, read
    as :mod:`.exported` says (argmax of per-action scores or integer actions on a Discrete
    space, a Box action clipped to the action space).

    Each call runs as every torch agent's does (:class:`~.torch.TorchPolicy`): in eval
    mode, under ``torch.no_grad()``, with ``threads`` torch threads (None: torch's own
    setting), padded to a multiple of :data:`~.torch.MIN_TORCH_ROWS` rows so that an
    action depends only on its observation. A module traced with a batch of one that
    refuses other batch sizes is run row by row (slower).
    """

    format = "TorchScript"

    def __init__(self, path: str | os.PathLike[str], name: str | None = None, *,
                 threads: int | None = 1) -> None:
        super().__init__(os.fspath(path), name)
        self.threads = threads
        self._row_by_row = False
        torch = _torch()
        if not is_torchscript(self.path):
            raise PolicyError(
                f"{self.path} is not a TorchScript file (torch.jit.save); a state dict saved with "
                "torch.save needs the module it came from: as_policy(MyModule(), "
                f"checkpoint={self.path!r})"
            )
        check_archive(self.path)  # member sizes bounded before torch reads any
        try:
            with warnings.catch_warnings():
                # torch 2.13 deprecates TorchScript; the files deployed today are TorchScript
                warnings.simplefilter("ignore", DeprecationWarning)
                self.module = torch.jit.load(self.path, map_location="cpu")
        except Exception as exc:  # torch raises RuntimeError and its own types
            raise PolicyError(f"cannot load {self.path} as TorchScript: {exc}") from exc
        self.module.eval()

    def _forward(self, rows: np.ndarray) -> np.ndarray:
        torch = _torch()
        out = self.module(torch.as_tensor(rows))
        if isinstance(out, (tuple, list)) and out:
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise PolicyError(f"{self.name}: forward returned {type(out).__name__}, not a tensor "
                              "of actions; export a module whose forward returns the action")
        return np.asarray(out.detach().cpu().numpy())

    def _run(self, rows: np.ndarray) -> np.ndarray:
        n = len(rows)
        with _inference(self.module, self.threads):
            if not self._row_by_row:
                try:
                    return self._forward(_pad_rows(rows, MIN_TORCH_ROWS))[:n]
                except Exception as exc:  # torch.jit.Error (a script's raise) is no RuntimeError
                    # Before the probe ran, a RuntimeError is torch refusing the shape; after
                    # it, or any other exception, is the model's own code raising.
                    if self._bound or not isinstance(exc, RuntimeError):
                        raise self._raised(exc, rows) from exc
                    if n and self._accepts_one_row(rows):
                        self._row_by_row = True  # traced with a fixed batch of one
                    else:
                        raise self._shape_error(rows) from None
            try:
                return np.concatenate([self._forward(rows[i : i + 1]) for i in range(n)])
            except Exception as exc:
                raise self._raised(exc, rows) from exc

    def _accepts_one_row(self, rows: np.ndarray) -> bool:
        try:
            self._forward(rows[:1])
        except RuntimeError:
            return False
        return True

    def _shape_error(self, rows: np.ndarray) -> PolicyError:
        shape = tuple(rows.shape[1:])
        return PolicyError(
            f"{self.name}: the TorchScript module fails on the env's observations, a batch of "
            f"shape (batch, {', '.join(map(str, shape))}). Is it the model for this env? Export "
            f"it with an example input of shape (1, {', '.join(map(str, shape))})"
        )
