"""``assert_replay_close``: a replay as a test (DESIGN.md section 22).

The limits are upper bounds on :func:`~pytest_rlaudit.auditing.replays.replay`'s
``disagreement`` and ``divergence``, judged in ``mode`` as the audit's thresholds are:
``"point"`` compares the measured value; ``"confident"`` passes only when the whole
interval lies within the limit; ``"not_worse"`` fails only when the whole interval lies
beyond it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..auditing.replays import ReplayResult, replay
from ..errors import InvalidArgumentError, ReplayError
from ..stats.episodes import Estimate

__all__ = ["assert_replay_close", "replay_verdict", "MODES"]

#: How a limit is judged against a measure and its interval.
MODES = ("point", "confident", "not_worse")


def _judged(estimate: Estimate, limit: float, mode: str) -> float:
    """The value of ``estimate`` that ``mode`` holds to the limit."""
    return {"point": estimate.value, "confident": estimate.high,
            "not_worse": estimate.low}[mode]


def replay_verdict(result: ReplayResult, *, max_disagreement: float | None = None,
                   max_divergence: float | None = None, mode: str = "point") -> list[str]:
    """What ``result`` breaks of the limits, one sentence each (empty: it passes).

    >>> from pytest_rlaudit.stats.episodes import Estimate
    >>> class R:  # the two measures a verdict reads
    ...     disagreement, divergence = Estimate(0.2, 0.1, 0.3), Estimate(0.04, 0.03, 0.05)
    ...     failed, episodes, tolerance = (), 10, 0.05
    >>> replay_verdict(R(), max_disagreement=0.1)
    ['disagreement 20.0% [10.0%, 30.0%] is above max_disagreement=10.0% (point mode: the measured value)']
    """
    check_limits(max_disagreement, max_divergence, mode)
    broken = []
    words = {"point": "the measured value", "confident": "the interval's upper end",
             "not_worse": "the interval's lower end"}[mode]
    for name, limit, estimate, fmt in (
            ("disagreement", max_disagreement, result.disagreement, "{:.1%}"),
            ("divergence", max_divergence, result.divergence, "{:.4g}")):
        if limit is None:
            continue
        if _judged(estimate, limit, mode) > limit:
            broken.append(f"{name} {fmt.format(estimate.value)} [{fmt.format(estimate.low)}, "
                          f"{fmt.format(estimate.high)}] is above max_{name}="
                          f"{fmt.format(limit)} ({mode} mode: {words})")
    if result.failed:
        broken.append(f"the candidate raised on {len(result.failed)} episode(s) (first: episode "
                      f"{result.failed[0].id}, step {result.failed[0].step}: "
                      f"{result.failed[0].error})")
    return broken


def check_limits(max_disagreement: Any, max_divergence: Any, mode: str) -> None:
    """An :class:`~pytest_rlaudit.errors.InvalidArgumentError` for a limit that is not a
    number of 0 or more, or an unknown mode."""
    if mode not in MODES:
        raise InvalidArgumentError(f"mode={mode!r}: modes are {', '.join(MODES)}")
    for name, value in (("max_disagreement", max_disagreement),
                        ("max_divergence", max_divergence)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not value >= 0):
            raise InvalidArgumentError(f"{name}={value!r}: give a number of 0 or more (a share "
                                       "of steps for disagreement, a share of the action range "
                                       "for divergence)")


def assert_replay_close(candidate: Any, dataset: Any, *, max_disagreement: float | None = None,
                        max_divergence: float | None = None, mode: str = "point",
                        tolerance: float | None = None,
                        episodes: int | Sequence[int] | None = None,
                        confidence: float = 0.95, **kwargs: Any) -> ReplayResult:
    """Replay ``candidate`` on ``dataset`` (see
    :func:`~pytest_rlaudit.auditing.replays.replay`, whose other keyword arguments it
    takes) and raise :class:`~pytest_rlaudit.errors.ReplayError` when its disagreement or
    divergence is above the limit given, or it raised on an episode; return the result.
    Without a limit it fails only on an episode the candidate raised on.

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> obs = np.linspace(-1, 1, 40).reshape(20, 2)
    >>> np.savez(path, observations=obs, actions=(obs[:, 0] > 0).astype(np.int64),
    ...          episode_starts=np.arange(20) % 10 == 0)
    >>> assert_replay_close(lambda o: np.zeros(len(o), dtype=np.int64), path,
    ...                     max_disagreement=0.1)
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.ReplayError: <lambda> acts unlike the recording ... disagreement 50.0% ...
    """
    __tracebackhide__ = True
    check_limits(max_disagreement, max_divergence, mode)
    result = replay(candidate, dataset, tolerance=tolerance, episodes=episodes,
                    confidence=confidence, **kwargs)
    broken = replay_verdict(result, max_disagreement=max_disagreement,
                            max_divergence=max_divergence, mode=mode)
    if broken:
        raise ReplayError(
            f"{result.candidate} acts unlike the recording {result.recording} "
            f"({result.episodes} episode(s), {result.steps:,} steps): " + "; ".join(broken)
            + f". Where: {result.diagnosis}. Open-loop replay compares actions only; "
            "audit the candidate in simulation for its return", result)
    return result
