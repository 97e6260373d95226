"""What a model's ``policy_kwargs`` and a zoo ``config.yml``'s ``env_wrapper`` may name
when nothing in the file is run: the allow-lists of classes taken by name (torch.nn's
activations, torch.optim's optimizers, SB3's feature extractors; the env wrappers of
gymnasium, SB3, the zoo and sb3-contrib), and a zoo ``config.yml``'s ``policy_kwargs``
read as data.

>>> allowed_class("activation_fn", "<class 'torch.nn.modules.activation.Tanh'>").__name__
'Tanh'
>>> allowed_class("activation_fn", "nn.ReLU").__name__, allowed_class("activation_fn", "os.system")
('ReLU', None)
"""

from __future__ import annotations

import ast
import re
from typing import Any

__all__ = ["ALLOWED_WORDS", "CLASS_REPR", "WRAPPER_WORDS", "allowed_class",
           "allowed_wrapper_module", "config_policy_kwargs"]

#: How SB3 writes a class it could not put in JSON: ``str(cls)``.
CLASS_REPR = re.compile(r"^<class '([\w.]+)'>$")
#: Module spellings of torch's activations and optimizers, besides each class's own module.
_TORCH_ALIASES = {"activation_fn": ("torch.nn", "th.nn", "nn"),
                  "optimizer_class": ("torch.optim", "th.optim", "optim")}


def _allowed(kind: str) -> dict[str, type]:
    """The classes a ``policy_kwargs`` entry ``kind`` may name, by class name."""
    import torch
    from torch import nn

    if kind == "activation_fn":
        from torch.nn.modules import activation

        found: dict[str, type] = {name: obj for name, obj in vars(activation).items()
                 if isinstance(obj, type) and issubclass(obj, nn.Module)
                 and obj.__module__ == activation.__name__ and name != "MultiheadAttention"}
        found["Identity"] = nn.Identity
        return found
    if kind == "optimizer_class":
        from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

        optimizers: dict[str, type] = {name: obj for name, obj in vars(torch.optim).items()
                 if isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer)
                 and obj is not torch.optim.Optimizer}
        optimizers["RMSpropTFLike"] = RMSpropTFLike
        return optimizers
    if kind == "features_extractor_class":
        from stable_baselines3.common import torch_layers

        return {c.__name__: c for c in (torch_layers.FlattenExtractor, torch_layers.NatureCNN,
                                        torch_layers.CombinedExtractor)}
    return {}


ALLOWED_WORDS = {"activation_fn": "torch.nn's activations",
                  "features_extractor_class": "SB3's FlattenExtractor, NatureCNN and "
                                              "CombinedExtractor",
                  "optimizer_class": "torch.optim's optimizers"}


#: The modules whose env wrappers a config.yml may name (each with its submodules), with the
#: package a class found there must come from: libraries already installed and trusted,
#: never a module of the folder itself.
WRAPPER_MODULES = {"gymnasium.wrappers": "gymnasium.",
                   "stable_baselines3.common.atari_wrappers": "stable_baselines3.",
                   "rl_zoo3.wrappers": "rl_zoo3.",
                   "sb3_contrib.common.wrappers": "sb3_contrib."}
#: Wrappers of those modules that act outside the env (an audit needs none of them).
WRAPPERS_OUTSIDE = {"RecordVideo": "writes video files", "HumanRendering": "opens a window"}
WRAPPER_WORDS = ("gymnasium.wrappers.* but RecordVideo and HumanRendering, "
                 "stable_baselines3.common.atari_wrappers.*, rl_zoo3.wrappers.*, "
                 "sb3_contrib.common.wrappers.*")


def allowed_wrapper_module(name: str) -> tuple[str, str] | None:
    """``(module, package)`` when the dotted ``name`` (``module.Class``) is on the
    allow-list of env wrappers by its name alone, before anything is imported: its module
    one of :data:`WRAPPER_MODULES` (or below it), its class a public name other than
    :data:`WRAPPERS_OUTSIDE`'s. ``package`` is where the class must come from. Else None.

    >>> allowed_wrapper_module("gymnasium.wrappers.TimeLimit")
    ('gymnasium.wrappers', 'gymnasium.')
    >>> [allowed_wrapper_module(n) for n in ("pydoc.pipepager", "gymnasium.wrappers.RecordVideo",
    ...                                      "gymnasium.wrappersX.TimeLimit")]
    [None, None, None]
    """
    module, _, cls = name.rpartition(".")
    if (not cls.isidentifier() or cls.startswith("_") or cls in WRAPPERS_OUTSIDE
            or not all(part.isidentifier() for part in module.split("."))):
        return None
    for allowed, package in WRAPPER_MODULES.items():
        if module == allowed or module.startswith(allowed + "."):
            return module, package
    return None


def allowed_class(kind: str, text: Any) -> type | None:
    """The class ``text`` names for the ``policy_kwargs`` entry ``kind``, if it is on that
    entry's allow-list (torch.nn's activations; torch.optim's optimizers and SB3's
    ``RMSpropTFLike``; SB3's own feature extractors), else None. ``text`` is SB3's
    ``"<class 'torch.nn.modules.activation.Tanh'>"`` or a zoo config's ``nn.Tanh``, or
    the bare ``Tanh``; nothing is imported by that name."""
    if not isinstance(text, str):
        return None
    match = CLASS_REPR.match(text.strip())
    dotted = match.group(1) if match else text.strip()
    module, _, name = dotted.rpartition(".")
    cls = _allowed(kind).get(name)
    if cls is None:
        return None
    if module and module != cls.__module__ and module not in _TORCH_ALIASES.get(kind, ()):
        return None
    return cls


def _literal(node: ast.AST) -> Any:
    """A config value's expression as data, evaluating nothing: ``dict(...)`` with keywords,
    dicts, lists, tuples, constants, negative numbers; a name (``nn.ReLU``) as its text."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        pairs = zip(node.keys, node.values, strict=True)
        return {_literal(key): _literal(value) for key, value in pairs if key is not None}
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"
            and not node.args and all(k.arg for k in node.keywords)):
        return {k.arg: _literal(k.value) for k in node.keywords}
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_literal(node.value)}.{node.attr}"
    raise ValueError(f"not a literal: {ast.dump(node)}")


def config_policy_kwargs(value: Any) -> dict[str, Any]:
    """An rl-baselines3-zoo ``config.yml``'s ``policy_kwargs`` (the text
    ``"dict(activation_fn=nn.ReLU, net_arch=[64, 64])"`` or a mapping) as a dict, read,
    never evaluated: names stay text, for :func:`allowed_class`. ``{}`` when it is not
    plain data.

    >>> config_policy_kwargs("dict(log_std_init=-2, activation_fn=nn.ReLU, net_arch=dict(pi=[8]))")
    {'log_std_init': -2, 'activation_fn': 'nn.ReLU', 'net_arch': {'pi': [8]}}
    >>> config_policy_kwargs("__import__('os').system('true')")
    {}
    """
    if isinstance(value, dict):
        return dict(value)
    if not isinstance(value, str):
        return {}
    try:
        read = _literal(ast.parse(value.strip(), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    return read if isinstance(read, dict) else {}
