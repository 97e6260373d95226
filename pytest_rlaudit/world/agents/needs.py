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
import importlib.util
import inspect
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from ..._optional import install_hint
from ...errors import AgentWarning, PolicyError, UntrustedFileError
from ..atari import looks_atari, with_whole_games
from ..envs import AuditEnv, EnvLike, env_spec, recipe
from .allow_lists import WRAPPER_WORDS, WRAPPERS_OUTSIDE, allowed_wrapper_module
from .untrusted import TRUST_HINT

__all__ = ["EnvNeeds", "import_wrapper"]

#: Wrapper modules of the zoo's older layouts and where they live now.
_MOVED = {"utils.wrappers": "rl_zoo3.wrappers"}
#: SB3's Atari wrappers that call the ALE's own methods (action meanings, lives).
_ATARI_MODULE = "stable_baselines3.common.atari_wrappers"
_NEEDS_ALE = frozenset({"AtariWrapper", "NoopResetEnv", "FireResetEnv", "EpisodicLifeEnv"})


def _in(config: str | None) -> str:
    return f"{config!r}: " if config else ""


def import_wrapper(name: str, *, trusted: bool = True, config: str | None = None) -> type:
    """The wrapper class ``package.module.Class`` a zoo config names (``env_wrapper``).

    ``trusted=False`` (a folder loaded by default, whose ``config.yml`` is ``config``):
    the name is checked against the allow-list (:data:`.allow_lists.WRAPPER_MODULES`)
    before anything is imported, and what it names must be a ``gymnasium.Wrapper`` class
    of that library; anything else is an
    :class:`~pytest_rlaudit.errors.UntrustedFileError` naming ``config``, the name and
    ``trusted=True`` / ``--rl-trusted``. ``trusted=True`` imports any name, as the zoo
    does (a name written in one's own code is one's own).

    >>> import_wrapper("gymnasium.wrappers.TimeAwareObservation", trusted=False).__name__
    'TimeAwareObservation'
    >>> import_wrapper("pydoc.pipepager", trusted=False, config="config.yml")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.UntrustedFileError: 'config.yml': env_wrapper names 'pydoc.pipepager', ...
    """
    name = str(name)
    module_name, _, attribute = name.rpartition(".")
    if not trusted:
        return _allowed_wrapper(name, config)
    candidates = [module_name, _MOVED[module_name]] if module_name in _MOVED else [module_name]
    errors = []
    for candidate in candidates:
        try:
            wrapper: type = getattr(importlib.import_module(candidate), attribute)
            return wrapper
        except (ImportError, AttributeError, ValueError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    raise _cannot_import(name, errors, config)


def _cannot_import(name: str, errors: list[str], config: str | None) -> PolicyError:
    return PolicyError(
        f"{_in(config)}the agent was trained with the env wrapper {name!r}, which cannot be "
        f"imported here ({'; '.join(errors)}); install the package that provides it (rl_zoo3's "
        f"wrappers: {install_hint(package='rl_zoo3')}), since the agent expects the "
        "observations it makes")


def _refused(name: str, why: str, config: str | None) -> UntrustedFileError:
    return UntrustedFileError(
        f"{_in(config)}env_wrapper names {name!r}, {why}; a default load imports only the env "
        f"wrappers of an allow-list, by name ({WRAPPER_WORDS}), since importing any other "
        "module runs code the folder chose. Remove it from the file, or, " + TRUST_HINT)


def _allowed_wrapper(name: str, config: str | None) -> type:
    """:func:`import_wrapper` of an untrusted name: from the allow-list, or refused before
    any import (importing a module runs it)."""
    module_name, _, attribute = name.rpartition(".")
    # The zoo's old spelling is rl_zoo3's module, never imported as written: a folder
    # (or the working directory) can hold a `utils/wrappers.py` of its own.
    module_name = _MOVED.get(module_name, module_name)
    allowed = allowed_wrapper_module(f"{module_name}.{attribute}")
    if allowed is None:
        why = (f"which {WRAPPERS_OUTSIDE[attribute]} (outside the env: an audit has no use "
               "for it)" if attribute in WRAPPERS_OUTSIDE else "which is not on the allow-list")
        raise _refused(name, why, config)
    module, package = allowed
    _check_not_shadowed(name, package[:-1], config)
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        raise _cannot_import(name, [f"{type(exc).__name__}: {exc}"], config) from exc
    wrapper = getattr(imported, attribute, None)
    if wrapper is None:
        raise PolicyError(f"{_in(config)}env_wrapper names {name!r}, but {module} has no "
                          f"{attribute!r} here (another version of {package[:-1]}?)")
    if not (inspect.isclass(wrapper) and issubclass(wrapper, gym.Wrapper)
            and wrapper.__module__.startswith(package)):
        raise _refused(name, f"which is not one of {package[:-1]}'s env wrapper classes", config)
    return wrapper


def _check_not_shadowed(name: str, package: str, config: str | None) -> None:
    """Refuse an allow-listed package that is not imported yet and would be found inside
    the saved run's own folder (a ``rl_zoo3/`` it carries, on ``sys.path`` or in the
    working directory) rather than installed: finding a top-level package runs nothing."""
    if package in sys.modules or config is None:
        return
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return  # the import below says what is missing
    origin = getattr(spec, "origin", None)
    run = Path(config).resolve().parent.parent  # zoo: <run>/<Env>/config.yml
    if origin and Path(origin).resolve().is_relative_to(run):
        raise _refused(name, f"whose package {package} would be imported from {origin}, "
                             "inside the agent's own folder, not from the installed library",
                       config)


def _check_kwargs(wrapper: type, name: str, kwargs: Mapping[str, Any],
                  config: str | None) -> None:
    """The keyword arguments a config gives a wrapper, checked against its signature at
    load time (binding runs nothing), not found wrong in the first rollout."""
    try:
        signature = inspect.signature(wrapper)
    except (TypeError, ValueError):  # no signature to read: the call will tell
        return
    try:
        bound = signature.bind(None, **kwargs)
    except TypeError as exc:
        raise PolicyError(f"{_in(config)}env_wrapper {name!r} cannot take the keyword arguments "
                          f"{dict(kwargs)!r} ({exc}); it takes {signature}") from None
    # A function (TransformObservation's func) cannot be data: YAML gives text, never run.
    for key, value in bound.arguments.items():
        annotation = signature.parameters[key].annotation
        if "Callable" in str(annotation) and value is not None and not callable(value):
            raise PolicyError(
                f"{_in(config)}env_wrapper {name!r} takes a function as {key}, and the file "
                f"gives {value!r}, which is data: a config cannot hold a function, and its "
                "text is never evaluated. Wrap the env with it in your own code instead (an "
                "env factory, or the rl_env fixture)")


def _not_atari(name: str, env: str, config: str | None) -> str:
    return (f"{_in(config)}env_wrapper {name!r} is one of SB3's wrappers for Atari (ALE) "
            f"games, but {env} is not one: audit the agent on the Atari env it was trained "
            "on, or, if it was not trained on Atari frames, remove the wrapper from the file")


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
    and wrappers (importable names with their keyword arguments) it expects.

    ``trusted``: whether the wrappers' names may be imported whatever they are (names
    written in one's own code, or a folder loaded with ``trusted=True``); a zoo folder
    loaded by default gives False, and then only allow-listed wrappers are imported
    (:func:`import_wrapper`), here, when the needs are rebuilt in a worker process, and
    wherever they are applied. ``config``: the ``config.yml`` they were read from, named
    in errors. Neither changes what env is made, so neither is compared."""

    trained_on: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    trusted: bool = field(default=True, compare=False)
    config: str | None = field(default=None, compare=False)
    #: the envs already warned of as not the one trained on: said once per agent, not at
    #: each apply (its spaces are made once at load, its env again for the audit)
    noted: set[str] = field(default_factory=set, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, kwargs in self.wrappers:  # fail at load time, not in the first rollout
            wrapper = import_wrapper(name, trusted=self.trusted, config=self.config)
            _check_kwargs(wrapper, name, kwargs, self.config)
            if getattr(wrapper, "__module__", None) == _ATARI_MODULE:
                self._check_atari_env(name)
            if name.rpartition(".")[2] == "AtariWrapper":
                _check_opencv(name)

    def _check_atari_env(self, name: str) -> None:
        """An Atari wrapper on an env registered here that is not an ALE game (a CartPole
        folder whose config.yml names AtariWrapper): said at load time."""
        trained_on = self.trained_on
        if (name.rpartition(".")[2] not in _NEEDS_ALE or not trained_on
                or looks_atari(trained_on) or trained_on not in gym.registry):
            return
        entry = gym.registry[trained_on].entry_point
        if "ale_py" not in str(getattr(entry, "__module__", entry)):
            raise PolicyError(_not_atari(name, trained_on, self.config))

    def wrap(self, env: gym.Env) -> gym.Env:
        """``env`` inside the wrappers, innermost first."""
        for name, kwargs in self.wrappers:
            wrapper = import_wrapper(name, trusted=self.trusted, config=self.config)
            if (getattr(wrapper, "__module__", None) == _ATARI_MODULE
                    and name.rpartition(".")[2] in _NEEDS_ALE
                    and not hasattr(env.unwrapped, "get_action_meanings")):
                spec = getattr(env, "spec", None)
                raise PolicyError(_not_atari(name, spec.id if spec is not None
                                             else type(env.unwrapped).__name__, self.config))
            env = wrapper(env, **dict(kwargs))
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
        # the agent's wrappers and keyword arguments go round one env: no batch takes them
        batch = spec.batch if not self.wrappers and not self.env_kwargs else None
        if batch is None and spec.batch is not None and spec.batch.given is not None:
            raise PolicyError(
                f"the agent needs its env made with {self._described()}, which cannot be "
                f"applied to {spec.batch.given.label}: build them into the envs it steps, or "
                "pass the env's id or a factory of one env")
        return AuditEnv(spec.name, factory, source=spec.source, needs=self, recipe=made,
                        batch=batch)

    def _described(self) -> str:
        """The keyword arguments and wrappers this agent's env needs, in words."""
        parts = [f"env_kwargs {dict(self.env_kwargs)}"] if self.env_kwargs else []
        parts += [f"the wrapper {name}" for name, _ in self.wrappers]
        return " and ".join(parts)

    def _note_other_env(self, audited: str) -> None:
        if (not self.trained_on or audited == self.trained_on or audited not in gym.registry
                or audited in self.noted):
            return
        self.noted.add(audited)
        same = audited.split("-v")[0] == self.trained_on.split("-v")[0]
        warnings.warn(AgentWarning(
            f"the agent was trained on {self.trained_on} and is audited on {audited}"
            + (" (another version of the same env: fine when only the version number moved)"
               if same else ": make sure that is the env you mean")), stacklevel=3)
