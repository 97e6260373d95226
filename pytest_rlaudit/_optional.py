"""Optional dependencies: import one, or say which extra installs it.

>>> require("json", "none", "this example").__name__
'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``; if it is not installed, raise an ImportError that
    names the pytest-rlaudit extra which installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.partition(".")[0]
        if exc.name not in (module, top):
            raise  # the module is there but something it imports is not: its own error
        raise ImportError(
            f"{feature} needs {top}, which is not installed: "
            f"pip install 'pytest-rlaudit[{extra}]'") from exc
