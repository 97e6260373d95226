"""The suite on a Python without torch (.ci/pythons.sh: every admitted Python but 3.11, for
which alone a CPU torch wheel is at hand): what needs torch is skipped, the rest runs.

A test needs torch when it, its module or a helper it calls imports torch,
stable-baselines3 or sb3-contrib (directly, or through the package loading an SB3 zip).
Where torch is not installed, :func:`install` puts a finder first on ``sys.meta_path``
that turns such an import (or one of the dev extra's other heavy packages, when it is not
installed either: :data:`HEAVY_PACKAGES`) into a skip, as ``pytest.importorskip`` would: at a module's
top, the module is skipped; inside a test, the test. A test that catches ImportError to
check an install hint is unaffected: it hides the package with ``sys.modules[name] =
None``, which Python answers before asking any finder. Tests whose inner pytest runs
subprocesses load an agent there, out of the finder's reach: they carry the
``needs_torch`` marker (:data:`MARKER`), skipped here too.

Where torch is installed (the 3.11 stages of .ci/run) none of this is active.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest

#: The packages that bring or are torch: importing any of them needs torch.
TORCH_PACKAGES = ("torch", "stable_baselines3", "sb3_contrib")
#: The dev extra's other heavy packages, which that stage does not install either: without
#: torch, importing one that is not installed skips too.
HEAVY_PACKAGES = ("huggingface_hub", "pygame", "mujoco", "ale_py", "cv2", "ray", "onnx",
                  "onnxruntime", "Box2D")
MARKER = ("needs_torch: the test needs torch, stable-baselines3 or sb3-contrib where the "
          "finder in tests/torch_free.py cannot see it (a subprocess); skipped on a Python "
          "without torch")


#: Asked once, before :func:`install` (after it, the finder answers these questions).
TORCH = importlib.util.find_spec("torch") is not None
SKIPPED = frozenset(p for p in (*TORCH_PACKAGES, *HEAVY_PACKAGES)
                    if importlib.util.find_spec(p) is None)


class _SkipTorch:
    """A meta path finder: importing a package of :data:`SKIPPED` skips."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> Any:
        top = name.partition(".")[0]
        if top in SKIPPED:
            raise pytest.skip.Exception(
                f"needs {top}, not installed on this Python ({sys.version.split()[0]}, "
                "without torch); the 3.11 stages of .ci/run run it", allow_module_level=True)
        return None


def install() -> bool:
    """Make torch imports skip where torch is not installed; True if it did."""
    if TORCH:
        return False
    if not any(isinstance(f, _SkipTorch) for f in sys.meta_path):
        sys.meta_path.insert(0, _SkipTorch())
    return True


def skip_marked(items: list[pytest.Item]) -> None:
    """Skip the ``needs_torch`` tests where torch is not installed."""
    if TORCH:
        return
    skip = pytest.mark.skip(reason=f"needs torch, not installed on this Python "
                                   f"({sys.version.split()[0]})")
    for item in items:
        if item.get_closest_marker("needs_torch"):
            item.add_marker(skip)
