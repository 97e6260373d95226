"""``audit()``: an agent on the nominal env and on each scenario, paired by seed, with statistics.

>>> import numpy as np
>>> from pytest_rlaudit import audit
>>> def controller(obs):  # a hand-tuned CartPole controller
...     return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)
>>> result = audit(controller, "CartPole-v1", scenarios=["delay", "spike"], episodes=8)
>>> result["delay"].rating, result["spike"].rating
('PASS', 'FAIL')
>>> low, high = result["spike"].ci
>>> bool(low <= result["spike"].ratio <= high)
True
>>> result.deployment.rating    # the worst deployment scenario's rating
'FAIL'

(The module is ``auditing``, not ``audit``: a submodule named ``audit`` would replace the
function ``pytest_rlaudit.audit`` on the package as soon as it was imported.)
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..rollout.calls import CALL_TIMEOUT
from ..rollout.runner import DEFAULT_MAX_STEPS
from ..stats import DEFAULT_THRESHOLDS, Thresholds
from ..world import scenarios as registry
from ..world.envs import EnvLike
from ..world.scenarios import NOMINAL, ScenarioLike
from .engine import Engine
from .measure import summarise
from .outcomes import SCHEMA_VERSION, Aggregate, AuditResult, ScenarioResult
from .progress import showing
from .reference import random_episodes, reference_score
from .settings import AuditSettings, check_episodes

__all__ = ["audit", "run_audit", "AuditResult", "ScenarioResult", "Aggregate",
           "SCHEMA_VERSION", "summarise", "check_episodes"]


def audit(
    agent: Any,
    env: EnvLike,
    scenarios: ScenarioLike | Iterable[ScenarioLike] | None = None,
    episodes: int = 30,
    seed: int = 0,
    batch_size: int | None = None,
    reference: float | str = 0,
    confidence: float = 0.95,
    *,
    thresholds: Thresholds | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    workers: int | str | None = None,
    backend: str = "local",
    timeout: float | None = None,
    progress: bool | None = None,
    call_timeout: float | None = CALL_TIMEOUT,
) -> AuditResult:
    """Audit ``agent`` on ``env`` under ``scenarios`` (default: the deployment + stress suite).

    Episode ``i`` of every scenario, nominal included, resets with env seed ``seed + i``,
    so returns are paired by episode. ``reference`` is the score a ratio is measured
    from: 0, a number, or ``"random"`` (a uniform random policy on the same seeds);
    ``ratio = (mean(perturbed) - ref) / (mean(nominal) - ref)``. ``thresholds`` sets the
    rating scale (default PASS > 0.95, MILD > 0.80, DEGRADED > 0.50).

    ``env`` is an id, an ``EnvSpec`` or a factory of one env; or a batch, run as one
    lock-step batch with the same seeds and pairing: a ``gymnasium.vector.VectorEnv``
    (envpool's pools too) or a :class:`~pytest_rlaudit.BatchedEnv` (a GPU simulator's
    adapter). CartPole ids run on gymnasium's vector env by themselves, with the numbers
    of one env per slot; ``batch_size`` (None: every episode at once there, up to 4,096;
    else 128 env slots) is the rows. See the how-to "Vector envs and GPU simulators".

    ``workers`` (a count or ``"auto"``) runs the episodes in that many processes, each
    with its own copy of the agent; ``backend="ray"`` runs shards of the episodes
    on Ray actors (``workers`` of them; default: the cluster's CPUs). Neither changes a
    number: see :func:`~pytest_rlaudit.rollout.runner.run_episodes`.

    ``timeout`` (seconds, None: no limit) bounds the whole audit: past it, it stops with
    :class:`~pytest_rlaudit.errors.RolloutTimeoutError` naming the scenario, episode and
    agent step it was stuck in, and its worker processes are killed. An env step that
    never returns is interrupted when the audit runs in the main thread (a ``SIGALRM``
    timer, sharing the signal with pytest-timeout's) and in worker processes; in another
    thread the deadline is checked between decision steps only (see
    :mod:`pytest_rlaudit.rollout.deadline`). ``call_timeout`` (seconds, default 60; None
    or 0: no bound) bounds each env step, reset and policy call, even with no
    ``timeout``: one that never returns stops the audit with the same error, naming the
    call (see :mod:`pytest_rlaudit.rollout.calls`).

    ``progress``: once the audit has run about 2 s, show its episodes done of total and
    the time left in a tqdm bar (None, the default: when standard error is a terminal or
    this is a notebook, and tqdm is installed; True: always, a plain line without tqdm;
    False: never). See :mod:`pytest_rlaudit.auditing.progress`.

    >>> r = audit("random", "CartPole-v1", scenarios="speed_5x", episodes=2)
    >>> sorted(r.to_dict()["scenarios"])
    ['speed_5x']
    """
    settings = AuditSettings(
        episodes=episodes, seed=seed, reference=reference, confidence=confidence,
        thresholds=thresholds or DEFAULT_THRESHOLDS, batch_size=batch_size,
        max_steps=max_steps, workers=workers, backend=backend, timeout=timeout,
        progress=progress, call_timeout=call_timeout)
    return run_audit(agent, env, scenarios, settings)


def run_audit(agent: Any, env: EnvLike, scenarios: ScenarioLike | Iterable[ScenarioLike] | None,
              settings: AuditSettings, *, random: np.ndarray | None = None,
              engine: Engine | None = None) -> AuditResult:
    """:func:`audit` with its settings made: the nominal episodes and ``scenarios``' in
    one pool, the random reference, then the statistics (:class:`.engine.Engine`).

    ``random``: the uniform random policy's returns on these episodes of this env, if
    already run (:func:`~.runs.audit_runs` runs them once for all its runs: they depend
    only on the env and the seeds); ``engine``: the engine to audit with, if made."""
    __tracebackhide__ = True  # pytest shows the caller's line
    with settings.limits():
        chosen = [s for s in registry.resolve(scenarios) if s.name != NOMINAL.name]
        engine = engine or Engine(agent, env, settings)
        engine.check(chosen)  # before any rollout, not after nominal
        episodes = settings.episodes
        started = time.perf_counter()
        # + nominal and, unless given, random
        randoms = 0 if random is not None else random_episodes(episodes, settings.random_reference)
        with showing(settings.progress, expected=(len(chosen) + 1) * episodes + randoms):
            batches = engine.paired(chosen, range(episodes))
            # as run: a scenario sized by the observations' spread with the spread calibrated
            chosen = [s.with_params(**batches[s.name].params) for s in chosen]
            random = engine.random(episodes) if random is None else random
        ref = reference_score(settings.reference, random)
        measured = engine.measure(batches, chosen, random=random, reference=ref)
        return AuditResult(
            agent=engine.name,
            env=engine.env.name,
            seed=settings.seed,
            episodes=episodes,
            reference=ref,
            confidence=settings.confidence,
            thresholds=settings.thresholds,
            nominal=measured.nominal,
            scenarios=measured.scenarios,
            seconds=time.perf_counter() - started,
            margin=measured.margin,
            agent_details=engine.details,
        )
