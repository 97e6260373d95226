"""What an agent needs of the env it is audited on: the keyword arguments and wrappers it
was trained with (an rl-baselines3-zoo folder's ``env_kwargs`` and ``env_wrapper``).

They belong to the env, not to the agent: the audit applies them to every env it makes,
the random reference's too, under the perturbations (the zoo wraps ``gym.make(id)``
before anything else, and perturbations disturb the env as trained).

>>> needs = EnvNeeds(wrappers=(("gymnasium.wrappers.TimeAwareObservation", {}),))
>>> needs.apply("CartPole-v1").make().observation_space.shape
(5,)
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from ..._optional import install_hint
from ...errors import AgentWarning, PolicyError
from ..atari import with_whole_games
from ..envs import AuditEnv, EnvLike, env_spec, recipe

__all__ = ["EnvNeeds", "import_wrapper"]

#: Wrapper modules of the zoo's older layouts and where they live now.
_MOVED = {"utils.wrappers": "rl_zoo3.wrappers"}


def import_wrapper(name: str) -> type:
    """The wrapper class ``package.module.Class`` a zoo config names (``env_wrapper``).

    >>> import_wrapper("gymnasium.wrappers.TimeAwareObservation").__name__
    'TimeAwareObservation'
    """
    module_name, _, attribute = str(name).rpartition(".")
    candidates = [module_name, _MOVED[module_name]] if module_name in _MOVED else [module_name]
    errors = []
    for candidate in candidates:
        try:
            wrapper: type = getattr(importlib.import_module(candidate), attribute)
            return wrapper
        except (ImportError, AttributeError, ValueError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    raise PolicyError(
        f"the agent was trained with the env wrapper {name!r}, which cannot be imported here "
        f"({'; '.join(errors)}); install the package that provides it (rl_zoo3's wrappers: "
        f"{install_hint(package='rl_zoo3')}), since the agent expects the observations it makes"
    )


def _check_opencv(name: str) -> None:
    """SB3's AtariWrapper resizes frames with OpenCV, imported when present and asserted
    on the first frame: say so here, with the extra that installs it."""
    try:
        importlib.import_module("cv2")
    except ImportError as exc:
        raise PolicyError(
            f"the agent was trained with the env wrapper {name!r}, which resizes frames with "
            f"OpenCV (cv2), not installed here: {install_hint('atari')}") from exc


@dataclass(frozen=True)
class EnvNeeds:
    """The env id an agent was trained on, and the ``gymnasium.make`` keyword arguments
    and wrappers (importable names with their keyword arguments) it expects."""

    trained_on: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def __post_init__(self) -> None:
        for name, _ in self.wrappers:
            import_wrapper(name)  # fail at load time, not in the first rollout
            if name.rpartition(".")[2] == "AtariWrapper":
                _check_opencv(name)

    def wrap(self, env: gym.Env) -> gym.Env:
        """``env`` inside the wrappers, innermost first."""
        for name, kwargs in self.wrappers:
            env = import_wrapper(name)(env, **dict(kwargs))
        return env

    def apply(self, env: EnvLike) -> AuditEnv:
        """``env`` as an :class:`AuditEnv` with the keyword arguments and wrappers applied
        (once: an AuditEnv they were applied to is returned as it is).

        Keyword arguments need an id or ``EnvSpec`` to pass to ``gymnasium.make``; with a
        factory they are named in an :class:`~pytest_rlaudit.errors.AgentWarning` instead.
        An env other than the one the agent was trained on is a warning, not an error
        (``LunarLander-v3`` for a zoo folder of ``LunarLander-v2``).
        """
        if isinstance(env, AuditEnv) and env.needs == self:
            return env
        source = env.source if isinstance(env, AuditEnv) else (
            env if isinstance(env, (str, EnvSpec)) else None)
        # One spec, made (and checked) once: with the keyword arguments when they can go in.
        spec = (env_spec(source, **dict(self.env_kwargs)) if self.env_kwargs and source is not None
                else env_spec(env))
        self._note_other_env(spec.name)
        if self.env_kwargs and source is None:
            warnings.warn(AgentWarning(
                f"the agent was trained with env_kwargs {dict(self.env_kwargs)}, which cannot "
                f"be passed to the env factory {spec.name!r}: make sure it builds the env with "
                "them"), stacklevel=3)
        # An Atari agent's wrappers end its episodes at a lost life and clip its rewards:
        # the audit's episode is a whole game with its own score, as the zoo scores it.
        factory = ((lambda: with_whole_games(spec.make, self.wrap)) if self.wrappers
                   else spec.factory)
        made = None if spec.recipe is None else recipe(
            spec.recipe, *(part for wrapper in self.wrappers for part in wrapper))
        return AuditEnv(spec.name, factory, source=spec.source, needs=self, recipe=made)

    def _note_other_env(self, audited: str) -> None:
        if not self.trained_on or audited == self.trained_on or audited not in gym.registry:
            return
        same = audited.split("-v")[0] == self.trained_on.split("-v")[0]
        warnings.warn(AgentWarning(
            f"the agent was trained on {self.trained_on} and is audited on {audited}"
            + (" (another version of the same env: fine when only the version number moved)"
               if same else ": make sure that is the env you mean")), stacklevel=3)
