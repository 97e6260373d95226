"""ONNX policies: a ``.onnx`` file run with onnxruntime (the ``[onnx]`` extra), as robots
run their deployed policies. How its output becomes an action: :mod:`.exported`."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from gymnasium import spaces

from ..._optional import require
from ...errors import PolicyError, SpacesMismatchError
from .exported import ExportedPolicy
from .torch import MIN_TORCH_ROWS, _pad_rows

__all__ = ["OnnxPolicy"]

#: onnxruntime's element types that an observation is cast to.
_DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64,
           "tensor(float16)": np.float16}


class OnnxPolicy(ExportedPolicy):
    """The policy in an ONNX file, run on onnxruntime's CPU provider with ``threads``
    intra-op threads (1 by default, as torch agents run; None: onnxruntime's own
    setting).

    The model must take one input, a float tensor of shape ``(batch, *observation
    shape)``; its first output is the action (SB3's exported policies also return the
    value and log-probability after it), read as :mod:`.exported` says: argmax of
    per-action scores or integer actions on a Discrete space, a Box action clipped to
    the action space. The input's name and batch axis are read from the file. A model
    exported with a dynamic batch axis gets every call padded to a multiple of
    :data:`~.torch.MIN_TORCH_ROWS` rows, so an action depends only on its observation; one
    exported with a fixed batch axis of 1 (the default of ``torch.onnx.export`` without
    ``dynamic_axes``) runs row by row, which is slower for large audit batches.

    The session is opened on first use, and reopened from the file in a copied or
    unpickled policy.
    """

    format = "ONNX"

    def __init__(self, path: str | os.PathLike[str], name: str | None = None, *,
                 threads: int | None = 1) -> None:
        super().__init__(os.fspath(path), name)
        self.threads = threads
        self._session: Any = None
        self._session = self.session  # open now: a broken file fails in as_policy

    @property
    def session(self) -> Any:
        """The onnxruntime ``InferenceSession`` of the file."""
        if self._session is None:
            ort = require("onnxruntime", f"the ONNX policy {self.path}")
            options = ort.SessionOptions()
            if self.threads is not None:
                options.intra_op_num_threads = self.threads
                options.inter_op_num_threads = 1
            try:
                session = ort.InferenceSession(self.path, sess_options=options,
                                               providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime raises its own exception types
                raise PolicyError(f"cannot load {self.path} as an ONNX model: {exc}") from exc
            inputs = session.get_inputs()
            if len(inputs) != 1:
                names = ", ".join(repr(i.name) for i in inputs)
                raise PolicyError(
                    f"{self.path}: an ONNX policy takes one input, the observations; this model "
                    f"takes {len(inputs)} ({names}). Export a module whose forward takes the "
                    "observation batch only (recurrent states and goals are not supported)"
                )
            if inputs[0].type not in _DTYPES:
                raise PolicyError(f"{self.path}: the ONNX model's input is {inputs[0].type}; an "
                                  "ONNX policy takes float observations (export with a float "
                                  "dummy input)")
            self._session = session
        return self._session

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_session": None}

    def _input(self) -> Any:
        return self.session.get_inputs()[0]

    def _fixed_batch(self) -> int | None:
        """The model's fixed batch size, or None for a dynamic batch axis."""
        shape = self._input().shape
        return shape[0] if shape and isinstance(shape[0], int) and shape[0] > 0 else None

    def _check_observations(self, observation_space: spaces.Space[Any]) -> None:
        super()._check_observations(observation_space)
        shape = list(self._input().shape or ())
        want = tuple(observation_space.shape or ())
        if not shape:
            # No declared shape (onnxruntime gives [] for an unknown rank, as for a
            # scalar): the probe in bind runs the model on a batch of the env's
            # observations, and says so if it does not take them.
            return
        given = shape[1:]
        if len(given) != len(want) or any(isinstance(g, int) and g > 0 and g != w
                                          for g, w in zip(given, want, strict=True)):
            dims = ", ".join(str(d) if isinstance(d, int) else repr(d) for d in shape)
            raise SpacesMismatchError(
                f"{self.name}: the ONNX model's input {self._input().name!r} has shape ({dims}), "
                f"but the env's observations have shape {want} (a batch of them: (batch, "
                f"{', '.join(map(str, want))})). Is it the model for this env? Export it with a "
                f"dummy input of shape (1, {', '.join(map(str, want))})"
            )

    def _run(self, rows: np.ndarray) -> np.ndarray:
        entry = self._input()
        rows = np.ascontiguousarray(rows, dtype=_DTYPES[entry.type])
        n = len(rows)
        step = self._fixed_batch() or MIN_TORCH_ROWS
        padded = _pad_rows(rows, step)
        fixed = self._fixed_batch() is not None
        chunks = [padded[i : i + step] for i in range(0, len(padded), step)] if fixed else [padded]
        try:
            outs = [np.asarray(self.session.run(None, {entry.name: chunk})[0])
                    for chunk in chunks]
        except Exception as exc:  # onnxruntime's own exception types
            if self._bound:  # it ran on the probe: the model itself failed on these
                raise self._raised(exc, rows) from exc
            undeclared = ("; its input declares no shape, so the batch was given as it is"
                          if not self._input().shape else "")
            raise PolicyError(
                f"{self.name}: the ONNX model fails on the env's observations, a batch of shape "
                f"{tuple(rows.shape)}{undeclared}: {exc}. Is it the model for this env?"
            ) from exc
        out: np.ndarray = np.concatenate(outs)[:n] if outs[0].ndim else outs[0]
        return out
