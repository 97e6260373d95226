"""Loading a stable-baselines3 ``.zip`` without running any code it holds.

An SB3 ``.zip`` stores its settings in a JSON ``data`` file, but what JSON cannot hold
(the spaces, the policy class, ``policy_kwargs`` with an activation class in it, the
learning-rate schedule, the replay-buffer class...) is a base64 cloudpickle string
(``":serialized:"``) that SB3's ``load`` unpickles: a model downloaded from anywhere can
run anything on load. By default none of it is unpickled here
(:func:`weights_only_objects` stands in for every pickled entry, and SB3's ``load`` takes
the stand-ins instead, as its ``custom_objects`` are documented to do):

- the spaces are the env's the agent is audited on (images channel-first, as SB3 trains
  on them), checked against the shape and bounds the file writes beside the pickle; with
  no env, they are rebuilt from those readable fields (``Box`` and ``Discrete``);
- the policy class is read from the pickle's opcodes, without running them
  (:func:`pickled_global`): a reference to one of the algorithm's own policy classes
  (``policy_aliases``) is taken, anything else is refused;
- ``policy_kwargs`` come from the readable fields SB3 writes beside its pickle (a zoo
  ``config.yml``'s, read as data, where those do not say); the
  classes named there (``activation_fn``, ``features_extractor_class``,
  ``optimizer_class``) are taken from allow-lists by name, never imported
  (:func:`~.allow_lists.allowed_class`);
- schedules and training state (buffers, last observations, the replay buffer's class)
  take the values a new model of the algorithm starts with: inference never uses them.

The weights themselves are ``.pth`` files read with ``torch.load(weights_only=True)``
(SB3's loader, and torch's default since 2.6). VecNormalize statistics go through an
allow-listed unpickler (:func:`~.pickles.unpickle`).

What cannot be rebuilt this way (a policy class or an activation of one's own) is a
:class:`~pytest_rlaudit.errors.PolicyError` that names ``trusted=True`` /
``--rl-trusted``, SB3's full load, for files one trusts.

>>> untrusted_error(Path("agent.zip"), "its policy class is pickled by value").args[0][:60]
"cannot load 'agent.zip' without running code pickled in it: "
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import pickletools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from ...errors import PolicyError, SpacesMismatchError, UntrustedFileError
from .allow_lists import ALLOWED_WORDS, CLASS_REPR, allowed_class, config_policy_kwargs

__all__ = ["TRUST_HINT", "InferenceOnlyOptimizer", "pickled_global", "readable_policy_kwargs",
           "readable_space", "weights_only_objects", "untrusted_error"]

#: How to load a file in full, for the errors that need it.
TRUST_HINT = ("if you trust the file, load it in full (as SB3 and the zoo load it, running "
              "the code it holds or names): as_policy(path, trusted=True) or --rl-trusted")


def untrusted_error(path: Path, why: str) -> PolicyError:
    """The error for a file that cannot be loaded without running its code (an
    :class:`~pytest_rlaudit.errors.UntrustedFileError`: could not audit, not a finding)."""
    return UntrustedFileError(f"cannot load {str(path)!r} without running code pickled in it: {why}; "
                       + TRUST_HINT)


#: Opcodes that only frame or memoize a pickle: a reference to a global is these, the
#: two strings naming it and STACK_GLOBAL (or one GLOBAL).
_FRAMING = frozenset({"PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "STOP"})
_STRINGS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"})


def pickled_global(serialized: str) -> tuple[str, str] | None:
    """``(module, name)`` when the base64 pickle ``serialized`` is nothing but a reference
    to a global (a class pickled by name), else None (a class pickled by value, as
    cloudpickle pickles one defined in ``__main__``, or anything else). The opcodes are
    read, never run.

    >>> import pickle
    >>> from collections import OrderedDict
    >>> pickled_global(base64.b64encode(pickle.dumps(OrderedDict)).decode())
    ('collections', 'OrderedDict')
    >>> pickled_global(base64.b64encode(pickle.dumps(OrderedDict(a=1))).decode()) is None
    True
    """
    try:
        ops = [(op.name, arg) for op, arg, _ in
               pickletools.genops(base64.b64decode(serialized.encode(), validate=True))]
    except (ValueError, binascii.Error):
        return None
    significant = [(name, arg) for name, arg in ops if name not in _FRAMING]
    if len(significant) == 1 and significant[0][0] == "GLOBAL":
        module, _, name = str(significant[0][1]).partition(" ")
        return module, name
    if len(significant) == 3 and significant[2][0] == "STACK_GLOBAL" and all(
            op in _STRINGS for op, _ in significant[:2]):
        return str(significant[0][1]), str(significant[1][1])
    return None


def _policy_class(path: Path, entry: Any, algo_cls: Any) -> Any:
    """The policy class a zip's ``policy_class`` entry names, among the algorithm's own."""
    allowed = {c for c in algo_cls.policy_aliases.values()}
    named = pickled_global(entry.get(":serialized:", "")) if isinstance(entry, dict) else None
    if named is not None:
        module, name = named
        for cls in allowed:
            if (cls.__module__, cls.__qualname__) == (module, name):
                return cls
        for cls in allowed:  # moved within SB3 or sb3-contrib since the file was saved
            if cls.__qualname__ == name and module.startswith(("stable_baselines3.", "sb3_contrib.")):
                return cls
    what = f"{named[0]}.{named[1]}" if named else "a class pickled by value"
    raise untrusted_error(path, (
        f"its policy class is {what}, not one of {algo_cls.__name__}'s own "
        f"({', '.join(sorted(c.__name__ for c in allowed))})"))


def _looks_like_repr(value: str) -> bool:
    """A readable field SB3 wrote with ``str()`` because JSON could not hold the value."""
    return value.startswith(("<", "{", "[", "(")) or "object at 0x" in value


def readable_policy_kwargs(path: Path, entry: Any,
                           config: dict[str, Any] | None = None) -> dict[str, Any]:
    """``policy_kwargs`` from a zip's ``data``: a plain JSON dict as it is, or the readable
    fields SB3 writes beside a pickled one, with the classes they name resolved through
    :func:`~.allow_lists.allowed_class`. Where a field cannot be read so, the same key of ``config``
    (a zoo ``config.yml``'s ``policy_kwargs``, :func:`~.allow_lists.config_policy_kwargs`) is taken
    when it can. An optimizer off the allow-list is left out with its
    ``optimizer_kwargs`` (no optimizer is built: :func:`weights_only_objects` puts
    :class:`InferenceOnlyOptimizer` in); any other class, or a value only a pickle holds, is refused."""
    config = config or {}
    if entry is None:
        return {}
    if not isinstance(entry, dict):
        raise untrusted_error(path, f"its policy_kwargs is a {type(entry).__name__}")
    fields = {k: v for k, v in entry.items() if k not in (":type:", ":serialized:")}
    if ":serialized:" in entry and entry.get(":type:") not in ("<class 'dict'>", None):
        raise untrusted_error(path, f"its policy_kwargs is a {entry.get(':type:')}")
    out: dict[str, Any] = {}
    dropped_optimizer = False
    for key, value in fields.items():
        if key in ("activation_fn", "features_extractor_class", "optimizer_class"):
            cls = allowed_class(key, value)
            if cls is None and not CLASS_REPR.match(str(value)):  # unsaid, not another class
                cls = allowed_class(key, config.get(key))
            if cls is None and key == "optimizer_class":
                dropped_optimizer = True
                continue
            if cls is None:
                raise untrusted_error(path, (
                    f"its policy_kwargs' {key} is {value}, which is not one of those rebuilt "
                    f"by name ({ALLOWED_WORDS[key]})"))
            out[key] = cls
        elif isinstance(value, str) and _looks_like_repr(value):
            if key in config and not isinstance(config[key], str):
                out[key] = config[key]
                continue
            raise untrusted_error(path, f"its policy_kwargs' {key} is {value}, which only "
                                        "its pickle holds")
        else:
            out[key] = value
    if dropped_optimizer:
        out.pop("optimizer_kwargs", None)
    return out


def _floats(text: Any, size: int) -> np.ndarray | None:
    """The numbers of a numpy array's ``str()`` (as SB3 writes a space's bounds), when it
    holds ``size`` of them (one broadcast) and is not summarised with ``...``."""
    if isinstance(text, (int, float)):
        return np.full(size, float(text))
    if not isinstance(text, str) or "..." in text:
        return None
    try:
        values = np.array([float(v) for v in text.replace("[", " ").replace("]", " ").split()])
    except ValueError:
        return None
    if values.size == 1:
        return np.full(size, values[0])
    return values if values.size == size else None


def readable_space(entry: Any) -> spaces.Space[Any] | None:
    """The ``Box`` or ``Discrete`` space SB3's readable fields beside a pickled space
    describe (``n``; ``shape``, ``dtype``, ``low``, ``high``), or None when they do not
    describe one fully.

    >>> readable_space({":type:": "<class 'gym.spaces.discrete.Discrete'>", "n": 2})
    Discrete(2)
    >>> readable_space({":type:": "<class 'gymnasium.spaces.box.Box'>", "dtype": "float32",
    ...                 "_shape": [1], "low": "[-2.]", "high": "[2.]"})
    Box(-2.0, 2.0, (1,), float32)
    """
    if not isinstance(entry, dict):
        return None
    kind = str(entry.get(":type:", ""))
    try:
        if kind.endswith(".Discrete'>"):
            return spaces.Discrete(int(entry["n"]), start=int(entry.get("start") or 0))
        if kind.endswith(".Box'>"):
            raw = entry.get("_shape", entry.get("shape"))
            if not isinstance(raw, list):
                return None
            shape = tuple(int(s) for s in raw)
            dtype = np.dtype(str(entry["dtype"]))
            size = int(np.prod(shape))
            low, high = _floats(entry.get("low"), size), _floats(entry.get("high"), size)
            if low is None or high is None:
                return None
            return spaces.Box(low.reshape(shape).astype(dtype), high.reshape(shape).astype(dtype),
                              shape, dtype)
    except (KeyError, TypeError, ValueError):
        return None
    return None


def _channels_first(space: spaces.Space[Any]) -> spaces.Space[Any]:
    """``space`` as SB3 trains on it: channel-last images transposed (``VecTransposeImage``)."""
    from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
    from stable_baselines3.common.vec_env import VecTransposeImage

    if isinstance(space, spaces.Dict):
        return spaces.Dict({key: _channels_first(sub) for key, sub in space.spaces.items()})
    if is_image_space(space) and not is_image_space_channels_first(space):  # type: ignore[arg-type]
        transposed: spaces.Space[Any] = VecTransposeImage.transpose_space(space)  # type: ignore[arg-type]
        return transposed
    return space


def _summary(space: spaces.Space[Any]) -> str:
    shape = getattr(space, "shape", None)
    return f"{type(space).__name__}({getattr(space, 'n', '')}{tuple(shape) if shape else ''})"


def _check_fits(path: Path, key: str, saved: spaces.Space[Any] | None,
                env: spaces.Space[Any]) -> None:
    """The env's space where the file's readable fields describe another: a wrong env."""
    if saved is None:
        return
    same = type(saved) is type(env) and saved.shape == env.shape and (
        getattr(saved, "n", None) == getattr(env, "n", None))
    if same and isinstance(saved, spaces.Box) and isinstance(env, spaces.Box) and key == "action_space":
        same = bool(np.allclose(saved.low, env.low, rtol=1e-6) and np.allclose(
            saved.high, env.high, rtol=1e-6))
    if not same:
        what = "observations" if key == "observation_space" else "actions"
        raise SpacesMismatchError(
            f"{str(path)!r} was saved for {what} {saved} but the env's are {env}: is this the "
            "env it was trained on?")


Spaces = Callable[[], "tuple[spaces.Space[Any], spaces.Space[Any]]"]


def _spaces(path: Path, data: dict[str, Any], spaces_of_env: Spaces | None,
            spaces_of_trained: Spaces | None = None
            ) -> tuple[spaces.Space[Any], spaces.Space[Any]]:
    """The model's spaces: the env's (checked against the file's readable fields), else
    those fields' own, else (a Dict space, which they do not describe in full) those of
    the env the model's folder says it was trained on (``spaces_of_trained``)."""
    saved = [readable_space(data.get(key)) for key in ("observation_space", "action_space")]
    if spaces_of_env is None and (saved[0] is None or saved[1] is None):
        spaces_of_env = spaces_of_trained
    if spaces_of_env is not None:
        obs, act = spaces_of_env()
        obs = _channels_first(obs)
        _check_fits(path, "observation_space", saved[0], obs)
        _check_fits(path, "action_space", saved[1], act)
        return obs, act
    if saved[0] is None or saved[1] is None:
        kinds = [str(data.get(k, {}).get(":type:", "none")) if isinstance(data.get(k), dict)
                 else "none" for k in ("observation_space", "action_space")]
        raise PolicyError(
            f"cannot load {str(path)!r} without running code pickled in it: its spaces "
            f"({', '.join(kinds)}) are not described in full beside their pickles. Give the "
            "env it is audited on, whose spaces stand in for them: audit(path, env) or "
            "as_policy(path, env=env); or, " + TRUST_HINT)
    return saved[0], saved[1]


class InferenceOnlyOptimizer:
    """The optimizer of a policy loaded for an audit (its ``policy_kwargs``'
    ``optimizer_class``): an audit never trains, and building any torch optimizer imports
    ``torch._dynamo`` on its first ``add_param_group``, 1.5-2.5 s of CPU in every process
    that loads a zip (the controller and each xdist worker). SB3's ``load`` hands it the
    saved optimizer state, which it drops; training or saving the model is an error
    naming the load to use instead (``algo``: the algorithm's class name). (SAC, TQC and
    CrossQ build their entropy coefficient's ``Adam`` themselves, so loading one of them
    still pays the import.)

    >>> InferenceOnlyOptimizer([], algo="PPO", lr=3e-4).load_state_dict({"state": {}})
    """

    def __init__(self, params: Any, *, algo: str, **kwargs: Any) -> None:
        self.param_groups: list[dict[str, Any]] = []
        self.algo = algo

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> None:
        """Drop the saved state: nothing steps it."""

    def _not_here(self, *args: Any, **kwargs: Any) -> Any:
        raise PolicyError(
            "this model was loaded by pytest-rlaudit for an audit, without its optimizer: "
            f"to train or save it, load it with {self.algo}.load(path)")

    step = zero_grad = state_dict = _not_here


def weights_only_objects(path: Path, data: dict[str, Any], algo_cls: Any,
                         schedules: dict[str, Any], spaces_of_env: Spaces | None,
                         config_kwargs: Any = None,
                         spaces_of_trained: Spaces | None = None) -> dict[str, Any]:
    """A stand-in for every pickled entry of a zip's ``data`` (see the module docstring),
    to pass to SB3's ``load`` as ``custom_objects`` so that it unpickles none of them.
    ``schedules``: the stand-ins for the training schedules; ``config_kwargs``: a zoo
    ``config.yml``'s ``policy_kwargs``, for what the zip's readable fields do not say;
    ``spaces_of_trained``: the spaces of the env it was trained on, where neither the
    env nor the zip's readable fields give them."""
    policy_class = _policy_class(path, data.get("policy_class"), algo_cls)
    fresh = algo_cls(policy=policy_class, env=None, device="cpu", _init_setup_model=False)
    obs, act = _spaces(path, data, spaces_of_env, spaces_of_trained)
    custom: dict[str, Any] = {"policy_class": policy_class, "observation_space": obs,
                              "action_space": act,
                              "policy_kwargs": readable_policy_kwargs(
                                  path, data.get("policy_kwargs"),
                                  config_policy_kwargs(config_kwargs))}
    if "optimizer_class" in inspect.signature(policy_class).parameters:  # not ARS's
        custom["policy_kwargs"]["optimizer_class"] = functools.partial(
            InferenceOnlyOptimizer, algo=algo_cls.__name__)
    for key, entry in data.items():
        if key in custom or not (isinstance(entry, dict) and ":serialized:" in entry):
            continue
        if key in schedules:
            custom[key] = schedules[key]
        elif key == "_last_original_obs":
            # Only its presence is read: SB3 keeps it when trained inside a VecNormalize.
            custom[key] = np.zeros(0, dtype=np.float32)
        elif key == "target_entropy":
            # A number once set up (SAC, TQC, CrossQ): a new model's "auto" would read an env.
            custom[key] = -float(np.prod(getattr(act, "shape", ()) or (1,)))
        else:
            custom[key] = vars(fresh).get(key)
    return custom
