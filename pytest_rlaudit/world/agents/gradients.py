"""Differentiable action scores of torch-backed agents, for gradient attacks
(``adversarial_obs``, :class:`~pytest_rlaudit.world.perturbations.AdversarialObservation`).

:func:`action_scores` turns a policy into a map ``obs batch -> scores`` that torch can
differentiate with respect to the observation:

======================================  =================================================
agent                                   scores
======================================  =================================================
SB3 PPO, A2C, TRPO, MaskablePPO         Discrete: the action logits; Box: the mean
                                        (deterministic) action, ``get_distribution(x)``
SB3 DQN / sb3-contrib QRDQN             Q-values (QRDQN: the mean over quantiles)
SB3 SAC, TD3, DDPG, TQC, CrossQ, ARS    Box: the deterministic action, in the policy's
                                        own (squashed) units; ARS Discrete: its logits
torch ``nn.Module`` (TorchPolicy)       the rule's output (see :class:`~.torch.TorchPolicy`)
                                        before argmax or clipping; ``get_action`` on
                                        Discrete: log of its action probabilities
======================================  =================================================

A :class:`~.preprocess.NormalizedPolicy` is unwrapped and its VecNormalize statistics are
applied inside the map (``clip((obs - mean) / sqrt(var + eps))``), so gradients reach
the raw observation. Not supported, each with a :class:`~pytest_rlaudit.errors.PolicyError`
that says so: agents without gradients (callables, ``"random"``), frame-stacked agents
(the stack holds the episode's earlier frames, which the attack cannot see), recurrent SB3
policies (the LSTM state), and ``get_action_and_value`` modules (their action is a sample).

torch is imported only when a map is made.

>>> import numpy as np, torch
>>> from gymnasium import spaces
>>> from pytest_rlaudit.world.agents import TorchPolicy
>>> scores = action_scores(TorchPolicy(torch.nn.Linear(4, 2)),
...                        spaces.Box(-1, 1, (4,)), spaces.Discrete(2))
>>> with scores.session():
...     scores(torch.zeros(3, 4)).shape
torch.Size([3, 2])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from ...errors import PolicyError
from .base import CorePolicy, Policy
from .preprocess import FrameStackPolicy, NormalizedPolicy, PolicyWrapper
from .sb3 import SB3Policy
from .torch import TorchPolicy, _describe, _mean_of_get_action, _seeded, _torch_threads

if TYPE_CHECKING:
    import torch

__all__ = ["ActionScores", "action_scores", "SUPPORTED"]

#: What the attack supports, as the errors say it.
SUPPORTED = "an SB3 model or a torch nn.Module"

Scores = Callable[["torch.Tensor"], "torch.Tensor"]


@dataclass(frozen=True)
class ActionScores:
    """A differentiable ``obs batch (float32, the env's layout) -> scores (batch, k)``.

    ``discrete``: the scores are per-action (the agent takes their argmax); otherwise
    they are the action vector itself. Call it inside :meth:`session`, which puts the
    network in eval mode, turns gradients on and sets torch's threads, restoring all
    three afterwards.
    """

    fn: Scores
    discrete: bool
    module: Any
    threads: int | None = 1
    label: str = "policy"

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.fn(obs)
        return out.reshape(out.shape[0], -1)

    @contextmanager
    def session(self) -> Iterator[None]:
        """Eval mode, autograd on (even inside ``torch.no_grad()``), ``threads`` threads."""
        import torch

        was_training = bool(getattr(self.module, "training", False))
        if was_training:
            self.module.train(False)
        try:
            with torch.enable_grad(), _torch_threads(self.threads):
                yield
        finally:
            if was_training:
                self.module.train(True)


def action_scores(policy: Policy, observation_space: spaces.Space[Any],
                  action_space: spaces.Space[Any]) -> ActionScores:
    """The differentiable action scores of ``policy`` on an env with these spaces.

    Raises :class:`PolicyError` for an agent without gradients or a shape not supported
    (see the module docstring), naming the agent and what is supported.
    """
    transforms: list[Scores] = []
    inner: CorePolicy = policy
    while isinstance(inner, PolicyWrapper):
        if isinstance(inner, FrameStackPolicy):
            raise PolicyError(
                f"adversarial_obs does not support frame-stacked agents yet ({_name(policy)} "
                f"stacks {inner.n_stack} frames): the stack holds the episode's earlier frames, "
                "which an attack on one observation cannot see; audit it with obs_noise instead"
            )
        if isinstance(inner, NormalizedPolicy):
            transforms.append(_normalizer(inner.vec_normalize))
        elif type(inner) is not PolicyWrapper:  # an unknown wrapper may change observations
            raise _no_gradients(policy, f"its wrapper {type(inner).__name__} is not known")
        inner = inner.policy
    discrete = _discrete(action_space, policy)
    if isinstance(inner, SB3Policy):
        fn, module = _sb3_scores(inner, observation_space, discrete), inner.sb3_policy
        threads = inner.torch_threads
    elif isinstance(inner, TorchPolicy):
        fn, module = _torch_scores(inner, action_space, discrete), inner.module
        threads = inner.torch_threads
    else:
        raise _no_gradients(policy, f"it is a {type(inner).__name__}, which has no gradients")
    for transform in reversed(transforms):  # the outermost wrapper acts first
        fn = _after(transform, fn)
    return ActionScores(fn, discrete, module, threads, _name(policy))


def _after(first: Scores, then: Scores) -> Scores:
    return lambda x: then(first(x))


def _name(policy: Policy) -> str:
    name = policy.name
    return f"{type(policy).__name__} {name!r}" if name else type(policy).__name__


def _no_gradients(policy: Policy, why: str) -> PolicyError:
    return PolicyError(
        f"adversarial_obs needs a torch-backed agent: {SUPPORTED}; agent {_name(policy)} is "
        f"not one ({why}). Audit it with obs_noise, or pass the model itself as the agent"
    )


def _discrete(action_space: spaces.Space[Any], policy: Policy) -> bool:
    if isinstance(action_space, spaces.Discrete):
        return True
    if isinstance(action_space, spaces.Box):
        return False
    raise PolicyError(f"adversarial_obs supports Discrete and Box actions; agent {_name(policy)} "
                      f"acts in {action_space}")


def _normalizer(vec_normalize: Any) -> Scores:
    """VecNormalize's ``normalize_obs`` in torch: ``clip((x - mean) / sqrt(var + eps))``."""
    import torch

    if not getattr(vec_normalize, "norm_obs", True):
        return lambda x: x
    rms = vec_normalize.obs_rms
    if isinstance(rms, dict):
        raise PolicyError("adversarial_obs does not support VecNormalize on dict observations")
    mean = torch.as_tensor(np.asarray(rms.mean), dtype=torch.float32)
    std = torch.as_tensor(np.sqrt(np.asarray(rms.var) + vec_normalize.epsilon), dtype=torch.float32)
    clip = float(vec_normalize.clip_obs)
    return lambda x: torch.clamp((x - mean) / std, -clip, clip)


def _sb3_scores(policy: SB3Policy, observation_space: spaces.Space[Any], discrete: bool) -> Scores:
    """Logits, Q-values or the deterministic action of an SB3 policy (see the module table)."""
    sb3 = policy.sb3_policy
    if policy.recurrent:
        raise PolicyError(
            f"adversarial_obs does not support recurrent SB3 policies yet ({policy.name}): "
            "the attack would need each episode's LSTM state"
        )
    layout = _layout(sb3.observation_space, observation_space)
    device = getattr(sb3, "device", "cpu")
    if discrete:
        raw = _sb3_logits(sb3, policy.name)
    else:
        # SB3's documented BasePolicy._predict: the action before unscaling and clipping,
        # differentiable for every Box policy (Gaussian mean, squashed actor output).
        def raw(x: torch.Tensor) -> torch.Tensor:
            action: torch.Tensor = sb3._predict(x, deterministic=True)
            return action
    return lambda x: raw(layout(x).to(device)).cpu()


def _sb3_logits(sb3: Any, name: str) -> Scores:
    if callable(getattr(sb3, "get_distribution", None)):  # PPO, A2C, TRPO, MaskablePPO
        return lambda x: sb3.get_distribution(x).distribution.logits
    if callable(getattr(sb3, "q_net", None)):
        q_net: Scores = sb3.q_net  # DQN: Q-values (features extracted inside)
        return q_net
    if callable(getattr(sb3, "quantile_net", None)):
        return lambda x: sb3.quantile_net(x).mean(dim=1)  # QRDQN: its Q-values
    if callable(getattr(sb3, "action_net", None)) and callable(getattr(sb3, "extract_features", None)):
        return lambda x: sb3.action_net(sb3.extract_features(x, sb3.features_extractor))  # ARS
    raise PolicyError(
        f"adversarial_obs cannot read action scores from {type(sb3).__name__} ({name}); it "
        "supports SB3 actor-critic (PPO, A2C, TRPO, MaskablePPO), DQN, QRDQN and ARS policies "
        "for Discrete actions"
    )


def _layout(own: spaces.Space[Any], env: spaces.Space[Any]) -> Scores:
    """Channel-last env images to the channel-first layout SB3 trained on, as its
    ``predict`` transposes them; other observations as they are."""
    own_shape, env_shape = getattr(own, "shape", None), getattr(env, "shape", None)
    if own_shape is not None and env_shape is not None and len(env_shape) == 3 and \
            tuple(own_shape) != tuple(env_shape):
        return lambda x: x.permute(0, 3, 1, 2)
    return lambda x: x


def _torch_scores(policy: TorchPolicy, action_space: spaces.Space[Any], discrete: bool) -> Scores:
    """A module's output under its rule, before argmax or clipping."""
    import torch

    module, rule = policy.module, policy.rule
    if rule == "get_action_and_value":
        raise PolicyError(
            f"adversarial_obs cannot differentiate {policy.name}: its actions are samples "
            "(rule 'get_action_and_value'); give it a deterministic rule, e.g. "
            "TorchPolicy(module, rule='actor')"
        )
    if rule == "get_action":
        def raw(x: torch.Tensor) -> torch.Tensor:
            # get_action samples before returning the mean: on a private random stream
            out = _mean_of_get_action(_seeded(None, lambda: module.get_action(x)), policy.name)
            return torch.log(out.clamp_min(1e-12)) if discrete else out
    elif rule == "forward":
        raw = module
    else:
        raw = getattr(module, rule)

    n = action_space.n if isinstance(action_space, spaces.Discrete) else None  # discrete: set

    def checked(x: torch.Tensor) -> torch.Tensor:
        out = raw(x)
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or (
                discrete and tuple(out.shape) != (x.shape[0], n)):
            raise PolicyError(
                f"adversarial_obs needs per-action scores of shape ({x.shape[0]}, "
                f"{getattr(action_space, 'n', '...')}) from {policy.name} (rule {rule!r}), "
                f"got {_describe(out)}"
                if discrete else
                f"adversarial_obs needs float actions from {policy.name} (rule {rule!r}), "
                f"got {_describe(out)}"
            )
        return out

    return checked
