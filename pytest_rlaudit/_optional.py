"""Optional dependencies: import one, or say which extra installs it.

>>> require("json", "this example").__name__
'json'
>>> missing("hypothesis", "find_breaking_schedule")
"find_breaking_schedule needs hypothesis, which is not installed: pip install 'pytest-rlaudit[hypothesis]'"
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require", "missing"]

#: The extra that installs each optional package.
EXTRAS = {"hypothesis": "hypothesis", "stable_baselines3": "sb3", "yaml": "sb3", "matplotlib": "plot",
          "huggingface_hub": "hub", "ray": "ray"}


def missing(package: str, feature: str) -> str:
    """The message for ``feature`` needing ``package``, which is not installed."""
    return (f"{feature} needs {package}, which is not installed: "
            f"pip install 'pytest-rlaudit[{EXTRAS[package]}]'")


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``; if it is not installed, raise an ImportError that
    names the pytest-rlaudit extra which installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.partition(".")[0]
        if exc.name not in (module, top):
            raise  # the module is there but something it imports is not: its own error
        raise ImportError(missing(top, feature)) from exc
