"""What a rollout returns: the per-episode outcomes of one scenario."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import RolloutCapWarning

__all__ = ["EpisodeBatch", "warn_capped"]


@dataclass(frozen=True)
class EpisodeBatch:
    """Per-episode outcomes of one scenario, indexed by episode position.

    ``returns``: summed rewards; ``lengths``: agent decisions; ``env_steps``: environment
    steps (more than ``lengths`` when actions are held, as under ``speed_5x``);
    ``capped``: whether the episode was cut at the step cap; ``seeds``: env reset seeds;
    ``traces[i]``: episode ``i``'s reward at every environment step, as the env gave it
    below the perturbations (diagnoses use it to find where returns part from nominal).
    With ``run_episodes(..., record=True)``, ``observations[i]`` and ``actions[i]`` hold
    what the agent saw and chose at each agent step (determinism and collapse checks).
    """

    scenario: str
    seeds: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    env_steps: np.ndarray
    capped: np.ndarray
    traces: tuple[np.ndarray, ...] = ()
    observations: tuple[Any, ...] = ()
    actions: tuple[Any, ...] = ()
    #: the parameters the scenario ran with (a calibrated spread included)
    params: Mapping[str, Any] = field(default_factory=dict)
    #: whether the env terminated each episode (False: truncated, or cut at the cap)
    terminated: np.ndarray | None = None
    #: with ``record``: the observation each episode's last step returned
    last_observations: tuple[Any, ...] = ()

    @staticmethod
    def concat(parts: Sequence[EpisodeBatch]) -> EpisodeBatch:
        """Join batches of one scenario run on consecutive episode ranges."""
        seeds, returns, lengths, env_steps, capped = (
            np.concatenate([getattr(p, f) for p in parts])
            for f in ("seeds", "returns", "lengths", "env_steps", "capped"))
        return EpisodeBatch(parts[0].scenario, seeds, returns, lengths, env_steps, capped,
                            traces=tuple(t for p in parts for t in p.traces),
                            observations=tuple(o for p in parts for o in p.observations),
                            actions=tuple(a for p in parts for a in p.actions),
                            params=parts[0].params,
                            terminated=(None if any(p.terminated is None for p in parts)
                                        else np.concatenate([p.terminated for p in parts])),
                            last_observations=tuple(o for p in parts
                                                    for o in p.last_observations))


def warn_capped(out: Mapping[str, EpisodeBatch], max_steps: int, stacklevel: int) -> None:
    """A :class:`~pytest_rlaudit.errors.RolloutCapWarning` if episodes of ``out`` were
    cut at ``max_steps``, at the caller ``stacklevel`` frames up (run_episodes' caller)."""
    n_capped = sum(int(batch.capped.sum()) for batch in out.values())
    if n_capped:
        warnings.warn(
            f"{n_capped} episode(s) reached the cap of {max_steps} agent steps and were cut "
            "there; their returns are partial. Raise max_steps, or give the env a TimeLimit.",
            RolloutCapWarning, stacklevel=stacklevel + 1,
        )
