"""The batched lock-step episode runner.

All (scenario, episode) pairs of an audit share one pool of ``batch_size`` env slots.
At every decision step the runner makes one policy call for all active slots; a slot
whose episode ends takes the next pair from the queue, so policy calls stay as large as
possible until the queue drains. Episode ``i`` of every scenario is reset with env seed
``seed + i``, and each perturbation draws from a stream keyed on (seed, i, scenario).
Results are stored by (scenario, episode): they never depend on the batch size, the
order of the queue or the process that ran them.

>>> import numpy as np
>>> from pytest_rlaudit import scenarios
>>> from pytest_rlaudit.world.envs import env_spec
>>> from pytest_rlaudit.world.agents import as_policy
>>> policy = as_policy(lambda obs: (obs[:, 2] + obs[:, 3] > 0).astype(np.int64))
>>> out = run_episodes(policy, env_spec("CartPole-v1"), scenarios.resolve(["nominal", "jitter"]),
...                    episodes=3, seed=0)
>>> out["nominal"].returns.shape
(3,)
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .._checks import integer
from .._seeding import POLICY_STREAM, episode_seed_sequence
from ..errors import RolloutCapWarning, RolloutError
from ..world.agents import Policy
from ..world.calibration import observation_spread
from ..world.envs import AuditEnv
from ..world.perturbations import seed_perturbations
from ..world.scenarios import NOMINAL, Scenario

__all__ = ["EpisodeBatch", "run_episodes", "DEFAULT_MAX_STEPS", "DEFAULT_BATCH_SIZE"]

#: Cap on agent steps per episode; longer episodes are cut with a RolloutCapWarning.
DEFAULT_MAX_STEPS = 10_000
#: Slots in the pool when ``batch_size`` is None (measured in benchmarks/bench_rollout.py:
#: larger batches cost little more per call, so fewer calls win until env steps dominate).
DEFAULT_BATCH_SIZE = 128


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

    @staticmethod
    def concat(parts: Sequence[EpisodeBatch]) -> EpisodeBatch:
        """Join batches of one scenario run on consecutive episode ranges."""
        arrays = [np.concatenate([getattr(p, f) for p in parts])
                  for f in ("seeds", "returns", "lengths", "env_steps", "capped")]
        return EpisodeBatch(parts[0].scenario, *arrays,
                            traces=tuple(t for p in parts for t in p.traces),
                            observations=tuple(o for p in parts for o in p.observations),
                            actions=tuple(a for p in parts for a in p.actions),
                            params=parts[0].params)


class _StepCounter(gym.Wrapper):
    """Records the reward of every environment step below the perturbations (they may
    repeat actions, so an agent step can span several env steps)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.rewards: list[float] = []

    def reset(self, **kwargs: Any):
        self.rewards = []
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        result = self.env.step(action)
        self.rewards.append(result[1])
        return result


class _Slot:
    __slots__ = ("acts", "counter", "env", "job", "obs", "ret", "seen", "state", "steps")

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.acts: list[Any] = []
        self.job: tuple[int, int] | None = None
        self.env: gym.Env | None = None
        self.counter: _StepCounter | None = None
        self.obs: Any = None
        self.state: Any = None
        self.ret = 0.0
        self.steps = 0


def _attach_policy(env: gym.Env, policy: Policy) -> None:
    """Hand ``policy`` to every wrapper in ``env``'s chain that attacks the agent itself
    (``attach_policy``: adversarial observations). Once per env made, never per step."""
    current: Any = env
    while isinstance(current, gym.Wrapper):
        attach = getattr(current, "attach_policy", None)
        if attach is not None:
            attach(policy)
        current = current.env


def _where(scenario: str, episode: int, seed: int, step: int) -> str:
    return f"scenario {scenario!r}, episode {episode} (env seed {seed + episode}), agent step {step}"


def _check_obs(obs: Any, scenario: str, episode: int, seed: int, step: int) -> None:
    arrays = obs.values() if isinstance(obs, dict) else (obs,)
    if not all(np.asarray(a).dtype.kind != "f" or np.isfinite(a).all() for a in arrays):
        raise RolloutError(
            f"the env returned a non-finite observation {obs!r} at {_where(scenario, episode, seed, step)}",
            scenario=scenario, episode=episode, step=step,
        )


def _show(action: Any) -> str:
    value = np.asarray(action)
    return repr(value.tolist()) if value.dtype != object else repr(action)


def _all_finite(batch: Any) -> bool:
    arrays = batch.values() if isinstance(batch, dict) else (batch,)
    return all(a.dtype.kind != "f" or bool(np.isfinite(a).all()) for a in arrays)


def _stack(observations: list[Any]) -> Any:
    first = observations[0]
    if isinstance(first, dict):
        return {k: np.stack([o[k] for o in observations]) for k in first}
    return np.stack(observations)


class _ActionChecker:
    """Vectorised validation of a batch of actions against the env's action space."""

    def __init__(self, space: spaces.Space) -> None:
        self.space = space
        if isinstance(space, spaces.Discrete):
            self.kind = "discrete"
            self.low, self.high = int(space.start), int(space.start + space.n - 1)
        elif isinstance(space, spaces.Box):
            self.kind = "box"
        else:
            self.kind = "generic"

    def __call__(self, actions: Any, n: int) -> tuple[np.ndarray | list[Any], int | None]:
        """Return the actions to step with and the index of the first bad one (or None)."""
        if self.kind == "generic":
            acts = list(actions)
            if len(acts) != n:
                raise ValueError(f"the agent returned {len(acts)} actions for {n} observations")
            for i, a in enumerate(acts):
                if not self.space.contains(a):
                    return acts, i
            return acts, None
        acts = np.asarray(actions)
        if self.kind == "discrete":
            if acts.ndim == 2 and acts.shape[1] == 1:
                acts = acts[:, 0]
            if acts.shape != (n,):
                raise ValueError(
                    f"the agent returned actions of shape {acts.shape} for {n} observations; "
                    f"a Discrete action space needs shape ({n},)"
                )
            if acts.dtype.kind == "f":
                integral = np.isfinite(acts) & (acts == np.round(acts))
                if not integral.all():
                    return acts, int(np.argmin(integral))
                acts = acts.astype(np.int64)
            elif acts.dtype.kind not in "iub":
                return acts, 0
            bad = (acts < self.low) | (acts > self.high)
            return acts, (int(np.argmax(bad)) if bad.any() else None)
        shape = (n, *self.space.shape)
        if acts.shape != shape:
            if acts.size == math.prod(shape):
                acts = acts.reshape(shape)
            else:
                raise ValueError(
                    f"the agent returned actions of shape {acts.shape} for {n} observations; "
                    f"this Box action space needs shape {shape}"
                )
        acts = acts.astype(self.space.dtype, copy=False)
        ok = (np.isfinite(acts) & (acts >= self.space.low) & (acts <= self.space.high))
        ok = ok.reshape(n, -1).all(axis=1)
        return acts, (int(np.argmin(ok)) if not ok.all() else None)


def run_episodes(
    policy: Policy,
    env: AuditEnv,
    scenarios: Sequence[Scenario],
    episodes: int | Sequence[int],
    *,
    seed: int = 0,
    batch_size: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    record: bool | Collection[str] = False,
) -> dict[str, EpisodeBatch]:
    """Run ``episodes`` of every scenario with ``policy``, batched, and return them by name.

    ``episodes`` is a count (episode indices ``0 .. n-1``) or explicit episode indices;
    episode ``i`` resets with env seed ``seed + i``. ``batch_size`` (default
    :data:`DEFAULT_BATCH_SIZE`) is the number of env slots. ``record`` keeps every
    observation the agent saw and action it chose: for every scenario (True), or for the
    scenarios named. Exceptions from the agent or the env are re-raised as
    :class:`RolloutError` naming scenario, episode and step.

    Scenarios sized by the observations' spread (``needs_spread``, such as ``obs_noise``)
    are calibrated on the nominal episodes of the same indices: those run first (with the
    other scenarios, in one pool; added if not asked for), then the calibrated ones.
    Each batch's ``params`` say what its scenario ran with.
    """
    later = [s for s in scenarios if s.needs_spread]
    if not later:
        return _run_pool(policy, env, scenarios, episodes, seed=seed, batch_size=batch_size,
                         max_steps=max_steps, record=record)
    first = [s for s in scenarios if not s.needs_spread]
    if not any(s.name == NOMINAL.name for s in first):
        first.insert(0, NOMINAL)
    recorded = set(s.name for s in scenarios) if record is True else set(record or ())
    out = _run_pool(policy, env, first, episodes, seed=seed, batch_size=batch_size,
                    max_steps=max_steps, record=recorded | {NOMINAL.name})
    spread = observation_spread(out[NOMINAL.name].observations)
    out.update(_run_pool(policy, env, [s.calibrated(spread) for s in later], episodes,
                         seed=seed, batch_size=batch_size, max_steps=max_steps, record=recorded))
    return {s.name: out[s.name] for s in scenarios}


def _run_pool(
    policy: Policy,
    env: AuditEnv,
    scenarios: Sequence[Scenario],
    episodes: int | Sequence[int],
    *,
    seed: int,
    batch_size: int | None,
    max_steps: int,
    record: bool | Collection[str],
) -> dict[str, EpisodeBatch]:
    """:func:`run_episodes` of scenarios that need no calibration: one pool of slots."""
    indices = list(range(episodes)) if isinstance(episodes, (int, np.integer)) else list(episodes)
    if not indices or min(indices) < 0:
        raise ValueError(f"episodes must be a count >= 1 or non-negative indices, got {episodes!r}")
    if not scenarios:
        raise ValueError("run_episodes needs at least one scenario")
    seed = integer("seed", seed, minimum=0)
    batch_size = integer("batch_size", DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
                         minimum=1)
    integer("max_steps", max_steps, minimum=1)
    # One function on purpose: the slots, the queue and the per-episode arrays are the
    # state every phase below shares (fill a slot, one batched policy call, step every
    # slot, finish an episode); the helpers close over them rather than pass a dozen
    # arguments per env step on the hot path (bench_rollout.py holds it at the floor).

    names = [s.name for s in scenarios]
    recorded = [record is True or (not isinstance(record, bool) and name in record)
                for name in names]
    n_eps = len(indices)
    returns = np.zeros((len(scenarios), n_eps), dtype=np.float64)
    lengths = np.zeros((len(scenarios), n_eps), dtype=np.int64)
    env_steps = np.zeros((len(scenarios), n_eps), dtype=np.int64)
    capped = np.zeros((len(scenarios), n_eps), dtype=bool)
    traces: list[list[np.ndarray]] = [[np.empty(0)] * n_eps for _ in scenarios]
    seen: list[list[Any]] = [[()] * n_eps for _ in scenarios]
    chosen: list[list[Any]] = [[()] * n_eps for _ in scenarios]

    queue: deque[tuple[int, int]] = deque(
        (s, e) for s in range(len(scenarios)) for e in range(n_eps)
    )
    free: dict[int, list[tuple[gym.Env, _StepCounter]]] = {s: [] for s in range(len(scenarios))}
    made: list[gym.Env] = []
    base_ids: set[int] = set()
    bound = False  # once the policy is bound, every env made gets it attached (make reads it)

    def make(s: int) -> tuple[gym.Env, _StepCounter]:
        if free[s]:
            return free[s].pop()
        base = env.make()
        if id(base) in base_ids:
            raise ValueError(
                f"the env factory for {env.name!r} returned the same env object twice; it must "
                "build a new env on each call (the audit runs several envs side by side)"
            )
        base_ids.add(id(base))
        counter = _StepCounter(base)
        try:
            wrapped = scenarios[s].wrap(counter)
        except Exception:
            base.close()
            raise
        made.append(wrapped)
        if made[0] is not wrapped and (wrapped.observation_space != made[0].observation_space
                                       or wrapped.action_space != made[0].action_space):
            raise ValueError(
                f"scenario {names[s]!r} changes the env's spaces (observations "
                f"{wrapped.observation_space}, actions {wrapped.action_space}; nominal: "
                f"{made[0].observation_space}, {made[0].action_space}); the same agent must run "
                "every scenario, so a perturbation has to keep the spaces"
            )
        if bound:
            _attach_policy(wrapped, policy)
        return wrapped, counter

    first_env = make(0)
    free[0].append(first_env)
    probe = first_env[0]
    if hasattr(policy, "bind"):
        policy.bind(probe.observation_space, probe.action_space)
    _attach_policy(probe, policy)
    bound = True
    check_actions = _ActionChecker(probe.action_space)
    stateful = bool(getattr(policy, "stateful", False))
    policy.reset()

    slots = [_Slot() for _ in range(min(batch_size, len(queue)))]

    def start(slot: _Slot) -> bool:
        if not queue:
            slot.job = None
            return False
        s, e = queue.popleft()
        episode = indices[e]
        if slot.env is None or slot.job is None or slot.job[0] != s:
            if slot.env is not None and slot.job is not None:
                free[slot.job[0]].append((slot.env, slot.counter))
            slot.env, slot.counter = make(s)
        slot.job = (s, e)
        slot.ret, slot.steps = 0.0, 0
        slot.seen, slot.acts = [], []
        seed_perturbations(slot.env, episode_seed_sequence(seed, episode, names[s]))
        try:
            obs, _ = slot.env.reset(seed=seed + episode)
        except Exception as exc:
            raise RolloutError(
                f"env reset failed ({type(exc).__name__}: {exc}) at {_where(names[s], episode, seed, 0)}",
                scenario=names[s], episode=episode, step=0,
            ) from exc
        slot.obs = obs
        if stateful:
            slot.state = policy.initial_state(episode_seed_sequence(seed, episode, POLICY_STREAM))
        return True

    def finish(slot: _Slot, was_capped: bool) -> None:
        s, e = slot.job
        returns[s, e] = slot.ret
        lengths[s, e] = slot.steps
        env_steps[s, e] = len(slot.counter.rewards)
        capped[s, e] = was_capped
        traces[s][e] = np.asarray(slot.counter.rewards, dtype=np.float64)
        if recorded[s]:
            seen[s][e], chosen[s][e] = _gather(slot.seen), _gather(slot.acts)

    try:
        active = [slot for slot in slots if start(slot)]
        while active:
            obs_batch = _stack([slot.obs for slot in active])
            if not _all_finite(obs_batch):
                for slot in active:  # rare: find the culprit for the message
                    _check_obs(slot.obs, names[slot.job[0]], indices[slot.job[1]], seed, slot.steps)
            states = [slot.state for slot in active] if stateful else None
            try:
                actions, new_states = policy.act(obs_batch, states)
                actions, bad = check_actions(actions, len(active))
            except Exception as exc:
                where = "; ".join(
                    _where(names[sl.job[0]], indices[sl.job[1]], seed, sl.steps)
                    for sl in active[:3]
                )
                more = f" and {len(active) - 3} more" if len(active) > 3 else ""
                first = active[0]
                raise RolloutError(
                    f"the agent failed ({type(exc).__name__}: {exc}) in a batched call for "
                    f"{where}{more}",
                    scenario=names[first.job[0]], episode=indices[first.job[1]], step=first.steps,
                ) from exc
            if bad is not None:
                sl = active[bad]
                name, episode = names[sl.job[0]], indices[sl.job[1]]
                raise RolloutError(
                    f"the agent returned action {_show(actions[bad])}, which is not in the action space "
                    f"{check_actions.space} (non-finite, out of bounds or of the wrong type), at "
                    f"{_where(name, episode, seed, sl.steps)}. Fix the policy's output, or clip "
                    "it (gymnasium.wrappers.ClipAction) if that is what deployment does.",
                    scenario=name, episode=episode, step=sl.steps,
                )
            still = []
            for i, slot in enumerate(active):
                if stateful:
                    slot.state = new_states[i]
                if recorded[slot.job[0]]:
                    slot.seen.append(slot.obs)
                    slot.acts.append(actions[i])
                try:
                    obs, reward, terminated, truncated, _ = slot.env.step(actions[i])
                except Exception as exc:
                    name, episode = names[slot.job[0]], indices[slot.job[1]]
                    raise RolloutError(
                        f"env step failed ({type(exc).__name__}: {exc}) at "
                        f"{_where(name, episode, seed, slot.steps)}",
                        scenario=name, episode=episode, step=slot.steps,
                    ) from exc
                slot.steps += 1
                reward = float(reward)
                if not math.isfinite(reward):
                    name, episode = names[slot.job[0]], indices[slot.job[1]]
                    raise RolloutError(
                        f"the env returned a non-finite reward {reward} at "
                        f"{_where(name, episode, seed, slot.steps)}",
                        scenario=name, episode=episode, step=slot.steps,
                    )
                slot.ret += reward
                if terminated or truncated or slot.steps >= max_steps:
                    finish(slot, not (terminated or truncated))
                    if start(slot):
                        still.append(slot)
                else:
                    slot.obs = obs
                    still.append(slot)
            active = still
    finally:
        for wrapped in made:
            wrapped.close()

    n_capped = int(capped.sum())
    if n_capped:
        warnings.warn(
            f"{n_capped} episode(s) reached the cap of {max_steps} agent steps and were cut "
            "there; their returns are partial. Raise max_steps, or give the env a TimeLimit.",
            RolloutCapWarning, stacklevel=2,
        )
    seeds = np.asarray([seed + i for i in indices], dtype=np.int64)
    return {
        name: EpisodeBatch(name, seeds, returns[s], lengths[s], env_steps[s], capped[s],
                           tuple(traces[s]), tuple(seen[s]), tuple(chosen[s]),
                           dict(scenarios[s].params))
        for s, name in enumerate(names)
    }


def _gather(items: list[Any]) -> Any:
    """Per-step observations or actions as one array when they stack, else a tuple."""
    if not items:
        return np.empty(0)
    try:
        return _stack(items)
    except (ValueError, TypeError):
        return tuple(items)
