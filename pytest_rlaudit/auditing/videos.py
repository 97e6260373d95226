"""Film a failing scenario: its worst episode replayed with frames, beside its nominal twin.

:func:`capture` picks the episode of a record with the largest paired drop (nominal minus
perturbed return), replays it and its nominal twin (the same env seed) through the audit's
own runner, so seeding and perturbations are exactly the audit's, on a variant of the env
that renders ``rgb_array``, and checks that the replayed returns are the recorded ones
(a video of another episode would mislead: it is refused instead). The clip is a window of
env steps around the step where the two episodes part
(:func:`~pytest_rlaudit.auditing.diagnosis.parting_step`), the same steps on both sides.
Turning a :class:`Clip` into a GIF is :mod:`pytest_rlaudit.reports.gif`'s job.

Whatever cannot be filmed raises :class:`VideoUnavailable` saying why; the record's
``video`` field then holds ``{"skipped": why}``.

>>> import numpy as np
>>> from pytest_rlaudit import check_robust, scenarios
>>> from pytest_rlaudit.auditing.records import record_of
>>> agent = lambda obs: (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)
>>> rec = record_of("t::x", check_robust(agent, "CartPole-v1", "speed_5x", episodes=2), None)
>>> clip = capture(agent, "CartPole-v1", scenarios.get("speed_5x"), rec)
>>> clip.field("videos/x.gif")["start"] <= clip.parting_step < clip.field("videos/x.gif")["stop"]
True
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from .._seeding import episode_seed
from ..errors import RLAuditError, RolloutError
from ..rollout.runner import run_episodes
from ..world.agents import as_policy, env_for
from ..world.envs import AuditEnv, EnvLike
from ..world.scenarios import NOMINAL, Scenario
from .diagnosis import parting_step

__all__ = ["BEFORE", "AFTER", "MAX_FRAMES", "MAX_HEIGHT", "Clip", "VideoUnavailable",
           "worst_episode", "rendering_env", "window", "shrink", "capture"]

#: Env steps shown before and after the parting step.
BEFORE, AFTER = 40, 40
#: At most this many frames per side (a longer window is subsampled), each at most
#: ``MAX_HEIGHT`` pixels high: the GIF stays small enough to embed in a report.
MAX_FRAMES, MAX_HEIGHT = 120, 240


class VideoUnavailable(RLAuditError):
    """Why an episode cannot be filmed (the env cannot render, the replay differs, ...)."""


@dataclass(frozen=True)
class Clip:
    """Frames of one episode under a scenario and of its nominal twin, step by step.

    ``steps[j]`` is the env step that frame ``j`` of both sides shows (0: just after reset,
    t: just after env step t); an episode shorter than a step holds its last frame.
    ``lengths``: env steps of the perturbed and the nominal episode; ``returns`` theirs.
    """

    scenario: str
    episode: int
    seed: int
    parting_step: int | None
    steps: tuple[int, ...]
    perturbed: tuple[np.ndarray, ...]
    nominal: tuple[np.ndarray, ...]
    lengths: tuple[int, int]
    returns: tuple[float, float]

    @property
    def start(self) -> int:
        return self.steps[0]

    @property
    def stop(self) -> int:
        return self.steps[-1] + 1

    def field(self, file: str) -> dict[str, Any]:
        """The record's ``video`` field for this clip saved at ``file`` (relative to the
        report folder).

        >>> Clip("jitter", 3, 3, 12, (0, 1), (), (), (5, 9), (5.0, 9.0)).field("videos/a.gif")
        {'file': 'videos/a.gif', 'episode': 3, 'seed': 3, 'parting_step': 12, 'start': 0, 'stop': 2}
        """
        return {"file": file, "episode": self.episode, "seed": self.seed,
                "parting_step": self.parting_step, "start": self.start, "stop": self.stop}


def worst_episode(returns: Sequence[float], nominal_returns: Sequence[float]) -> int:
    """The position of the episode with the largest paired drop (ties: the first).

    >>> worst_episode([500.0, 120.0, 80.0], [500.0, 500.0, 460.0])
    1
    """
    drops = np.asarray(nominal_returns, dtype=np.float64) - np.asarray(returns, dtype=np.float64)
    return int(np.argmax(drops))


def window(parting: int | None, horizon: int, *, before: int = BEFORE, after: int = AFTER,
           max_frames: int = MAX_FRAMES) -> tuple[int, ...]:
    """The env steps to show: ``before`` steps before ``parting`` to ``after`` after it
    (from step 0 when the pair never parts), within ``0 .. horizon``; subsampled to at most
    ``max_frames`` on a grid through the parting step, so that step is always shown.

    >>> window(60, 500)[0], window(60, 500)[-1], len(window(60, 500))
    (20, 100, 81)
    >>> window(3, 7)
    (0, 1, 2, 3, 4, 5, 6, 7)
    >>> window(101, 500, before=100, after=100, max_frames=50)[:3]
    (1, 6, 11)
    """
    anchor = 0 if parting is None else min(parting, horizon)
    start = max(0, anchor - before)
    stop = min(horizon + 1, (anchor if parting is not None else start + before) + after + 1)
    stride = math.ceil((stop - start) / max_frames)
    return tuple(t for t in range(start, stop) if (t - anchor) % stride == 0)


def shrink(frame: np.ndarray, max_height: int = MAX_HEIGHT) -> np.ndarray:
    """``frame`` (H, W, 3) uint8, scaled down by a whole factor to at most ``max_height``
    rows, each pixel the mean of its block, rounded (integer arithmetic: the same frame
    gives the same bytes everywhere).

    >>> shrink(np.zeros((400, 600, 3), np.uint8)).shape
    (200, 300, 3)
    >>> shrink(np.array([[[0], [255]], [[0], [0]]], np.uint8), max_height=1)[0, 0]
    array([64], dtype=uint8)
    """
    factor = math.ceil(frame.shape[0] / max_height)
    if factor <= 1:
        return frame
    h, w = frame.shape[0] // factor, frame.shape[1] // factor
    cells = factor * factor
    total = np.zeros((h, w, frame.shape[2]), np.uint16 if cells * 255 < 2**16 else np.uint32)
    for i in range(factor):  # factor**2 strided adds: a few times faster than a mean over axes
        for j in range(factor):
            total += frame[i:h * factor:factor, j:w * factor:factor]
    mean: np.ndarray = ((total + cells // 2) // cells).astype(np.uint8)
    return mean


def _rgb(frame: Any, name: str) -> np.ndarray:
    """``frame`` as (H, W, 3) uint8, or VideoUnavailable saying what render() gave."""
    if frame is None:
        raise VideoUnavailable(f"{name}'s render() returned None in rgb_array mode, so there "
                               "are no frames to film")
    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] not in (3, 4) or array.dtype != np.uint8:
        raise VideoUnavailable(f"{name}'s render() returned {array.dtype} of shape {array.shape}, "
                               "not an RGB image (H, W, 3) of uint8")
    return array[:, :, :3]


class _Frames(gym.Wrapper):
    """Renders the env just after reset (step 0) and just after each env step in ``wanted``.

    It sits on the env as the audit makes it, below the perturbations, so its steps are
    the env steps of the runner's reward traces (not agent steps: an action held k times
    is k steps here). Frames outside ``wanted`` are never rendered (rendering costs more
    than stepping), which is exact only because rendering does not change the env.
    """

    def __init__(self, env: gym.Env, name: str, wanted: frozenset[int], max_height: int,
                 made: list[_Frames]) -> None:
        super().__init__(env)
        self.name, self.wanted, self.max_height = name, wanted, max_height
        self.frames: dict[int, np.ndarray] = {}
        self.t = 0
        self.reset_seed: int | None = None
        made.append(self)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        out = self.env.reset(seed=seed, options=options)
        self.frames, self.t, self.reset_seed = {}, 0, seed
        self._grab()
        return out

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        out = self.env.step(action)
        self.t += 1
        self._grab()
        return out

    def _grab(self) -> None:
        if self.t in self.wanted:
            self.frames[self.t] = shrink(_rgb(self.env.render(), self.name), self.max_height)


def rendering_env(env: AuditEnv) -> AuditEnv:
    """``env`` made with ``render_mode="rgb_array"``: itself when it renders so already;
    for a Gymnasium id or spec, the same id with the same keyword arguments (and the
    agent's wrappers, if any) plus that render mode. VideoUnavailable for a factory that
    does not render rgb_array, or an env that has no such mode.

    >>> from pytest_rlaudit.world.envs import env_spec
    >>> rendering_env(env_spec("CartPole-v1")).make().render_mode
    'rgb_array'
    """
    probe = env.make()
    try:
        mode, modes = probe.render_mode, probe.metadata.get("render_modes") or []
        made_with = getattr(probe.unwrapped.spec, "kwargs", None)
    finally:
        probe.close()
    if mode == "rgb_array":
        return env
    if "rgb_array" not in modes:
        raise VideoUnavailable(f"{env.name} does not render rgb_array (its render modes: "
                               f"{', '.join(map(str, modes)) or 'none'})")
    if env.source is None:
        raise VideoUnavailable(
            f"the env factory {env.name!r} makes envs with render_mode={mode!r}; to film it, "
            "make the factory pass render_mode='rgb_array' to gymnasium.make (or to the env)")
    source, needs = env.source, env.needs
    # The kwargs the env was made with (registered ones and those given to make): every
    # one of them again, only the render mode changed.
    kwargs = {**(made_with if made_with is not None else dict(getattr(needs, "env_kwargs", {}))),
              "render_mode": "rgb_array"}
    wrap = needs.wrap if getattr(needs, "wrappers", ()) else (lambda e: e)
    return AuditEnv(env.name, lambda: wrap(gym.make(source, **kwargs)), source=source,
                    needs=needs)


def _renders(env: AuditEnv) -> AuditEnv:
    """``env`` if one of its envs, reset, renders an RGB image; else VideoUnavailable
    saying what it did (before any replay, where the runner would bury the cause)."""
    probe = env.make()
    try:
        probe.reset(seed=0)
        _rgb(probe.render(), env.name)
    except VideoUnavailable:
        raise
    except Exception as exc:  # a missing renderer (pygame, a GL context) is a reason, not a crash
        raise VideoUnavailable(f"{env.name} cannot render rgb_array here "
                               f"({type(exc).__name__}: {exc})") from exc
    finally:
        probe.close()
    return env


def _replay(policy: Any, env: AuditEnv, scenario: Scenario, index: int, seed: int,
            wanted: frozenset[int], max_height: int) -> tuple[float, np.ndarray, dict[int, Any]]:
    """(return, reward trace, frames by env step) of episode ``index`` of ``scenario``."""
    made: list[_Frames] = []
    filmed = AuditEnv(env.name, lambda: _Frames(env.make(), env.name, wanted, max_height, made),
                      source=env.source, needs=env.needs)
    with warnings.catch_warnings():  # the audit has said it already (a capped episode, ...)
        warnings.simplefilter("ignore")
        try:
            batch = run_episodes(policy, filmed, [scenario], [index], seed=seed, batch_size=1)[
                scenario.name]
        except RolloutError as exc:  # a frame that could not be taken: say why, not where
            if isinstance(exc.__cause__, VideoUnavailable):
                raise exc.__cause__ from None
            raise
    # The env that ran the episode: the last one reset with its seed (a reuse probe may
    # have made and reset others first).
    ran = [f for f in made if f.reset_seed == episode_seed(seed, index)]
    frames = ran[-1].frames if ran else {}
    for f in made:
        f.close()
    return float(batch.returns[0]), batch.traces[0], frames


@contextmanager
def _offscreen() -> Iterator[None]:
    """SDL without a display while filming, unless the user chose a driver: pygame (which
    gymnasium's classic-control and Box2D envs draw with) needs none for rgb_array frames,
    and probing for one prints errors into the failing test's output on headless machines."""
    if "SDL_VIDEODRIVER" in os.environ:
        yield
        return
    os.environ["SDL_VIDEODRIVER"] = "dummy"
    try:
        yield
    finally:
        os.environ.pop("SDL_VIDEODRIVER", None)


def _same(replayed: float, recorded: float) -> bool:
    # Not bit for bit: the audit's policy calls were batched with other episodes, and a
    # float policy may round its actions differently by batch size; such an episode looks
    # the same, a different one shows in its return.
    return math.isclose(replayed, recorded, rel_tol=1e-6, abs_tol=1e-9)


def capture(agent: Any, env: EnvLike, scenario: Scenario, record: Mapping[str, Any], *,
            before: int = BEFORE, after: int = AFTER, max_frames: int = MAX_FRAMES,
            max_height: int = MAX_HEIGHT) -> Clip:
    """The :class:`Clip` of ``record``'s worst episode (see the module) under ``scenario``
    (the audited one, as given to the audit), for ``agent`` on ``env``; or
    VideoUnavailable saying why not.

    The record gives the seed, the episodes and their recorded returns (and for a
    scenario calibrated on the observations' spread, that spread). ``before`` / ``after``:
    env steps shown around the parting step; ``max_frames`` / ``max_height``: see
    :data:`MAX_FRAMES`. The same inputs give the same clip, frame for frame.
    """
    with _offscreen():
        return _capture(agent, env, scenario, record, before=before, after=after,
                        max_frames=max_frames, max_height=max_height)


def _capture(agent: Any, env: EnvLike, scenario: Scenario, record: Mapping[str, Any], *,
             before: int, after: int, max_frames: int, max_height: int) -> Clip:
    seed, position = int(record["seed"]), worst_episode(record["returns"],
                                                        record["nominal_returns"])
    index = int(record["seeds"][position]) - seed
    policy = as_policy(agent, env=env)
    with warnings.catch_warnings():  # said once by the audit (an agent trained elsewhere)
        warnings.simplefilter("ignore")
        spec = _renders(rendering_env(env_for(policy, env)))
    if scenario.needs_spread:  # the audit's own calibration, which one episode would not give
        spread = record.get("params", {}).get("spread")
        scenario = scenario.calibrated(None if spread is None else tuple(spread))
    pairs = ((scenario, float(record["returns"][position])),
             (NOMINAL, float(record["nominal_returns"][position])))
    traces = []
    for chosen, recorded in pairs:
        got, trace, _ = _replay(policy, spec, chosen, index, seed, frozenset(), max_height)
        if not _same(got, recorded):
            raise VideoUnavailable(
                f"the replay of episode {index} (env seed {episode_seed(seed, index)}) under "
                f"{chosen.name!r} returned {got:g}, not the recorded {recorded:g}: the agent "
                "or the env is not deterministic given the seed (or changed since the audit, "
                "as an agent a test trains further), so a video could show another episode")
        traces.append(trace)
    parted, _ = parting_step([traces[1]], [traces[0]],
                             reference=float(record.get("reference_score", 0.0)))
    lengths = (len(traces[0]), len(traces[1]))
    steps = window(None if parted is None else int(parted), max(lengths), before=before,
                   after=after, max_frames=max_frames)
    sides = []
    for (chosen, recorded), length in zip(pairs, lengths, strict=True):
        shown = frozenset(min(t, length) for t in steps)
        got, _, frames = _replay(policy, spec, chosen, index, seed, shown, max_height)
        if not _same(got, recorded) or set(frames) != shown:
            raise VideoUnavailable(f"the filmed replay of episode {index} under {chosen.name!r} "
                                   "differs from the first: the env's rendering changes it")
        sides.append(tuple(frames[min(t, length)] for t in steps))
    return Clip(scenario.name, index, episode_seed(seed, index), None if parted is None else int(parted),
                steps, sides[0], sides[1], lengths, (pairs[0][1], pairs[1][1]))
