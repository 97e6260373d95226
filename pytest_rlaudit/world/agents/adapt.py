"""``as_policy``: whatever a user passes as ``agent``, as a :class:`~.base.Policy`; and
``env_for``: the env it is audited on, with what the agent needs of it applied."""

from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path
from typing import Any

from ..._imports import import_module
from ...errors import PolicyError
from ..envs import AuditEnv, EnvLike, env_spec
from .base import CorePolicy, Policy
from .callables import CallablePolicy, RandomPolicy
from .missing import agent_not_found
from .needs import EnvNeeds
from .preprocess import FrameStackPolicy, NormalizedPolicy, PolicyWrapper, stacked_space
from .sb3 import SB3Policy, _is_sb3
from .sb3_load import load_sb3, trained_with_vec_normalize
from .torch import TorchPolicy, _is_torch_module

__all__ = ["as_policy", "env_for", "check_agent_path"]

HUB_PREFIX = "hf://"

#: Files of deployed policies, by suffix: ONNX (onnxruntime) and TorchScript (torch.jit).
DEPLOYED_SUFFIXES = frozenset({".onnx", ".pt", ".pth", ".ts", ".torchscript"})


def _import_object(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        obj: Any = import_module(module_name)
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


def _is_import(text: str) -> bool:
    if text.startswith(HUB_PREFIX) or Path(text).exists() or text.endswith(".zip"):
        return False
    return ":" in text and not (len(text) > 1 and text[1] == ":")  # not a Windows drive


def check_agent_path(text: str) -> None:
    """An :class:`~pytest_rlaudit.errors.AgentNotFoundError` now if ``text`` (an agent as
    :func:`as_policy` reads text) names a file or folder that does not exist, before
    anything is loaded; ``"random"``, ``hf://`` and ``"module:attribute"`` name none.

    >>> check_agent_path("random"), check_agent_path("agents:robust")
    (None, None)
    """
    if text == "random" or text.startswith(HUB_PREFIX) or _is_import(text) or Path(text).exists():
        return
    raise agent_not_found(text, "agent path")


def _is_saved_run(text: str) -> bool:
    """Whether ``text`` names a saved run (a zoo folder, a ``.zip``, ``hf://``), whose
    own convention decides ``deterministic=None``; not a deployed file or an import."""
    if text.startswith(HUB_PREFIX):
        return True
    return Path(text).suffix.lower() not in DEPLOYED_SUFFIXES and not _is_import(text)


def _made_spaces(env: EnvLike | None, needs: EnvNeeds) -> Any:
    """A function giving the spaces of ``env`` with the agent's needs applied, made once
    (None without an env)."""
    if env is None:
        return None

    @functools.cache
    def made() -> tuple[Any, Any]:
        env_made = needs.apply(env).make()
        try:
            return env_made.observation_space, env_made.action_space
        finally:
            env_made.close()

    return made


def _spaces_of(made: Any, frame_stack: int) -> Any:
    """A function giving the spaces the agent's network takes on the env ``made`` gives
    (None without an env): they stand in for pickled spaces that cannot be read."""
    if made is None:
        return None

    def spaces() -> tuple[Any, Any]:
        obs, act = made()
        return (stacked_space(obs, frame_stack) if frame_stack else obs), act

    return spaces


def _registered(env_id: str | None) -> str | None:
    """``env_id`` if gymnasium can make it here (a saved run's own env, whose spaces stand
    in where its file does not describe them: a goal-conditioned agent's Dict), else None."""
    import gymnasium as gym

    return env_id if env_id is not None and env_id in gym.registry else None


def _from_path(text: str, *, algo: str | None, vec_normalize: Any, frame_stack: int | None,
               env: EnvLike | None, deterministic: bool | None, torch_threads: int | None,
               name: str | None, trusted: bool) -> Policy:
    """A saved run (zoo folder, Hub download, model zip) as a policy."""
    from .zoo import read_saved_run

    label = None
    if text.startswith(HUB_PREFIX):
        from .hub import download

        label = text[len(HUB_PREFIX):]
        text = str(download(label))
    run = read_saved_run(text, trusted=trusted)
    label = label or run.label
    stack = run.frame_stack if frame_stack is None else frame_stack
    env_spaces = _made_spaces(env, run.needs)
    model = load_sb3(run.model, algo or run.algo,
                     spaces_of_env=_spaces_of(env_spaces, stack), trusted=trusted,
                     config_kwargs=run.policy_kwargs,
                     spaces_of_trained=_spaces_of(_made_spaces(
                         _registered(run.needs.trained_on), run.needs), stack))
    if deterministic is None:
        # The zoo's convention (enjoy.py): Atari agents are evaluated sampling their
        # actions, everything else taking the most likely one; the name says so.
        deterministic = not run.atari
        if run.atari:
            label = f"{label}, stochastic"
    name = name or f"{type(model).__name__}({label})"
    auto = isinstance(vec_normalize, str) and vec_normalize == "auto"
    stats = run.vec_normalize if auto else vec_normalize
    if auto and stats is None:
        _check_no_stats_needed(model, repr(str(run.model)))
    policy = _preprocessed(SB3Policy(model, deterministic=deterministic, name=name,
                                     torch_threads=torch_threads), stats, stack,
                          trusted=trusted)
    if env_spaces is not None and isinstance(policy, NormalizedPolicy):
        policy.check_observations(env_spaces()[0])  # another env's statistics: say so now
    policy.env_needs = run.needs
    return policy


def _deployed(text: str, *, name: str | None, torch_threads: int | None) -> Policy:
    """A deployed model file (ONNX, TorchScript) as a policy."""
    if not Path(text).is_file():
        raise PolicyError(f"no such model file: {text!r}")
    if Path(text).suffix.lower() == ".onnx":
        from .onnx import OnnxPolicy

        return OnnxPolicy(text, name, threads=torch_threads)
    from .torchscript import TorchScriptPolicy

    return TorchScriptPolicy(text, name, threads=torch_threads)


def _check_no_stats_needed(model: Any, what: str) -> None:
    """Stop at a model trained with VecNormalize whose statistics were not found, rather
    than audit it silently on unscaled observations (and rate it on that)."""
    if trained_with_vec_normalize(model):
        raise PolicyError(
            f"{what} was trained inside a VecNormalize (its saved training state says so), but "
            "no statistics were found beside it: without them it sees unscaled observations. "
            "Pass them: vec_normalize=PATH or --rl-vec-normalize PATH (a zoo folder keeps them "
            "as <Env>/vecnormalize.pkl); or vec_normalize=None / --rl-vec-normalize none if it "
            "normalised rewards only"
        )


def _preprocessed(policy: Policy, vec_normalize: Any, frame_stack: int | None, *,
                  trusted: bool = False) -> Policy:
    """``policy`` behind a frame stack, behind VecNormalize (the zoo's order)."""
    if frame_stack:
        policy = FrameStackPolicy(policy, frame_stack)
    if vec_normalize is not None:
        policy = NormalizedPolicy(policy, vec_normalize, trusted=trusted)
    return policy


def as_policy(agent: Any, *, algo: str | None = None, vec_normalize: Any = "auto",
              deterministic: bool | None = None, name: str | None = None,
              frame_stack: int | None = None, checkpoint: str | os.PathLike[str] | None = None,
              env: EnvLike | None = None, torch_threads: int | None = 1,
              trusted: bool = False) -> Policy:
    """Adapt ``agent`` to the batched :class:`Policy` protocol.

    ``agent``: an SB3 model, a path to an SB3 ``.zip`` or to an rl-baselines3-zoo
    folder, ``hf://<org>/<repo>`` (a model on the Hugging Face Hub), a path to a deployed
    policy: ``.onnx`` (run with onnxruntime, the ``[onnx]`` extra) or a TorchScript
    ``.pt`` / ``.pth`` / ``.ts`` (``torch.jit.load``), whose output is the action (see
    :mod:`.exported`), a torch
    ``nn.Module``, a callable ``obs_batch -> action_batch``, ``"random"``, a
    ``"module:attribute"`` string naming one of these, or a :class:`Policy`. An object
    with the members of :class:`~.base.CorePolicy` only (``act``, ``initial_state``,
    ``reset``, ``stateful``) is completed into a :class:`Policy` (a
    :class:`~.preprocess.PolicyWrapper` around it, with the defaults of
    :class:`~.base.BasePolicy`): the policy returned always has every member.

    - ``algo`` names the SB3 algorithm of a ``.zip`` when neither the file nor its
      folder tells.
    - ``vec_normalize``: ``"auto"`` finds the statistics a zoo folder or a ``.zip``'s
      folder holds (and a model object's attached ``VecNormalize``); a path or a
      ``VecNormalize``; ``None`` for none (a deployed ``.onnx`` or TorchScript file has
      none unless given).
    - ``deterministic=False`` samples SB3 actions, each episode from its own stream;
      ``True`` takes the most likely action. ``None`` (default): ``True``, except for a
      saved run (zoo folder, Hub download) of an Atari agent, which is sampled, as the
      rl-baselines3-zoo evaluates those (its name then says ``stochastic``).
    - ``name`` labels the agent in reports (default: the algorithm and the file, or the
      class of the object).
    - ``frame_stack`` stacks that many observations as SB3's ``VecFrameStack`` did in
      training (a zoo folder's config sets it).
    - ``checkpoint``: a torch state-dict file loaded into the ``nn.Module`` given.
    - ``env``: the env it will be audited on; an SB3 ``.zip`` takes its spaces (see
      ``trusted``), and without it only a file that describes its own spaces in readable
      fields (``Box``, ``Discrete``) loads.
    - ``trusted``: ``False`` (default) loads an SB3 ``.zip`` (a zoo folder's, an
      ``hf://`` download's) without running anything pickled in it: the weights with
      ``torch.load(weights_only=True)``, the spaces from ``env``, the policy class and
      ``policy_kwargs`` (``net_arch``, ``activation_fn``...) from the file's readable
      fields and allow-lists, and VecNormalize statistics through an allow-listed
      unpickler (see :mod:`.untrusted`); a zoo folder's ``config.yml`` is read as data, its
      env wrappers taken by name from an allow-list (:func:`.needs.import_wrapper`). A model
      whose own classes need its pickles, or a config naming another wrapper, is an error
      naming ``trusted=True``, which loads the way SB3 and the zoo do and runs them: for
      files one trusts. ``--rl-trusted`` on the command line.
    - ``torch_threads``: see the package docstring (for an ONNX file: onnxruntime's
      intra-op threads).

    >>> as_policy("random").name
    'random'
    >>> as_policy(42)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PolicyError: cannot use int as an agent; ...
    """
    if isinstance(agent, (str, os.PathLike)):
        return _from_text(os.fspath(agent), algo=algo, vec_normalize=vec_normalize,
                          deterministic=deterministic, name=name, frame_stack=frame_stack,
                          checkpoint=checkpoint, env=env, torch_threads=torch_threads,
                          trusted=trusted)
    deterministic = True if deterministic is None else deterministic
    if _is_sb3(agent):
        if isinstance(vec_normalize, str) and vec_normalize == "auto":
            get = getattr(agent, "get_vec_normalize_env", None)
            vec_normalize = get() if callable(get) else None
            if vec_normalize is None:
                _check_no_stats_needed(agent, f"the {type(agent).__name__} model")
        return _preprocessed(SB3Policy(agent, deterministic=deterministic, name=name,
                                       torch_threads=torch_threads), vec_normalize, frame_stack,
                             trusted=trusted)
    own_stats = None if isinstance(vec_normalize, str) and vec_normalize == "auto" else vec_normalize
    if _is_torch_module(agent):
        if checkpoint is not None:
            from .checkpoints import load_checkpoint

            agent = load_checkpoint(agent, checkpoint)
        # Sampled torch actions come from a CleanRL get_action_and_value, seeded per episode.
        rule = "auto" if deterministic else "get_action_and_value"
        return _preprocessed(TorchPolicy(agent, name=name, torch_threads=torch_threads,
                                         rule=rule), own_stats, frame_stack, trusted=trusted)
    if checkpoint is not None:
        raise PolicyError(f"checkpoint= loads a state dict into a torch nn.Module; the agent is "
                          f"a {type(agent).__name__}")
    if isinstance(agent, Policy):
        return _named(_preprocessed(agent, own_stats, frame_stack, trusted=trusted), name)
    if isinstance(agent, CorePolicy):
        # A policy of one's own with the narrow protocol only: completed, in a wrapper
        # that has every member (so the user's object is never renamed either).
        completed = PolicyWrapper(agent)
        if name is not None:
            completed.name = name
        return _preprocessed(completed, own_stats, frame_stack, trusted=trusted)
    if callable(agent):
        return _preprocessed(CallablePolicy(agent, name=name), own_stats, frame_stack, trusted=trusted)
    raise PolicyError(
        f"cannot use {type(agent).__name__} as an agent; pass an SB3 model, a path to an SB3 "
        ".zip or an rl-baselines3-zoo folder, 'hf://<org>/<repo>', a .onnx or TorchScript "
        "file, a torch nn.Module, a "
        "callable obs_batch -> action_batch, 'random', a 'module:attribute' string, or a Policy"
    )


def _from_text(text: str, *, algo: str | None, vec_normalize: Any, deterministic: bool | None,
               name: str | None, frame_stack: int | None,
               checkpoint: str | os.PathLike[str] | None, env: EnvLike | None,
               torch_threads: int | None, trusted: bool) -> Policy:
    """:func:`as_policy` of a string or path: ``"random"``, a deployed file, a
    ``"module:attribute"`` import, or a saved SB3 model (a ``.zip``, a zoo folder, ``hf://``)."""
    if text == "random":
        return _named(RandomPolicy(), name)
    if deterministic is None and not _is_saved_run(text):
        deterministic = True
    if not text.startswith(HUB_PREFIX) and Path(text).suffix.lower() in DEPLOYED_SUFFIXES:
        if deterministic is False:
            raise PolicyError(
                f"{text}: a deployed {Path(text).suffix} policy's output is its action, so "
                "it cannot be sampled: deterministic=False (--rl-stochastic) applies to "
                "SB3 models only; audit the file without it, or the SB3 .zip it was "
                "exported from with it")
        own = None if isinstance(vec_normalize, str) and vec_normalize == "auto" else vec_normalize
        return _preprocessed(_deployed(text, name=name, torch_threads=torch_threads),
                             own, frame_stack, trusted=trusted)
    if _is_import(text):
        return as_policy(_import_object(text), algo=algo, deterministic=deterministic,
                         vec_normalize=vec_normalize, name=name, frame_stack=frame_stack,
                         checkpoint=checkpoint, env=env, torch_threads=torch_threads,
                         trusted=trusted)
    return _from_path(text, algo=algo, vec_normalize=vec_normalize,
                      frame_stack=frame_stack, env=env, deterministic=deterministic,
                      torch_threads=torch_threads, name=name, trusted=trusted)


def _named(policy: Policy, name: str | None) -> Policy:
    """``policy`` under ``name``, without renaming an object the user still holds."""
    if name is None:
        return policy
    named = PolicyWrapper(policy)
    named.name = name
    return named


def env_for(policy: Policy, env: EnvLike) -> AuditEnv:
    """``env`` as an :class:`AuditEnv`, with what ``policy`` needs of it (a zoo folder's
    env_kwargs and env_wrapper) applied.

    >>> env_for(as_policy("random"), "CartPole-v1").name
    'CartPole-v1'
    """
    needs = policy.env_needs
    return needs.apply(env) if isinstance(needs, EnvNeeds) else env_spec(env)
