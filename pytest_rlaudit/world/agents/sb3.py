"""stable-baselines3 (and sb3-contrib) models and ``.zip`` files as agents."""

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

import numpy as np
from gymnasium import spaces

from ..._optional import EXTRAS, install_hint, missing
from ...errors import PolicyError
from .base import BasePolicy
from .pickles import gym_as_gymnasium
from .sb3_fast import batch_rows, flat_obs, plain_predict, plain_sac, row
from .torch import MIN_TORCH_ROWS, _pad_rows, _torch_threads
from .untrusted import TRUST_HINT, pickled_global, weights_only_objects

__all__ = ["SB3Policy", "load_sb3", "canonical_algo", "trained_with_vec_normalize", "uses_her"]

_SB3_ALGOS = ("PPO", "A2C", "DQN", "SAC", "TD3", "DDPG")
_CONTRIB_ALGOS = ("RecurrentPPO", "MaskablePPO", "QRDQN", "TQC", "TRPO", "ARS", "CrossQ")


def _space_summary(space: Any) -> str:
    shape = getattr(space, "shape", None)
    return f"{type(space).__name__}{tuple(shape) if shape else ''}"


def _same_obs_shape(own: Any, env: Any) -> bool:
    """The model takes the env's observations: the same shape, or for images the
    channel-first transpose SB3 trains on (its ``predict`` transposes channel-last input)."""
    own_shape, env_shape = getattr(own, "shape", None), getattr(env, "shape", None)
    if own_shape == env_shape:
        return True
    return (own_shape is not None and env_shape is not None and len(env_shape) == 3
            and tuple(own_shape) == (env_shape[-1], *env_shape[:-1]))


class SB3Policy(BasePolicy):
    """A stable-baselines3 model (or its ``.policy``), batched through its forward pass.

    ``deterministic=True`` (default) takes the mode of the action distribution. With
    ``deterministic=False`` each episode samples from its own seeded torch stream, one
    row per call (slower, but still independent of the batch); DQN and QRDQN take a
    uniform random action at their saved ``exploration_rate``, as their ``predict`` does. Recurrent policies
    (sb3-contrib RecurrentPPO) keep an LSTM state per episode, zeroed at its start.
    VecNormalize statistics and frame stacks are applied around it
    (:mod:`.preprocess`), as :func:`~.adapt.as_policy` arranges.

    Actions are those of ``policy.predict``, bit for bit, but its steps are taken here
    (:meth:`actions`) so that what it repeats on every call is done once: eval mode is set
    on the first call and again only when a module's mode has changed since (after
    ``model.learn()``, say), and a flat observation batch is copied into a tensor without
    predict's checks. The policy is left in eval mode, as ``predict`` leaves it. Policies
    that override ``predict`` (recurrent ones, users' own) are called through it.
    """

    def __init__(self, model: Any, *, deterministic: bool = True, name: str | None = None,
                 torch_threads: int | None = 1) -> None:
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
        self.name = name or type(model).__name__
        # DQN and QRDQN sample as their model's predict does: a uniform random action at
        # the exploration rate they were saved with (0.01 after the zoo's Atari training),
        # else the Q-network's argmax, which their policy's predict always takes.
        self.epsilon = float(getattr(model, "exploration_rate", 0.0) or 0.0) if (
            model is not self.sb3_policy) else 0.0
        self._fast = not self.recurrent and plain_predict(self.sb3_policy)
        self._flat = self._fast and flat_obs(self.sb3_policy)
        self._sac = self._fast and plain_sac(self.sb3_policy)
        self._forget_mode()

    def __getstate__(self) -> dict[str, Any]:
        # Pickled to travel (Ray actors): the policy network is all an audit runs, so the
        # model around it (its replay buffer: hundreds of MB for SAC) stays behind.
        state = dict(self.__dict__)
        state["model"] = self.sb3_policy
        state["_modules"] = None  # eval mode is checked again where it lands
        return state

    def _forget_mode(self) -> None:
        """Make the next call set eval mode (and read the device) again."""
        self._modules: tuple[Any, ...] | None = None
        self._eval_flags: list[bool] = []
        self._device: Any = None

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        super().bind(observation_space, action_space)
        # A rollout starts: the model may have been trained or moved since the last one.
        self._forget_mode()
        own_obs = self.sb3_policy.observation_space
        own_act = self.sb3_policy.action_space
        if not _same_obs_shape(own_obs, observation_space):
            raise PolicyError(
                f"agent {self.name} expects observations {_space_summary(own_obs)} but the env "
                f"gives {_space_summary(observation_space)}: is this the env it was trained on?"
            )
        same_bounds = not isinstance(own_act, spaces.Box) or (
            isinstance(action_space, spaces.Box)
            and np.array_equal(own_act.low, action_space.low)
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

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        n = batch_rows(obs)
        with _torch_threads(self.torch_threads):
            if self.recurrent:
                return self._act_recurrent(obs, states)
            if not self.deterministic:
                return self._act_stochastic(obs, states)
            return self.actions(_pad_rows(obs, MIN_TORCH_ROWS), deterministic=True)[:n], None

    def actions(self, obs: Any, deterministic: bool = True) -> np.ndarray:
        """The actions ``sb3_policy.predict(obs, deterministic=deterministic)`` returns for
        a batch ``obs`` (an array, or a dict of arrays for a Dict space), bit for bit.

        Its steps, minus what need not be repeated: eval mode (only when it changed, see
        the class), the observation as a tensor (``obs_to_tensor``, or for a flat batch
        the copy and reshape it makes), ``_predict`` under ``torch.no_grad()``, then for
        Box actions ``unscale_action`` when the policy squashes, else a clip to the space.
        A SAC actor's deterministic action is ``tanh`` of its mean, which ``_predict``
        reaches by building a torch ``Normal`` it then ignores (a third of the call): that
        is taken straight (:func:`~.sb3_fast.plain_sac`).

        >>> from stable_baselines3 import PPO
        >>> model = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[8]), seed=0)
        >>> obs = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        >>> ours = SB3Policy(model).actions(obs)
        >>> ours.tobytes() == model.policy.predict(obs, deterministic=True)[0].tobytes()
        True
        """
        policy = self.sb3_policy
        if not self._fast:
            predicted: np.ndarray = policy.predict(obs, deterministic=deterministic)[0]
            return predicted
        import torch

        self._eval_mode()
        if self._flat:
            # obs_to_tensor's copy: the network must not see (or change) the caller's array.
            shape = (-1, *policy.observation_space.shape)
            obs_tensor = torch.as_tensor(np.array(obs).reshape(shape), device=self._device)
        else:
            obs_tensor = policy.obs_to_tensor(obs)[0]
        with torch.no_grad():
            if deterministic and self._sac:
                actor = policy.actor
                features = actor.extract_features(obs_tensor, actor.features_extractor)
                out = torch.tanh(actor.mu(actor.latent_pi(features)))
            else:
                out = policy._predict(obs_tensor, deterministic=deterministic)
        space = policy.action_space
        actions = out.cpu().numpy().reshape((-1, *space.shape))
        if isinstance(space, spaces.Box):
            if policy.squash_output:
                unscaled: np.ndarray = policy.unscale_action(actions)
                return unscaled
            return np.clip(actions, space.low, space.high)
        return actions

    def _eval_mode(self) -> None:
        """``set_training_mode(False)``, which predict calls on every call (7% of the time
        of an audit of a SAC agent): here only when some module's flag has changed since
        this last called it (or on the first call), so the network runs in the very mode
        predict would give it."""
        modules = self._modules
        if modules is not None and [m.training for m in modules] == self._eval_flags:
            return
        policy = self.sb3_policy
        policy.set_training_mode(False)
        self._modules = modules = tuple(policy.modules())
        self._eval_flags = [m.training for m in modules]
        self._device = policy.device

    def _act_stochastic(self, obs: np.ndarray,
                        states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        import torch

        assert states is not None
        rows = []
        epsilon = self.epsilon
        for i, rng in enumerate(states):
            torch_seed = int(rng.integers(2**63 - 1))
            if epsilon and rng.random() < epsilon:
                space = self.sb3_policy.action_space
                rows.append(np.asarray(space.start + rng.integers(space.n), dtype=np.int64))
                continue
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(torch_seed)
                action = self.actions(row(obs, i), deterministic=False)
            rows.append(action[0])
        return np.stack(rows), states

    def _act_recurrent(self, obs: np.ndarray,
                       states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        assert states is not None
        n = batch_rows(obs)
        padded = _pad_rows(obs, MIN_TORCH_ROWS)
        rows = batch_rows(padded)
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


def _zip_data(path: Path) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(path) as archive:
            data: dict[str, Any] = json.loads(archive.read("data"))
            return data
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as exc:
        raise PolicyError(f"{str(path)!r} is not a stable-baselines3 model zip ({exc})") from exc


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
        raise PolicyError(f"agent file {str(path)!r} does not exist")
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
        hint = _load_hint(path, data, algo if given else None, env_spaces=bool(why or not trusted))
        if not trusted:
            hint += (" (loaded without running its pickles: the policy was rebuilt from the "
                     "env's spaces and the file's readable settings; " + TRUST_HINT + ")")
        raise PolicyError(
            f"cannot load {str(path)!r} as a {algo} model ({type(exc).__name__}: {exc}); " + hint
        ) from exc


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


def _is_sb3(obj: Any) -> bool:
    return any(c.__module__.startswith(("stable_baselines3", "sb3_contrib"))
               for c in type(obj).__mro__)
