"""``as_policy``: whatever a user passes as ``agent``, as a :class:`~.base.Policy`."""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path
from typing import Any

from ...errors import PolicyError
from .base import Policy
from .callables import CallablePolicy, RandomPolicy
from .sb3 import SB3Policy, _is_sb3, load_sb3
from .torch import TorchPolicy, _is_torch_module

__all__ = ["as_policy"]


def _import_object(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyError(f"cannot import {module_name!r} for agent {target!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PolicyError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if inspect.isclass(obj) or (inspect.isfunction(obj) and _takes_no_arguments(obj)):
        obj = obj()  # a zero-argument factory of the agent
    return obj


def _takes_no_arguments(fn: Any) -> bool:
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in inspect.signature(fn).parameters.values())


def as_policy(agent: Any, *, algo: str | None = None, deterministic: bool = True,
              vec_normalize: Any = None, torch_threads: int | None = 1) -> Policy:
    """Adapt ``agent`` to the batched :class:`Policy` protocol.

    ``algo`` names the SB3 algorithm of a ``.zip`` when the file does not tell;
    ``deterministic`` and ``vec_normalize`` apply to SB3 agents; ``torch_threads`` to
    torch-backed ones (see the module docstring).

    >>> as_policy("random").name
    'random'
    >>> as_policy(42)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PolicyError: cannot use int as an agent; ...
    """
    if isinstance(agent, (str, os.PathLike)):
        text = os.fspath(agent)
        if text == "random":
            return RandomPolicy()
        is_import = ":" in text and not Path(text).exists() and not text.endswith(".zip")
        if is_import and not (len(text) > 1 and text[1] == ":"):  # not a Windows drive
            return as_policy(_import_object(text), algo=algo, deterministic=deterministic,
                             vec_normalize=vec_normalize, torch_threads=torch_threads)
        model = load_sb3(text, algo)
        return SB3Policy(model, deterministic=deterministic, vec_normalize=vec_normalize,
                         name=f"{type(model).__name__}({Path(text).name})",
                         torch_threads=torch_threads)
    if isinstance(agent, Policy) and not _is_sb3(agent):
        return agent
    if _is_sb3(agent):
        return SB3Policy(agent, deterministic=deterministic, vec_normalize=vec_normalize,
                         torch_threads=torch_threads)
    if _is_torch_module(agent):
        return TorchPolicy(agent, torch_threads=torch_threads)
    if callable(agent):
        return CallablePolicy(agent)
    raise PolicyError(
        f"cannot use {type(agent).__name__} as an agent; pass an SB3 model, a path to an SB3 "
        ".zip, a torch nn.Module, a callable obs_batch -> action_batch, 'random', a "
        "'module:attribute' string, or a Policy"
    )
