"""What :class:`~.sb3.SB3Policy`'s fast path may do for a given SB3 policy: take
``predict``'s steps itself, copy a flat batch without ``obs_to_tensor``'s checks, take a
SAC actor's mean and an actor-critic's mode straight; and the batch helpers it shares for
arrays and Dict batches."""

from __future__ import annotations

import sys
from typing import Any

from gymnasium import spaces

from .base import check_finite

__all__ = ["plain_predict", "flat_obs", "plain_sac", "plain_q", "plain_mode", "mode_action",
           "finite_outputs", "batch_rows", "row"]


def plain_predict(policy: Any) -> bool:
    """Whether ``policy.predict`` is SB3's own, whose steps :class:`SB3Policy` can take
    itself; MaskablePPO's counts, as without masks it is the same. A policy that overrides
    it (recurrent ones, users' own) keeps its ``predict``."""
    base = sys.modules.get("stable_baselines3.common.policies")
    if base is None:
        return False
    own = [base.BasePolicy.predict]
    maskable = sys.modules.get("sb3_contrib.common.maskable.policies")
    if maskable is not None:
        own.append(maskable.MaskableActorCriticPolicy.predict)
    return (isinstance(policy, base.BasePolicy) and getattr(type(policy), "predict", None) in own
            and callable(getattr(policy, "_predict", None)))


def flat_obs(policy: Any) -> bool:
    """Whether the policy's ``obs_to_tensor`` is SB3's and does no more than copy and
    reshape (no Dict keys, no image transposes): then :class:`SB3Policy` does that itself,
    without the checks ``obs_to_tensor`` repeats on every call."""
    from stable_baselines3.common.policies import BaseModel
    from stable_baselines3.common.preprocessing import is_image_space

    space = policy.observation_space
    return (type(policy).obs_to_tensor is BaseModel.obs_to_tensor
            and not isinstance(space, spaces.Dict) and not is_image_space(space))


def plain_sac(policy: Any) -> bool:
    """Whether ``policy`` is SB3's own SAC policy and actor (no gSDE): its deterministic
    action is then ``tanh(mu(latent_pi(features)))``, which :class:`SB3Policy` computes
    without the distribution ``_predict`` builds around the mean (the same tensor
    operations, so the same bits)."""
    sac = sys.modules.get("stable_baselines3.sac.policies")
    actor: Any = getattr(policy, "actor", None)
    return (sac is not None and type(policy)._predict is sac.SACPolicy._predict
            and type(actor) is sac.Actor and not actor.use_sde)


def plain_q(policy: Any) -> bool:
    """Whether ``policy`` is SB3's own DQN policy and Q-network: its deterministic action
    is then the argmax of ``q_net(obs)``, which :class:`SB3Policy` takes itself (the same
    tensor operations, so the same bits) so as to see the Q-values first: an argmax would
    quietly turn NaN Q-values into action 0."""
    dqn = sys.modules.get("stable_baselines3.dqn.policies")
    return (dqn is not None and type(policy)._predict is dqn.DQNPolicy._predict
            and type(getattr(policy, "q_net", None)) is dqn.QNetwork)


def plain_mode(policy: Any) -> str | None:
    """``"categorical"`` or ``"gaussian"`` when ``policy`` is SB3's own actor-critic
    (PPO's, A2C's: ``_predict``, ``get_distribution`` and the distribution's construction
    not overridden) with a Categorical or diagonal Gaussian action distribution, whose
    deterministic action :func:`mode_action` computes without the torch distribution
    ``_predict`` builds around it; else None (MaskablePPO, gSDE, MultiDiscrete, users' own)."""
    base = sys.modules.get("stable_baselines3.common.policies")
    dists = sys.modules.get("stable_baselines3.common.distributions")
    if base is None or dists is None or not isinstance(policy, base.ActorCriticPolicy):
        return None
    own, kind = base.ActorCriticPolicy, type(policy)
    if any(getattr(kind, name) is not getattr(own, name)
           for name in ("_predict", "get_distribution", "_get_action_dist_from_latent")):
        return None
    dist = type(getattr(policy, "action_dist", None))
    return {dists.CategoricalDistribution: "categorical",
            dists.DiagGaussianDistribution: "gaussian"}.get(dist)


def mode_action(policy: Any, obs: Any, kind: str, name: str) -> Any | None:
    """What ``policy._predict(obs, deterministic=True)`` returns for a :func:`plain_mode`
    policy, by the same tensor operations (so the same bits) minus the distribution object:
    its construction and argument checks were a fifth of the call for a small MLP. A logit
    or mean that is NaN or infinite is a
    :class:`~pytest_rlaudit.errors.NonFiniteOutputError` naming the row (the agent
    ``name``'s): a softmax's argmax would turn it into an action, a clip an infinite mean
    into the bound. None where the distribution would reject the scale (not above 0): the
    caller then calls ``_predict``, which raises torch's own error."""
    import torch
    from stable_baselines3.common.policies import ActorCriticPolicy

    # get_distribution's steps; its super() is ActorCriticPolicy's parent
    features = super(ActorCriticPolicy, policy).extract_features(
        obs, policy.pi_features_extractor)
    params = policy.action_net(policy.mlp_extractor.forward_actor(features))
    finite_outputs(params, name)
    if kind == "gaussian":  # Normal(mean, std).mean is the mean itself
        std = policy.log_std.exp()
        return None if not bool((std > 0).all()) else params
    logits = params - params.logsumexp(dim=-1, keepdim=True)  # as Categorical normalises
    # CategoricalDistribution.mode: the argmax of Categorical.probs (softmax of its logits)
    return torch.argmax(torch.nn.functional.softmax(logits, dim=-1), dim=1)


def finite_outputs(out: Any, name: str) -> None:
    """Raise :func:`~.base.check_finite`'s error when the tensor ``out`` (a network's
    scores, logits or means; one row per observation) holds NaN or an infinite value.
    Read through numpy: on a CPU tensor made under ``no_grad`` ``numpy()`` is a view, and
    numpy's ``isfinite`` costs a fraction of torch's two small ops: about 9 us of a SAC
    policy call of 100 us on 16 rows, against 16-28 us through torch."""
    try:
        array = out.numpy()
    except (TypeError, RuntimeError):  # on a GPU, or part of a graph: a copy
        array = out.detach().cpu().numpy()
    check_finite(array, name)


def batch_rows(obs: Any) -> int:
    return len(next(iter(obs.values()))) if isinstance(obs, dict) else obs.shape[0]


def row(obs: Any, i: int) -> Any:
    """Row ``i`` of a batch, keeping the batch axis."""
    if isinstance(obs, dict):
        return {key: value[i : i + 1] for key, value in obs.items()}
    return obs[i : i + 1]
