"""``assert_no_policy_collapse``: the agent's actions must still vary with its input.

A collapsed policy (a dead network, a saturated output, observations normalised to a
constant, training that converged on one action) can still score on an easy env. This
counts the distinct actions an agent chooses over evaluation episodes and their entropy
(Box actions are binned per dimension first) and fails below a floor.

>>> import numpy as np
>>> def controller(obs):
...     return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
>>> assert_no_policy_collapse(controller, "CartPole-v1", episodes=2).distinct
2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from .._checks import integer, number
from ..rollout.runner import DEFAULT_MAX_STEPS, run_episodes
from ..world import scenarios as registry
from ..world.agents import as_policy, env_for
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, ScenarioLike
from .assertions import RobustnessError

__all__ = ["assert_no_policy_collapse", "ActionStats"]


@dataclass(frozen=True)
class ActionStats:
    """What the agent chose: ``distinct`` actions (occupied bins for Box), their
    ``entropy`` in bits, the number of ``decisions``, and the most frequent action and its
    share."""

    distinct: int
    entropy: float
    decisions: int
    top: Any
    top_share: float
    episodes: int


def assert_no_policy_collapse(
    agent: Any,
    env: EnvLike,
    *,
    episodes: int = 5,
    seed: int = 0,
    min_distinct: int = 2,
    min_entropy: float | None = None,
    scenario: ScenarioLike | None = None,
    bins: int = 10,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> ActionStats:
    """Fail with :class:`RobustnessError` when the agent's actions collapse.

    Over ``episodes`` (on ``scenario``, default nominal) the agent must choose at least
    ``min_distinct`` distinct actions and, if given, reach ``min_entropy`` bits of action
    entropy. Discrete, MultiDiscrete and MultiBinary actions are counted as they are;
    Box actions are binned into ``bins`` equal bins per dimension over the action bounds
    (over the observed range where a bound is infinite). Non-finite actions are reported
    by the rollout as such, naming the episode and step.
    """
    integer("min_distinct", min_distinct, minimum=1)
    if min_entropy is not None:
        number("min_entropy", min_entropy, low=0, why=" (bits)")
    integer("bins", bins, minimum=2)
    chosen = NOMINAL if scenario is None else registry.as_scenario(scenario)
    policy = as_policy(agent, env=env)
    spec = env_for(policy, env)
    batch = run_episodes(policy, spec, [chosen], episodes, seed=seed, max_steps=max_steps,
                         record=True)[chosen.name]
    probe = spec.make()
    try:
        space = chosen.wrap(probe).action_space
    finally:
        probe.close()
    stats = action_stats(batch.actions, space, bins=bins)
    floors = []
    if stats.distinct < min_distinct:
        floors.append(f"{stats.distinct} distinct action(s), the floor is {min_distinct}")
    if min_entropy is not None and stats.entropy < min_entropy:
        floors.append(f"action entropy {stats.entropy:.3f} bits, the floor is {min_entropy:g}")
    if floors:
        unit = " (binned)" if isinstance(space, spaces.Box) else ""
        raise RobustnessError(
            f"policy collapse on {spec.name} ({chosen.name}): {'; '.join(floors)}. Over "
            f"{stats.episodes} episodes ({stats.decisions} decisions) the most frequent "
            f"action{unit} {stats.top} was chosen {stats.top_share:.0%} of the time.\n"
            "  likely cause: the policy ignores its observation: a dead or saturated "
            "network, observations normalised to a constant (check VecNormalize statistics), "
            "or training that collapsed onto one action\n"
            "  fix: check the observations the policy receives and its output layer; "
            "retrain with a larger entropy bonus (ent_coef) or a lower learning rate\n"
            f"  reproduce: assert_no_policy_collapse(agent, {spec.name!r}, episodes={episodes}, "
            f"seed={seed})")
    return stats


def action_stats(actions: tuple[Any, ...], space: spaces.Space, *, bins: int = 10) -> ActionStats:
    """Distinct actions and entropy of per-episode action arrays for ``space``."""
    rows = [np.asarray(a) for a in actions if len(a)]
    if not rows:
        raise ValueError("no decisions to count: every episode ended at reset")
    flat = np.concatenate([r.reshape(len(r), -1) for r in rows])
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low.ravel()), space.low.ravel(), flat.min(axis=0))
        high = np.where(np.isfinite(space.high.ravel()), space.high.ravel(), flat.max(axis=0))
        width = np.where(high > low, high - low, 1.0)
        codes = np.clip(((flat - low) / width * bins).astype(np.int64), 0, bins - 1)
        centres = low + (codes + 0.5) * width / bins
    else:
        codes = centres = flat
    values, index, counts = np.unique(codes, axis=0, return_index=True, return_counts=True)
    p = counts / counts.sum()
    top = int(np.argmax(counts))
    shown = centres[index[top]]
    top_action = np.round(shown, 3).tolist() if shown.size > 1 else round(float(shown.item()), 3)
    if not isinstance(space, spaces.Box):
        top_action = shown.tolist() if shown.size > 1 else shown.item()
    return ActionStats(distinct=len(values), entropy=float(-(p * np.log2(p)).sum()) + 0.0,
                       decisions=int(counts.sum()), top=top_action,
                       top_share=float(counts[top] / counts.sum()), episodes=len(actions))
