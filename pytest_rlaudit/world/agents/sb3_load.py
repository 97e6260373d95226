"""Loading a stable-baselines3 (or sb3-contrib) model ``.zip``: which algorithm saved it,
and SB3's ``load`` with what cannot or must not be unpickled replaced (:mod:`.untrusted`).

>>> canonical_algo("ppo_lstm")
'RecurrentPPO'
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import pickle
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gymnasium import spaces

from ..._optional import EXTRAS, install_hint, missing
from ...errors import PolicyError
from .archives import check_archive, not_intact
from .missing import agent_not_found
from .pickles import gym_as_gymnasium
from .untrusted import TRUST_HINT, pickled_global, weights_only_objects

__all__ = ["load_sb3", "canonical_algo", "trained_with_vec_normalize", "uses_her"]

_SB3_ALGOS = ("PPO", "A2C", "DQN", "SAC", "TD3", "DDPG")
_CONTRIB_ALGOS = ("RecurrentPPO", "MaskablePPO", "QRDQN", "TQC", "TRPO", "ARS", "CrossQ")

#: Each algorithm by the module of its policy class; ActorCriticPolicy (shared by PPO, A2C
#: and TRPO) and TD3Policy (shared by TD3 and DDPG) are told apart by their saved settings.
_BY_POLICY_MODULE = {
    "stable_baselines3.dqn.": "DQN", "stable_baselines3.sac.": "SAC",
    "sb3_contrib.common.recurrent.": "RecurrentPPO", "sb3_contrib.common.maskable.": "MaskablePPO",
    "sb3_contrib.qrdqn.": "QRDQN", "sb3_contrib.tqc.": "TQC", "sb3_contrib.ars.": "ARS",
    "sb3_contrib.crossq.": "CrossQ",
}
#: Algorithms that keep a replay buffer: loaded with a one-transition buffer, as the
#: zoo's ``enjoy`` does, instead of allocating the training buffer.
_OFF_POLICY = ("DQN", "SAC", "TD3", "DDPG", "QRDQN", "TQC", "CrossQ")
#: Training schedules pickled as functions: old ones do not unpickle under today's Python,
#: and inference never calls them (the zoo's ``enjoy`` replaces them the same way).
_SCHEDULES = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0,
              "exploration_schedule": lambda _: 0.0}


def uses_her(data: dict[str, Any]) -> bool:
    """Whether a zip's ``data`` says it was trained with SB3's ``HerReplayBuffer``
    (goal-conditioned agents: the zoo's TQC/SAC + HER), read from the pickle's opcodes
    without running them.

    >>> entry = {":serialized:": base64.b64encode(pickle.dumps(zipfile.ZipFile)).decode()}
    >>> uses_her({"replay_buffer_class": entry})
    False
    """
    entry = data.get("replay_buffer_class")
    if not isinstance(entry, dict):
        return False
    named = pickled_global(str(entry.get(":serialized:", "")))
    return (named is not None and named[1] == "HerReplayBuffer") or (
        str(entry.get("__module__", "")).endswith("her_replay_buffer"))


#: Replay-buffer settings a HER model is loaded with. SB3 builds a model's replay buffer
#: on load, and a ``HerReplayBuffer`` needs the training env (its ``compute_reward``):
#: without one SB3 stops ("You must pass an environment when using HerReplayBuffer").
#: Inference never reads the buffer, so SB3's plain one for Dict observations stands in,
#: without HER's settings (the zoo's ``enjoy`` passes the env instead, which a policy
#: audited on its own, or on another env's variant, cannot).
_HER_STAND_INS: dict[str, Any] = {"replay_buffer_class": None, "replay_buffer_kwargs": {}}


def canonical_algo(name: str) -> str:
    """The SB3 class name of ``name`` in any case, or its rl-baselines3-zoo folder name.

    >>> canonical_algo("ppo_lstm"), canonical_algo("qrdqn")
    ('RecurrentPPO', 'QRDQN')
    """
    lookup = {a.lower(): a for a in (*_SB3_ALGOS, *_CONTRIB_ALGOS)}
    lookup["ppo_lstm"] = "RecurrentPPO"  # the zoo's folder name for it
    canonical = lookup.get(str(name).lower())
    if canonical is None:
        raise PolicyError(
            f"unknown SB3 algorithm {name!r}; known: {', '.join(_SB3_ALGOS + _CONTRIB_ALGOS)}"
        )
    return canonical


def _algo_class(name: str) -> Any:
    canonical = canonical_algo(name)
    package = "stable_baselines3" if canonical in _SB3_ALGOS else "sb3_contrib"
    try:
        return getattr(importlib.import_module(package), canonical)
    except ImportError as exc:
        raise PolicyError(missing(package, canonical) if package in EXTRAS else (
            f"{canonical} needs {package}, which is not installed: "
            f"{install_hint(package='sb3-contrib')}")) from exc


#: The entries of a zip's ``data`` that are read before SB3's ``load`` (to tell the
#: algorithm, rebuild the policy or check the spaces), and what each must be. Each is a
#: dict as SB3 writes it: ``{":type:": ..., ":serialized:": <base64 pickle>, ...}`` for
#: what JSON cannot hold (``policy_kwargs`` is a plain dict when JSON can).
_DATA_ENTRIES = ("policy_class", "observation_space", "action_space", "policy_kwargs")


def _zip_data(path: Path) -> dict[str, Any]:
    """The ``data`` of an SB3 zip, once :func:`~.archives.check_archive` has bounded and
    checked its members, and checked to be shaped as SB3 writes it."""
    check_archive(path, sb3=True)
    with zipfile.ZipFile(path) as archive:
        raw = archive.read("data")
    try:
        data = json.loads(raw.decode("utf-8"))  # as SB3 reads it
    except UnicodeDecodeError as exc:
        raise not_intact(path, f"its data member is not UTF-8 text ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise not_intact(path, f"its data member is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise not_intact(path, f"its data member is {_json_kind(data)} in JSON, not the object "
                               "of settings SB3 writes")
    for key in _DATA_ENTRIES:
        entry = data.get(key)
        if key not in data or (entry is None and key == "policy_kwargs"):
            continue
        serialized = entry.get(":serialized:", "") if isinstance(entry, dict) else None
        if not isinstance(serialized, str) or (key == "policy_class" and not serialized):
            raise not_intact(path, (
                f"its data's {key} is {_json_kind(entry)} {_clip(entry)}, not the entry SB3 "
                "writes (a dict with ':type:' and ':serialized:')"))
    if "policy_class" not in data:
        raise not_intact(path, "its data names no policy_class")
    return data


def _json_kind(value: Any) -> str:
    """``value``'s kind in JSON's words, with its article: ``a list``."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             type(None): "null"}
    return kinds.get(type(value), "a number")


def _clip(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _algo_from_zip(path: Path, data: dict[str, Any]) -> str:
    """The algorithm of an SB3 zip, from its ``data``: policy class module and settings."""
    module = str(data.get("policy_class", {}).get("__module__", ""))
    for prefix, algo in _BY_POLICY_MODULE.items():
        if module.startswith(prefix):
            return algo
    if module.startswith("stable_baselines3.td3."):
        # DDPG is TD3 with one critic update per actor update and no target smoothing.
        ddpg = data.get("policy_delay") == 1 and data.get("target_noise_clip") == 0.0
        return "DDPG" if ddpg else "TD3"
    if module.startswith("stable_baselines3.common.policies"):
        if "clip_range" in data:
            return "PPO"
        return "TRPO" if "cg_max_steps" in data else "A2C"
    raise PolicyError(
        f"cannot tell which algorithm trained {str(path)!r} (policy module {module!r}); "
        "name it: as_policy(path, algo='PPO') or --rl-algo PPO"
    )


def _unreadable_spaces(data: dict[str, Any]) -> str | None:
    """Why the spaces pickled in a zip's ``data`` cannot be read here (with gym read as
    gymnasium), or None when they can."""
    for key in ("observation_space", "action_space"):
        serialized = data.get(key, {}).get(":serialized:")
        if serialized is None:
            return f"it holds no {key}"
        try:
            with gym_as_gymnasium():
                pickle.loads(base64.b64decode(serialized.encode()))
        except Exception as exc:
            return f"its {key} does not unpickle here ({type(exc).__name__}: {exc})"
    return None


Spaces = Callable[[], "tuple[spaces.Space[Any], spaces.Space[Any]]"]


def load_sb3(path: str | os.PathLike[str], algo: str | None = None, *,
             spaces_of_env: Spaces | None = None, trusted: bool = False,
             config_kwargs: Any = None, spaces_of_trained: Spaces | None = None) -> Any:
    """Load an SB3 model from a ``.zip``, reading the algorithm from the file if not given.

    By default nothing pickled in the file is unpickled (:mod:`.untrusted`): the spaces
    are the env's (``spaces_of_env()``, the spaces of the env it will be audited on; or,
    without one, those the file describes in readable fields), the policy class and
    ``policy_kwargs`` are rebuilt from readable fields and allow-lists, and the weights
    are read with ``torch.load(weights_only=True)``. What that cannot rebuild (a policy
    class or activation of one's own) is an error naming ``trusted``. ``config_kwargs``:
    the ``policy_kwargs`` of a zoo folder's ``config.yml``, read (as data) where the
    file's own readable fields do not say. ``spaces_of_trained()``: the spaces of the env
    a saved run's folder says it was trained on, where neither ``spaces_of_env`` nor the
    file's readable fields give them (a Dict space is not described in full there).

    Before anything of the file is read, trusted or not, its members' sizes are checked
    against limits and the zip against what SB3's ``save`` writes
    (:func:`~.archives.check_archive`), and its ``data`` against the shape SB3 gives it:
    anything else is an error naming the file and what is wrong in it.

    A model trained with SB3's ``HerReplayBuffer`` (:func:`uses_her`) is loaded with SB3's
    plain buffer in its place, which needs no env (see ``_HER_STAND_INS``).

    ``trusted=True`` loads the way SB3 does, running the pickles: files saved under old
    ``gym`` load too (``gym`` is read as ``gymnasium``, :mod:`.pickles`), and when the
    pickled spaces still cannot be read, the env's spaces stand in for them, as SB3's
    ``custom_objects``. For example ``load_sb3("examples/ppo_cartpole.zip")`` returns the
    bundled PPO model.
    """
    path = Path(path)
    if not path.is_file():
        raise agent_not_found(path)
    given = algo is not None
    data = _zip_data(path)
    algo = canonical_algo(algo) if algo else _algo_from_zip(path, data)
    cls = _algo_class(algo)
    custom: dict[str, Any] = dict(_SCHEDULES)
    why = None
    if not trusted:
        custom = weights_only_objects(path, data, cls, custom, spaces_of_env, config_kwargs,
                                      spaces_of_trained)
    else:
        why = _unreadable_spaces(data)
    if why is not None:
        spaces_of_env = spaces_of_env or spaces_of_trained
        if spaces_of_env is None:
            raise PolicyError(
                f"cannot load {str(path)!r}: {why}. Give the env it is audited on, whose spaces "
                "stand in for the pickled ones: audit(path, env) or as_policy(path, env=env)"
            )
        custom["observation_space"], custom["action_space"] = spaces_of_env()
    extra: dict[str, Any] = (
        {"buffer_size": 1, "optimize_memory_usage": False} if algo in _OFF_POLICY else {})
    if algo in _OFF_POLICY and uses_her(data):
        extra.update(_HER_STAND_INS)
    try:
        with gym_as_gymnasium(), warnings.catch_warnings():
            # SB3 warns of every training-only object it cannot unpickle; none is used here.
            warnings.filterwarnings("ignore", message="Could not deserialize object")
            return cls.load(path, device="cpu", custom_objects=custom, **extra)
    except ModuleNotFoundError as exc:
        raise PolicyError(
            f"cannot load {str(path)!r} as a {algo} model: it was pickled with module "
            f"{exc.name!r}, which is not installed here; install the package that provides it"
        ) from exc
    except Exception as exc:
        cause = _sb3_cause(exc)
        hint = _load_hint(path, data, algo if given else None, env_spaces=bool(why or not trusted))
        if _weights_misnamed(cause) and not hint.endswith("is algo right?"):
            raise not_intact(path, f"its .pth members are not those a {algo} model saves "
                                   f"({type(cause).__name__}: {cause})", ran=trusted) from exc
        if not trusted:
            hint += (" (loaded without running its pickles: the policy was rebuilt from the "
                     "env's spaces and the file's readable settings; " + TRUST_HINT + ")")
        raise PolicyError(
            f"cannot load {str(path)!r} as a {algo} model ({type(cause).__name__}: {cause}); "
            + hint) from exc


def _sb3_cause(exc: BaseException) -> BaseException:
    """The error SB3's ``load`` met first: when ``set_parameters`` fails with a
    ``ValueError``, SB3 retries as for an old DQN file, indexing the optimizer state (the
    stand-in optimizer has none: :class:`~.untrusted.InferenceOnlyOptimizer`), and that
    retry's ``IndexError`` or ``KeyError`` says nothing of the file."""
    context = exc.__context__
    if isinstance(exc, (IndexError, KeyError)) and isinstance(context, ValueError):
        return context
    return exc


def _weights_misnamed(exc: BaseException) -> bool:
    """Whether SB3's ``set_parameters`` refused the names of the zip's ``.pth`` members:
    one the algorithm has no object for, or a set other than the one it saves."""
    return isinstance(exc, ValueError) and (
        "is an invalid object name" in str(exc) or "Names of parameters do not match" in str(exc))


def _load_hint(path: Path, data: dict[str, Any], given: str | None, *, env_spaces: bool) -> str:
    """What to check when SB3's load failed: the algorithm only when the one given is not
    the one the file names (a HER model's failure is not the algorithm's, for one)."""
    if given is not None:
        try:
            saved = _algo_from_zip(path, data)
        except PolicyError:  # the file does not say: the algorithm given may be wrong
            return "is algo right?"
        if saved != given:
            return f"the file was saved by {saved}, not {given}: is algo right?"
    if env_spaces:
        return "the env's spaces stood in for the pickled ones: is this the env it was trained on?"
    return "is it an intact SB3 model zip?"


def trained_with_vec_normalize(model: Any) -> bool:
    """Whether an on-policy SB3 model was trained inside a ``VecNormalize``: SB3 keeps the
    unnormalised last observation (``_last_original_obs``) only then, and saves it. (An
    off-policy model keeps it always, so it tells nothing there.)"""
    if type(model).__name__ in _OFF_POLICY:
        return False
    return getattr(model, "_last_original_obs", None) is not None
