"""``record()``: an audit's episodes written as a Minari dataset, for :func:`~.replays.replay`
to compare later checkpoints against (DESIGN.md section 22).

The episodes are the audit's own: episode ``i`` of every scenario resets with env seed
``seed + i`` and runs as in :func:`~pytest_rlaudit.audit` (the same engine), so a recording
made here and an audit with the same agent, env, scenarios and seed hold the same
episodes. What is written is what the agent acted on (its env's observations, after the
scenario's perturbations and a zoo folder's env wrappers, before the agent's own
VecNormalize and frame stack, which replay applies again) and the actions the env received.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..rollout.runner import DEFAULT_MAX_STEPS, run_episodes
from ..world import scenarios as registry
from ..world.agents import as_policy
from ..world.agents.adapt import env_for
from ..world.envs import EnvLike
from ..world.recordings import Recording
from ..world.scenarios import ScenarioLike
from .settings import check_episodes

__all__ = ["record", "recording_of"]


def record(agent: Any, env: EnvLike, path: str | os.PathLike[str], *, episodes: int = 30,
           seed: int = 0, scenarios: ScenarioLike | Iterable[ScenarioLike] = ("nominal",),
           max_steps: int = DEFAULT_MAX_STEPS, workers: int | str | None = None) -> Path:
    """Run ``episodes`` of ``agent`` on ``env`` under each of ``scenarios`` (default: the
    nominal env alone) and write them as a Minari dataset in the folder ``path`` (it must
    not hold one already); return ``path``. Needs the ``[replay]`` extra.

    Each episode's metadata holds its env seed, scenario and return; the dataset's
    ``algorithm_name`` is the agent's name. Per-step rewards are the env's; under a timing
    scenario that holds actions over several env steps they are not kept (NaN), the
    return is.

    >>> import tempfile
    >>> folder = record("random", "CartPole-v1", tempfile.mkdtemp() + "/rec", episodes=2)
    >>> from pytest_rlaudit import replay
    >>> replay("random", folder).episodes
    2
    """
    check_episodes(episodes)
    path = os.path.abspath(path)  # minari resolves a relative one twice
    policy = as_policy(agent, env=env)
    audit_env = env_for(policy, env)
    chosen = list(registry.resolve(scenarios))
    batches = run_episodes(policy, audit_env, chosen, episodes, seed=seed, record=True,
                           max_steps=max_steps, workers=workers)
    probe = audit_env.make()
    try:
        obs_space, act_space, spec = probe.observation_space, probe.action_space, probe.spec
    finally:
        probe.close()
    recording, names, last = recording_of([batches[s.name] for s in chosen], policy.name,
                                          obs_space, act_space, source=os.fspath(path))
    from ..world.recordings.minari_files import write_minari

    write_minari(recording, path, last_observations=last, env_spec=_spec(spec),
                 scenarios=names,
                 description=(f"{policy.name} on {audit_env.name}: {episodes} episode(s) of "
                              f"{', '.join(s.name for s in chosen)}, seed {seed}, recorded by "
                              "pytest-rlaudit"))
    return Path(path)


def _spec(spec: Any) -> Any:
    """The env's spec where Minari can store it (a spec made from a callable cannot be
    serialised: the dataset then holds the spaces alone)."""
    try:
        if spec is not None:
            spec.to_json()
        return spec
    except Exception:
        return None


def recording_of(batches: list[Any], agent: str, observation_space: Any, action_space: Any,
                 *, source: str) -> tuple[Recording, list[str], list[Any]]:
    """The :class:`Recording` of rollout ``batches`` run with ``record`` (every episode of
    each, batch after batch), each episode's scenario name, and each episode's last
    observation (for Minari's layout)."""
    obs_parts: list[Any] = []
    actions, rewards, terms, truncs, seeds, returns, names, last = [], [], [], [], [], [], [], []
    for batch in batches:
        for i in range(len(batch.seeds)):
            steps = int(batch.lengths[i])
            obs_parts.append(batch.observations[i])
            actions.append(np.asarray(batch.actions[i]))
            trace = np.asarray(batch.traces[i], dtype=np.float64)
            rewards.append(trace if len(trace) == steps else np.full(steps, np.nan))
            end = np.zeros(steps, dtype=bool)
            terminated = bool(batch.terminated[i]) if batch.terminated is not None else False
            term, trunc = end.copy(), end.copy()
            (term if terminated else trunc)[-1] = True
            terms.append(term)
            truncs.append(trunc)
            seeds.append(int(batch.seeds[i]))
            returns.append(float(batch.returns[i]))
            names.append(batch.scenario)
            last.append(batch.last_observations[i] if batch.last_observations else None)
    observations: Any
    if isinstance(obs_parts[0], dict):
        observations = {k: np.concatenate([p[k] for p in obs_parts]) for k in obs_parts[0]}
    else:
        observations = np.concatenate(obs_parts)
    lengths = [len(a) for a in actions]
    recording = Recording(
        source, "minari", observations, np.concatenate(actions),
        np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
        rewards=np.concatenate(rewards), terminations=np.concatenate(terms),
        truncations=np.concatenate(truncs), seeds=tuple(seeds),
        returns=np.array(returns), observation_space=observation_space,
        action_space=action_space, agent=agent)
    return recording, names, last
