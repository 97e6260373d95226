"""What :class:`~.sb3.SB3Policy`'s fast path may do for a given SB3 policy: take
``predict``'s steps itself, copy a flat batch without ``obs_to_tensor``'s checks, take a
SAC actor's mean straight; and the batch helpers it shares for arrays and Dict batches."""

from __future__ import annotations

import sys
from typing import Any

from gymnasium import spaces

__all__ = ["plain_predict", "flat_obs", "plain_sac", "batch_rows", "row"]


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


def batch_rows(obs: Any) -> int:
    return len(next(iter(obs.values()))) if isinstance(obs, dict) else obs.shape[0]


def row(obs: Any, i: int) -> Any:
    """Row ``i`` of a batch, keeping the batch axis."""
    if isinstance(obs, dict):
        return {key: value[i : i + 1] for key, value in obs.items()}
    return obs[i : i + 1]
