"""The one audit engine: every verb's audit takes the same steps, here, once.

Resolve the agent and the env, check (every scenario applies; the seeds fix the
episodes), run the nominal episodes, calibrate the scenarios sized by the observations'
spread, run the scenarios (in a fixed number of episodes or in adaptive rounds), run the
random reference, then rate and diagnose (:func:`.measure.summarise`). ``audit``,
``tolerance`` (an audit of a ladder of scenarios), ``check_robust``/``assert_robust`` and
the plugin's items ask an :class:`Engine` for what they need and judge the result
themselves.

>>> from pytest_rlaudit.world import scenarios
>>> engine = Engine("random", "CartPole-v1", AuditSettings(episodes=4))
>>> delay = scenarios.get("delay")
>>> engine.check([delay])
>>> batches = engine.paired([delay], range(4))
>>> measured = engine.measure(batches, [delay], random=engine.random(4), reference=0.0)
>>> sorted(measured.scenarios), measured.nominal.episodes
(['delay'], 4)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..errors import RolloutError
from ..rollout import replay_row
from ..rollout.deadline import Expired
from ..rollout.replay import Replayed, check_replay, check_replayed
from ..rollout.runner import EpisodeBatch
from ..stats import adaptive_sample
from ..world.agents import as_policy, env_for, normalizes
from ..world.batches.chains import check_scenarios
from ..world.calibration import observation_spread
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, Scenario
from .measure import Measured, summarise
from .reference import random_episodes, random_returns
from .settings import AuditSettings

__all__ = ["Engine", "Sampled"]

T = TypeVar("T")

#: The phases of an audit, as a :class:`~pytest_rlaudit.errors.RolloutError` names them
#: (``"during the seed-replay check: the agent failed ..."``).
CONTRACT, REPLAY, NOMINAL_EPISODES, CALIBRATION, SCENARIO_EPISODES, PAIRED_EPISODES, REFERENCE = (
    "the contract check", "the seed-replay check", "the nominal episodes",
    "calibration (the nominal episodes the scenario is sized on)", "the scenario episodes",
    "the nominal and scenario episodes", "the random-policy reference")


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Name the audit's phase ``name`` in any :class:`~pytest_rlaudit.errors.RolloutError`
    raised in the block (the agent's or the env's failure, a timeout, here or in another
    process), unless an inner block named one; the error itself goes on, its
    ``__cause__`` untouched."""
    try:
        yield
    except RolloutError as exc:
        exc.during(name)
        raise
    except Expired as exc:  # the deadline struck here: within() makes it the error
        if exc.phase is None:
            exc.phase = name
        raise


@dataclass(frozen=True)
class Sampled:
    """A scenario's paired batches (``"nominal"`` and its name), with, after adaptive
    rounds, the interval the stopping rule used, why it stopped and at what level."""

    batches: dict[str, EpisodeBatch]
    intervals: dict[str, tuple[float, float]] | None = None
    stopped: str | None = None
    level: float = 0.95


class Engine:
    """One agent on one env under one :class:`AuditSettings`.

    ``cache``: a mapping in which policy adapters and the nominal and random-reference
    rollouts are kept, keyed by the agent and env objects, seed and episode range, so that
    engines of one process (the plugin's items, a hypothesis test's examples) share them.
    Without one, the engine keeps its own, and runs the nominal episodes in the same pool
    as the scenarios (:meth:`paired`).
    """

    def __init__(self, agent: Any, env: EnvLike, settings: AuditSettings,
                 cache: MutableMapping[Hashable, Any] | None = None) -> None:
        self.settings = settings
        self.shared = cache is not None
        self.cache: MutableMapping[Hashable, Any] = {} if cache is None else cache
        # Adapters are kept with their agent (alive, so its id is not reused); the env is
        # the agent's (a zoo folder's wrappers and env_kwargs applied to it).
        self.policy = self.keep(("policy", agent if isinstance(agent, str) else id(agent)),
                                lambda: (agent, as_policy(agent, env=env)))[1]
        self.env = self.keep(("env", env if isinstance(env, str) else id(env), id(self.policy)),
                             lambda: (env, env_for(self.policy, env)))[1]

    @property
    def name(self) -> str:
        """The agent's name, as reports show it."""
        return str(self.policy.name)

    @property
    def details(self) -> tuple[str, ...]:
        """What reports show of the agent beyond its name: its ``details()`` if it has
        them (an ONNX policy: how it runs batches, an exported robot policy's joint names
        and action scale), else nothing."""
        said = getattr(self.policy, "details", None)  # a policy wrapper forwards it
        return tuple(str(line) for line in said()) if callable(said) else ()

    @property
    def normalized(self) -> bool:
        """Whether the agent normalises its observations (diagnoses do not advise it)."""
        return normalizes(self.policy)

    def keep(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, once per ``key`` in the cache."""
        if key not in self.cache:
            self.cache[key] = compute()
        kept: T = self.cache[key]
        return kept

    def check(self, scenarios: Sequence[Scenario]) -> None:
        """Before any rollout: every scenario applies to the env, and the seeds fix the
        episodes (else there is no pairing). Once per scenarios and env, agent and seed."""
        chosen = list(scenarios)
        with phase(CONTRACT):
            self.keep(("applicable", repr(chosen), id(self.env)),
                      lambda: check_scenarios(chosen, self.env))
        # nominal episode 0 run whole, as the audit will run it (at most max_steps); run()
        # holds the audit's own run of it to this one. Where the env can batch, only its
        # first steps here: the run's batch runs the whole of it in a row of its own
        # (rollout.replay_row), at a row's cost rather than an episode of one-row calls.
        with phase(REPLAY):
            self.keep(self._replay_key(),
                      lambda: check_replay(self.policy, self.env, seed=self.settings.seed,
                                           steps=self.settings.max_steps,
                                           whole=self.env.batch is None))

    def _replay_key(self) -> tuple[Hashable, ...]:
        s = self.settings
        return ("replay", id(self.policy), id(self.env), s.seed, s.max_steps)

    def run(self, scenarios: Sequence[Scenario], indices: range,
            record: bool | Collection[str] = False) -> dict[str, EpisodeBatch]:
        """Episodes ``indices`` of each scenario, as the settings say; nominal episode 0,
        if among them, must repeat the seed-replay check's run of it (:meth:`check`)."""
        replayed = self.cache.get(self._replay_key()) if indices.start == 0 else None
        again = replayed is not None and not replayed.whole
        asking: AbstractContextManager[list[EpisodeBatch]] = (
            replay_row.asked() if again else nullcontext([]))
        with asking as rows:
            out = self.settings.rollout(self.policy, self.env, scenarios, indices, record)
        nominal = out.get(NOMINAL.name)
        if nominal is not None and replayed is not None and len(nominal.returns):
            check_replayed(replayed, self.policy, self.env, nominal)
            if again:  # the whole episode: from the batch's replay row, else run now
                with phase(REPLAY):
                    whole = (Replayed.of(rows[0], replayed.episode) if rows else self.keep(
                        (*self._replay_key(), "whole"), lambda: check_replay(
                            self.policy, self.env, seed=self.settings.seed,
                            steps=self.settings.max_steps)))
                check_replayed(whole, self.policy, self.env, nominal)
        return out

    def nominal(self, indices: range) -> EpisodeBatch:
        """The nominal episodes ``indices``, recorded (a spread is calibrated on them), once."""
        with phase(NOMINAL_EPISODES):
            return self._nominal(indices)

    def _nominal(self, indices: range) -> EpisodeBatch:
        s = self.settings
        key = ("nominal", id(self.policy), id(self.env), s.seed, indices.start, indices.stop,
               s.max_steps)
        return self.keep(key, lambda: self.run([NOMINAL], indices, record=["nominal"])["nominal"])

    def paired(self, scenarios: Sequence[Scenario], indices: range, *,
               separate: bool | None = None) -> dict[str, EpisodeBatch]:
        """Episodes ``indices`` of nominal and of each scenario, by name. ``separate``
        (default: when the cache is shared): the nominal ones through :meth:`nominal`,
        kept for the next scenario; else in the same pool as the scenarios, which then
        calibrate themselves on them (see :meth:`calibrated`)."""
        if not (self.shared if separate is None else separate):
            # nominal's first episode recorded: it is held to the seed-replay check's step
            # by step (run()); the rest only if a scenario calibrates on them (the runner
            # records them then), since recording every row of a big batch costs
            with phase(PAIRED_EPISODES):
                return self.run([NOMINAL, *scenarios], indices,
                                record={NOMINAL.name: {indices.start}})
        with phase(SCENARIO_EPISODES):
            out = self.run(scenarios, indices)
        return {"nominal": self.nominal(indices), **out}

    def calibrated(self, scenario: Scenario) -> Scenario:
        """``scenario`` sized by the spread of the first round's nominal observations, if
        it is sized so; as it is otherwise."""
        if not scenario.needs_spread:
            return scenario
        first = range(self.settings.episodes)
        with phase(CALIBRATION):  # runs the nominal episodes, unless they ran already
            seen = self._nominal(first).observations
        return scenario.calibrated(observation_spread(seen, scenario.params.get("keys")))

    def random(self, episodes: int) -> np.ndarray:
        """A uniform random policy's returns on the first ``episodes`` episodes, once; on
        the first :data:`~.reference.CHECK_EPISODES` of them at most unless the reference
        is its mean (:func:`~.reference.random_episodes`)."""
        s = self.settings
        n = random_episodes(episodes, s.random_reference)
        with phase(REFERENCE):
            return self.keep(("random", id(self.env), s.seed, n, s.max_steps),
                             lambda: random_returns(self.env, n, run=s.rollout))

    def sample(self, scenario: Scenario, *, max_episodes: int | None = None,
               threshold: float | None = None, strict: bool = False, mode: str = "point",
               target_ci_width: float | None = None, reference: float = 0.0) -> Sampled:
        """``scenario``'s paired episodes: the settings' ``episodes``, or with
        ``max_episodes`` adaptive rounds of them until the verdict on ``threshold``
        (``strict``: ratio > it) in ``mode`` is decided or the interval is narrower than
        ``target_ci_width`` (:func:`~pytest_rlaudit.stats.adaptive_sample`)."""
        s = self.settings
        # the calibration's nominal episodes are the audit's own: run them once
        separate = self.shared or scenario.needs_spread
        if max_episodes is None or (threshold is None and target_ci_width is None):
            return Sampled(self.paired([scenario], range(s.episodes), separate=separate),
                           level=s.confidence)
        parts: list[dict[str, EpisodeBatch]] = []

        def more(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
            parts.append(self.paired([scenario], range(start, stop), separate=separate))
            return parts[-1]["nominal"].returns, parts[-1][scenario.name].returns

        outcome = adaptive_sample(
            more, episodes=s.episodes, max_episodes=max_episodes, threshold=threshold,
            target_ci_width=target_ci_width, reference=reference, confidence=s.confidence,
            strict=strict, mode=mode)
        batches = {name: EpisodeBatch.concat([p[name] for p in parts])
                   for name in ("nominal", scenario.name)}
        # the level the stopping rule used at each look
        return Sampled(batches, {scenario.name: outcome.ci}, outcome.stopped,
                       outcome.look_confidence)

    def measure(self, batches: dict[str, EpisodeBatch], scenarios: Sequence[Scenario], *,
                random: np.ndarray, reference: float,
                intervals: dict[str, tuple[float, float]] | None = None) -> Measured:
        """Rate and diagnose ``scenarios`` from their ``batches`` against the nominal ones
        (:func:`.measure.summarise`); ``random``: the random policy's returns the agent
        must beat."""
        s = self.settings
        return summarise(batches["nominal"], {sc: batches[sc.name] for sc in scenarios},
                         reference=reference, confidence=s.confidence, seed=s.seed,
                         thresholds=s.thresholds, intervals=intervals, random=random,
                         agent=self.name, normalized=self.normalized,
                         random_reference=s.random_reference)
