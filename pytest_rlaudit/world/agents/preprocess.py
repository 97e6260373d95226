"""What an agent does to observations before its network sees them: VecNormalize
statistics and frame stacks, as policies wrapping the policy they feed.

They sit on the agent's side of the perturbations, as in deployment: a noisy or stale
sensor frame is normalised and stacked like any other. The order is the
rl-baselines3-zoo's (``create_test_env``): normalise each frame, then stack, so a
``VecNormalize`` saved in training holds the statistics of one frame.

>>> import numpy as np
>>> from gymnasium import spaces
>>> from pytest_rlaudit.world.agents import as_policy
>>> first = as_policy(lambda obs: obs[:, 0].astype(np.int64))   # the oldest stacked value
>>> policy = FrameStackPolicy(first, 3)
>>> policy.bind(spaces.Box(0, 9, (1,)), spaces.Discrete(10))
>>> policy.act(np.array([[7.0]]), [policy.initial_state(np.random.SeedSequence(0))])[0]
array([0])
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path
from typing import Any, cast

import numpy as np
from gymnasium import spaces

from ...errors import PolicyError, SpacesMismatchError
from .base import BasePolicy, CorePolicy
from .pickles import unpickle

__all__ = ["PolicyWrapper", "NormalizedPolicy", "FrameStackPolicy", "load_vec_normalize",
           "stacked_space", "STATS_FILES", "normalizes", "check_stats_fit"]


class PolicyWrapper(BasePolicy):
    """A policy around another one: binding, resets and episode state pass through, the
    wrapped policy's ``name``, ``stateful``, ``shards_freely`` and ``env_needs`` are its
    own, and attributes it does not have are read from the wrapped policy (``.model`` of
    an SB3 agent), as gymnasium wrappers once forwarded theirs.

    It is also what completes a policy of one's own that implements only the
    :class:`~.base.CorePolicy` members into a :class:`~.base.Policy`: the members the
    wrapped object lacks take :class:`~.base.BasePolicy`'s defaults (its class name as
    ``name``; a ``bind`` that only records the spaces).

    >>> import numpy as np
    >>> class Mine:  # the narrow protocol only
    ...     stateful = False
    ...     def act(self, obs, states): return np.zeros(len(obs), dtype=np.int64), None
    ...     def initial_state(self, seed): return None
    ...     def reset(self): pass
    >>> completed = PolicyWrapper(Mine())
    >>> completed.name, completed.shards_freely, completed.env_needs
    ('Mine', True, None)
    """

    def __init__(self, policy: CorePolicy) -> None:
        self.policy = policy
        # The one place that reads these with defaults: everything downstream of a
        # wrapper (and of as_policy) reads them directly.
        self.name = getattr(policy, "name", type(policy).__name__)
        self.stateful = bool(getattr(policy, "stateful", False))
        self.shards_freely = bool(getattr(policy, "shards_freely", True))
        self.env_needs = getattr(policy, "env_needs", None)

    def __getattr__(self, name: str) -> Any:
        if name == "policy":  # not set yet (unpickling): never recurse
            raise AttributeError(name)
        return getattr(self.policy, name)

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        super().bind(observation_space, action_space)
        _bind(self.policy, observation_space, action_space)

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        return self.policy.initial_state(seed)

    def reset(self) -> None:
        self.policy.reset()

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        return self.policy.act(obs, states)


def _bind(policy: CorePolicy, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
    """``policy.bind(...)``, if it has one: a narrow policy has none."""
    bind = getattr(policy, "bind", None)
    if bind is not None:
        bind(observation_space, action_space)


#: The names VecNormalize statistics are saved under: the zoo's, and the Hub's.
STATS_FILES = ("vecnormalize.pkl", "vec_normalize.pkl")


def _stats_file(path: Path) -> Path:
    """``path``, or for a folder (a zoo run) the one statistics file in it or one level down."""
    if not path.is_dir():
        return path
    found = [f for pattern in STATS_FILES for f in (*path.glob(pattern), *path.glob(f"*/{pattern}"))]
    if len(found) != 1:
        raise PolicyError(
            f"VecNormalize folder {str(path)!r} holds "
            + (f"several statistics files ({', '.join(map(str, found))})" if found
               else "no vecnormalize.pkl") + "; pass the file itself")
    return found[0]


def load_vec_normalize(vec_normalize: Any, *, trusted: bool = False) -> Any:
    """A copy of a ``VecNormalize`` as given, or one read from the path of one saved with
    ``.save()`` (under old ``gym`` too), with training and reward normalisation off.

    A file is read through an allow-listed unpickler that builds VecNormalize statistics
    and nothing else (:func:`~.pickles.unpickle`); ``trusted=True`` unpickles it in full.

    A given object is copied, statistics included: it is usually the training env, which
    must keep updating its statistics and normalising rewards after an audit, and the
    audit must see the statistics of one moment."""
    loaded = vec_normalize
    if hasattr(loaded, "normalize_obs"):
        # A shallow copy (its envs are shared, never stepped here) with statistics of its
        # own; not copy.copy, whose VecNormalize.__getstate__ fails on an unpickled one.
        loaded = object.__new__(type(vec_normalize))
        loaded.__dict__.update(vars(vec_normalize))
        for name in ("obs_rms", "ret_rms"):
            if name in vars(loaded):
                setattr(loaded, name, copy.deepcopy(getattr(loaded, name)))
    elif isinstance(vec_normalize, (str, os.PathLike)):
        loaded = unpickle(_stats_file(Path(vec_normalize)), "VecNormalize", trusted=trusted)
        if not hasattr(loaded, "normalize_obs"):
            raise PolicyError(f"{str(vec_normalize)!r} does not hold a VecNormalize "
                              f"(got {type(loaded).__name__})")
    else:
        raise PolicyError(
            f"vec_normalize={vec_normalize!r} is not VecNormalize statistics: pass the path of a "
            "vecnormalize.pkl (or of the zoo folder holding it), a VecNormalize, \"auto\" to "
            "find them beside the model, or None for none")
    # As the zoo's enjoy: the statistics stay as trained, rewards are the env's own.
    loaded.training = False
    loaded.norm_reward = False
    return loaded


def _obs_scale(vec_normalize: Any) -> tuple[np.ndarray, np.ndarray, float] | None:
    """``(mean, sqrt(var + epsilon), clip_obs)`` of a plain ``VecNormalize`` that
    normalises array observations, so that ``clip((obs - mean) / std, -clip, clip)`` as
    float32 is its ``normalize_obs(obs)`` bit for bit, without the deep copy of ``obs``
    and the square root it makes on every call; None for anything else (Dict statistics,
    subclasses, ``norm_obs=False``), which keeps ``normalize_obs``.

    >>> _obs_scale(object()) is None
    True
    """
    module = sys.modules.get("stable_baselines3.common.vec_env.vec_normalize")
    if module is None or not isinstance(vec_normalize, module.VecNormalize):
        return None
    cls, base = type(vec_normalize), module.VecNormalize
    rms = vec_normalize.obs_rms
    if (cls.normalize_obs is not base.normalize_obs or cls._normalize_obs is not base._normalize_obs
            or not vec_normalize.norm_obs or isinstance(rms, dict)):
        return None
    return rms.mean, np.sqrt(rms.var + vec_normalize.epsilon), vec_normalize.clip_obs


def _stats_shapes(vec_normalize: Any) -> Any:
    """The observation shape(s) VecNormalize statistics were gathered on: a tuple, a dict
    of them (Dict observations), or None where they normalise no observations."""
    if not getattr(vec_normalize, "norm_obs", True):
        return None
    rms = getattr(vec_normalize, "obs_rms", None)
    if isinstance(rms, dict):
        return {key: tuple(np.shape(getattr(r, "mean", ()))) for key, r in rms.items()}
    mean = getattr(rms, "mean", None)
    return None if mean is None else tuple(np.shape(mean))


def _obs_shapes(observations: Any) -> Any:
    """The shape(s) of one observation of a space, or of a batch's rows."""
    if isinstance(observations, spaces.Dict):
        return {key: tuple(sub.shape or ()) for key, sub in observations.spaces.items()}
    if isinstance(observations, spaces.Space):
        return tuple(observations.shape or ())
    if isinstance(observations, dict):
        return {key: tuple(np.shape(v)[1:]) for key, v in observations.items()}
    return tuple(np.shape(observations)[1:])


def _fits(stats: tuple[int, ...], obs: tuple[int, ...]) -> bool:
    """Whether ``normalize_obs`` keeps a batch of ``obs`` rows as it is (its arithmetic
    broadcasts the statistics over the batch)."""
    try:
        return np.broadcast_shapes((2, *obs), stats) == (2, *obs)
    except ValueError:
        return False


def check_stats_fit(vec_normalize: Any, observations: Any, source: str) -> None:
    """A :class:`~pytest_rlaudit.errors.SpacesMismatchError` naming both shapes and the
    statistics (``source``) when VecNormalize statistics are not for the env's
    observations (``observations``: its observation space, or a batch of them): another
    env's ``vecnormalize.pkl``, which would otherwise fail as the agent's own error."""
    saved, env = _stats_shapes(vec_normalize), _obs_shapes(observations)
    if saved is None:
        return
    if isinstance(saved, dict) or isinstance(env, dict):
        if not (isinstance(saved, dict) and isinstance(env, dict)):
            why = f"observations {saved}, but the env's are {env}"
        else:
            bad = [k for k in saved if k not in env or not _fits(saved[k], env[k])]
            if not bad:
                return
            k = bad[0]
            why = (f"observations whose {k!r} has shape {saved[k]}, but the env's "
                   + (f"have shape {env[k]}" if k in env else f"have no {k!r} (keys {sorted(env)})"))
    elif _fits(saved, env):
        return
    else:
        why = f"observations of shape {saved}, but the env's observations have shape {env}"
    raise SpacesMismatchError(
        f"VecNormalize statistics {source} are for {why}: they are another env's statistics. "
        "Pass the ones saved with this agent: vec_normalize=PATH or --rl-vec-normalize PATH "
        "(a zoo folder keeps them as <Env>/vecnormalize.pkl); or vec_normalize=None / "
        "--rl-vec-normalize none if it was trained without")


class NormalizedPolicy(PolicyWrapper):
    """Observations normalised with a ``VecNormalize``'s statistics before ``policy``
    (its ``normalize_obs``, bit for bit). ``trusted``: see :func:`load_vec_normalize`.
    Statistics for other observations than the env's are an error naming both shapes
    (:func:`check_stats_fit`) when it is bound to the env, or at its first call."""

    def __init__(self, policy: CorePolicy, vec_normalize: Any, *, trusted: bool = False) -> None:
        super().__init__(policy)
        self.vec_normalize = load_vec_normalize(vec_normalize, trusted=trusted)
        self.stats_source = (repr(str(_stats_file(Path(vec_normalize))))
                             if isinstance(vec_normalize, (str, os.PathLike))
                             else "(the VecNormalize given)")
        self._scale: tuple[np.ndarray, np.ndarray, float] | None = None
        self._checked = False

    def check_observations(self, observations: Any) -> None:
        """Stop now if the statistics are not for ``observations`` (a space or a batch)."""
        check_stats_fit(self.vec_normalize, observations, self.stats_source)
        self._checked = True

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        self.check_observations(observation_space)
        super().bind(observation_space, action_space)
        # Read once per rollout: the statistics do not change within one (training is off).
        self._scale = _obs_scale(self.vec_normalize)

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        if not self._checked:  # called without being bound to an env
            self.check_observations(obs)
        scale = self._scale
        if scale is None or isinstance(obs, dict):
            return self.policy.act(self.vec_normalize.normalize_obs(obs), states)
        mean, std, clip = scale
        return self.policy.act(np.clip((obs - mean) / std, -clip, clip).astype(np.float32), states)


def normalizes(policy: Any) -> bool:
    """Whether ``policy`` normalises its observations (a VecNormalize in front of it).

    >>> from pytest_rlaudit.world.agents import as_policy
    >>> normalizes(as_policy("random"))
    False
    """
    while policy is not None:
        if isinstance(policy, NormalizedPolicy):
            return True
        policy = policy.__dict__.get("policy") if isinstance(policy, PolicyWrapper) else None
    return False


def _stack_axis(space: spaces.Box) -> int:
    """SB3's ``VecFrameStack`` rule: channel-first images stack on their first axis,
    everything else (channel-last images, vectors) on the last."""
    shape = space.shape
    is_image = len(shape) == 3 and space.dtype == np.uint8
    return 0 if is_image and int(np.argmin(shape)) == 0 else len(shape) - 1


def stacked_space(space: spaces.Space[Any], n_stack: int) -> spaces.Box:
    """The observation space of ``n_stack`` stacked frames of ``space``.

    >>> stacked_space(spaces.Box(0, 255, (8, 8, 3), dtype=np.uint8), 4).shape
    (8, 8, 12)
    """
    if not isinstance(space, spaces.Box):
        raise PolicyError(f"frame_stack needs array observations (a Box space); this env "
                          f"gives {space}")
    axis = _stack_axis(space)
    return spaces.Box(np.repeat(space.low, n_stack, axis=axis),
                      np.repeat(space.high, n_stack, axis=axis), dtype=space.dtype)


class FrameStackPolicy(PolicyWrapper):
    """The last ``n_stack`` observations, stacked as SB3's ``VecFrameStack`` stacks them
    (zeros before the episode's first frame, the newest frame last), fed to ``policy``.

    Stateful: each episode keeps its own stack, so an action never depends on other
    episodes sharing the call.
    """

    def __init__(self, policy: CorePolicy, n_stack: int) -> None:
        super().__init__(policy)
        if isinstance(n_stack, bool) or not isinstance(n_stack, (int, np.integer)) or n_stack < 1:
            raise PolicyError(f"frame_stack must be an integer >= 1, got {n_stack!r}")
        self.n_stack = int(n_stack)
        self.stateful = True
        self._axis = 0

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        stacked = stacked_space(observation_space, self.n_stack)
        self._axis = _stack_axis(cast(spaces.Box, observation_space))  # stacked_space checked
        BasePolicy.bind(self, observation_space, action_space)
        _bind(self.policy, stacked, action_space)

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        inner = self.policy.initial_state(seed) if self.policy.stateful else None
        return (None, inner)  # the stack is made from the episode's first frame

    def restart_state(self, state: Any) -> Any:
        """``state`` with the stack emptied, the wrapped policy's state kept: what the
        runner asks for where the agent's episode restarts within the audit's (an Atari
        life lost, where SB3's ``VecFrameStack`` zeroes the stack of a done env)."""
        return (None, state[1])

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        assert states is not None
        axis = self._axis
        width = obs.shape[1 + axis]
        keep = (slice(None),) * axis + (slice(width, None),)  # all but the oldest frame
        stacks = []
        for row, (stack, _) in zip(obs, states, strict=True):
            if stack is None:
                shape = list(row.shape)
                shape[axis] *= self.n_stack
                stack = np.zeros(shape, dtype=row.dtype)
            stacks.append(np.concatenate([stack[keep], row], axis=axis))
        batch = np.stack(stacks)
        inner = [s[1] for s in states] if self.policy.stateful else None
        actions, inner = self.policy.act(batch, inner)
        return actions, [(stack, inner[i] if inner is not None else None)
                         for i, stack in enumerate(stacks)]
