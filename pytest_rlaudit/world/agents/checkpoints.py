"""State-dict checkpoints loaded into a torch module the user built: CleanRL's
``.cleanrl_model`` files, RSL-RL's ``model_*.pt``, and plain ``torch.save(state_dict)``.

Files are read with ``torch.load(path, map_location="cpu", weights_only=True)``: tensors
and plain containers only, never arbitrary pickled objects (unpickling runs code). The
layouts understood, in the order they are tried:

- a state dict itself (``torch.save(agent.state_dict(), path)``; CleanRL's PPO, DQN, SAC);
- a dict holding one under ``"model_state_dict"`` (RSL-RL's ``{"model_state_dict": ...,
  "optimizer_state_dict": ..., "iter": ...}``), ``"state_dict"`` or ``"model"``;
- a tuple or list of state dicts (CleanRL's TD3 and DDPG save ``(actor, qf1, qf2)``): the
  one whose keys fit the module.

Keys saved through ``nn.DataParallel`` (``module.``) or ``torch.compile``
(``_orig_mod.``) are matched without that prefix. Every error names the file and the cause.
"""

from __future__ import annotations

import os
import re
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from ...errors import PolicyError
from .archives import check_archive

__all__ = ["load_checkpoint", "CHECKPOINT_KEYS"]

#: Keys of a checkpoint dict that hold the model's state dict, tried in this order.
CHECKPOINT_KEYS = ("model_state_dict", "state_dict", "model")
#: Prefixes that wrappers add to every key (nn.DataParallel, torch.compile).
_WRAPPER_PREFIXES = ("module.", "_orig_mod.")
#: How many missing or unexpected keys an error lists.
_SHOWN = 4

M = TypeVar("M")


def load_checkpoint(module: M, path: str | os.PathLike[str]) -> M:
    """Load the state dict in the file at ``path`` into ``module`` and return ``module``.

    ``module`` must be built with the class and sizes of the trained one (CleanRL's own
    evaluation does the same: ``Agent(envs).load_state_dict(torch.load(path))``). Raises
    :class:`~pytest_rlaudit.errors.PolicyError` naming the file when it is missing, is
    not a torch file, declares a record over the size limits (:mod:`.archives`, checked
    before torch reads any), holds pickled objects, or does not fit the module (missing
    or unexpected keys, size mismatches).

    >>> import tempfile, torch
    >>> folder = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> path = Path(folder.name) / "agent.pt"
    >>> torch.save({"model_state_dict": torch.nn.Linear(4, 2).state_dict(), "iter": 7}, path)
    >>> load_checkpoint(torch.nn.Linear(4, 2), path)
    Linear(in_features=4, out_features=2, bias=True)
    >>> load_checkpoint(torch.nn.Linear(3, 2), path)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PolicyError: checkpoint '.../agent.pt' does not fit Linear: size mismatch ...
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise PolicyError(f"checkpoint {str(path)!r} {what}")
    state = _state_dict(_read(path), module, path)
    _check_fits(module, state, path)
    try:
        module.load_state_dict(state)  # type: ignore[attr-defined]
    except Exception as exc:  # anything _check_fits did not foresee
        raise PolicyError(f"cannot load checkpoint {str(path)!r} into {type(module).__name__}: "
                          f"{type(exc).__name__}: {exc}") from exc
    return module


def _read(path: Path) -> Any:
    """``torch.load`` the file (CPU, weights only), with errors that say what the file is."""
    import torch

    if zipfile.is_zipfile(path):  # torch's format since 1.6: sizes bounded before it reads
        check_archive(path)
    try:
        with warnings.catch_warnings():
            # torch notes odd pickle protocols of files it then refuses; the error says enough
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise PolicyError(_unreadable(path, exc)) from exc


def _unreadable(path: Path, exc: Exception) -> str:
    text = str(exc)
    if "Weights only load failed" in text and zipfile.is_zipfile(path):
        found = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        which = f" (it pickles {found.group(1)})" if found else ""
        return (
            f"checkpoint {str(path)!r} holds Python objects besides tensors{which}, which "
            "torch.load(weights_only=True) refuses to unpickle: unpickling runs code. Save the "
            "weights alone, torch.save(model.state_dict(), path), and load that"
        )
    first = text.strip().splitlines()[0][:200] if text.strip() else "no detail"
    return (f"checkpoint {str(path)!r} is not a torch file ({type(exc).__name__}: {first}); "
            "expected one written by torch.save")


def _is_state_dict(obj: Any) -> bool:
    import torch

    return (isinstance(obj, Mapping) and bool(obj)
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()))


def _state_dict(loaded: Any, module: Any, path: Path) -> Mapping[str, Any]:
    """The state dict inside ``loaded``, in any of the layouts of the module docstring."""
    if _is_state_dict(loaded):
        return _unwrapped(loaded, module)
    if isinstance(loaded, Mapping):
        for key in CHECKPOINT_KEYS:
            if _is_state_dict(loaded.get(key)):
                return _unwrapped(loaded[key], module)
    if isinstance(loaded, (tuple, list)) and loaded and all(_is_state_dict(s) for s in loaded):
        # CleanRL's TD3/DDPG tuple: the part that shares most keys with the module (the
        # actor first on a tie, as CleanRL saves it first)
        wanted = set(module.state_dict())
        parts = [_unwrapped(s, module) for s in loaded]
        return max(parts, key=lambda s: len(wanted & set(s)))
    raise PolicyError(
        f"checkpoint {str(path)!r} holds {_summary(loaded)}, not a state dict; expected "
        "torch.save(model.state_dict(), path), or a dict with the state dict under "
        f"{' or '.join(repr(k) for k in CHECKPOINT_KEYS)}"
    )


def _summary(obj: Any) -> str:
    if isinstance(obj, Mapping):
        keys = [str(k) for k in list(obj)[:6]]
        more = ", ..." if len(obj) > 6 else ""
        return f"a dict with keys {', '.join(keys)}{more}" if keys else "an empty dict"
    if isinstance(obj, (tuple, list)):
        return f"a {type(obj).__name__} of {len(obj)} items"
    return f"a {type(obj).__name__}"


def _unwrapped(state: Mapping[str, Any], module: Any) -> Mapping[str, Any]:
    """``state`` without a wrapper prefix on every key that the module's keys lack."""
    own = set(module.state_dict())
    for prefix in _WRAPPER_PREFIXES:
        if all(k.startswith(prefix) for k in state) and not own & set(state):
            return {k[len(prefix):]: v for k, v in state.items()}
    return state


def _few(keys: set[str]) -> str:
    shown = sorted(keys)[:_SHOWN]
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return ", ".join(shown) + more


def _check_fits(module: Any, state: Mapping[str, Any], path: Path) -> None:
    """Raise a readable error when ``state`` does not fit ``module`` key for key."""
    own = module.state_dict()
    name = type(module).__name__
    missing, unexpected = set(own) - set(state), set(state) - set(own)
    if missing or unexpected:
        parts = ([f"missing keys {_few(missing)}"] if missing else []) + (
            [f"unexpected keys {_few(unexpected)}"] if unexpected else [])
        raise PolicyError(f"checkpoint {str(path)!r} does not fit {name}: {'; '.join(parts)}. "
                          "Is this checkpoint for this module class?")
    wrong = [k for k in own if tuple(own[k].shape) != tuple(state[k].shape)]
    if wrong:
        k = wrong[0]
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise PolicyError(
            f"checkpoint {str(path)!r} does not fit {name}: size mismatch for {k}: "
            f"{tuple(state[k].shape)} in the checkpoint, {tuple(own[k].shape)} in the module{more}. "
            "Build the module with the sizes it was trained with (observation and action "
            "dimensions, hidden units)"
        )
