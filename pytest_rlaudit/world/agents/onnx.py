"""ONNX policies: a ``.onnx`` file run with onnxruntime (the ``[onnx]`` extra), as robots
run their deployed policies. How its output becomes an action: :mod:`.exported`.

Isaac Lab, mjlab, rsl_rl and MuJoCo Playground export policies whose input has the shape
``[1, obs_dim]``: a batch axis fixed at 1. Run as declared, such a file takes one
observation per call, and an audit's batch of hundreds of rows costs hundreds of calls. At
load the batch axis is made symbolic (:func:`relaxed_model`, with the ``onnx`` package)
and the result is checked against the file as it is (:func:`agrees`): only a model that
gives the same outputs on a probe batch in one call as in one call per row runs batched.
Any other (one with an internal ``Reshape`` to ``[1, -1]``, say) keeps running row by row,
correct and slower, and its :meth:`OnnxPolicy.describe` says why.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import DTypeLike

from ..._optional import install_hint, require
from ...errors import PolicyError, SpacesMismatchError
from .exported import ExportedPolicy
from .torch import MIN_TORCH_ROWS, _pad_rows

__all__ = ["OnnxPolicy", "relaxed_model", "agrees"]

#: onnxruntime's element types that an observation is cast to.
_DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64,
           "tensor(float16)": np.float16}

#: The name the relaxed batch axis gets (any name would do: onnxruntime only needs it free).
BATCH_AXIS = "batch"

#: Rows of the probe batch the relaxed model is checked on (padded as every call is, to
#: :data:`~.torch.MIN_TORCH_ROWS`): distinct rows, so that a model mixing rows shows it.
PROBE_ROWS = 3

#: How far the relaxed model's float outputs may be from the row-by-row ones: a kernel
#: for a larger batch may round the last bits differently (onnxruntime's CPU kernels give
#: equal bits in the cases tested; :func:`agrees` says which of the two it was).
PROBE_RTOL, PROBE_ATOL = 1e-5, 1e-6

#: Metadata entries shown by :meth:`OnnxPolicy.describe`, as mjlab writes them
#: (comma-separated values; ``action_scale`` may also be one number).
_SHOWN_METADATA = {"joint_names": "joints", "action_scale": "action scale"}


def relaxed_model(path: str) -> bytes:
    """The ONNX model in ``path``, serialized, with every graph input and output whose
    axis 0 is a fixed 1 given the symbolic axis :data:`BATCH_AXIS` instead, and the
    shapes of intermediate values dropped: exporters record them for a batch of 1, and
    onnxruntime infers them again. Needs the ``onnx`` package (ImportError without it).
    Nodes are untouched, so one that pins the batch (a ``Reshape`` to a constant ``[1,
    -1]``) still does: :func:`agrees` is what tells."""
    onnx: Any = importlib.import_module("onnx")
    model = onnx.load_model(path)  # with its external data, if any: the bytes must hold it
    graph = model.graph
    initializers = {init.name for init in graph.initializer}  # old IRs list them as inputs
    for value in (*graph.input, *graph.output):
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
        if value.name not in initializers and dims and dims[0].HasField("dim_value") \
                and dims[0].dim_value == 1:
            dims[0].dim_param = BATCH_AXIS  # clears dim_value: the two are a oneof
    del graph.value_info[:]
    serialized: bytes = model.SerializeToString()
    return serialized


def probe_rows(shape: list[Any], dtype: DTypeLike) -> np.ndarray | None:
    """:data:`PROBE_ROWS` distinct observations for a model input of ``shape`` (axis 0
    the batch), from a fixed generator so a load always checks the same rows; None when an
    axis past the batch has no fixed size (nothing to build the rows from)."""
    rest = shape[1:]
    if not all(isinstance(d, int) and d > 0 for d in rest):
        return None
    rows: np.ndarray = np.random.default_rng(0).standard_normal((PROBE_ROWS, *rest)).astype(dtype)
    return rows


def agrees(batched: Any, original: Any, rows: np.ndarray) -> str | None:
    """How the session ``batched`` (the relaxed model), called once on ``rows`` padded as
    :meth:`OnnxPolicy._run` pads, compares with the session ``original`` (the file as it
    is) called on one row at a time: "exactly", or "to within rtol=.., atol=..", or None
    when they differ (another shape, other values) or the batched call raises. Only the
    first output, the one read as the action, is compared."""
    name = original.get_inputs()[0].name
    expected = np.concatenate([np.asarray(original.run(None, {name: rows[i : i + 1]})[0])
                               for i in range(len(rows))])
    quiet = importlib.import_module("onnxruntime").RunOptions()
    quiet.log_severity_level = 4  # a failure is an answer here, not an error to log
    try:
        out = batched.run(None, {name: _pad_rows(rows, MIN_TORCH_ROWS)}, quiet)[0]
    except Exception:  # onnxruntime's own exception types: the batch axis is pinned inside
        return None
    got = np.asarray(out)[: len(rows)]
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return None
    if np.array_equal(got, expected, equal_nan=True):
        return "exactly"
    if got.dtype.kind == "f" and np.allclose(got, expected, rtol=PROBE_RTOL, atol=PROBE_ATOL,
                                             equal_nan=True):
        return f"to within rtol={PROBE_RTOL:g}, atol={PROBE_ATOL:g}"
    return None


def _said(exc: BaseException) -> str:
    """The first line of an exception's message (onnxruntime's run to several)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _shortened(value: str, keep: int = 4) -> str:
    """A comma-separated metadata value cut to its first ``keep`` items and a count.

    >>> _shortened("a,b,c,d,e,f")
    'a, b, c, d, ... (6 in all)'
    >>> _shortened("0.25")
    '0.25'
    """
    items = [item.strip() for item in value.split(",")]
    if len(items) <= keep:
        return ", ".join(items)
    return f"{', '.join(items[:keep])}, ... ({len(items)} in all)"


class OnnxPolicy(ExportedPolicy):
    """The policy in an ONNX file, run on onnxruntime's CPU provider with ``threads``
    intra-op threads (1 by default, as torch agents run; None: onnxruntime's own
    setting).

    The model must take one input, a float tensor of shape ``(batch, *observation
    shape)``; its first output is the action (SB3's exported policies also return the
    value and log-probability after it), read as :mod:`.exported` says: argmax of
    per-action scores or integer actions on a Discrete space, a Box action clipped to
    the action space. The input's name and batch axis are read from the file. A model
    with a dynamic batch axis gets every call padded to a multiple of
    :data:`~.torch.MIN_TORCH_ROWS` rows, so an action depends only on its observation.
    A model whose batch axis is fixed at 1 (Isaac Lab's, mjlab's, rsl_rl's exports, and
    ``torch.onnx.export`` without ``dynamic_axes``) has the axis made symbolic at load and
    then runs as a dynamic one, if a probe batch shows it gives the outputs of the file
    run row by row (see the module); otherwise, or without the ``onnx`` package, it runs
    row by row. :attr:`batched` and :meth:`describe` say which.

    :attr:`metadata` holds the file's ``metadata_props`` (mjlab writes ``joint_names``,
    ``action_scale``, ``default_joint_pos``, ``observation_names`` there).

    The session is opened on first use, and reopened from the file in a copied or
    unpickled policy.
    """

    format = "ONNX"

    def __init__(self, path: str | os.PathLike[str], name: str | None = None, *,
                 threads: int | None = 1) -> None:
        super().__init__(os.fspath(path), name)
        self.threads = threads
        #: The file's ``metadata_props``, as onnxruntime reads them, by key.
        self.metadata: dict[str, str] = {}
        #: Whether a whole batch is one session call (False: one call per row, or per
        #: fixed batch of the model).
        self.batched = True
        #: How the model is given batches, in words (see :meth:`describe`).
        self.batching = "dynamic batch axis"
        #: For a model whose fixed batch of 1 was made symbolic: None until the check at
        #: the first load; then whether it passed (a copy reopens without checking again).
        self._relax: bool | None = None
        #: How the relaxed model matched the row-by-row calls: "exactly", or a tolerance.
        self._checked = ""
        self._session: Any = None
        self._session = self.session  # open now: a broken file fails in as_policy

    @property
    def session(self) -> Any:
        """The onnxruntime ``InferenceSession`` the policy calls: of the file, or of the
        file with its fixed batch of 1 made symbolic (see the module)."""
        if self._session is None:
            ort = require("onnxruntime", f"the ONNX policy {self.path}")
            session = self._open(ort, self.path)
            # sorted: onnxruntime's map keeps no order, and a description should not vary
            self.metadata = dict(sorted(session.get_modelmeta().custom_metadata_map.items()))
            batch = (session.get_inputs()[0].shape or [None])[0]
            if batch == 1:
                session = self._batch_one(ort, session)
            elif isinstance(batch, int) and batch > 1:
                self.batched, self.batching = False, f"in chunks of its fixed batch of {batch}"
            self._session = session
        return self._session

    def _open(self, ort: Any, model: str | bytes) -> Any:
        """An onnxruntime session of ``model`` (a path or serialized bytes), checked to
        take one float input."""
        options = ort.SessionOptions()
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(model, sess_options=options,
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
        return session

    def _batch_one(self, ort: Any, original: Any) -> Any:
        """The session to call for a model whose batch axis is fixed at 1: the relaxed
        model's if it passes the check (or passed it at the first load), else
        ``original``, run row by row; sets :attr:`batched` and :attr:`batching`."""
        fixed = "fixed batch of 1"
        self.batched, self.batching = False, f"row by row ({fixed})"
        if self._relax is False:
            return original
        try:
            relaxed = self._open(ort, relaxed_model(self.path))
        except ImportError:
            self.batching = (f"row by row ({fixed}; the onnx package, which would make it "
                             f"symbolic, is not installed: {install_hint('onnx')})")
            return original
        except Exception as exc:  # onnx's or our own: any failure keeps the file as it is
            self._relax = False
            self.batching = f"row by row ({fixed}; cannot be made symbolic: {_said(exc)})"
            return original
        if self._relax is None:
            why = self._check(relaxed, original)
            self._relax = why is None
            if why is not None:
                self.batching = f"row by row ({fixed}; {why})"
                return original
        self.batched = True
        self.batching = (f"one call per batch ({fixed} made symbolic; checked on {PROBE_ROWS} "
                         f"probe rows: the outputs of one call per row, {self._checked})")
        return relaxed

    def _check(self, relaxed: Any, original: Any) -> str | None:
        """Check the session ``relaxed`` against ``original`` on probe rows (:func:`agrees`),
        noting how they matched in ``_checked``; None if they match, else why not."""
        entry = original.get_inputs()[0]
        rows = probe_rows(list(entry.shape), _DTYPES[entry.type])
        if rows is None:
            return "not checked: an input axis past the batch has no fixed size to probe"
        try:
            how = agrees(relaxed, original, rows)
        except Exception as exc:  # the file itself fails on them: bind's probe says more
            return f"not checked: the file fails on probe observations: {_said(exc)}"
        if how is None:
            return ("made symbolic, it fails or differs from row-by-row calls on a probe "
                    "batch: the graph pins the batch, a Reshape to [1, -1] say")
        self._checked = how
        return None

    def describe(self) -> str:
        """A few lines on the policy: its file, how batches run, and the joint names and
        action scale of its metadata if it has them (cut short when long)."""
        lines = [f"{self.name} from {self.path}", f"batches: {self.batching}"]
        for key, label in _SHOWN_METADATA.items():
            if key in self.metadata:
                lines.append(f"{label}: {_shortened(self.metadata[key])}")
        others = [key for key in self.metadata if key not in _SHOWN_METADATA]
        if others:
            lines.append(f"other metadata: {_shortened(','.join(others))}")
        return "\n".join(lines)

    def details(self) -> tuple[str, ...]:
        """What reports show of the policy beyond its name (:meth:`describe` past its first
        line): how it runs batches, and the joint names and action scale of its metadata
        (mjlab's export) when it has them.

        >>> import tempfile, numpy as np, onnx
        >>> from onnx import TensorProto, helper, numpy_helper
        >>> lean = numpy_helper.from_array(  # CartPole: push the way the pole falls
        ...     np.array([[0, 0], [0, 0], [-1, 1], [-1, 1]], np.float32), "w")
        >>> graph = helper.make_graph(
        ...     [helper.make_node("MatMul", ["obs", "w"], ["scores"])], "lean",
        ...     [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, 4])],
        ...     [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2])], [lean])
        >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
        ...                           ir_version=8)  # as mjlab exports: a batch of 1
        >>> helper.set_model_props(model, {"joint_names": "slider,hinge"})
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     onnx.save(model, f"{folder}/policy.onnx")
        ...     policy = OnnxPolicy(f"{folder}/policy.onnx")
        ...     policy.bind(spaces.Box(-np.inf, np.inf, (4,)), spaces.Discrete(2))
        ...     policy.details()
        ('batches: one call per batch (fixed batch of 1 made symbolic; ...)', 'joints: slider, hinge')
        """
        return tuple(self.describe().splitlines()[1:])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {'; '.join(self.describe().splitlines())}>"

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
