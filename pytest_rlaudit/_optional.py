"""Optional dependencies: import one, or say which extra installs it.

>>> require("json", "this example").__name__
'json'
>>> missing("hypothesis", "find_breaking_schedule")
"find_breaking_schedule needs hypothesis, which is not installed: pip install 'pytest-rlaudit[hypothesis]'"
>>> install_hint("sb3")  # doctest: +NORMALIZE_WHITESPACE
"pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
 && pip install 'pytest-rlaudit[sb3]' (torch's CPU build first: ..."
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require", "missing", "install_hint", "TORCH_PIN", "TORCH_CPU_INDEX", "TORCH_INSTALL", "EXTRAS"]

#: The extra that installs each optional package.
EXTRAS = {"hypothesis": "hypothesis", "stable_baselines3": "sb3", "yaml": "sb3", "matplotlib": "plot",
          "huggingface_hub": "hub", "ray": "ray", "tqdm": "progress",
          "onnxruntime": "onnx", "ale_py": "atari", "cv2": "atari",
          "minari": "replay", "pyarrow": "replay", "PIL": "replay"}

#: Extras, and packages named in hints, that bring torch (stable-baselines3 depends on it).
TORCH_EXTRAS = frozenset({"sb3", "hub"})
TORCH_PACKAGES = frozenset({"stable-baselines3", "sb3-contrib", "rl_zoo3"})

#: The torch every install hint pins where it installs torch: the release CI tests with.
#: The pin picks the version, not the build: on Linux, PyPI's ``torch`` is the CUDA build
#: with several GB of ``nvidia-*`` packages, whatever the version.
TORCH_PIN = "torch==2.13.0"
#: PyTorch's own index of CPU builds (Linux, macOS and Windows); its ``2.13.0+cpu``
#: satisfies ``torch==2.13.0``, so a later install that pins torch keeps it.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The command every hint gives for torch itself.
TORCH_INSTALL = f"pip install {TORCH_PIN} --index-url {TORCH_CPU_INDEX}"


def install_hint(extra: str | None = None, package: str | None = None) -> str:
    """The ``pip install`` line for a pytest-rlaudit ``extra`` (or another ``package``),
    with torch pinned first where what it installs brings torch."""
    what = f"'pytest-rlaudit[{extra}]'" if extra else str(package)
    if extra in TORCH_EXTRAS or package in TORCH_PACKAGES:
        return (f"{TORCH_INSTALL} && pip install {what} "
                "(torch's CPU build first: from PyPI, Linux gets the CUDA build, several GB)")
    return f"pip install {what}"


def missing(package: str, feature: str) -> str:
    """The message for ``feature`` needing ``package``, which is not installed."""
    return f"{feature} needs {package}, which is not installed: {install_hint(EXTRAS[package])}"


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
