"""``audit()``: run an agent on the nominal env and on each scenario, paired by seed.

>>> import numpy as np
>>> from pytest_rlaudit import audit
>>> def controller(obs):  # a hand-tuned CartPole controller
...     return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)
>>> result = audit(controller, "CartPole-v1", scenarios=["delay"], episodes=4)
>>> result.nominal.returns.shape
(4,)
>>> 0 <= result["delay"].ratio
True

This is the engine's audit: per-scenario returns, lengths and the point ratio. The
statistics layer (intervals, p-values, ratings, diagnoses) builds on these numbers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import scenarios as registry
from .envs import EnvLike, env_spec
from .policies import as_policy
from .rollout import DEFAULT_MAX_STEPS, EpisodeBatch, run_episodes
from .scenarios import NOMINAL, Scenario

__all__ = ["audit", "AuditResult", "ScenarioResult", "SCHEMA_VERSION"]

#: Version of the ``to_dict()`` layout; bumped on any incompatible change.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario's paired episodes: ``returns[i]`` is episode ``i`` (env seed ``seeds[i]``)."""

    name: str
    category: str
    returns: np.ndarray
    lengths: np.ndarray
    env_steps: np.ndarray
    capped: np.ndarray
    seeds: np.ndarray
    ratio: float = float("nan")
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def episodes(self) -> int:
        return len(self.returns)

    def to_dict(self) -> dict[str, Any]:
        """Plain floats, ints and strings only (JSON and xdist safe)."""
        return {
            "name": self.name,
            "category": self.category,
            "params": {k: _plain(v) for k, v in self.params.items()},
            "episodes": self.episodes,
            "mean_return": self.mean_return,
            "ratio": float(self.ratio),
            "returns": [float(r) for r in self.returns],
            "lengths": [int(x) for x in self.lengths],
            "env_steps": [int(x) for x in self.env_steps],
            "capped": int(np.sum(self.capped)),
            "seeds": [int(s) for s in self.seeds],
        }


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`: ``result.nominal`` and ``result[name]`` per scenario."""

    agent: str
    env: str
    seed: int
    episodes: int
    reference: float
    nominal: ScenarioResult
    scenarios: dict[str, ScenarioResult]
    seconds: float = 0.0

    def __getitem__(self, name: str) -> ScenarioResult:
        if name == "nominal":
            return self.nominal
        try:
            return self.scenarios[name]
        except KeyError:
            raise KeyError(
                f"scenario {name!r} was not audited; this result has: "
                f"{', '.join(self.scenarios) or 'no scenarios'}"
            ) from None

    def __iter__(self) -> Iterator[ScenarioResult]:
        return iter(self.scenarios.values())

    def __len__(self) -> int:
        return len(self.scenarios)

    def to_dict(self) -> dict[str, Any]:
        """A versioned, JSON-serialisable dict (``"schema": 1``)."""
        return {
            "schema": SCHEMA_VERSION,
            "agent": self.agent,
            "env": self.env,
            "seed": self.seed,
            "episodes": self.episodes,
            "reference": float(self.reference),
            "seconds": float(self.seconds),
            "nominal": self.nominal.to_dict(),
            "scenarios": {name: r.to_dict() for name, r in self.scenarios.items()},
        }

    def __str__(self) -> str:
        header = (f"audit of {self.agent} on {self.env}: {self.episodes} episodes per scenario, "
                  f"seed {self.seed}, reference {self.reference:g}")
        rows = [("scenario", "category", "mean return", "ratio", "agent steps", "env steps")]
        for r in (self.nominal, *self.scenarios.values()):
            rows.append((
                r.name, r.category, f"{r.mean_return:.1f}",
                "-" if r is self.nominal else f"{r.ratio:.3f}",
                f"{np.median(r.lengths):.0f}", f"{np.median(r.env_steps):.0f}",
            ))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [header, ""]
        for row in rows:
            lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        lines.append("(agent steps and env steps are medians per episode)")
        return "\n".join(lines)


def _check_reference(reference: Any) -> None:
    if isinstance(reference, str):
        if reference != "random":
            raise ValueError(
                f"reference must be a number or 'random', got {reference!r}"
            )
    elif isinstance(reference, bool) or not isinstance(reference, (int, float, np.number)) or (
        not np.isfinite(reference)
    ):
        raise ValueError(f"reference must be a finite number or 'random', got {reference!r}")


def audit(
    agent: Any,
    env: EnvLike,
    scenarios: str | Scenario | Iterable[str | Scenario] | None = None,
    episodes: int = 30,
    seed: int = 0,
    batch_size: int | None = None,
    reference: float | str = 0,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> AuditResult:
    """Audit ``agent`` on ``env`` under ``scenarios`` (default: the deployment + stress suite).

    Episode ``i`` of every scenario, nominal included, resets with env seed ``seed + i``,
    so returns are paired by episode. ``reference`` is the score a ratio is measured
    from: 0, a number, or ``"random"`` (a uniform random policy on the same seeds);
    ``ratio = (mean(perturbed) - ref) / (mean(nominal) - ref)``.

    >>> r = audit("random", "CartPole-v1", scenarios="speed_5x", episodes=2)
    >>> sorted(r.to_dict()["scenarios"])
    ['speed_5x']
    """
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 2:
        raise ValueError(
            f"episodes must be an integer >= 2 (a ratio needs paired episodes), got {episodes!r}"
        )
    _check_reference(reference)
    chosen = [s for s in registry.resolve(scenarios) if s.name != NOMINAL.name]
    spec = env_spec(env)
    policy = as_policy(agent)
    started = time.perf_counter()
    batches = run_episodes(policy, spec, [NOMINAL, *chosen], episodes, seed=seed,
                           batch_size=batch_size, max_steps=max_steps)
    random_mean = None
    if reference == "random":
        random_mean = float(np.mean(run_episodes(
            as_policy("random"), spec, [NOMINAL], episodes, seed=seed, batch_size=batch_size,
            max_steps=max_steps)["nominal"].returns))
    ref = random_mean if random_mean is not None else float(reference)
    nominal_mean = float(np.mean(batches["nominal"].returns))
    if not nominal_mean > ref:
        raise ValueError(
            f"the nominal mean return ({nominal_mean:.4g}) does not exceed the reference "
            f"({ref:.4g}), so a return ratio would be meaningless or sign-flipped (returns are "
            "negative on envs like Pendulum). Set reference='random' to measure from a random "
            "policy, or reference=<a number below the nominal return> (for example the worst "
            "return you would accept)."
        )

    def result(s: Scenario, batch: EpisodeBatch) -> ScenarioResult:
        ratio = (float(np.mean(batch.returns)) - ref) / (nominal_mean - ref)
        return ScenarioResult(s.name, s.category, batch.returns, batch.lengths, batch.env_steps,
                              batch.capped, batch.seeds, ratio, dict(s.params))

    return AuditResult(
        agent=getattr(policy, "name", type(policy).__name__),
        env=spec.name,
        seed=int(seed),
        episodes=int(episodes),
        reference=ref,
        nominal=result(NOMINAL, batches["nominal"]),
        scenarios={s.name: result(s, batches[s.name]) for s in chosen},
        seconds=time.perf_counter() - started,
    )
