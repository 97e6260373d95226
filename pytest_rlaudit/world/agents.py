"""Agents: adapt what a user passes as ``agent`` to one batched policy protocol.

:func:`as_policy` accepts a stable-baselines3 model (PPO, A2C, DQN, SAC, TD3, and
sb3-contrib's RecurrentPPO), a path to an SB3 ``.zip``, a torch ``nn.Module``, any
callable ``obs_batch -> action_batch``, ``"random"`` (a uniform random policy), a
``"package.module:attribute"`` string naming one of these (or a zero-argument factory of
one), or an object that already implements :class:`Policy`.

>>> import numpy as np
>>> policy = as_policy(lambda obs: (obs[:, 2] > 0).astype(np.int64))
>>> actions, _ = policy.act(np.array([[0, 0, 0.1, 0], [0, 0, -0.1, 0]]), None)
>>> actions.tolist()
[1, 0]

Batch invariance. Torch's CPU matrix kernels round a row differently depending on the
number of rows in the call (measured here: calls under 16 rows use other kernels, and
in larger calls the last ``n % 4`` rows differ in the last bits). The torch-backed
adapters therefore pad every policy call to a multiple of :data:`MIN_TORCH_ROWS` rows,
so an action depends only on its observation, never on how many other episodes share
the call: results are identical for any audit batch size.

Threads. Torch-backed policy calls run with one intra-op thread by default
(``torch_threads=1``; the setting is restored after each call). The small MLPs of RL
gain nothing from more, and on a small, busy CI machine torch's thread pool stalls:
measured here on 2 shared cores, up to 48 ms per call instead of 0.2 ms. Pass
``torch_threads=None`` to keep torch's own setting (large CNN policies).

torch, stable-baselines3 and sb3-contrib are imported only when an agent needs them.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import pickle
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

from .._optional import EXTRAS, missing
from ..errors import PolicyError

__all__ = [
    "Policy",
    "BasePolicy",
    "CallablePolicy",
    "RandomPolicy",
    "TorchPolicy",
    "SB3Policy",
    "as_policy",
    "load_sb3",
    "MIN_TORCH_ROWS",
]

#: Torch-backed policy calls are padded to a multiple of this many rows (batch invariance).
MIN_TORCH_ROWS = 16

_SB3_ALGOS = ("PPO", "A2C", "DQN", "SAC", "TD3", "DDPG")
_CONTRIB_ALGOS = ("RecurrentPPO", "QRDQN", "TQC", "TRPO", "ARS", "CrossQ")


@runtime_checkable
class Policy(Protocol):
    """The batched policy protocol the rollout runner drives.

    ``act(obs, states)`` maps a batch of observations (first axis: one row per active
    episode) to a batch of actions. Stateless policies have ``stateful = False`` and get
    and return ``states = None``. Stateful ones (recurrent nets, random policies) get a
    list with one state per row, where ``initial_state(seed)`` made each state at the
    start of its episode from that episode's own seed, and return the updated list.
    ``reset()`` is called once before each rollout.
    """

    stateful: bool

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        ...

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        ...

    def reset(self) -> None:
        ...


class BasePolicy:
    """Convenience base: a stateless policy bound to the env's spaces by the runner."""

    stateful: bool = False
    name: str = "policy"
    observation_space: spaces.Space | None = None
    action_space: spaces.Space | None = None

    def bind(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        """Learn the env's spaces before a rollout (and check they fit the agent)."""
        self.observation_space = observation_space
        self.action_space = action_space

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        return None

    def reset(self) -> None:
        return None

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class CallablePolicy(BasePolicy):
    """Any callable ``obs_batch -> action_batch`` (numpy controllers, jitted functions).

    >>> import numpy as np
    >>> CallablePolicy(lambda obs: np.zeros(len(obs), dtype=int)).act(np.ones((3, 4)), None)[0]
    array([0, 0, 0])
    """

    def __init__(self, fn: Any, name: str | None = None) -> None:
        if not callable(fn):
            raise PolicyError(f"CallablePolicy needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or getattr(fn, "__qualname__", None) or type(fn).__name__

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, None]:
        return np.asarray(self.fn(obs)), None


class RandomPolicy(BasePolicy):
    """Uniform random actions, drawn from each episode's own seeded stream.

    Stateful so that an episode's actions depend only on its seed, never on which
    other episodes share the batch.

    >>> import numpy as np
    >>> from gymnasium import spaces
    >>> p = RandomPolicy(); p.bind(spaces.Box(-1, 1, (4,)), spaces.Discrete(2))
    >>> s = [p.initial_state(np.random.SeedSequence(0))]
    >>> p.act(np.zeros((1, 4)), s)[0].shape
    (1,)
    """

    stateful = True
    name = "random"

    def initial_state(self, seed: np.random.SeedSequence) -> spaces.Space:
        if self.action_space is None:
            raise PolicyError("RandomPolicy must be bound to an action space before use")
        space = copy.deepcopy(self.action_space)
        space.seed(int(seed.generate_state(1, dtype=np.uint32)[0]))
        return space

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        assert states is not None
        return np.stack([np.asarray(s.sample()) for s in states]), states


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run torch with ``threads`` intra-op threads, restoring the setting afterwards."""
    if threads is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    if old == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _pad_rows(obs: np.ndarray, rows: int) -> np.ndarray:
    """Pad ``obs`` with copies of its first row up to a multiple of ``rows`` rows."""
    n = obs.shape[0]
    target = -(-n // rows) * rows
    if n == target:
        return obs
    return np.concatenate([obs, np.repeat(obs[:1], target - n, axis=0)])


class TorchPolicy(BasePolicy):
    """A torch ``nn.Module`` mapping a float32 observation batch to an action batch.

    For Discrete actions the output is either one integer per row or a row of
    scores/logits per action (argmax is taken). For Box actions the output is reshaped
    to the action shape. Runs in eval mode under ``torch.no_grad()``.
    """

    def __init__(self, module: Any, name: str | None = None, *,
                 torch_threads: int | None = 1) -> None:
        self.module = module
        self.name = name or type(module).__name__
        self.torch_threads = torch_threads

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, None]:
        import torch

        n = obs.shape[0]
        x = torch.as_tensor(_pad_rows(np.asarray(obs, dtype=np.float32), MIN_TORCH_ROWS))
        was_training = self.module.training
        if was_training:
            self.module.eval()
        try:
            with torch.no_grad(), _torch_threads(self.torch_threads):
                out = self.module(x)
        finally:
            if was_training:
                self.module.train()
        out = np.asarray(out.detach().cpu().numpy())[:n]
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            if out.ndim == 2 and out.shape[1] == space.n:
                return out.argmax(axis=1) + space.start, None
            if out.ndim == 2 and out.shape[1] == 1:
                out = out[:, 0]
            return out, None
        if isinstance(space, spaces.Box):
            return out.reshape((n, *space.shape)), None
        return out, None


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


def _import_object(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyError(f"cannot import {module_name!r} for agent {target!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PolicyError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if inspect.isclass(obj) or (inspect.isfunction(obj) and _takes_no_arguments(obj)):
        obj = obj()  # a zero-argument factory of the agent
    return obj


def _takes_no_arguments(fn: Any) -> bool:
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in inspect.signature(fn).parameters.values())


def _is_sb3(obj: Any) -> bool:
    return any(c.__module__.startswith(("stable_baselines3", "sb3_contrib"))
               for c in type(obj).__mro__)


def _is_torch_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def as_policy(agent: Any, *, algo: str | None = None, deterministic: bool = True,
              vec_normalize: Any = None, torch_threads: int | None = 1) -> Policy:
    """Adapt ``agent`` to the batched :class:`Policy` protocol.

    ``algo`` names the SB3 algorithm of a ``.zip`` when the file does not tell;
    ``deterministic`` and ``vec_normalize`` apply to SB3 agents; ``torch_threads`` to
    torch-backed ones (see the module docstring).

    >>> as_policy("random").name
    'random'
    >>> as_policy(42)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PolicyError: cannot use int as an agent; ...
    """
    if isinstance(agent, (str, os.PathLike)):
        text = os.fspath(agent)
        if text == "random":
            return RandomPolicy()
        is_import = ":" in text and not Path(text).exists() and not text.endswith(".zip")
        if is_import and not (len(text) > 1 and text[1] == ":"):  # not a Windows drive
            return as_policy(_import_object(text), algo=algo, deterministic=deterministic,
                             vec_normalize=vec_normalize, torch_threads=torch_threads)
        model = load_sb3(text, algo)
        return SB3Policy(model, deterministic=deterministic, vec_normalize=vec_normalize,
                         name=f"{type(model).__name__}({Path(text).name})",
                         torch_threads=torch_threads)
    if isinstance(agent, Policy) and not _is_sb3(agent):
        return agent
    if _is_sb3(agent):
        return SB3Policy(agent, deterministic=deterministic, vec_normalize=vec_normalize,
                         torch_threads=torch_threads)
    if _is_torch_module(agent):
        return TorchPolicy(agent, torch_threads=torch_threads)
    if callable(agent):
        return CallablePolicy(agent)
    raise PolicyError(
        f"cannot use {type(agent).__name__} as an agent; pass an SB3 model, a path to an SB3 "
        ".zip, a torch nn.Module, a callable obs_batch -> action_batch, 'random', a "
        "'module:attribute' string, or a Policy"
    )
