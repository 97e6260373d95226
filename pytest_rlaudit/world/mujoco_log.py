"""MuJoCo's own warnings while the audit builds envs, as Python warnings.

MuJoCo's C library prints a warning each time a model compiles with one, and appends it
to ``MUJOCO_LOG.TXT`` in the current folder. An audit builds an env per slot, so one
deprecated attribute in a model file (gymnasium's HalfCheetah and ``settotalmass`` under
MuJoCo 4) became hundreds of identical lines on the terminal and in that file. While
the audit builds envs, MuJoCo's warnings go through :mod:`warnings` instead: shown once
per process, in pytest's warnings summary under pytest, and filterable like any other.
A handler the user installed (``mujoco.set_mju_user_warning``) is left alone.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     with mujoco_warnings():
...         pass
>>> caught
[]
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["mujoco_warnings"]


def _warn(message: str) -> None:
    # Called from MuJoCo's C code: it must not raise, so an "error" filter on this
    # warning is not honoured here (the exception would be lost in the C call anyway).
    try:
        warnings.warn(f"MuJoCo: {message}", UserWarning, stacklevel=2)
    except Exception:
        pass


@contextmanager
def mujoco_warnings(load: bool = False) -> Iterator[None]:
    """Within the block, MuJoCo's warnings are Python warnings (a ``UserWarning``
    starting ``"MuJoCo: "``), if MuJoCo is imported (``load``: import it first, for an
    env known to need it) and no handler of the user's is installed."""
    if load and "mujoco" not in sys.modules:
        try:
            importlib.import_module("mujoco")
        except ImportError:  # the env's own make says what is missing
            pass
    mujoco = sys.modules.get("mujoco")
    setter = getattr(mujoco, "set_mju_user_warning", None)
    if mujoco is None or setter is None or mujoco.get_mju_user_warning() is not None:
        yield
        return
    setter(_warn)
    try:
        yield
    finally:
        setter(None)
