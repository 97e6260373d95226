"""Env slots: one gymnasium env per row of a lock-step batch.

:class:`SlotRows` is the batch kind (:mod:`pytest_rlaudit.world.batches.kinds`) of the
scalar path: each row holds one env of the audited env, wrapped whole by the scenario of
the episode it runs (timing, observation and action perturbations by their gymnasium
wrappers, which are the batch hooks on a batch of one; dynamics, pushes, adversarial
attacks and users' own wrappers inside the env's step). The same
:class:`~.lockstep.BatchGroup` that drives a vector env or a batched simulator drives it:
the queue of (scenario, episode) jobs, the returns, the caps and the replies are that
one's. What the rows add is what one env per row has: a reward trace and contract
checks below the perturbations, an Atari life lost, the adversarial attacks of all rows
in one batch, and a new env per episode where ``reset(seed=...)`` is not exact. It knows
nothing of the policy's call, so its group runs in the runner's process or in a worker
process (:mod:`.workers`), and the policy calls stay batched in one place.

This module also holds the records every group's replies are made of (:class:`Reply`,
:class:`Finished`).

>>> from pytest_rlaudit import scenarios
>>> from pytest_rlaudit.rollout.lockstep import BatchGroup
>>> from pytest_rlaudit.world.envs import env_spec
>>> nominal = scenarios.resolve(["nominal"])
>>> rows = SlotRows(env_spec("CartPole-v1"), nominal, [0, 1], seed=0, slots=2)
>>> group = BatchGroup(rows, nominal, [0, 1], seed=0, max_steps=10_000)
>>> reply = group.step(None, [(0, 0), (0, 1)])
>>> reply.obs.shape, reply.started
((2, 4), [(0, 0), (0, 1)])
>>> group.close()
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np

from .._seeding import episode_seed_sequence
from ..errors import EnvContractError, RolloutError
from ..world.atari import LIVES_LOST
from ..world.batches.kinds import BatchKind
from ..world.envs import AuditEnv
from ..world.perturbations import seed_perturbations
from ..world.perturbations.pgd import Pending, attack_all
from ..world.scenarios import Scenario
from . import calls
from .checks import CHECKED_STEPS, ObservationContract, unpacks_old_api, where
from .deadline import Expired

if TYPE_CHECKING:
    from ..world.agents import Policy

__all__ = ["Finished", "Reply", "SlotRows", "where", "stack"]

Job = tuple[int, int]  # (scenario position, episode position)
_row = attrgetter("row")


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
    __slots__ = ("action", "counter", "env", "group", "job", "lost", "obs", "row", "steps")

    def __init__(self, group: SlotRows, row: int) -> None:
        self.group = group  # for the watcher's words (:meth:`waiting_on`)
        self.row = row
        self.job: Job | None = None
        self.env: gym.Env | None = None
        self.counter: _StepCounter | None = None
        self.obs: Any = None
        self.action: Any = None  # the agent's, for the env's next step
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
        """A slot running an episode (``SlotRows.live``): its job, env and counter are
        set. For the type checker only: at run time it is a :class:`_Slot`, which
        :meth:`SlotRows.assign` makes one of (the hot path checks nothing per step)."""

        job: Job
        env: gym.Env
        counter: _StepCounter
else:
    _Running = _Slot


#: Whether the rows' adversarial attacks run in one batch (see
#: :meth:`SlotRows._attack`); False only to time the per-observation attack against it
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


class SlotRows(BatchKind):
    """``slots`` gymnasium envs of ``env`` as the rows of a lock-step batch
    (:class:`~.lockstep.BatchGroup`), each row's env wrapped whole by the scenario of the
    episode it runs (see the module).

    ``reuse``: whether an env may run a later episode of its scenario (exact when
    ``reset(seed=...)`` restores everything; see :func:`~pytest_rlaudit.world.reuse.
    reset_is_exact`); else each episode gets a new env. ``spaces``: the observation and
    action spaces every scenario's env must keep (None: an env of the first scenario is
    made here, and its spaces are the ones). ``policy``: handed to wrappers that attack
    the agent (adversarial observations).
    """

    whole = True

    def __init__(self, env: AuditEnv, scenarios: Sequence[Scenario], indices: Sequence[int], *,
                 seed: int, slots: int, reuse: bool = True,
                 spaces: tuple[gym.Space[Any], gym.Space[Any]] | None = None,
                 policy: Policy | None = None) -> None:
        self.audit_env = env
        self.label = f"env {env.name!r}"
        self.num_envs = slots
        self.scenarios = list(scenarios)
        self.names = [s.name for s in scenarios]
        self.indices = list(indices)
        self.seed = seed
        self.reuse = reuse
        self.spaces = spaces
        self.policy = policy
        self.rows = [_Slot(self, row) for row in range(slots)]
        self.live: list[_Running] = []  # the rows running an episode
        self.restarted: list[int] = []
        self.free: dict[int, list[tuple[gym.Env, _StepCounter]]] = {}
        self.made: list[gym.Env] = []
        self.bases: dict[int, gym.Env] = {}  # the open ones, by id (kept, so ids stay unique)
        self.contract: ObservationContract | None = None  # from the first env made
        self.attacks = False  # whether some env's step observations are deferred attacks
        if spaces is None:  # the first env: it sets the spaces, and runs the first job
            try:
                self.free[0] = [self.make(0)]
            except BaseException:
                self.close()
                raise

    @property
    def observation_space(self) -> gym.Space[Any]:  # type: ignore[override]
        assert self.spaces is not None  # set by the first env made
        return self.spaces[0]

    @property
    def action_space(self) -> gym.Space[Any]:  # type: ignore[override]
        assert self.spaces is not None
        return self.spaces[1]

    def idle_actions(self) -> np.ndarray:
        """Unused: each row's env steps with its own row of the policy's output
        (:meth:`give`), never a row of an array the next step overwrites."""
        return np.zeros(self.num_envs)

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

    def bind(self, policy: Policy) -> None:
        """Hand ``policy`` to the envs made so far that attack the agent, and to those to come."""
        self.policy = policy
        for wrapped in self.made:
            if attach_policy(wrapped, policy):
                self.attacks = True

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
        """Close every env the rows made."""
        for wrapped in self.made:
            wrapped.close()
        self.made = []

    # ------------------------------------------------------------------ episodes
    def assign(self, row: int, job: Job) -> None:
        """Row ``row`` runs ``job`` from its next reset: an env of its scenario (the one it
        holds if that may run it, else a spare or a new one)."""
        slot = self.rows[row]
        if slot.env is not None:  # it ran an episode before
            done = cast(_Running, slot)
            if not self.reuse or done.job[0] != job[0]:
                self._release(done)
        if slot.env is None:
            slot.env, slot.counter = self.make(job[0])
        slot.job = job

    def reset(self, ids: np.ndarray, seeds: Sequence[int]) -> Any:
        started = []
        for row in ids.tolist():
            run = cast(_Running, self.rows[row])  # its job, env and counter are set now
            self._start(run)
            started.append(run)
        self.live = sorted([*self.live, *started], key=_row)
        return None  # the group asks for each reply's rows (batch)

    def _start(self, run: _Running) -> None:
        s, e = run.job
        episode = self.indices[e]
        run.steps, run.lost = 0, 0
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

    def end(self, row: int) -> None:
        """Row ``row``'s episode is over (its env is kept for the row's next job)."""
        self.live.remove(cast(_Running, self.rows[row]))

    def give(self, rows: np.ndarray, actions: Any) -> None:
        """The agents' ``actions`` for ``rows`` (``actions[i]`` for ``rows[i]``), each
        kept for its env's next step."""
        slots = self.rows
        for i, row in enumerate(rows.tolist()):
            slots[row].action = actions[i]

    def trace(self, row: int) -> np.ndarray:
        """The env's reward at every env step of row ``row``'s episode so far, below the
        perturbations (which may hold an action for several)."""
        counter = self.rows[row].counter
        assert counter is not None  # a row that ran an episode has its env
        return np.asarray(counter.rewards, dtype=np.float64)

    def last(self, row: int) -> Any:
        """What row ``row``'s last step returned, as the agent sees it."""
        return self.rows[row].obs

    def _fail(self, slot: _Running, what: str) -> RolloutError:
        name, episode = self.names[slot.job[0]], self.indices[slot.job[1]]
        return RolloutError(f"{what} at {where(name, episode, self.seed, slot.steps)}",
                            scenario=name, episode=episode, step=slot.steps)

    def _stuck(self, exc: Expired, slot: _Running) -> Expired:
        name, episode = self.names[slot.job[0]], self.indices[slot.job[1]]
        return exc.locate(name, episode, slot.steps,
                          f"in the env's step at {where(name, episode, self.seed, slot.steps)}")

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """Step the env of every running row with the action :meth:`give` gave it; the
        observations are asked for by rows (:meth:`batch`)."""
        # The hot path of every rollout on one env per row: one pass over the running rows.
        n = self.num_envs
        rewards, terminated, truncated = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        restarted: list[int] = []
        going: list[_Running] = []
        watch = calls._ACTIVE  # notes each call for the watcher: one store (see .calls)
        for slot in self.live:
            if watch is not None:
                watch.on = slot
            try:
                obs, reward, done, cut, info = slot.env.step(slot.action)
            except EnvContractError:
                raise
            except Exception as exc:
                if unpacks_old_api(exc):  # gymnasium's own wrappers unpack it below us
                    raise slot.counter.contract.old_api(  # the rows' contract
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
            row = slot.row
            rewards[row] = reward
            slot.obs = obs
            if done or cut:
                terminated[row], truncated[row] = bool(done), bool(cut)
                continue
            going.append(slot)
            lost = info.get(LIVES_LOST, slot.lost) if info else slot.lost
            if lost != slot.lost:  # the zoo's frame stack starts afresh at a lost life
                slot.lost = lost
                restarted.append(row)
        self.restarted = restarted
        if self.attacks:  # the episodes going on only: a last observation is never attacked
            self._attack(going)
        return None, rewards, terminated, truncated

    def _attack(self, rows: list[_Running]) -> None:
        """Run the deferred attacks of ``rows`` in one batch, each row's result the one its
        wrapper computes alone (:mod:`~pytest_rlaudit.world.perturbations.pgd`)."""
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

    def batch(self, rows: Sequence[int]) -> Any:
        """The observations of ``rows`` as one batch, of the declared shape on every
        decision step (bounds are held on the first steps only, by the counters)."""
        contract = self.contract
        assert contract is not None  # made with the first env, before any row ran
        slots = [cast(_Running, self.rows[row]) for row in rows]
        try:
            batch = stack([slot.obs for slot in slots])
        except (ValueError, TypeError):  # rows of different shapes: found just below
            batch = None
        if batch is not None and contract.fits(batch):
            return batch
        for slot in slots:  # rare: find the culprit for the message
            name, episode = self.names[slot.job[0]], self.indices[slot.job[1]]
            contract.check(slot.obs, f"at {where(name, episode, self.seed, slot.steps)} "
                           "(as the agent sees it, after the scenario's perturbation)")
        raise EnvContractError(
            f"the observations of env {self.audit_env.name!r} do not stack into one batch of "
            f"its observation space {contract.space}; each must have the declared shape")
