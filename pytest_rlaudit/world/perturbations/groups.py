"""An observation perturbation on part of the observation only: some elements of an array,
some keys of a Dict. What :func:`pytest_rlaudit.attribute` runs to ask which sensor a
failure comes through.

The scenario's own wrapper runs on the whole observation, as it always does (the same
draws, from the same stream); what the agent sees is then its output on the chosen part
and the clean observation elsewhere. So the perturbation on every part is the scenario
itself, bit for bit, and two parts' runs share their noise (common random numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec, WrapperSpec

from ...errors import PerturbationError
from .base import Perturbation

__all__ = ["OnPart", "Unperturbed"]


class Unperturbed(Perturbation, gym.Wrapper):
    """Innermost layer of :class:`OnPart`: keeps the observation before the scenario's
    wrappers see it (it draws nothing, so the scenario's layers keep their streams)."""

    LOCKSTEP = True
    DRAWS = False

    def __init__(self, env: gym.Env) -> None:
        self._init_perturbation()
        gym.Wrapper.__init__(self, env)
        self.latest: Any = None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self.latest = obs
        return obs, info

    def observe(self, obs: Any) -> Any:
        self.latest = obs
        return obs

    step = Perturbation._step_by_hooks


class OnPart(Perturbation, gym.Wrapper):
    """``perturbation(env, **params)`` (an observation perturbation: noise, delay, dropped
    frames, a schedule of them) seen by the agent on ``part`` only: flat element indices
    of an array observation, or keys of a Dict one. Elsewhere the agent sees the clean
    observation.

    >>> import gymnasium as gym
    >>> from pytest_rlaudit.perturbations import ObservationNoise
    >>> env = OnPart(gym.make("CartPole-v1"), ObservationNoise, {"sigma": 1.0}, part=(2, 3))
    >>> clean = gym.make("CartPole-v1")
    >>> o, _ = env.reset(seed=0); c, _ = clean.reset(seed=0)
    >>> o, c = env.step(0)[0], clean.step(0)[0]
    >>> bool((o[:2] == c[:2]).all()), bool((o[2:] != c[2:]).all())
    (True, True)
    """

    LOCKSTEP = True
    DRAWS = False

    def __init__(self, env: gym.Env, perturbation: Callable[..., gym.Env],
                 params: Mapping[str, Any], part: Sequence[int] | Sequence[str]) -> None:
        self._init_perturbation(perturbation=perturbation, params=dict(params), part=tuple(part))
        self.clean = Unperturbed(env)
        inner = perturbation(self.clean, **params)
        gym.Wrapper.__init__(self, inner)
        space = env.observation_space
        self.keys: tuple[str, ...] | None = None
        self.dims: np.ndarray | None = None
        if isinstance(space, gym.spaces.Dict):
            unknown = [k for k in part if k not in space.spaces]
            if unknown or not part:
                raise PerturbationError(
                    f"OnPart: part must name keys of the Dict observation "
                    f"({', '.join(map(str, space.spaces))}), got {list(part)!r}")
            self.keys = tuple(str(k) for k in part)
        else:
            size = int(np.prod(space.shape or (1,)))
            dims = np.asarray(part)
            if dims.ndim != 1 or not len(dims) or dims.dtype.kind not in "iu" or \
                    dims.min() < 0 or dims.max() >= size:
                raise PerturbationError(
                    f"OnPart: part must be element indices 0..{size - 1} of the observation, "
                    f"got {list(part)!r}")
            self.dims = dims

    @property
    def spec(self) -> EnvSpec | None:  # type: ignore[override]
        # The layers inside are this wrapper's own: gymnasium, rebuilding an env from its
        # spec wrapper by wrapper (gym.make(env.spec)), must see this wrapper alone.
        base = self.clean.env.spec
        if base is None:
            return None
        spec = deepcopy(base)
        kwargs = {k: v for k, v in self._saved_kwargs.items() if k != "env"}
        spec.additional_wrappers += (WrapperSpec(
            self.class_name(), f"{type(self).__module__}:{type(self).__name__}", kwargs),)
        return spec

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return self._merge(obs, self.clean.latest), info

    def observe(self, obs: Any) -> Any:
        return self._merge(obs, self.clean.latest)

    def _merge(self, seen: Any, clean: Any) -> Any:
        if self.keys is not None:
            out = dict(clean)
            for key in self.keys:
                out[key] = seen[key]
            return out
        merged = np.array(clean, copy=True)
        flat, perturbed = merged.reshape(-1), np.asarray(seen).reshape(-1)
        flat[self.dims] = perturbed[self.dims]
        return merged

    step = Perturbation._step_by_hooks
