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
2. the agent and env together: the first :data:`REPLAY_STEPS` agent steps of one nominal
   episode run twice, each in a fresh env, one policy call per step, and are compared step
   by step. The first observation that differs after equal actions is the env's doing; the
   first action that differs on an equal observation is the agent's. Stochastic agents
   pass: their sampling is seeded per episode (``initial_state``, the ``POLICY_STREAM``).

Cheap by design: a few dozen policy calls of one row against the audit's (scenarios + 1)
x episodes episodes (benchmarks/bench_rollout.py: within a percent of an audit's time).
Any other failure of the agent or env during the replay is left to the audit itself,
which reports it in its usual words.

>>> import numpy as np
>>> from pytest_rlaudit.world.agents import as_policy
>>> from pytest_rlaudit.world.envs import env_spec
>>> check_replay(as_policy(lambda obs: (obs[:, 2] > 0).astype(np.int64)),
...              env_spec("CartPole-v1"), seed=0)
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
from ..errors import NonReproducibleError
from ..world.agents import Policy
from ..world.envs import AuditEnv
from ..world.reuse import UNSEEDED, reset_verdict, same
from ..world.scenarios import NOMINAL
from . import calls
from .checks import ActionChecker, show, where
from .slots import SlotGroup

__all__ = ["check_replay", "REPLAY_STEPS"]

#: Agent steps of the replayed episode (fewer if it ends first). Randomness outside the
#: seeds shows within a few steps (an unseeded draw differs at its first use), while each
#: step costs two policy calls of one row.
REPLAY_STEPS = 16

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
    failed: bool = False  # the agent failed or misbehaved: the audit will say so itself


def check_replay(policy: Policy, env: AuditEnv, *, seed: int, episode: int = 0,
                 steps: int = REPLAY_STEPS) -> None:
    """Raise :class:`~pytest_rlaudit.errors.NonReproducibleError` unless the env honours
    its reset seed and episode ``episode`` (env seed ``seed + episode``) replays, agent
    and env together, for its first ``steps`` agent steps (see the module).

    Also holds the env to its contract on the way (shape, bounds, API: an
    :class:`~pytest_rlaudit.errors.EnvContractError`), since the replay runs through the
    runner's own env slots.
    """
    verdict = reset_verdict(env)
    if verdict.kind == UNSEEDED:
        raise NonReproducibleError(
            f"env {env.name!r} ignores reset(seed=...): two fresh envs reset with the same "
            f"seed and stepped with the same actions differ ({verdict.detail}). {_WHY} "
            f"{_ENV_FIX}")
    first = _replay(policy, env, seed, episode, steps)
    second = _replay(policy, env, seed, episode, steps)
    if first.failed or second.failed:
        return
    label = f"episode {episode} of env {env.name!r} (env seed {seed + episode}), run twice"
    for t, (x, y) in enumerate(zip(first.observations, second.observations, strict=False)):
        if not same(x, y):
            at = "after the reset" if t == 0 else f"at agent step {t}, after the same actions"
            raise NonReproducibleError(
                f"env {env.name!r} does not replay under its seed: {label}, gave different "
                f"observations {at} ({_short(x)} vs {_short(y)}). {_WHY} {_ENV_FIX}")
        if t < min(len(first.actions), len(second.actions)) and not same(
                first.actions[t], second.actions[t]):
            raise NonReproducibleError(_agent_message(policy, label, t, first.actions[t],
                                                      second.actions[t]))
    if first.steps != second.steps or not same(first.trace, second.trace):
        raise NonReproducibleError(
            f"env {env.name!r} does not replay under its seed: {label} with the same "
            f"actions, it gave different rewards or ends (returns {float(first.trace.sum()):g} "
            f"vs {float(second.trace.sum()):g} over {first.steps} and {second.steps} agent "
            f"steps). {_WHY} {_ENV_FIX}")


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
        "protocol. Fix: act deterministically (an SB3 agent's default), or sample from the "
        "generator the audit seeds for each episode: an SB3 or CleanRL agent sampling "
        "(deterministic=False, --rl-stochastic) already does; a Policy of your own makes "
        "it in initial_state(seed), e.g. np.random.default_rng(seed), and draws from each "
        "row's state in act().")


def _replay(policy: Policy, env: AuditEnv, seed: int, episode: int, steps: int) -> _Run:
    """The first ``steps`` agent steps of nominal episode ``episode`` in a fresh env, one
    policy call of one row per step, as the runner makes them."""
    run = _Run()
    group = SlotGroup(env, [NOMINAL], [episode], seed=seed, max_steps=steps, slots=1,
                      reuse=False)
    try:
        first = group.make(0)
        policy.bind(first[0].observation_space, first[0].action_space)
        group.free[0] = [first]
        check_actions = ActionChecker(first[0].action_space)
        policy.reset()
        states = ([policy.initial_state(episode_seed_sequence(seed, episode, POLICY_STREAM))]
                  if policy.stateful else None)
        reply = group.step(None, [(0, 0)])
        while reply.jobs:
            run.observations.append(reply.obs)  # stacked afresh at every step
            watch = calls._ACTIVE
            if watch is not None:
                watch.on = calls.Noted("the policy call", "nominal", episode, len(run.actions),
                                       f"in the seed replay, for "
                                       f"{where('nominal', episode, seed, len(run.actions))}")
            try:
                chosen, states = policy.act(reply.obs, states)
                if watch is not None:
                    watch.on = None
                actions, bad = check_actions(chosen, 1)
            except Exception:
                run.failed = True
                return run
            if bad is not None:
                run.failed = True
                return run
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


def _short(obs: Any) -> str:
    """An observation (a batch of one row) in a message: short, one line."""
    row = {k: v[0] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[0]
    text = repr(row) if isinstance(row, dict) else repr(np.asarray(row).tolist())
    return text if len(text) <= 80 else text[:77] + "..."
