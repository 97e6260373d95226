"""Env slots: the half of the runner that owns environments.

A :class:`SlotGroup` holds some of the pool's env slots. It is driven one decision step
at a time: ``step(actions, jobs)`` applies the actions the policy chose for its active
rows, finishes the episodes that ended, starts queued (scenario, episode) jobs in the
slots that are free, and returns a :class:`Reply` with the next observations. It knows
nothing of the policy's call, so the same group runs in the runner's process or in a
worker process (:mod:`.workers`), and the policy calls stay batched in one place.

>>> import numpy as np
>>> from pytest_rlaudit import scenarios
>>> from pytest_rlaudit.world.envs import env_spec
>>> group = SlotGroup(env_spec("CartPole-v1"), scenarios.resolve(["nominal"]), [0, 1],
...                   seed=0, max_steps=10_000, slots=2)
>>> reply = group.step(None, [(0, 0), (0, 1)])
>>> reply.obs.shape, reply.started
((2, 4), [(0, 0), (0, 1)])
>>> group.close()
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np

from .._seeding import episode_seed_sequence
from ..errors import EnvContractError, RolloutError
from ..world.atari import LIVES_LOST
from ..world.envs import AuditEnv
from ..world.perturbations import seed_perturbations
from ..world.perturbations.pgd import Pending, attack_all
from ..world.scenarios import Scenario
from . import calls
from .checks import CHECKED_STEPS, ObservationContract, unpacks_old_api, where
from .deadline import Expired

if TYPE_CHECKING:
    from ..world.agents import Policy

__all__ = ["Finished", "Reply", "SlotGroup", "where", "stack"]

Job = tuple[int, int]  # (scenario position, episode position)


def stack(observations: Sequence[Any]) -> Any:
    """Observations (arrays or dicts of arrays) as one batch along a new first axis."""
    first = observations[0]
    if isinstance(first, dict):
        return {k: np.stack([o[k] for o in observations]) for k in first}
    return np.stack(observations)


@dataclass(frozen=True)
class Finished:
    """One ended episode, as its env saw it."""

    job: Job
    ret: float
    steps: int
    env_steps: int
    capped: bool
    #: the env's reward at every environment step, below the perturbations
    trace: np.ndarray
    #: whether the env ended it by termination (not a truncation, not the step cap)
    terminated: bool = False
    #: the observation the last step returned (kept for recordings: a Minari episode
    #: holds one observation more than its actions)
    last_obs: Any = None


@dataclass
class Reply:
    """What a group says after a step: its active rows (``jobs[i]`` is row ``i`` of
    ``obs``, ``steps[i]`` its agent steps so far), the jobs it started, the episodes
    that ended, and how many queued jobs it still holds."""

    jobs: list[Job]
    obs: Any
    steps: list[int]
    started: list[Job] = field(default_factory=list)
    finished: list[Finished] = field(default_factory=list)
    backlog: int = 0
    #: running episodes whose agent restarts within them (an Atari life lost: see
    #: :data:`~pytest_rlaudit.world.atari.LIVES_LOST`)
    restarted: list[Job] = field(default_factory=list)
    #: each row's job as one number (scenario x episodes + episode), where the group
    #: has them at hand (a lock-step batch); else the driver counts them
    ids: np.ndarray | None = None


class _StepCounter(gym.Wrapper):
    """Records the reward of every environment step below the perturbations (they may
    repeat actions, so an agent step can span several env steps), and holds the env to
    its ``contract`` there, where what it returns is its own (a perturbation's noise may
    rightly leave the bounds): at each reset and on the first :data:`CHECKED_STEPS` env
    steps. ``at``: (scenario, episode, seed) of the episode it runs, for the message."""

    def __init__(self, env: gym.Env, contract: ObservationContract) -> None:
        super().__init__(env)
        self.rewards: list[SupportsFloat] = []  # as the env gave them
        self.contract = contract
        self.at: tuple[str, int, int] = ("", 0, 0)

    def reset(self, **kwargs: Any) -> Any:
        self.rewards = []
        result = self.env.reset(**kwargs)
        self.contract.check_reset(result, lambda: f"at the reset of {self._episode()}")
        return result

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        rewards = self.rewards
        rewards.append(result[1])
        if len(rewards) <= CHECKED_STEPS:
            self.contract.check_step(
                result, lambda: f"at env step {len(self.rewards)} of {self._episode()}")
        return result

    def _episode(self) -> str:
        scenario, episode, seed = self.at
        return f"episode {episode} (env seed {seed + episode}) of scenario {scenario!r}"


class _Slot:
    __slots__ = ("counter", "env", "group", "job", "lost", "obs", "ret", "steps")

    def __init__(self, group: SlotGroup) -> None:
        self.group = group  # for the watcher's words (:meth:`waiting_on`)
        self.job: Job | None = None
        self.env: gym.Env | None = None
        self.counter: _StepCounter | None = None
        self.obs: Any = None
        self.ret = 0.0
        self.steps = 0
        self.lost = 0  # lives lost so far in the episode (Atari), as the env's info says

    def waiting_on(self) -> calls.Said:
        """The env step this slot is taking, for :mod:`.calls` (noted as the slot itself:
        nothing is made per step)."""
        group, (s, e) = self.group, self.job or (0, 0)
        name, episode = group.names[s], group.indices[e]
        return ("env.step", name, episode, self.steps,
                f"at {where(name, episode, group.seed, self.steps)}")


if TYPE_CHECKING:
    class _Running(_Slot):
        """A slot running an episode (``SlotGroup.active``): its job, env and counter are
        set. For the type checker only: at run time it is a :class:`_Slot`, which
        :meth:`SlotGroup._start` makes one of (the hot path checks nothing per step)."""

        job: Job
        env: gym.Env
        counter: _StepCounter
else:
    _Running = _Slot


#: Whether a group attacks the observations of all its slots in one batch (see
#: :meth:`SlotGroup._attack`); False only to time the per-observation attack against it
#: (benchmarks/bench_adversarial.py): the numbers are the same either way.
_BATCH_ATTACKS = True


def attach_policy(env: gym.Env, policy: Policy) -> bool:
    """Hand ``policy`` to every wrapper in ``env``'s chain that attacks the agent itself
    (``attach_policy``: adversarial observations). Once per env made, never per step.

    Returns whether ``env``'s step observations are deferred attacks (:class:`Pending`)
    for the group to run in one batch: only when the attacking wrapper is the outermost
    one, as ``adversarial_obs`` is; below another wrapper, which may use the observation,
    it attacks each one in its own step.
    """
    current: Any = env
    while isinstance(current, gym.Wrapper):
        attach = getattr(current, "attach_policy", None)
        if attach is not None:
            attach(policy)
        current = current.env
    # on the class: an instance's attribute lookup might reach into the wrapped env
    if getattr(type(env), "defer_attacks", None) is None or not _BATCH_ATTACKS:
        return False
    env.defer_attacks()  # type: ignore[attr-defined]
    return True


class SlotGroup:
    """``slots`` env slots running jobs of ``scenarios`` x ``indices`` (see the module).

    ``reuse``: whether an env may run a later episode of its scenario (exact when
    ``reset(seed=...)`` restores everything; see :func:`~pytest_rlaudit.world.reuse.
    reset_is_exact`); else each episode gets a new env. ``spaces``: the observation and
    action spaces every scenario's env must keep (None: the first env made sets them).
    ``policy``: handed to wrappers that attack the agent (adversarial observations).
    """

    def __init__(self, env: AuditEnv, scenarios: Sequence[Scenario], indices: Sequence[int], *,
                 seed: int, max_steps: int, slots: int, reuse: bool = True,
                 spaces: tuple[gym.Space[Any], gym.Space[Any]] | None = None,
                 policy: Policy | None = None) -> None:
        self.audit_env = env
        self.scenarios = list(scenarios)
        self.names = [s.name for s in scenarios]
        self.indices = list(indices)
        self.seed = seed
        self.max_steps = max_steps
        self.reuse = reuse
        self.spaces = spaces
        self.policy = policy
        self.slots = [_Slot(self) for _ in range(slots)]
        self.active: list[_Running] = []
        self.idle: list[_Slot] = list(self.slots)
        self.queue: deque[Job] = deque()
        self.free: dict[int, list[tuple[gym.Env, _StepCounter]]] = {}
        self.made: list[gym.Env] = []
        self.bases: dict[int, gym.Env] = {}  # the open ones, by id (kept, so ids stay unique)
        self.contract: ObservationContract | None = None  # from the first env made
        self.attacks = False  # whether some env's step observations are deferred attacks

    # ------------------------------------------------------------------ envs
    def make(self, s: int) -> tuple[gym.Env, _StepCounter]:
        """A wrapped env of scenario ``s``: a used one when reuse is exact, else new."""
        spare = self.free.get(s)
        if spare:
            return spare.pop()
        try:
            base = self.audit_env.make()
        except RolloutError as exc:
            exc.scenario = exc.scenario or self.names[s]  # the scenario it was made for
            raise
        if id(base) in self.bases:
            raise ValueError(
                f"the env factory for {self.audit_env.name!r} returned the same env object "
                "twice; it must build a new env on each call (the audit runs several envs "
                "side by side)"
            )
        self.bases[id(base)] = base
        try:
            if self.contract is None:  # refuses a space the runner cannot batch
                self.contract = ObservationContract(base.observation_space, self.audit_env.name)
            counter = _StepCounter(base, self.contract)
            wrapped = self.scenarios[s].wrap(counter)
        except Exception:
            base.close()
            raise
        self.made.append(wrapped)
        got = (wrapped.observation_space, wrapped.action_space)
        # held to the env's own spaces, not only to the first scenario's: a pool may hold
        # only the scenarios a batch could not step
        want = self.spaces or (counter.observation_space, counter.action_space)
        if got[0] != want[0] or got[1] != want[1]:
            raise ValueError(
                f"scenario {self.names[s]!r} changes the env's spaces (observations {got[0]}, "
                f"actions {got[1]}; nominal: {want[0]}, {want[1]}); the same "
                "agent must run every scenario, so a perturbation has to keep the spaces"
            )
        self.spaces = want
        if self.policy is not None and attach_policy(wrapped, self.policy):
            self.attacks = True
        return wrapped, counter

    def _release(self, slot: _Running) -> None:
        if self.reuse:
            self.free.setdefault(slot.job[0], []).append((slot.env, slot.counter))
        else:
            slot.env.close()
            self.made.remove(slot.env)
            del self.bases[id(slot.counter.env)]
        idle: _Slot = slot
        idle.env = idle.counter = None

    def close(self) -> None:
        """Close every env this group made."""
        for wrapped in self.made:
            wrapped.close()
        self.made = []

    # ------------------------------------------------------------------ episodes
    def _start(self, slot: _Slot, job: Job) -> _Running:
        """Start ``job`` in ``slot``, idle or just done with an episode: it is running now."""
        s, e = job
        episode = self.indices[e]
        if slot.env is not None:  # it ran the episode that just ended
            done = cast(_Running, slot)
            if not self.reuse or done.job[0] != s:
                self._release(done)
        if slot.env is None:
            slot.env, slot.counter = self.make(s)
        slot.job = job
        run = cast(_Running, slot)  # its job, env and counter are set now
        run.ret, run.steps, run.lost = 0.0, 0, 0
        seed_perturbations(run.env, episode_seed_sequence(self.seed, episode, self.names[s]))
        run.counter.at = (self.names[s], episode, self.seed)
        watch = calls._ACTIVE
        if watch is not None:
            watch.on = calls.Noted("env.reset", self.names[s], episode, 0,
                                   f"at {where(self.names[s], episode, self.seed, 0)}")
        try:
            run.obs, _ = run.env.reset(seed=self.seed + episode)
        except EnvContractError:
            raise
        except Exception as exc:
            raise RolloutError(
                f"env reset failed ({type(exc).__name__}: {exc}) at "
                f"{where(self.names[s], episode, self.seed, 0)}",
                scenario=self.names[s], episode=episode, step=0,
            ) from exc
        except Expired as exc:  # the audit's deadline struck in this reset
            raise exc.locate(self.names[s], episode, 0, "in the env's reset at "
                             f"{where(self.names[s], episode, self.seed, 0)}") from None
        return run

    def _finish(self, slot: _Running, capped: bool, terminated: bool = False,
                last_obs: Any = None) -> Finished:
        return Finished(slot.job, slot.ret, slot.steps, len(slot.counter.rewards), capped,
                        np.asarray(slot.counter.rewards, dtype=np.float64), terminated,
                        last_obs)

    def _fail(self, slot: _Running, what: str) -> RolloutError:
        name, episode = self.names[slot.job[0]], self.indices[slot.job[1]]
        return RolloutError(f"{what} at {where(name, episode, self.seed, slot.steps)}",
                            scenario=name, episode=episode, step=slot.steps)

    def _stuck(self, exc: Expired, slot: _Running) -> Expired:
        name, episode = self.names[slot.job[0]], self.indices[slot.job[1]]
        return exc.locate(name, episode, slot.steps,
                          f"in the env's step at {where(name, episode, self.seed, slot.steps)}")

    def step(self, actions: Any, jobs: Sequence[Job] = ()) -> Reply:
        """Step every active row with its action (``actions[i]`` for row ``i`` of the last
        reply), queue ``jobs``, fill free slots from the queue, and say what happened."""
        # The hot path of every rollout: one pass over the active slots per decision step.
        self.queue.extend(jobs)
        started: list[Job] = []
        finished: list[Finished] = []
        still: list[_Running] = []
        restarted: list[Job] = []
        watch = calls._ACTIVE  # notes each call for the watcher: one store (see .calls)
        for i, slot in enumerate(self.active):
            if watch is not None:
                watch.on = slot
            try:
                obs, reward, terminated, truncated, info = slot.env.step(actions[i])
            except EnvContractError:
                raise
            except Exception as exc:
                if unpacks_old_api(exc):  # gymnasium's own wrappers unpack it below us
                    raise slot.counter.contract.old_api(  # the group's contract
                        f"a step failed unpacking what the env's step() returned ({exc}) at "
                        f"{where(self.names[slot.job[0]], self.indices[slot.job[1]], self.seed, slot.steps)}"
                    ) from exc
                raise self._fail(slot, f"env step failed ({type(exc).__name__}: {exc})") from exc
            except Expired as exc:  # the audit's deadline struck in this step (no cost before)
                raise self._stuck(exc, slot) from None
            slot.steps += 1
            reward = float(reward)
            if not math.isfinite(reward):
                raise self._fail(slot, f"the env returned a non-finite reward {reward}")
            slot.ret += reward
            if terminated or truncated or slot.steps >= self.max_steps:
                finished.append(self._finish(slot, not (terminated or truncated),
                                             bool(terminated), obs))
                if self.queue:
                    job = self.queue.popleft()
                    self._start(slot, job)
                    started.append(job)
                    still.append(slot)
                else:
                    self._release(slot)
                    idle: _Slot = slot
                    idle.job = None
                    self.idle.append(idle)
            else:
                slot.obs = obs
                still.append(slot)
                lost = info.get(LIVES_LOST, slot.lost) if info else slot.lost
                if lost != slot.lost:  # the zoo's frame stack starts afresh at a lost life
                    slot.lost = lost
                    restarted.append(slot.job)
        if self.attacks:  # before the new episodes start: their reset observations are clean
            self._attack(still)
        while self.idle and self.queue:
            job = self.queue.popleft()
            running = self._start(self.idle.pop(), job)
            started.append(job)
            still.append(running)
        self.active = still
        if watch is not None:
            watch.on = None  # no call of this group's under way
        return Reply([slot.job for slot in still], self._batch(still) if still else None,
                     [slot.steps for slot in still], started, finished, len(self.queue),
                     restarted)

    def _attack(self, rows: list[_Running]) -> None:
        """Run the deferred attacks of ``rows`` in one batch, each row's result the one its
        wrapper computes alone (:mod:`~pytest_rlaudit.world.perturbations.pgd`). Episodes
        that just ended are not in ``rows``: their last observation is never attacked."""
        attacked = [slot for slot in rows if isinstance(slot.obs, Pending)]
        if not attacked:
            return
        try:
            worst = attack_all([slot.obs for slot in attacked])
        except EnvContractError:
            raise
        except Exception as exc:
            raise self._fail(attacked[0], f"the adversarial attack failed ({type(exc).__name__}: "
                                          f"{exc}), in a batch of {len(attacked)} rows,") from exc
        except Expired as exc:  # the audit's deadline struck in the attack
            raise self._stuck(exc, attacked[0]) from None
        for slot, obs in zip(attacked, worst, strict=True):
            slot.obs = obs

    def _batch(self, rows: list[_Running]) -> Any:
        """The observations of ``rows`` as one batch, of the declared shape on every
        decision step (bounds are held on the first steps only, by the counters)."""
        contract = self.contract
        assert contract is not None  # made with the first env, before any row ran
        try:
            batch = stack([slot.obs for slot in rows])
        except (ValueError, TypeError):  # rows of different shapes: found just below
            batch = None
        if batch is not None and contract.fits(batch):
            return batch
        for slot in rows:  # rare: find the culprit for the message
            name, episode = self.names[slot.job[0]], self.indices[slot.job[1]]
            contract.check(slot.obs, f"at {where(name, episode, self.seed, slot.steps)} "
                           "(as the agent sees it, after the scenario's perturbation)")
        raise EnvContractError(
            f"the observations of env {self.audit_env.name!r} do not stack into one batch of "
            f"its observation space {contract.space}; each must have the declared shape")
