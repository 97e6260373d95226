"""``assert_deterministic``: the same seeds must give the same episodes, bit for bit.

Audits are only as reproducible as the agent and env are. This runs the same episodes
three times: twice alike, then with one env per policy call (another batch size). A
difference between the first two is randomness outside the seeds (``np.random.*``,
``random.*``, unseeded torch sampling, wall-clock dependence); a difference only in the
third is numerics that depend on the batch (a batched forward pass that rounds rows
differently). The message names the first differing scenario, episode and step.

>>> import numpy as np
>>> def controller(obs):
...     return (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
>>> sorted(assert_deterministic(controller, "CartPole-v1", episodes=3))
['nominal']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..rollout.runner import DEFAULT_MAX_STEPS, EpisodeBatch, run_episodes
from ..world import scenarios as registry
from ..world.agents import as_policy, env_for
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, ScenarioLike
from .assertions import RobustnessError

__all__ = ["assert_deterministic"]


def assert_deterministic(
    agent: Any,
    env: EnvLike,
    *,
    episodes: int = 5,
    seed: int = 0,
    scenarios: Iterable[ScenarioLike] = (),
    max_steps: int = DEFAULT_MAX_STEPS,
) -> dict[str, np.ndarray]:
    """Fail with :class:`RobustnessError` unless repeated runs of the same episodes agree.

    ``scenarios``: perturbation scenarios to run besides nominal (their noise is seeded,
    so they must replay too). Compares every observation the agent saw, every action it
    chose and every reward. Returns the returns per scenario.
    """
    policy = as_policy(agent, env=env)
    spec = env_for(policy, env)
    chosen = [NOMINAL, *(s for s in registry.resolve(list(scenarios)) if s.name != NOMINAL.name)]

    def run(batch_size: int | None) -> dict[str, EpisodeBatch]:
        return run_episodes(policy, spec, chosen, episodes, seed=seed, batch_size=batch_size,
                            max_steps=max_steps, record=True)

    first = run(None)
    for label, again, cause, fix in (
        ("running the same episodes again", run(None),
         "randomness outside the seeds: the agent or the env draws from a global generator "
         "(np.random.*, random.*, torch without a generator) or from the clock",
         "draw from the env's np_random or a generator seeded at reset, or seed the agent"),
        ("one env per policy call (batch size 1)", run(1),
         "the agent's output for an observation depends on the other rows of the batch "
         "(batched numerics, batch normalisation in training mode, cross-row state)",
         "evaluate in eval mode and make the forward pass row-independent"),
    ):
        where = _first_difference(first, again, seed)
        if where is not None:
            raise RobustnessError(
                f"not deterministic: {label} changed {where}.\n  likely cause: {cause}\n"
                f"  fix: {fix}\n  reproduce: assert_deterministic(agent, {spec.name!r}, "
                f"episodes={episodes}, seed={seed})")
    return {name: batch.returns for name, batch in first.items()}


def _first_difference(a: dict[str, EpisodeBatch], b: dict[str, EpisodeBatch],
                      seed: int) -> str | None:
    """Where the two runs first differ: scenario, episode, agent step and what."""
    episodes = len(next(iter(a.values())).returns)
    for e in range(episodes):
        for name in a:
            x, y = a[name], b[name]
            label = f"scenario {name!r}, episode {e} (env seed {int(x.seeds[e])})"
            for what, xs, ys in (("observation", x.observations[e], y.observations[e]),
                                 ("action", x.actions[e], y.actions[e])):
                step = _first_unequal(xs, ys)
                if step is not None:
                    return (f"{label} at agent step {step}: {what} "
                            f"{_show(xs, step)} vs {_show(ys, step)}")
            step = _first_unequal(x.traces[e], y.traces[e])
            if step is not None or x.returns[e] != y.returns[e]:
                return (f"{label}: return {x.returns[e]:g} vs {y.returns[e]:g} "
                        f"(first differing reward at env step {step})")
    return None


def _first_unequal(xs: Any, ys: Any) -> int | None:
    n = min(len(xs), len(ys))
    for t in range(n):
        if not _equal(xs[t], ys[t]):
            return t
    return None if len(xs) == len(ys) else n


def _equal(x: Any, y: Any) -> bool:
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x)
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=x.dtype.kind == "f"))


def _show(values: Any, step: int) -> str:
    if step >= len(values):
        return "(episode over)"
    value = values[step]
    return repr(np.asarray(value).tolist()) if not isinstance(value, dict) else repr(value)
