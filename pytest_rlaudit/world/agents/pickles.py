"""Reading what old code pickled: agents saved under ``gym``, read under ``gymnasium``.

Most published stable-baselines3 models (the rl-baselines3-zoo's, the Hugging Face
Hub's) were saved while SB3 used OpenAI ``gym``; their ``.zip`` files and
``vecnormalize.pkl`` files pickle ``gym.spaces.Box`` and friends. Gymnasium is gym's
continuation and its spaces unpickle the old state (``Box`` and ``Discrete`` fill in the
attributes gym lacked), so :func:`gym_as_gymnasium` resolves ``gym`` and every
``gym.*`` module to its ``gymnasium`` counterpart while a file is read. The alias holds
only inside the ``with`` block: an installed ``gym`` is set aside and put back after,
and nothing else sees the alias.

>>> import pickle
>>> with gym_as_gymnasium():
...     import gym.spaces
...     space = pickle.loads(pickle.dumps(gym.spaces.Discrete(3)))
>>> type(space).__module__
'gymnasium.spaces.discrete'
>>> import sys; "gym" in sys.modules
False
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import pickle
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from ...errors import PolicyError

__all__ = ["gym_as_gymnasium", "unpickle"]

_LOCK = threading.RLock()  # sys.modules and sys.meta_path are process-wide


def _is_gym(name: str) -> bool:
    return name == "gym" or name.startswith("gym.")


class _GymAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``gym.x.y`` and loads it as the already-imported ``gymnasium.x.y``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not _is_gym(fullname):
            return None
        try:
            importlib.util.find_spec("gymnasium" + fullname[3:])
        except ModuleNotFoundError:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        return importlib.import_module("gymnasium" + spec.name[3:])

    def exec_module(self, module: ModuleType) -> None:
        return None  # already executed as gymnasium's module


@contextmanager
def gym_as_gymnasium() -> Iterator[None]:
    """Resolve ``gym`` and ``gym.*`` imports to ``gymnasium`` inside the block (see the
    module docstring); numpy's warnings about the ``numpy.core`` paths old pickles name are
    silenced there too, since they concern the file, not the user's code."""
    with _LOCK:
        saved = {name: sys.modules.pop(name) for name in list(sys.modules) if _is_gym(name)}
        finder = _GymAlias()
        sys.meta_path.insert(0, finder)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r"numpy\.core", category=DeprecationWarning)
                yield
        finally:
            sys.meta_path.remove(finder)
            for name in [n for n in sys.modules if _is_gym(n)]:
                del sys.modules[name]
            sys.modules.update(saved)


#: What VecNormalize statistics may be made of, by (module, name) as pickled: the
#: VecNormalize and RunningMeanStd classes (whose ``__setstate__`` only stores the state),
#: numpy arrays, scalars and random generators, gym and gymnasium spaces, OrderedDict.
_STATS_GLOBALS = frozenset({
    ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
    ("stable_baselines3.common.running_mean_std", "RunningMeanStd"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    *((f"numpy.{core}.multiarray", name) for core in ("core", "_core")
      for name in ("_reconstruct", "scalar")),
    *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
    *(("numpy.random._pickle", name) for name in (
        "__generator_ctor", "__bit_generator_ctor", "__randomstate_ctor")),
    ("numpy.random", "__RandomState_ctor"),
    *((f"numpy.random._{module}", name) for module, name in (
        ("pcg64", "PCG64"), ("pcg64", "PCG64DXSM"), ("mt19937", "MT19937"),
        ("philox", "Philox"), ("sfc64", "SFC64"), ("generator", "Generator"))),
    ("numpy.random.bit_generator", "SeedSequence"),
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    *((f"{gym}.spaces.{module}", name) for gym in ("gym", "gymnasium") for module, name in (
        ("box", "Box"), ("discrete", "Discrete"), ("dict", "Dict"), ("tuple", "Tuple"),
        ("multi_discrete", "MultiDiscrete"), ("multi_binary", "MultiBinary"))),
    ("collections", "OrderedDict"),
})


def _where(module: str) -> str:
    """Where an allow-listed global lives here: ``gym`` is ``gymnasium``; numpy 2 keeps
    ``numpy.core``'s modules as ``numpy._core``."""
    if _is_gym(module):
        return "gymnasium" + module[3:]
    if module.startswith("numpy.core.") and importlib.util.find_spec("numpy._core") is not None:
        return "numpy._core." + module[len("numpy.core."):]
    return module


class _StatsUnpickler(pickle.Unpickler):
    """An unpickler that builds only :data:`_STATS_GLOBALS`: a file naming anything else
    (a function to call on load) is refused before anything of it runs."""

    def __init__(self, file: Any, path: Path, what: str) -> None:
        super().__init__(file)
        self._path, self._what = path, what

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _STATS_GLOBALS:
            raise PolicyError(
                f"{self._what} {str(self._path)!r} pickles {module}.{name}, which is not part "
                "of VecNormalize statistics, so it is not unpickled (it could run code); if you "
                "trust the file, load it in full: as_policy(path, trusted=True) or --rl-trusted")
        return getattr(importlib.import_module(_where(module)), name)


def unpickle(path: str | Path, what: str, *, trusted: bool = False) -> Any:
    """Unpickle ``path`` (a ``what``, for messages) with ``gym`` read as ``gymnasium``.

    By default only VecNormalize statistics can be read (an allow-listed unpickler,
    :data:`_STATS_GLOBALS`); ``trusted=True`` unpickles anything, running what the file
    says to run. Errors name the file and the real cause: a folder, a YAML or text file,
    a missing module (and which), a damaged file, a class off the allow-list.
    """
    path = Path(path)
    if path.is_dir():
        raise PolicyError(f"{what} {str(path)!r} is a folder; pass the pickle file itself")
    if not path.is_file():
        raise PolicyError(f"{what} file {str(path)!r} does not exist")
    head = path.read_bytes()[:64]
    if not head.startswith(b"\x80"):  # every pickle protocol >= 2 starts with PROTO
        kind = "a YAML file" if head.lstrip()[:1] in (b"!", b"-") or b":" in head else "not a pickle"
        raise PolicyError(f"{what} {str(path)!r} is {kind}, not a pickled file "
                          "(a zoo folder keeps it as vecnormalize.pkl)")
    try:
        with gym_as_gymnasium(), path.open("rb") as f:
            return pickle.load(f) if trusted else _StatsUnpickler(f, path, what).load()
    except PolicyError:
        raise
    except ModuleNotFoundError as exc:
        raise PolicyError(
            f"cannot read {what} {str(path)!r}: it was pickled with module {exc.name!r}, which "
            f"is not installed here; install the package that provides {exc.name!r}"
        ) from exc
    except Exception as exc:
        raise PolicyError(
            f"cannot read {what} {str(path)!r} ({type(exc).__name__}: {exc})"
        ) from exc
