"""The random policy on the audit's own seeds: the ``"random"`` reference score, and the
check that the agent under audit beats it.

A robustness ratio of an agent that does no better than uniform random actions measures
nothing, and on real agents that almost always means it was loaded without something it
was trained with: so every audit runs the random policy on the nominal episodes' seeds
(random episodes are cheap next to a network's) and stops with the usual causes when the
nominal mean return is not above the random one.

>>> from pytest_rlaudit.world.envs import env_spec
>>> returns = random_returns(env_spec("CartPole-v1"), 3, seed=0)
>>> returns.shape
(3,)
>>> check_beats_random("a", [9.0, 10.0], returns)
Traceback (most recent call last):
...
pytest_rlaudit.errors.MisloadedAgentError: agent a does no better than random actions: ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from .._format import fixed
from ..errors import MisloadedAgentError
from ..rollout.runner import DEFAULT_MAX_STEPS, EpisodeBatch, run_episodes
from ..world.agents import as_policy
from ..world.envs import AuditEnv
from ..world.scenarios import NOMINAL

__all__ = ["check_reference_arg", "random_returns", "reference_score", "check_beats_random",
           "CHECK_EPISODES", "random_episodes"]

#: The most episodes the random policy runs when the reference is a number, so that its
#: returns serve only :func:`check_beats_random`. More would make that check laxer, not
#: stricter (the agent's lead must exceed one standard error, which shrinks as the
#: episodes grow), and cost as much as a scenario: on a 1,024-env batched simulator at
#: 4,096 episodes the whole random reference was a fifth of the audit.
CHECK_EPISODES = 256

#: Why a loaded agent does no better than random, most likely first.
USUAL_CAUSES = (
    "VecNormalize statistics missing or wrong (a zoo folder's vecnormalize.pkl: "
    "as_policy(..., vec_normalize=PATH) or --rl-vec-normalize PATH)",
    "another env version than the one it was trained on (LunarLander-v2 vs -v3), or other "
    "env_kwargs",
    "wrappers it was trained with missing (frame stacks: frame_stack=N; a zoo config's "
    "env_wrapper)",
    "the deterministic flag: some agents (Atari, MiniGrid) only work sampled "
    "(deterministic=False or --rl-stochastic)",
    "the wrong checkpoint, or an untrained model",
)


def check_reference_arg(reference: Any) -> None:
    """Raise ValueError unless ``reference`` is a finite number or ``"random"``."""
    if isinstance(reference, str):
        if reference != "random":
            raise ValueError(f"reference must be a number or 'random', got {reference!r}")
    elif isinstance(reference, bool) or not isinstance(reference, (int, float, np.number)) or (
        not np.isfinite(reference)
    ):
        raise ValueError(f"reference must be a finite number or 'random', got {reference!r}")


def random_returns(env: AuditEnv, episodes: int | Sequence[int], *, seed: int = 0,
                   batch_size: int | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                   run: Callable[..., dict[str, EpisodeBatch]] | None = None) -> np.ndarray:
    """Returns of a uniform random policy on ``episodes`` (a count or indices), episode
    ``i`` reset with env seed ``seed + i`` as in the audit. ``run``: the audit's own
    :func:`run_episodes` with its settings bound (seed, workers, backend), if given."""
    run = run or partial(run_episodes, seed=seed, batch_size=batch_size, max_steps=max_steps)
    return run(as_policy("random"), env, [NOMINAL], episodes)["nominal"].returns


def random_episodes(episodes: int, random_reference: bool) -> int:
    """How many of the first ``episodes`` the random policy runs: all of them when its mean
    return is the reference, else at most :data:`CHECK_EPISODES` (the check's).

    >>> random_episodes(4096, False), random_episodes(4096, True), random_episodes(30, False)
    (256, 4096, 30)
    """
    return episodes if random_reference else min(episodes, CHECK_EPISODES)


def reference_score(reference: float | str, random: np.ndarray) -> float:
    """The reference score: a number as given, or the random policy's mean return."""
    check_reference_arg(reference)
    return float(np.mean(random)) if reference == "random" else float(reference)


def check_beats_random(agent: str, nominal: Sequence[float] | np.ndarray,
                       random: Sequence[float] | np.ndarray) -> None:
    """Raise :class:`~pytest_rlaudit.errors.MisloadedAgentError` unless the agent beats a
    random policy on the same episodes (the first ``len(nominal)`` of ``random``) by more
    than the noise: its mean paired advantage must exceed one standard error of it.

    One standard error, not a significance test: a trained agent beats random actions by
    many standard errors even over a few episodes, while an agent missing its VecNormalize
    statistics can land a little above random by chance (the zoo's Pendulum A2C without
    them: -1148 against -1185 over 4 episodes, -1302 against -1239 over 20). The random
    agent itself (``agent="random"``) is what it is.
    """
    if agent == "random":
        return
    # Adaptive runs add nominal episodes beyond those the random policy ran: the first
    # episodes, which both have, decide.
    n = min(len(nominal), len(random))
    nominal = np.asarray(nominal, dtype=float)[:n]
    random = np.asarray(random, dtype=float)[:n]
    advantage = nominal - random
    mean = float(np.mean(advantage))
    noise = float(np.std(advantage, ddof=1) / np.sqrt(len(advantage))) if len(advantage) > 1 else 0.0
    if mean > noise:
        return
    causes = "".join(f"\n  - {cause}" for cause in USUAL_CAUSES)
    how = ("does no better than random actions" if mean <= 0 else
           f"is not clearly better than random actions (its lead, {fixed(mean, 1)}, is within "
           f"one standard error, {fixed(noise, 1)})")
    raise MisloadedAgentError(
        f"agent {agent} {how}: nominal mean return "
        f"{fixed(float(np.mean(nominal)), 1)} against {fixed(float(np.mean(random)), 1)} for a "
        f"uniform random policy on the same {len(nominal)} episode seeds, so a robustness ratio "
        "would measure nothing. Agents that load but do this badly usually miss something they "
        f"were trained with:{causes}"
    )
