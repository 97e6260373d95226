"""Seed replay: the assumption paired audits rest on, checked before any ratio is rated.

Episode ``i`` of every scenario, nominal included, is reset with env seed ``seed + i``, and
each scenario's episode is compared with the nominal one of the same seed (DESIGN section
5). That pairing holds only if the seed fixes the episode. An env that ignores
``reset(seed=...)`` (it draws from ``np.random``, ``random`` or a generator made without
the seed) or an agent that draws randomness outside the audit's seeds breaks it silently:
two identical audits give different ratios. :func:`check_replay` refuses both with a
:class:`~pytest_rlaudit.errors.NonReproducibleError` that says which and how to seed it:

1. the env, by :func:`~pytest_rlaudit.world.reuse.reset_verdict`: Gymnasium's own envs
   honour their seed; any other env is probed once per process (two fresh envs reset
   with one seed and stepped with the same seeded actions must agree), which the runner
   needs anyway to decide whether an env may be reused;
2. the agent and env together: nominal episode 0 runs whole (up to the audit's
   ``max_steps``) in a fresh env, one policy call per step, and its first
   :data:`PREFIX_STEPS` agent steps run a second time and are compared step by step: the
   first observation that differs after equal actions is the env's doing; the first
   action that differs on an equal observation is the agent's;
3. the whole episode, once the audit has run its own nominal episode 0
   (:func:`check_replayed`, from the engine's ``run``): step by step against the audit's
   (which records nominal's observations and actions), else in rewards and length. An
   agent that draws outside the seeds only late in an episode (from step 20 on, once a
   state is reached) is caught there, before anything is rated. Stochastic agents pass:
   their sampling is seeded per episode (``initial_state``, the ``POLICY_STREAM``). An
   agent whose actions change with the batch (float rounding in a batched forward pass)
   is refused there too, with the rounding named when the actions are close floats.

Cost: one episode of one-row policy calls (and :data:`PREFIX_STEPS` more) beside the
audit's (scenarios + 1) x episodes batched episodes: 0.14 s of a 1.6 s default-suite
audit of ``examples/ppo_cartpole.zip`` on CartPole-v1 at 30 episodes
(benchmarks/bench_seed_replay.py), once per agent, env and seed in a process. On a
batch the engine asks for ``whole=False`` and the batch runs the whole episode again in
a row of its own (:mod:`.replay_row`), at the cost of a row rather than of one-row calls.
What it still cannot see: randomness drawn only in later episodes (episode 1 on), on a
branch episode 0 never takes, or that changes no action of episode 0; state an agent keeps
from one episode to the next; and nondeterminism that shows only in another process (a
worker, a Ray actor).
Any other failure of the agent or env during the replay (an exception, an action outside
the action space) stops the audit here, in the words the runner uses for it, with the
original exception chained: an agent that raises only on its third call must not pass
for one that "did not replay" and then be audited as if nothing happened.

>>> import numpy as np
>>> from pytest_rlaudit.world.agents import as_policy
>>> from pytest_rlaudit.world.envs import env_spec
>>> replayed = check_replay(as_policy(lambda obs: (obs[:, 2] > 0).astype(np.int64)),
...                         env_spec("CartPole-v1"), seed=0)
>>> replayed.steps == len(replayed.trace)
True
>>> check_replay(as_policy(lambda obs: np.random.randint(0, 2, len(obs))),
...              env_spec("CartPole-v1"), seed=0)
Traceback (most recent call last):
...
pytest_rlaudit.errors.NonReproducibleError: agent <lambda> does not replay its own episode: ...
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._seeding import POLICY_STREAM, episode_seed_sequence
from ..errors import NonFiniteOutputError, NonReproducibleError
from ..world.agents import Policy
from ..world.envs import AuditEnv
from ..world.reuse import EXACT, UNSEEDED, Verdict, reset_verdict, same
from ..world.scenarios import NOMINAL
from . import calls
from .batches import EpisodeBatch
from .checks import ActionChecker, action_refused, agent_failed, output_not_finite, show, where
from .deadline import current
from .lockstep import BatchGroup
from .runner import DEFAULT_MAX_STEPS
from .slots import SlotRows

__all__ = ["check_replay", "check_replayed", "Replayed", "REPLAY_STEPS", "PREFIX_STEPS"]

#: Agent steps of the replayed episode by default (fewer if it ends first): a whole
#: episode, as the runner's own ``max_steps`` bounds one. An unseeded draw differs at its
#: first use, but that use may come late (an agent that explores only once the pole
#: leans): the first steps alone miss it. The engine passes the audit's ``max_steps``.
REPLAY_STEPS = DEFAULT_MAX_STEPS

#: Agent steps replayed a second time and compared step by step (fewer if the episode
#: ends first): an unseeded draw at its first use within them is named at its step and
#: blamed on the agent or the env; later ones are found by :func:`check_replayed`.
PREFIX_STEPS = 16

#: Why a broken replay matters, in every message.
_WHY = ("Paired audits compare each scenario's episode i with the nominal episode i under "
        "the same env seed (seed + i), which assumes that the seed fixes the episode; here "
        "it does not, so two identical audits would give different ratios.")


@dataclass
class _Run:
    """One replay: what the agent saw and chose at each agent step, and how it ended."""

    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    steps: int = 0
    trace: np.ndarray = field(default_factory=lambda: np.empty(0))


@dataclass(frozen=True)
class Replayed:
    """A nominal episode as the seed-replay check ran it: what the audit's own run of it
    must repeat (:func:`check_replayed`). ``whole``: run to its end (or the audit's
    ``max_steps``), else its first :data:`PREFIX_STEPS` agent steps only; ``how``: how
    the two runs compared came about, for the message."""

    episode: int
    seed: int  # the env seed it was reset with
    steps: int  # agent steps
    trace: np.ndarray  # the env's reward at every env step
    observations: list[Any] = field(default_factory=list, repr=False)  # batches of one row
    actions: list[Any] = field(default_factory=list, repr=False)
    whole: bool = True
    how: str = "run by the seed-replay check and then by the audit"

    @classmethod
    def of(cls, batch: EpisodeBatch, episode: int) -> Replayed:
        """The first episode of ``batch`` (recorded), which is episode ``episode``, run
        again in a row of the audit's batch (:mod:`.replay_row`)."""
        seen, chosen = batch.observations[0], batch.actions[0]
        return cls(episode, int(batch.seeds[0]), int(batch.lengths[0]), batch.traces[0],
                   [_one(seen, t) for t in range(len(chosen))], list(chosen),
                   how="run in two rows of the audit's batch")


def check_replay(policy: Policy, env: AuditEnv, *, seed: int, episode: int = 0,
                 steps: int = REPLAY_STEPS, whole: bool = True) -> Replayed:
    """Raise :class:`~pytest_rlaudit.errors.NonReproducibleError` unless the env honours
    its reset seed and episode ``episode`` (env seed ``seed + episode``) replays, agent
    and env together, for its first :data:`PREFIX_STEPS` agent steps; return the episode
    as run whole (up to ``steps`` agent steps, the audit's ``max_steps``), for
    :func:`check_replayed` to hold the audit's run of it to. See the module.

    ``whole=False``: the first run stops at :data:`PREFIX_STEPS` too, and the episode
    returned says so (the engine's way on a batch, where a row of the audit's own batch
    runs the whole episode again: :mod:`.replay_row`).

    Also holds the env to its contract on the way (shape, bounds, API: an
    :class:`~pytest_rlaudit.errors.EnvContractError`), since the replay runs through the
    runner's own env slots.
    """
    # A batch the user gave: every env the probe would make is the batch's row 0, so it
    # could only compare the row with itself, at a hundred steps of the whole batch; the
    # two runs below see an unseeded reset themselves, and the audit's rows are reset,
    # never remade, so there is no reuse to decide.
    given = env.batch is not None and env.batch.given is not None
    verdict = Verdict(EXACT) if given else reset_verdict(env)
    if verdict.kind == UNSEEDED:
        raise NonReproducibleError(
            f"env {env.name!r} ignores reset(seed=...): two fresh envs reset with the same "
            f"seed and stepped with the same actions differ ({verdict.detail}). {_WHY} "
            f"{_ENV_FIX}")
    limit = steps if whole else min(steps, PREFIX_STEPS)
    first = _replay(policy, env, seed, episode, limit)
    second = _replay(policy, env, seed, episode, min(steps, PREFIX_STEPS))
    if verdict.error is not None:  # a fault the replay did not meet in its own terms
        raise verdict.error
    named, fix = _env_named(env), _env_fix(env)
    label = f"episode {episode} of {named} (env seed {seed + episode}), run twice"
    for t, (x, y) in enumerate(zip(first.observations, second.observations, strict=False)):
        if not same(x, y):
            at = "after the reset" if t == 0 else f"at agent step {t}, after the same actions"
            raise NonReproducibleError(
                f"{named} does not replay under its seed: {label}, gave different "
                f"observations {at} ({_short(x)} vs {_short(y)}). {_WHY} {fix}")
        if t < min(len(first.actions), len(second.actions)) and not same(
                first.actions[t], second.actions[t]):
            raise NonReproducibleError(_agent_message(policy, label, t, first.actions[t],
                                                      second.actions[t]))
    # the second run stops at PREFIX_STEPS: up to there (or its end) they must agree
    cut = second.steps >= PREFIX_STEPS and first.steps > second.steps
    prefix = first.trace[:len(second.trace)] if cut else first.trace
    if (not cut and first.steps != second.steps) or not same(prefix, second.trace):
        raise NonReproducibleError(
            f"{named} does not replay under its seed: {label} with the same "
            f"actions, it gave different rewards or ends (returns {float(prefix.sum()):g} "
            f"vs {float(second.trace.sum()):g} over {min(first.steps, second.steps)} and "
            f"{second.steps} agent steps). {_WHY} {fix}")
    return Replayed(episode, seed + episode, first.steps, first.trace, first.observations,
                    first.actions, whole=limit == steps or first.steps < limit)


def check_replayed(replayed: Replayed | None, policy: Policy, env: AuditEnv,
                   batch: EpisodeBatch) -> None:
    """Raise :class:`~pytest_rlaudit.errors.NonReproducibleError` unless the audit's own
    run of the replayed nominal episode (``batch``'s first, its observations and actions
    if recorded) repeats the seed-replay check's (``replayed``; None: nothing to hold it
    to), step by step where recorded, else in its rewards and length (up to where the
    check ran it, if not ``whole``). Randomness outside the seeds that the first
    :data:`PREFIX_STEPS` steps did not show shows here."""
    if replayed is None:
        return
    named = _env_named(env)
    label = (f"episode {replayed.episode} of {named} (env seed {replayed.seed}), "
             f"{replayed.how}")
    if batch.observations and batch.actions:
        seen, chosen = batch.observations[0], batch.actions[0]
        for t, (x, a) in enumerate(zip(replayed.observations, replayed.actions, strict=False)):
            if t >= min(len(seen), len(chosen)):
                break
            if not same(x, _one(seen, t)):
                raise NonReproducibleError(
                    f"{named} does not replay under its seed: {label}, gave "
                    f"different observations at agent step {t}, after the same actions "
                    f"({_short(x)} vs {_short(_one(seen, t))}). {_WHY} {_env_fix(env)}")
            if not same(a, chosen[t]):
                raise NonReproducibleError(_agent_message(policy, label, t, a, chosen[t]))
    ours, steps, ret = replayed.trace, int(batch.lengths[0]), float(batch.returns[0])
    trace = batch.traces[0] if batch.traces else None
    if trace is not None and not len(trace):
        trace = None
    if not replayed.whole:  # its first steps only: compared above, and in their rewards
        if trace is None or same(ours, trace[:len(ours)]):
            return
    elif steps == replayed.steps and (same(ours, trace) if trace is not None
                                      else float(ours.sum()) == ret):
        return
    parted = ""
    if trace is not None:
        n = min(len(ours), len(trace))
        differ = np.flatnonzero(ours[:n] != trace[:n])
        at = int(differ[0]) if len(differ) else n
        parted = f"; their rewards part at env step {at}"
    raise NonReproducibleError(
        f"agent {policy.name} on {named} does not replay episode {replayed.episode} "
        f"(env seed {replayed.seed}) past its first steps: the seed-replay check ran it to a "
        f"return of {float(ours.sum()):g} over {replayed.steps} agent steps, the audit to "
        f"{float(ret):g} over {steps}{parted} (the first {PREFIX_STEPS} steps replayed "
        f"alike). {_WHY} Likely cause: randomness drawn outside the audit's seeds later in "
        "the episode, by the agent (np.random.*, random.*, torch sampling without a seeded "
        "generator, once some state is reached) or by the env. Fix for the agent: "
        f"{_AGENT_FIX} For the env: {_env_fix(env).removeprefix('Fix: ')}")


def _env_named(env: AuditEnv) -> str:
    """The env as messages name it: a batch the user gave by its label ("the batched env
    SharedStarts"), any other by its name ("env 'CartPole-v1'")."""
    given = env.batch.given if env.batch is not None else None
    return given.label if given is not None else f"env {env.name!r}"


def _env_fix(env: AuditEnv) -> str:
    """How to make ``env``'s episodes replay under their seeds: its batch kind's way
    (a batched simulator seeds each env at ``reset(env_ids, seeds)``), else a gymnasium
    env's."""
    given = env.batch.given if env.batch is not None else None
    return (given.seed_fix if given is not None else None) or _ENV_FIX


_ENV_FIX = ("Fix: draw all of the env's randomness from the generator seeded in reset: call "
            "super().reset(seed=seed) first in reset() and use self.np_random (not "
            "np.random.*, random.* or a generator made without the seed), and seed any "
            "simulator it drives from that seed. An env that truly cannot be seeded (real "
            "hardware, a simulator without seeds) cannot be audited with paired episodes: "
            "its ratios would mix the perturbation's effect with the env's own luck.")


def _agent_message(policy: Policy, label: str, t: int, a: Any, b: Any) -> str:
    name = policy.name
    x, y = np.asarray(a), np.asarray(b)
    rounding = ""
    if x.shape == y.shape and x.dtype.kind == y.dtype.kind == "f" and np.allclose(
            x, y, rtol=1e-4, atol=1e-6):
        rounding = (f" They differ by float rounding only (at most "
                    f"{float(np.max(np.abs(x - y))):.3g}): nondeterministic numerics (GPU "
                    "kernels, a varying number of threads). Fix: "
                    "torch.use_deterministic_algorithms(True), or run the agent on the CPU.")
    return (
        f"agent {name} does not replay its own episode: on {label}, it chose "
        f"{show(a)} and then {show(b)} for the same observation at agent step {t}.{rounding} "
        f"{_WHY} Likely cause: the agent draws randomness outside the audit's seeds "
        "(np.random.*, random.*, torch sampling without a seeded generator, a generator made "
        "without a seed), or keeps state from one episode to the next outside the policy "
        f"protocol. Fix: {_AGENT_FIX}")


_AGENT_FIX = (
    "act deterministically (an SB3 agent's default), or sample from the generator the "
    "audit seeds for each episode: an SB3 or CleanRL agent sampling (deterministic=False, "
    "--rl-stochastic) already does; a Policy of your own makes it in initial_state(seed), "
    "e.g. np.random.default_rng(seed), and draws from each row's state in act().")


def _replay(policy: Policy, env: AuditEnv, seed: int, episode: int, steps: int) -> _Run:
    """Nominal episode ``episode`` in a fresh env, up to ``steps`` agent steps, one
    policy call of one row per step, as the runner makes them."""
    run = _Run()
    rows = SlotRows(env, [NOMINAL], [episode], seed=seed, slots=1, reuse=False)
    group = BatchGroup(rows, [NOMINAL], [episode], seed=seed, max_steps=steps)
    try:
        policy.bind(rows.observation_space, rows.action_space)
        check_actions = ActionChecker(rows.action_space)
        policy.reset()
        try:
            states = ([policy.initial_state(episode_seed_sequence(seed, episode, POLICY_STREAM))]
                      if policy.stateful else None)
        except Exception as exc:
            raise agent_failed(exc, [(NOMINAL.name, episode, 0)], seed,
                               "its initial_state") from exc
        reply = group.step(None, [(0, 0)])
        # a whole episode may be long: outside the main thread (no alarm) the deadline is
        # checked between decision steps here too, as the runner checks it
        bound = current()
        polled = bound if bound is not None and bound.polled else None
        while reply.jobs:
            run.observations.append(reply.obs)  # stacked afresh at every step
            t = reply.steps[0]
            if polled is not None and polled.passed():
                raise polled.expire().locate(
                    NOMINAL.name, episode, t, "in the seed replay, between two decision "
                    f"steps (checked only there outside the main thread), for "
                    f"{where(NOMINAL.name, episode, seed, t)}")
            watch = calls._ACTIVE
            if watch is not None:
                watch.on = calls.Noted("the policy call", "nominal", episode, t,
                                       f"in the seed replay, for "
                                       f"{where('nominal', episode, seed, t)}")
            try:
                chosen, states = policy.act(reply.obs, states)
                if watch is not None:
                    watch.on = None
                actions, bad = check_actions(chosen, 1)
            except NonFiniteOutputError as exc:
                raise output_not_finite(exc.output, _row(reply.obs), NOMINAL.name, episode,
                                        seed, t) from exc
            except Exception as exc:
                raise agent_failed(exc, [(NOMINAL.name, episode, t)], seed) from exc
            if bad is not None:
                raise action_refused(actions[0], check_actions.space, NOMINAL.name, episode,
                                     seed, t, _row(reply.obs))
            run.actions.append(copy.deepcopy(actions[0]))
            reply = group.step(actions, [])
            restart = getattr(policy, "restart_state", None)
            if reply.restarted and states is not None and restart is not None:
                states = [restart(states[0])]  # as the runner does (an Atari life lost)
        done = reply.finished[0]
        run.steps, run.trace = done.steps, done.trace
        return run
    finally:
        group.close()


def _one(stacked: Any, t: int) -> Any:
    """Step ``t`` of a recorded episode's observations, as a batch of one row (as the
    replay keeps them)."""
    if isinstance(stacked, dict):
        return {k: np.asarray(v[t])[None] for k, v in stacked.items()}
    return np.asarray(stacked[t])[None]


def _short(obs: Any) -> str:
    """An observation (a batch of one row) in a message: short, one line."""
    row = {k: v[0] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[0]
    text = repr(row) if isinstance(row, dict) else repr(np.asarray(row).tolist())
    return text if len(text) <= 80 else text[:77] + "..."


def _row(obs: Any) -> Any:
    """The one row of a batch of one observation."""
    return {k: v[0] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[0]
