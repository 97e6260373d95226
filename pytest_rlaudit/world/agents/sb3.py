"""stable-baselines3 (and sb3-contrib) models and ``.zip`` files as agents."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from ..._optional import EXTRAS, missing
from ...errors import PolicyError
from .base import BasePolicy
from .torch import MIN_TORCH_ROWS, _pad_rows, _torch_threads

__all__ = ["SB3Policy", "load_sb3"]

_SB3_ALGOS = ("PPO", "A2C", "DQN", "SAC", "TD3", "DDPG")
_CONTRIB_ALGOS = ("RecurrentPPO", "QRDQN", "TQC", "TRPO", "ARS", "CrossQ")


def _space_summary(space: Any) -> str:
    shape = getattr(space, "shape", None)
    return f"{type(space).__name__}{tuple(shape) if shape else ''}"


class SB3Policy(BasePolicy):
    """A stable-baselines3 model (or its ``.policy``), batched through ``policy.predict``.

    ``deterministic=True`` (default) takes the mode of the action distribution. With
    ``deterministic=False`` each episode samples from its own seeded torch stream, one
    row per call (slower, but still independent of the batch). ``vec_normalize``: a
    ``VecNormalize`` (or the path of one saved with ``.save``) whose observation
    statistics are applied before the policy, as during training. Recurrent policies
    (sb3-contrib RecurrentPPO) keep an LSTM state per episode, zeroed at its start.
    """

    def __init__(self, model: Any, *, deterministic: bool = True, vec_normalize: Any = None,
                 name: str | None = None, torch_threads: int | None = 1) -> None:
        self.model = model
        self.torch_threads = torch_threads
        self.sb3_policy = getattr(model, "policy", model)
        if not hasattr(self.sb3_policy, "predict"):
            raise PolicyError(f"{type(model).__name__} has no predict(); not an SB3 model")
        self.deterministic = bool(deterministic)
        self.recurrent = hasattr(self.sb3_policy, "lstm_actor")
        if self.recurrent and not self.deterministic:
            raise PolicyError(
                "deterministic=False is not supported for recurrent SB3 policies yet; "
                "audit with deterministic=True (the default)"
            )
        self.stateful = self.recurrent or not self.deterministic
        self.vec_normalize = _load_vec_normalize(vec_normalize)
        self.name = name or type(model).__name__

    def bind(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        super().bind(observation_space, action_space)
        own_obs = self.sb3_policy.observation_space
        own_act = self.sb3_policy.action_space
        if getattr(own_obs, "shape", None) != getattr(observation_space, "shape", None):
            raise PolicyError(
                f"agent {self.name} expects observations {_space_summary(own_obs)} but the env "
                f"gives {_space_summary(observation_space)}: is this the env it was trained on?"
            )
        same_bounds = not isinstance(own_act, spaces.Box) or (
            np.array_equal(own_act.low, action_space.low)
            and np.array_equal(own_act.high, action_space.high))
        if type(own_act) is not type(action_space) or getattr(own_act, "shape", None) != getattr(
            action_space, "shape", None
        ) or getattr(own_act, "n", None) != getattr(action_space, "n", None) or not same_bounds:
            raise PolicyError(
                f"agent {self.name} acts in {own_act} but the env's action space is "
                f"{action_space}: is this the env it was trained on?"
            )

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        if self.recurrent:
            return None  # zero LSTM state, flagged as an episode start
        return np.random.default_rng(seed)

    def _normalize(self, obs: np.ndarray) -> np.ndarray:
        if self.vec_normalize is None:
            return obs
        return self.vec_normalize.normalize_obs(obs)

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        obs = self._normalize(obs)
        n = obs.shape[0]
        with _torch_threads(self.torch_threads):
            if self.recurrent:
                return self._act_recurrent(obs, states)
            if not self.deterministic:
                return self._act_stochastic(obs, states)
            actions, _ = self.sb3_policy.predict(_pad_rows(obs, MIN_TORCH_ROWS),
                                                 deterministic=True)
            return actions[:n], None

    def _act_stochastic(self, obs: np.ndarray, states: list[Any] | None):
        import torch

        assert states is not None
        rows = []
        for i, rng in enumerate(states):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(rng.integers(2**63 - 1)))
                action, _ = self.sb3_policy.predict(obs[i : i + 1], deterministic=False)
            rows.append(action[0])
        return np.stack(rows), states

    def _act_recurrent(self, obs: np.ndarray, states: list[Any] | None):
        assert states is not None
        n = obs.shape[0]
        padded = _pad_rows(obs, MIN_TORCH_ROWS)
        rows = padded.shape[0]
        zero = np.zeros(self.sb3_policy.lstm_hidden_state_shape, dtype=np.float32)
        starts = np.ones(rows, dtype=np.float32)
        hs, cs = [], []
        for i in range(rows):
            state = states[i] if i < n else None
            if state is None:
                hs.append(zero)
                cs.append(zero)
            else:
                hs.append(state[0])
                cs.append(state[1])
                starts[i] = 0.0
        h = np.concatenate(hs, axis=1)
        c = np.concatenate(cs, axis=1)
        actions, (h, c) = self.sb3_policy.predict(
            padded, state=(h, c), episode_start=starts, deterministic=True
        )
        new_states = [(h[:, i : i + 1], c[:, i : i + 1]) for i in range(n)]
        return actions[:n], new_states


def _load_vec_normalize(vec_normalize: Any) -> Any:
    if vec_normalize is None or hasattr(vec_normalize, "normalize_obs"):
        return vec_normalize
    path = Path(vec_normalize)
    if not path.is_file():
        raise PolicyError(f"vec_normalize file {str(path)!r} does not exist")
    # VecNormalize.load() wants a venv only to wrap it; the statistics are all we need.
    with path.open("rb") as f:
        loaded = pickle.load(f)
    if not hasattr(loaded, "normalize_obs"):
        raise PolicyError(f"{str(path)!r} does not hold a VecNormalize (got {type(loaded).__name__})")
    return loaded


def _algo_class(name: str) -> Any:
    lookup = {a.lower(): a for a in (*_SB3_ALGOS, *_CONTRIB_ALGOS)}
    canonical = lookup.get(name.lower())
    if canonical is None:
        raise PolicyError(
            f"unknown SB3 algorithm {name!r}; known: {', '.join(_SB3_ALGOS + _CONTRIB_ALGOS)}"
        )
    package = "stable_baselines3" if canonical in _SB3_ALGOS else "sb3_contrib"
    try:
        return getattr(importlib.import_module(package), canonical)
    except ImportError as exc:
        raise PolicyError(missing(package, canonical) if package in EXTRAS else (
            f"{canonical} needs {package}, which is not installed: pip install sb3-contrib")) from exc


def _algo_from_zip(path: Path) -> str:
    """Read the algorithm from an SB3 zip: its policy class module and hyperparameters."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as exc:
        raise PolicyError(f"{str(path)!r} is not a stable-baselines3 model zip ({exc})") from exc
    module = str(data.get("policy_class", {}).get("__module__", ""))
    by_module = {
        "stable_baselines3.dqn.": "DQN", "stable_baselines3.sac.": "SAC",
        "stable_baselines3.td3.": "TD3", "sb3_contrib.common.recurrent.": "RecurrentPPO",
        "sb3_contrib.qrdqn.": "QRDQN", "sb3_contrib.tqc.": "TQC",
    }
    for prefix, algo in by_module.items():
        if module.startswith(prefix):
            return algo
    if module.startswith("stable_baselines3.common.policies"):
        # PPO and A2C share ActorCriticPolicy; only PPO has a clipping range.
        return "PPO" if "clip_range" in data else "A2C"
    raise PolicyError(
        f"cannot tell which algorithm trained {str(path)!r} (policy module {module!r}); "
        "name it: as_policy(path, algo='PPO') or --rl-algo PPO"
    )


def load_sb3(path: str | os.PathLike[str], algo: str | None = None) -> Any:
    """Load an SB3 model from a ``.zip``, reading the algorithm from the file if not given.

    For example ``load_sb3("examples/ppo_cartpole.zip")`` returns the bundled PPO model.
    """
    path = Path(path)
    if not path.is_file():
        raise PolicyError(f"agent file {str(path)!r} does not exist")
    algo = algo or _algo_from_zip(path)
    cls = _algo_class(algo)
    try:
        return cls.load(path, device="cpu")
    except Exception as exc:
        raise PolicyError(
            f"cannot load {str(path)!r} as a {cls.__name__} model ({type(exc).__name__}: {exc}); "
            "is it an SB3 .zip, and is algo right?"
        ) from exc


def _is_sb3(obj: Any) -> bool:
    return any(c.__module__.startswith(("stable_baselines3", "sb3_contrib"))
               for c in type(obj).__mro__)
