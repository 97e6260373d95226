"""Replay: a new checkpoint against recorded episodes, open loop, with no simulator
(DESIGN.md section 22).

:func:`replay` calls the candidate on every observation of a recording (a Minari
dataset, a LeRobot dataset, an ``.npz``; see :mod:`pytest_rlaudit.world.recordings`)
and measures how differently it acts from what was recorded. The candidate's own
preprocessing applies (its VecNormalize statistics, a frame stack rebuilt from the
recorded sequence, Dict keys), as in an audit. A stateless candidate sees the whole
recording in a few large batches; a stateful one (a recurrent policy, a frame stack) is
batched across episodes, one step of every running episode per call, its state reset at
each episode's start.

What it measures, each with an interval over episodes (the episode is the unit; see
:mod:`pytest_rlaudit.stats.episodes`):

- ``divergence``: the mean per-step distance between the candidate's and the recorded
  action, both as the env receives them; per dimension the absolute difference divided
  by the action range (the recorded spread where the space is unbounded), averaged over
  dimensions, so 0.05 reads "5% of the range". Discrete: the share of steps whose action
  differs. ``per_dimension``: each dimension's own mean.
- ``disagreement``: the share of steps whose distance exceeds ``tolerance``
  (:data:`DEFAULT_TOLERANCE`, 0.05, unless given).
- ``ood_actions``: the share of steps whose action, before the candidate's own clip
  (SB3's ``predict`` clips), lies outside the action space; ``ood_recorded``: outside
  the range the recording's actions cover (Discrete: an action never recorded).
- ``failed``: episodes on which the candidate raised (or returned NaN), with the error;
  the other episodes are still measured.
- ``worst``: the steps where the two differ most, and which observation dimensions set
  those steps apart from the rest (the diagnosis line).
- ``baseline``: the recording's own returns and lengths, labelled as the recording's.

Open-loop replay measures action agreement only: the candidate never drives the env, so
nothing here is the candidate's return or success.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .._seeding import POLICY_STREAM, episode_seed_sequence
from ..errors import DatasetError, InvalidArgumentError, SpacesMismatchError
from ..stats.episodes import Estimate, paired_step_mean_ci, step_mean_ci
from ..world.agents import as_policy
from ..world.agents.base import clip_hidden, unclipped_actions
from ..world.recordings import Recording, load_recording
from ..world.recordings.base import rows, take, width

__all__ = ["replay", "compare_replay", "ReplayResult", "ReplayComparison", "FailedEpisode",
           "WorstStep", "DEFAULT_TOLERANCE"]

#: The default ``tolerance``: a step whose actions differ by more than 5% of the action
#: range (averaged over dimensions) counts as a disagreement; for Discrete actions any
#: difference does.
DEFAULT_TOLERANCE = 0.05
#: How many bytes of observations one batched call takes at most (large batches are what
#: make replay fast; the cap keeps image recordings within memory).
CHUNK_BYTES = 32 << 20
#: How many of the most different steps ``worst`` lists.
WORST_STEPS = 3


class FailedEpisode(NamedTuple):
    """An episode the candidate could not be measured on: its position and id in the
    recording, the step of the failing call, and the error."""

    episode: int
    id: int
    step: int
    error: str


class WorstStep(NamedTuple):
    """One of the steps where candidate and recording differ most."""

    episode: int
    id: int
    step: int
    distance: float
    candidate: list[Any]
    recorded: list[Any]


@dataclass(frozen=True)
class ReplayResult:
    """What :func:`replay` measured (see the module for each field's meaning).

    ``per_episode``: each measured episode's divergence (its own steps' mean), in the
    order of ``episode_ids``; ``apart``: ``(observation dimension, z)`` pairs, where the
    worst steps' observations lie from the recording's mean in its standard deviations;
    ``worst_episode``: the id, recorded and candidate actions (one row per step) of the
    episode with the highest divergence, for the report's chart.
    """

    candidate: str
    recording: str
    format: str
    recorded_by: str | None
    episodes: int
    steps: int
    tolerance: float
    confidence: float
    divergence: Estimate
    per_dimension: tuple[Estimate, ...]
    dimensions: tuple[str, ...]
    disagreement: Estimate
    ood_actions: Estimate
    ood_recorded: Estimate
    failed: tuple[FailedEpisode, ...]
    worst: tuple[WorstStep, ...]
    apart: tuple[tuple[str, float], ...]
    per_episode: tuple[float, ...]
    episode_ids: tuple[int, ...]
    baseline_returns: tuple[float, ...] | None
    baseline_lengths: tuple[int, ...]
    worst_episode: dict[str, Any] | None = None
    seconds: float = 0.0
    discrete: bool = False
    #: the per-episode sums behind the estimates (what compare_replay pairs)
    _sums: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    _lengths: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    @property
    def diagnosis(self) -> str:
        """One line: where the candidate departs most from the recording, and what sets
        those steps apart."""
        if not self.worst:
            if self.failed and not self.episodes:
                return (f"the candidate raised on every episode ({self.failed[0].error}); "
                        "nothing was measured")
            return "the candidate takes the recorded action at every step"
        w = self.worst[0]
        where = f"episode {w.id} step {w.step} (distance {w.distance:.3g})"
        if not self.apart:
            return f"the candidate departs most at {where}; no observation dimension sets " \
                   "those steps apart"
        dims = " and ".join(f"{name} {'high' if z > 0 else 'low'} (z={z:+.1f})"
                            for name, z in self.apart)
        return f"the candidate departs most where {dims}: {where}"

    def summary(self) -> str:
        """The result as text, as :func:`print` shows it."""
        def pct(e: Estimate) -> str:
            if math.isnan(e.value):
                return "    n/a"
            return f"{e.value:7.1%}  [{e.low:.1%}, {e.high:.1%}]"

        level = f"{self.confidence:.0%}"
        lines = [
            f"replay of {self.candidate} against {self.recording} ({self.format}: "
            f"{self.episodes} episode(s), {self.steps:,} steps"
            + (f", recorded by {self.recorded_by}" if self.recorded_by else "") + ")",
            f"  divergence    {self._divergence_text()}  "
            + ("share of steps whose action differs" if self.discrete
               else "mean |candidate - recorded| / action range")
            + f" ({level} interval over episodes)",
            f"  disagreement  {pct(self.disagreement)}  " + (
                "steps whose action differs" if self.discrete else
                f"steps further apart than {self.tolerance:g}"),
            f"  out of space  {pct(self.ood_actions)}  actions outside the action space "
            "before clipping" + (" (not measured: the candidate clips inside SB3's predict, "
                                 "where its unclipped actions cannot be read)"
                                 if math.isnan(self.ood_actions.value) and self.episodes
                                 else ""),
            f"  beyond record {pct(self.ood_recorded)}  actions outside the recorded range",
        ]
        if len(self.dimensions) > 1:
            parts = ", ".join(f"{n} {e.value:.3g}" for n, e in zip(self.dimensions, self.per_dimension,
                                                                   strict=True))
            lines.append(f"  per dimension {parts}")
        for f in self.failed:
            lines.append(f"  FAILED episode {f.id} at step {f.step}: {f.error}")
        if self.baseline_returns:
            mean = sum(self.baseline_returns) / len(self.baseline_returns)
            lines.append(f"  the recording's own return: mean {mean:.4g} over "
                         f"{len(self.baseline_returns)} episode(s) (the recorded agent's; "
                         "open-loop replay measures actions, not the candidate's return)")
        lines.append(f"  diagnosis: {self.diagnosis}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _divergence_text(self) -> str:
        d = self.divergence
        if math.isnan(d.value):  # every episode failed: nothing measured
            return "    n/a"
        return f"{d.value:7.4f}  [{d.low:.4f}, {d.high:.4f}]"

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON types: the fields of a ``"replay"`` record."""
        return {
            "kind": "replay", "candidate": self.candidate, "recording": self.recording,
            "format": self.format, "recorded_by": self.recorded_by,
            "episodes": self.episodes, "steps": self.steps,
            "tolerance": self.tolerance, "confidence": self.confidence,
            "discrete": self.discrete,
            "divergence": self.divergence.to_dict(),
            "disagreement": self.disagreement.to_dict(),
            "ood_actions": self.ood_actions.to_dict(),
            "ood_recorded": self.ood_recorded.to_dict(),
            "per_dimension": [{"name": n, **e.to_dict()}
                              for n, e in zip(self.dimensions, self.per_dimension, strict=True)],
            "per_episode": [{"id": i, "divergence": float(d), "steps": int(n)}
                            for i, d, n in zip(self.episode_ids, self.per_episode,
                                               self._lengths, strict=True)],
            "failed": [f._asdict() for f in self.failed],
            "worst": [{"id": w.id, "step": w.step, "distance": w.distance} for w in self.worst],
            "apart": [[n, float(z)] for n, z in self.apart],
            "diagnosis": self.diagnosis,
            "baseline": {"label": "the recording's own episodes",
                         "returns": (None if self.baseline_returns is None
                                     else list(self.baseline_returns)),
                         "lengths": list(self.baseline_lengths)},
            "worst_episode": self.worst_episode,
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class ReplayComparison:
    """Two candidates on one recording, paired by episode (:func:`compare_replay`).

    ``difference``: ``a``'s divergence minus ``b``'s, with its interval; ``closer``:
    ``"a"`` or ``"b"`` when the interval excludes 0 (that one acts more like the
    recording), None when the recording cannot tell them apart."""

    a: ReplayResult
    b: ReplayResult
    difference: Estimate
    episodes: int

    @property
    def closer(self) -> str | None:
        if self.difference.high < 0:
            return "a"
        if self.difference.low > 0:
            return "b"
        return None

    def summary(self) -> str:
        d = self.difference
        head = (f"{self.a.candidate} vs {self.b.candidate} against {self.a.recording} "
                f"({self.episodes} episode(s) both measured): divergence "
                f"{self.a.divergence.value:.4f} vs {self.b.divergence.value:.4f}, "
                f"difference {d.value:+.4f} [{d.low:+.4f}, {d.high:+.4f}]")
        if self.closer is None:
            return head + ("; the interval holds 0: this recording does not tell which acts "
                           "more like it (more episodes may)")
        near, far = ((self.a, self.b) if self.closer == "a" else (self.b, self.a))
        return head + f"; {near.candidate} acts more like the recording than {far.candidate}"

    def __str__(self) -> str:
        return self.summary()


# ---------------------------------------------------------------------------- replay

def replay(candidate: Any, dataset: Any, *, tolerance: float | None = None,
           episodes: int | Sequence[int] | None = None, confidence: float = 0.95,
           state: str | None = None, action: str | None = None,
           action_space: spaces.Space[Any] | None = None,
           name: str | None = None) -> ReplayResult:
    """Replay ``candidate`` (anything :func:`~pytest_rlaudit.as_policy` takes: an SB3
    ``.zip``, a zoo folder, an ONNX file, a model, a policy) on every observation of
    ``dataset`` (a Minari dataset folder or local id, a LeRobot dataset folder, an
    ``.npz``, or a :class:`~pytest_rlaudit.world.recordings.Recording`) and measure how
    differently it acts (see the module).

    ``episodes``: a count (the first ones) or positions; ``state`` and ``action``: a
    LeRobot dataset's column names where they are not ``observation.state`` and
    ``action``; ``action_space``: the env's action space, where neither the recording
    (Minari stores it) nor the candidate (an SB3 model) says it.

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> obs = np.linspace(-1, 1, 40).reshape(20, 2)
    >>> np.savez(path, observations=obs, actions=(obs[:, 0] > 0).astype(np.int64),
    ...          episode_starts=np.arange(20) % 10 == 0)
    >>> r = replay(lambda o: (o[:, 0] > 0).astype(np.int64), path)
    >>> r.divergence.value, r.disagreement.value
    (0.0, 0.0)
    """
    tolerance = _checked(tolerance, confidence)
    recording = _recording(dataset, episodes, state, action)
    policy = _candidate(candidate, recording, action_space, name)
    return _replay(policy, recording, tolerance, confidence)


def compare_replay(a: Any, b: Any, dataset: Any, *, tolerance: float | None = None,
                   episodes: int | Sequence[int] | None = None, confidence: float = 0.95,
                   state: str | None = None, action: str | None = None,
                   action_space: spaces.Space[Any] | None = None) -> ReplayComparison:
    """Replay two candidates on the same recording and compare their divergence, paired
    by episode: which one acts more like the recorded behaviour, with an interval.

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> obs = np.linspace(-1, 1, 40).reshape(20, 2)
    >>> np.savez(path, observations=obs, actions=(obs[:, 0] > 0).astype(np.int64),
    ...          episode_starts=np.arange(20) % 5 == 0)
    >>> same = lambda o: (o[:, 0] > 0).astype(np.int64)
    >>> opposite = lambda o: (o[:, 0] <= 0).astype(np.int64)
    >>> compare_replay(same, opposite, path).closer
    'a'
    """
    tolerance = _checked(tolerance, confidence)
    recording = _recording(dataset, episodes, state, action)
    ra = _replay(_candidate(a, recording, action_space, None), recording, tolerance, confidence)
    rb = _replay(_candidate(b, recording, action_space, None), recording, tolerance, confidence)
    both = sorted(set(ra.episode_ids) & set(rb.episode_ids))
    if not both:
        raise DatasetError(f"{recording.source}: no episode was measured for both candidates "
                           "(each raised on every episode the other did not); see their "
                           "failed episodes")
    pos_a = {i: k for k, i in enumerate(ra.episode_ids)}
    pos_b = {i: k for k, i in enumerate(rb.episode_ids)}
    sums_a = np.array([ra._sums[pos_a[i]] for i in both])
    sums_b = np.array([rb._sums[pos_b[i]] for i in both])
    steps = np.array([ra._lengths[pos_a[i]] for i in both])
    diff = paired_step_mean_ci(sums_a, sums_b, steps, confidence=confidence)
    return ReplayComparison(ra, rb, diff, len(both))


def _checked(tolerance: float | None, confidence: float) -> float:
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise InvalidArgumentError(f"confidence={confidence!r}: give a level between 0 and 1, "
                                   "such as 0.95")
    if tolerance is None:
        return DEFAULT_TOLERANCE
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise InvalidArgumentError(f"tolerance={tolerance!r}: give a distance of 0 or more (a "
                                   "share of the action range, such as 0.05)")
    return float(tolerance)


def _recording(dataset: Any, episodes: int | Sequence[int] | None, state: str | None,
               action: str | None) -> Recording:
    recording = load_recording(dataset, state=state, action=action)
    if episodes is not None:
        if isinstance(episodes, (int, np.integer)) and not isinstance(episodes, bool):
            if episodes < 1:
                raise InvalidArgumentError(f"episodes={episodes}: give at least 1")
            recording = recording.select(range(min(int(episodes), recording.episodes)))
        else:
            recording = recording.select(list(cast(Sequence[int], episodes)))
    _check_finite(recording)
    return recording


def _check_finite(recording: Recording) -> None:
    """NaN or an infinite value in the recorded observations or actions is the file's
    fault: named, with its episode and step, before the candidate is called."""
    parts = (recording.observations.items() if isinstance(recording.observations, dict)
             else [("", recording.observations)])
    for what, values in [*((f"observations{f'[{k!r}]' if k else ''}", v) for k, v in parts),
                         ("actions", recording.actions)]:
        values = np.asarray(values)
        if values.dtype.kind != "f":
            continue
        bad = ~np.isfinite(values.reshape(len(values), -1)).all(axis=1)
        if bad.any():
            step = int(np.argmax(bad))
            episode = int(np.searchsorted(recording.starts, step, side="right") - 1)
            raise DatasetError(
                f"{recording.source}: the recorded {what} hold NaN or an infinite value at "
                f"episode {recording.ids[episode]}, step {step - recording.starts[episode]} "
                f"({int(bad.sum())} step(s) in all); no action can be compared there: drop "
                "those episodes (episodes=[...]) or fix the recording")


class _SpacesEnv(gym.Env):  # type: ignore[type-arg,unused-ignore]
    """The spaces a recording was made with, where an agent loader asks for an env (an
    SB3 ``.zip`` takes its spaces from it); it cannot be stepped."""

    def __init__(self, observation_space: spaces.Space[Any],
                 action_space: spaces.Space[Any]) -> None:
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        raise DatasetError("a replay has no env to reset: the recording is all it has")

    def step(self, action: Any) -> Any:
        raise DatasetError("a replay has no env to step: the recording is all it has")


def _observation_space(recording: Recording) -> spaces.Space[Any]:
    if recording.observation_space is not None:
        return recording.observation_space

    def box(values: np.ndarray) -> spaces.Box:
        dtype = values.dtype if values.dtype.kind == "f" else np.float32
        return spaces.Box(-np.inf, np.inf, tuple(values.shape[1:]), dtype=dtype)

    obs = recording.observations
    if isinstance(obs, dict):
        return spaces.Dict({k: box(np.asarray(v)) for k, v in obs.items()})
    return box(np.asarray(obs))


def _own_spaces(policy: Any) -> tuple[Any, Any]:
    """The observation and action spaces the candidate itself says (an SB3 model's)."""
    seen = 0
    while policy is not None and seen < 32:
        sb3 = getattr(policy, "__dict__", {}).get("sb3_policy")
        if sb3 is not None:
            return sb3.observation_space, sb3.action_space
        policy, seen = getattr(policy, "__dict__", {}).get("policy"), seen + 1
    return None, None


def _action_space(recording: Recording, policy: Any,
                  given: spaces.Space[Any] | None) -> spaces.Space[Any]:
    if given is not None:
        return given
    if recording.action_space is not None:
        return recording.action_space
    own = _own_spaces(policy)[1]
    if own is not None:
        return cast("spaces.Space[Any]", own)
    actions = np.asarray(recording.actions)
    if actions.dtype.kind in "iub" and actions.reshape(len(actions), -1).shape[1] == 1:
        return spaces.Discrete(int(actions.max()) + 1)
    return spaces.Box(-np.inf, np.inf, tuple(actions.shape[1:]), dtype=np.float32)


def _candidate(candidate: Any, recording: Recording, action_space: spaces.Space[Any] | None,
               name: str | None) -> Any:
    obs_space = _observation_space(recording)
    given_space = action_space or recording.action_space
    env = (None if given_space is None
           else (lambda: _SpacesEnv(obs_space, given_space)))
    try:
        policy = as_policy(candidate, env=env, name=name)
        act_space = _action_space(recording, policy, action_space)
        _check_actions(recording, act_space)
        policy.bind(obs_space, act_space)
    except SpacesMismatchError as exc:
        raise DatasetError(
            f"{recording.source}: the recording does not fit the candidate: recorded "
            f"observations {width(recording.observations)} in {obs_space}, actions in "
            f"{given_space or 'the space the candidate says'}; {exc} Replay a recording made "
            "on the env the candidate was trained for") from None
    return policy


def _check_actions(recording: Recording, space: spaces.Space[Any]) -> None:
    shape = tuple(np.asarray(recording.actions).shape[1:])
    want = tuple(space.shape or ())
    fits = shape == want or (isinstance(space, spaces.Discrete) and shape in ((), (1,)))
    if not fits:
        raise DatasetError(f"{recording.source}: the recorded actions have shape {shape} per "
                           f"step, but the action space {space} takes {want}; replay a "
                           "recording made in this action space (or give action_space=)")


def _replay(policy: Any, recording: Recording, tolerance: float,
            confidence: float) -> ReplayResult:
    started = time.perf_counter()
    space = policy.action_space
    acted, asked, failed = (_act_stateful if policy.stateful else _act_stateless)(
        policy, recording)
    recorded = np.asarray(recording.actions)
    discrete = isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))
    measured = np.array([e for e in range(recording.episodes)
                         if e not in {f.episode for f in failed}], dtype=np.int64)
    lengths_all = recording.lengths
    if not len(measured):
        empty = Estimate(math.nan, math.nan, math.nan, confidence)
        return _result(policy, recording, tolerance, confidence, empty, (), (), empty, empty,
                       empty, tuple(failed), (), (), np.zeros(0), np.zeros(0), measured,
                       None, started, discrete)
    steps_mask = np.repeat(np.isin(np.arange(recording.episodes), measured), lengths_all)
    cand = _as_rows(acted[steps_mask], space)
    rec = _as_rows(recorded[steps_mask], space)
    unclipped = _as_rows(asked[steps_mask], space)
    starts = np.concatenate([[0], np.cumsum(lengths_all[measured])[:-1]]).astype(np.int64)
    lengths = lengths_all[measured]
    if discrete:
        per_dim = (cand != rec).astype(np.float64)
    else:
        low, high = np.asarray(space.low, np.float64).reshape(-1), np.asarray(
            space.high, np.float64).reshape(-1)
        spread = np.where(np.isfinite(high - low), high - low,
                          recorded.reshape(len(recorded), -1).max(axis=0)
                          - recorded.reshape(len(recorded), -1).min(axis=0))
        spread = np.where(spread > 0, spread, 1.0)
        per_dim = np.abs(cand.astype(np.float64) - rec.astype(np.float64)) / spread
    distance = per_dim.mean(axis=1)
    est = step_mean_ci(np.add.reduceat(distance, starts), lengths, confidence=confidence)
    dims = tuple(step_mean_ci(np.add.reduceat(per_dim[:, d], starts), lengths,
                              confidence=confidence) for d in range(per_dim.shape[1]))
    disagree = step_mean_ci(np.add.reduceat((distance > tolerance).astype(np.float64), starts),
                            lengths, confidence=confidence)
    if isinstance(space, spaces.Box) and clip_hidden(policy):
        ood = Estimate(math.nan, math.nan, math.nan, confidence)  # not measured: never 0
    else:
        ood = step_mean_ci(np.add.reduceat(_outside_space(unclipped, space), starts), lengths,
                           confidence=confidence)
    beyond = step_mean_ci(np.add.reduceat(_outside_record(cand, recorded, space), starts),
                          lengths, confidence=confidence)
    sums = np.add.reduceat(distance, starts)
    episode_of = np.repeat(np.arange(len(measured)), lengths)
    order = np.argsort(-distance, kind="stable")[:WORST_STEPS]
    worst = tuple(WorstStep(int(measured[episode_of[k]]),
                            int(recording.ids[measured[episode_of[k]]]),
                            int(k - starts[episode_of[k]]), float(distance[k]),
                            cand[k].tolist(), rec[k].tolist())
                  for k in order if distance[k] > 0)
    apart = _apart(recording, steps_mask, distance, discrete) if worst else ()
    per_episode = sums / lengths
    top = int(np.argmax(per_episode))
    worst_episode = None
    if per_episode[top] > 0:
        sl = slice(int(starts[top]), int(starts[top] + lengths[top]))
        worst_episode = {"id": int(recording.ids[measured[top]]),
                         "recorded": rec[sl].astype(np.float64).tolist(),
                         "candidate": cand[sl].astype(np.float64).tolist()}
    return _result(policy, recording, tolerance, confidence, est, dims,
                   _dimension_names(recording, per_dim.shape[1]), disagree, ood, beyond,
                   tuple(failed), worst, apart, sums, lengths, measured, worst_episode,
                   started, discrete)


def _result(policy: Any, recording: Recording, tolerance: float, confidence: float,
            est: Estimate, dims: tuple[Estimate, ...], names: tuple[str, ...],
            disagree: Estimate, ood: Estimate, beyond: Estimate,
            failed: tuple[FailedEpisode, ...], worst: tuple[WorstStep, ...],
            apart: tuple[tuple[str, float], ...], sums: np.ndarray, lengths: np.ndarray,
            measured: np.ndarray, worst_episode: dict[str, Any] | None, started: float,
            discrete: bool) -> ReplayResult:
    returns = recording.episode_returns()
    per_episode = tuple(float(x) for x in (sums / lengths)) if len(lengths) else ()
    return ReplayResult(
        candidate=policy.name, recording=recording.source, format=recording.format,
        recorded_by=recording.agent, episodes=len(measured), steps=int(lengths.sum()),
        tolerance=tolerance, confidence=confidence, divergence=est, per_dimension=dims,
        dimensions=names, disagreement=disagree, ood_actions=ood, ood_recorded=beyond,
        failed=failed, worst=worst, apart=apart, per_episode=per_episode,
        episode_ids=tuple(int(recording.ids[e]) for e in measured),
        baseline_returns=None if returns is None else tuple(float(x) for x in returns),
        baseline_lengths=tuple(int(x) for x in recording.lengths),
        worst_episode=worst_episode, seconds=time.perf_counter() - started,
        discrete=discrete, _sums=sums, _lengths=lengths)


def _dimension_names(recording: Recording, count: int) -> tuple[str, ...]:
    if len(recording.action_names) == count:
        return tuple(recording.action_names)
    return tuple(f"a[{d}]" for d in range(count))


def _as_rows(values: np.ndarray, space: spaces.Space[Any]) -> np.ndarray:
    values = np.asarray(values)
    return values.reshape(len(values), -1)


def _outside_space(actions: np.ndarray, space: spaces.Space[Any]) -> np.ndarray:
    """Per step, 1.0 where the action (before any clip) lies outside ``space``."""
    if isinstance(space, spaces.Box):
        low, high = space.low.reshape(-1), space.high.reshape(-1)
        values = actions.astype(np.float64)
        out = ((values < low) | (values > high)).any(axis=1).astype(np.float64)
        return cast(np.ndarray, out)
    if isinstance(space, spaces.Discrete):
        v = actions[:, 0]
        outside: np.ndarray = ((v < space.start) | (v >= space.start + space.n)).astype(
            np.float64)
        return outside
    return np.zeros(len(actions))


def _outside_record(actions: np.ndarray, recorded: np.ndarray,
                    space: spaces.Space[Any]) -> np.ndarray:
    """Per step, 1.0 where the candidate's action lies outside what the recording holds:
    beyond the recorded range in some dimension, or a discrete action never recorded."""
    flat = recorded.reshape(len(recorded), -1)
    if isinstance(space, spaces.Box):
        low, high = flat.min(axis=0), flat.max(axis=0)
        beyond: np.ndarray = ((actions < low) | (actions > high)).any(axis=1).astype(np.float64)
        return beyond
    if flat.shape[1] == 1:  # one discrete choice a step: a vectorised lookup
        fresh: np.ndarray = ~np.isin(actions[:, 0], np.unique(flat[:, 0]))
        return fresh.astype(np.float64)
    seen = {tuple(r) for r in np.unique(flat, axis=0).tolist()}
    return np.array([tuple(r) not in seen for r in actions.tolist()], dtype=np.float64)


def _flat_observations(recording: Recording) -> tuple[np.ndarray, list[str]] | None:
    obs = recording.observations
    parts = sorted(obs.items()) if isinstance(obs, dict) else [("obs", obs)]
    arrays: list[np.ndarray] = []
    names: list[str] = []
    for key, values in parts:
        values = np.asarray(values).reshape(len(values), -1)
        if values.shape[1] > 1024:  # images: a pixel is no sensor to name
            return None
        arrays.append(values.astype(np.float64))
        names.extend(f"{key}[{i}]" for i in range(values.shape[1]))
    return np.concatenate(arrays, axis=1), names


#: How far (in standard deviations of all steps) the most different steps' mean must lie
#: from all steps' mean for a dimension to be named as setting them apart: a medium effect.
APART_Z = 0.5


def _apart(recording: Recording, mask: np.ndarray, distance: np.ndarray,
           discrete: bool) -> tuple[tuple[str, float], ...]:
    """The observation dimensions that set the most different steps (those that differ
    for discrete actions, else the top 2%, at least 1 and at most 200, of those that
    differ) apart from the rest: where their mean lies furthest from all steps' mean, in
    standard deviations (``z``, at least :data:`APART_Z` either way), at most three. Each
    dimension is read as it is (``obs[2]`` high) and by its magnitude (``|obs[1]|`` low:
    near 0, where a controller's decision boundary often lies), whichever sets them
    further apart."""
    flat = _flat_observations(recording)
    if flat is None:
        return ()
    values, names = flat
    values = values[mask]
    differing = np.flatnonzero(distance > 0)
    count = len(differing) if discrete else max(1, min(200, int(len(distance) * 0.02)))
    top = differing[np.argsort(-distance[differing], kind="stable")[:count]]
    scores = []
    for read, shown in ((values, "{}"), (np.abs(values), "|{}|")):
        std = read.std(axis=0)
        ok = std > 0
        z = np.zeros(read.shape[1])
        z[ok] = (read[top].mean(axis=0)[ok] - read.mean(axis=0)[ok]) / std[ok]
        scores.append((z, shown))
    (raw, raw_shown), (size, size_shown) = scores
    best = np.where(np.abs(size) > np.abs(raw), size, raw)
    chosen = [int(i) for i in np.argsort(-np.abs(best), kind="stable")[:3]
              if abs(best[i]) >= APART_Z]
    return tuple(((size_shown if abs(size[i]) > abs(raw[i]) else raw_shown).format(names[i]),
                  float(best[i])) for i in chosen)


# ---------------------------------------------------------------- calling the candidate

def _chunk_rows(recording: Recording) -> int:
    obs = recording.observations
    per_row = (sum(np.asarray(v)[0].nbytes for v in obs.values()) if isinstance(obs, dict)
               else np.asarray(obs)[0].nbytes)
    return max(256, CHUNK_BYTES // max(1, int(per_row)))


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


def _call(policy: Any, obs: Any, states: list[Any] | None) -> tuple[np.ndarray, np.ndarray,
                                                                     list[Any] | None]:
    n = rows(obs)
    actions, new_states = policy.act(obs, states)
    actions = np.asarray(actions)
    if len(actions) != n:
        raise ValueError(f"returned {len(actions)} actions for {n} observations")
    raw = unclipped_actions(policy, n)
    return actions, (actions if raw is None else np.asarray(raw)), new_states


def _act_stateless(policy: Any, recording: Recording) -> tuple[np.ndarray, np.ndarray,
                                                                list[FailedEpisode]]:
    """Every step in a few large calls; a call that raises is retried episode by episode,
    so that only the episodes it raises on are lost."""
    policy.reset()
    obs, limit = recording.observations, _chunk_rows(recording)
    starts, ends = recording.starts, recording.ends
    acted: list[np.ndarray | None] = [None] * recording.episodes
    asked: list[np.ndarray | None] = [None] * recording.episodes
    failed: list[FailedEpisode] = []
    group: list[int] = []

    def run(episodes: list[int]) -> None:
        lo, hi = int(starts[episodes[0]]), int(ends[episodes[-1]])
        try:
            parts = [_call(policy, take(obs, slice(a, min(a + limit, hi))), None)
                     for a in range(lo, hi, limit)]
        except Exception as exc:
            if len(episodes) > 1:
                for e in episodes:
                    run([e])
                return
            failed.append(FailedEpisode(episodes[0], int(recording.ids[episodes[0]]), 0,
                                        _error(exc)))
            return
        a_all = np.concatenate([p[0] for p in parts])
        r_all = np.concatenate([p[1] for p in parts])
        for e in episodes:
            sl = slice(int(starts[e]) - lo, int(ends[e]) - lo)
            acted[e], asked[e] = a_all[sl], r_all[sl]

    size = 0
    for e in range(recording.episodes):
        group.append(e)
        size += int(ends[e] - starts[e])
        if size >= limit:
            run(group)
            group, size = [], 0
    if group:
        run(group)
    return (*_joined(acted, asked, recording), failed)


def _act_stateful(policy: Any, recording: Recording) -> tuple[np.ndarray, np.ndarray,
                                                               list[FailedEpisode]]:
    """One call per step index, with a row for every episode still running at it, each
    row's state carried from its previous step and made afresh at its start."""
    policy.reset()
    obs, starts, lengths = recording.observations, recording.starts, recording.lengths
    states: dict[int, Any] = {e: policy.initial_state(
        episode_seed_sequence(0, e, POLICY_STREAM)) for e in range(recording.episodes)}
    out_a: dict[int, list[np.ndarray]] = {e: [] for e in states}
    out_r: dict[int, list[np.ndarray]] = {e: [] for e in states}
    failed: list[FailedEpisode] = []
    for t in range(int(lengths.max())):
        running = [e for e in states if lengths[e] > t]
        if not running:
            break
        try:
            batches = [(running, _call(policy, take(obs, starts[running] + t),
                                       [states[e] for e in running]))]
        except Exception:
            batches = []
            for e in running:  # the culprits, row by row
                try:
                    batches.append(([e], _call(policy, take(obs, starts[[e]] + t), [states[e]])))
                except Exception as exc:
                    failed.append(FailedEpisode(e, int(recording.ids[e]), t, _error(exc)))
                    del states[e]
        for members, (actions, raw, new_states) in batches:
            for i, e in enumerate(members):
                out_a[e].append(actions[i])
                out_r[e].append(raw[i])
                states[e] = None if new_states is None else new_states[i]
    acted: list[np.ndarray | None] = [np.stack(out_a[e]) if e in states else None
                                      for e in range(recording.episodes)]
    asked: list[np.ndarray | None] = [np.stack(out_r[e]) if e in states else None
                                      for e in range(recording.episodes)]
    return (*_joined(acted, asked, recording), failed)


def _joined(acted: list[np.ndarray | None], asked: list[np.ndarray | None],
            recording: Recording) -> tuple[np.ndarray, np.ndarray]:
    """Every step's candidate action, and unclipped action, in one array each (a failed
    episode's steps filled with zeros: they are masked out)."""
    template = next((a for a in acted if a is not None), None)
    recorded = np.asarray(recording.actions)
    if template is None:
        return recorded, recorded
    parts_a, parts_r = [], []
    for e in range(recording.episodes):
        if acted[e] is None:
            fill = np.zeros((int(recording.lengths[e]), *template.shape[1:]),
                            dtype=template.dtype)
            parts_a.append(fill)
            parts_r.append(fill)
        else:
            parts_a.append(cast(np.ndarray, acted[e]))
            parts_r.append(cast(np.ndarray, asked[e]))
    return np.concatenate(parts_a), np.concatenate(parts_r)
