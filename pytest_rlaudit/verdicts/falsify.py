"""``find_breaking_schedule``: the smallest disturbance that breaks an agent, as an answer.

A property test says *whether* some schedule breaks the agent; this says *which*: it
runs hypothesis' search and shrinking outside a test and returns the minimal breaking
schedule (or scenario), or None when none of the examples tried breaks the agent.

>>> import numpy as np
>>> from pytest_rlaudit.strategies import schedules
>>> def controller(obs):
...     return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
>>> found = find_breaking_schedule(controller, "CartPole-v1", schedules(kinds=["speed"]),
...                                min_ratio=0.8, max_examples=20, episodes=4)
>>> found
Schedule(speed=[1]*2 + [5]*42)
>>> found.describe()
'speed goes 1 -> 5 for 42 steps at step 2'
"""

from __future__ import annotations

import random
from typing import Any

from .._checks import integer
from .._optional import require
from ..rollout.runner import DEFAULT_MAX_STEPS
from ..world.envs import EnvLike
from ..world.schedules import Schedule
from .assertions import check_robust

__all__ = ["find_breaking_schedule"]


def find_breaking_schedule(
    agent: Any,
    env: EnvLike,
    strategy: Any = None,
    min_ratio: float | None = 0.8,
    max_examples: int = 100,
    seed: int = 0,
    *,
    episodes: int = 10,
    min_rating: str | None = None,
    mode: str = "point",
    reference: float | str = 0,
    batch_size: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Schedule | Any | None:
    """The minimal schedule from ``strategy`` under which ``agent`` misses the threshold.

    ``strategy``: a hypothesis strategy of schedules (default
    ``strategies.schedules()``) or of scenarios (``strategies.scenarios()``; a Scenario
    is returned then). The threshold is as in :func:`~pytest_rlaudit.assert_robust`
    (``min_ratio``, ``min_rating``, ``mode``) on ``episodes`` paired episodes. ``seed``
    seeds both the episodes and hypothesis' search (no example database is read or
    written), so the same call returns the same schedule. ``max_examples`` bounds the
    search; shrinking the first failure to a minimal one comes on top. Nominal episodes
    are run once and shared by all examples, and a candidate equal to one already tried
    is not audited again.
    """
    require("hypothesis", "find_breaking_schedule")
    from hypothesis import Phase, find, settings
    from hypothesis.errors import NoSuchExample

    from ..world.strategies import schedules

    if strategy is None:
        strategy = schedules()
    integer("max_examples", max_examples, minimum=1)
    if min_ratio is None and min_rating is None:
        raise ValueError("find_breaking_schedule needs a threshold: min_ratio or min_rating")
    cache: dict[Any, Any] = {}
    # Different draws can make equal schedules (about one in eight of a shrinking search),
    # and an audit depends only on agent, env, scenario, seed and episodes: each distinct
    # candidate is audited once.
    decided: dict[Any, bool] = {}

    def audit_breaks(candidate: Any) -> bool:
        return not check_robust(
            agent, env, candidate, min_ratio=min_ratio, min_rating=min_rating, mode=mode,
            episodes=episodes, seed=seed, reference=reference, batch_size=batch_size,
            max_steps=max_steps, cache=cache).passed

    def breaks(candidate: Any) -> bool:
        try:
            hash(candidate)
        except TypeError:  # an unhashable candidate is audited each time
            return audit_breaks(candidate)
        if candidate not in decided:
            decided[candidate] = audit_breaks(candidate)
        return decided[candidate]

    search = settings(max_examples=max_examples, database=None, deadline=None,
                      phases=[Phase.generate, Phase.shrink])
    try:
        return find(strategy, breaks, settings=search, random=random.Random(seed))
    except NoSuchExample:
        return None
