"""Import a module a user named (``--rl-agent my_agents:make``, ``my_envs:Foo-v0``).

``python -m pytest`` puts the current folder on ``sys.path``; the plain ``pytest`` script
does not, so a ``my_agents.py`` beside the tests imports under one and not the other.
:func:`import_module` gives both the same rule, and when a module is still not found
says where it looked and how to fix it.

>>> import_module("json").__name__
'json'
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from types import ModuleType

__all__ = ["import_module"]


def import_module(name: str) -> ModuleType:
    """Import ``name``; when its top-level package is only in the current folder, add
    that folder to ``sys.path`` first.

    Errors raised inside the module (its own missing dependency, say) pass through
    unchanged; only ``name`` itself not being found becomes the ``ModuleNotFoundError``
    that says where it looked.

    >>> import_module("no_such_module_xyz")
    Traceback (most recent call last):
    ...
    ModuleNotFoundError: No module named 'no_such_module_xyz' in this Python (...) nor in
    the current folder (...). ...
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if not _is_missing(exc, name):
            raise  # the module is there, something it imports is not: its own error
        missing = exc
    cwd = os.getcwd()
    if _in_folder(name, cwd) and not _on_path(cwd):
        # The same rule as `python -m pytest`, which puts the current folder first on
        # sys.path; the plain `pytest` script leaves it out.
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()  # the folder may have changed since it was listed
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not _is_missing(exc, name):
                raise
            missing = exc
    raise ModuleNotFoundError(_not_found(name, cwd), name=name) from missing


def _is_missing(exc: ModuleNotFoundError, name: str) -> bool:
    """Whether ``exc`` is about ``name`` or one of its parent packages (not about a
    module that ``name`` itself imports)."""
    parts = name.split(".")
    return exc.name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def _in_folder(name: str, folder: str) -> bool:
    """Whether ``name``'s top-level package is a module or package in ``folder``."""
    top = name.partition(".")[0]
    return importlib.machinery.PathFinder.find_spec(top, [folder]) is not None


def _on_path(folder: str) -> bool:
    # "" on sys.path stands for the current folder.
    return any(os.path.abspath(entry or os.curdir) == folder for entry in sys.path)


def _not_found(name: str, cwd: str) -> str:
    return (
        f"No module named {name!r} in this Python ({sys.executable}) nor in the current "
        f"folder ({cwd}). If it comes from a package, install that package; if it is your own "
        "module, run "
        "`python -m pytest` from the folder that holds it, or add that folder to "
        "`pythonpath` in the pytest ini file."
    )
