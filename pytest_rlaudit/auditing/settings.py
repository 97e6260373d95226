"""How an audit runs and measures, as one typed object that every verb hands the engine.

``audit``, ``check_robust``/``assert_robust``, ``tolerance`` and the plugin's items take
the same keyword arguments (seed, episodes, reference, confidence, thresholds, batch size,
max steps, workers, backend, timeout, progress). They are validated here, once, in one
wording, and travel as an :class:`AuditSettings` instead of being copied between verbs.

>>> s = AuditSettings(episodes=8, seed=3)
>>> s.episode_seeds(range(2, 4)).tolist()
[5, 6]
>>> AuditSettings(episodes=1)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pytest_rlaudit.errors.InvalidArgumentError: episodes must be an integer >= 2 (a ratio and ...), got 1
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._checks import confidence as check_confidence
from .._checks import integer
from .._checks import seed as check_seed
from .._seeding import episode_seeds
from ..rollout.calls import CALL_TIMEOUT, bounded, check_call_timeout
from ..rollout.deadline import check_timeout, within
from ..rollout.runner import (
    DEFAULT_MAX_STEPS,
    EpisodeBatch,
    check_backend,
    check_workers,
    run_episodes,
)
from ..stats import DEFAULT_THRESHOLDS, Thresholds
from ..world.agents import Policy
from ..world.envs import AuditEnv
from ..world.scenarios import Scenario
from .reference import check_reference_arg

__all__ = ["AuditSettings", "check_episodes"]


def check_episodes(episodes: Any, name: str = "episodes") -> int:
    """``episodes`` as an int of at least 2, else an error naming ``name``."""
    return integer(name, episodes, minimum=2,
                   why=" (a ratio and its interval need paired episodes)")


@dataclass(frozen=True)
class AuditSettings:
    """Every setting an audit shares with the others, validated when made.

    ``episodes`` paired episodes (episode ``i`` resets with env seed ``seed + i``:
    :meth:`episode_seeds`); ``reference`` 0, a number or ``"random"``; ``confidence`` the
    intervals' level; ``thresholds`` the rating scale; ``batch_size``, ``max_steps``,
    ``workers`` and ``backend`` say how episodes run (never changing a number);
    ``timeout`` seconds for the whole audit (None: no limit); ``call_timeout`` seconds
    one env step, reset or policy call may take (None or 0: no bound; see
    :mod:`~pytest_rlaudit.rollout.calls`); ``progress`` the progress bar (None: on a
    terminal).
    """

    episodes: int = 30
    seed: int = 0
    reference: float | str = 0
    confidence: float = 0.95
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    batch_size: int | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    workers: int | str | None = None
    backend: str = "local"
    timeout: float | None = None
    progress: bool | None = None
    call_timeout: float | None = CALL_TIMEOUT

    def __post_init__(self) -> None:
        # in the order the verbs always checked them: the first bad one is the one named
        episodes = check_episodes(self.episodes)
        object.__setattr__(self, "episodes", episodes)
        object.__setattr__(self, "seed", check_seed(self.seed, episodes=episodes))
        object.__setattr__(self, "confidence", check_confidence(self.confidence))
        check_reference_arg(self.reference)
        object.__setattr__(self, "workers", check_workers(self.workers))
        object.__setattr__(self, "backend", check_backend(self.backend))
        object.__setattr__(self, "timeout", check_timeout(self.timeout))
        object.__setattr__(self, "call_timeout", check_call_timeout(self.call_timeout))
        object.__setattr__(self, "thresholds", self.thresholds or DEFAULT_THRESHOLDS)

    def but(self, **changes: Any) -> AuditSettings:
        """A copy with ``changes`` (validated again).

        >>> AuditSettings().but(episodes=4).episodes
        4
        """
        return replace(self, **changes)

    @contextmanager
    def limits(self) -> Iterator[None]:
        """The block under the audit's ``timeout`` and the bound on each call."""
        with within(self.timeout), bounded(self.call_timeout):
            yield

    @property
    def random_reference(self) -> bool:
        """Whether ratios are measured from a random policy's mean return."""
        return isinstance(self.reference, str)

    def episode_seeds(self, indices: Sequence[int]) -> np.ndarray:
        """The env seed of each episode index: the one place they are derived."""
        return episode_seeds(self.seed, indices)

    def rollout(self, policy: Policy, env: AuditEnv, scenarios: Sequence[Scenario],
                episodes: int | Sequence[int],
                record: bool | Collection[str] = False) -> dict[str, EpisodeBatch]:
        """:func:`~pytest_rlaudit.rollout.runner.run_episodes` with these settings."""
        return run_episodes(policy, env, scenarios, episodes, seed=self.seed,
                            batch_size=self.batch_size, max_steps=self.max_steps,
                            workers=self.workers, backend=self.backend, record=record)
