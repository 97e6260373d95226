"""The runner's half of a pool of env slots: it hands out the queue's jobs, makes every
policy call and gathers the results by (scenario, episode).

Groups of env slots (:class:`~.lockstep.BatchGroup`) step the envs, in this process
(:class:`~.workers.LocalGroup`) or in a worker process (:class:`~.workers.WorkerPart`),
all behind one ``send``/``receive`` pair. :func:`drive` runs one pool: a :class:`Driver`
holds what every group shares (the per-episode arrays, each row's policy state, the
records) and makes the policy calls; :class:`Turns` says which groups go when.

The groups are split into phases (one group per process in each) that take turns: for
phase ``p`` the driver takes in its groups' replies, makes ONE policy call for the rows
of all of them, sends the worker processes their actions and steps this process's own
group while they step theirs, then reads the worker replies of the other phase, which
they stepped meanwhile (with one phase, of this phase).

>>> deal(deque([(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]), [2, 3])
[[(0, 1), (1, 1)], [(0, 0), (1, 0), (2, 0)]]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, cast

import numpy as np

from .._seeding import POLICY_STREAM, episode_seed_sequence, episode_seeds
from ..errors import NonFiniteOutputError, RolloutError
from ..world.agents import Policy
from ..world.scenarios import Scenario
from . import calls, progress, replay_row
from .batches import EpisodeBatch
from .call_log import CallLog
from .checks import ActionChecker, action_refused, agent_failed, all_finite, check_obs, output_not_finite
from .deadline import Expired, current
from .slots import Finished, Job, Reply, stack, where
from .workers import LocalGroup, Placer

__all__ = ["drive", "Driver", "Turns", "placer", "deal", "recorded_jobs"]


def drive(policy: Policy, phases: list[list[Any]], jobs: deque[Job], scenarios: Sequence[Scenario],
          indices: list[int], *, seed: int, record: bool | Collection[str],
          space: Any) -> dict[str, EpisodeBatch]:
    """Run every job of the queue ``jobs`` on the groups of ``phases`` (this process's own
    first in each phase, :mod:`.workers`) and return the batches by scenario name.

    ``record``: keep what the agent saw and chose, in every scenario (True) or in those
    named; ``space``: the env's action space, which every action must be in.
    """
    groups = [group for phase in phases for group in phase]
    # With several groups each holds a few queued jobs beyond its slots, so a slot that
    # frees up starts its next episode at once; a few, so no group hoards the queue's tail.
    driver = Driver(policy, jobs, scenarios, indices, seed=seed, record=record, space=space,
                    backlog=0 if len(groups) == 1 else 2)
    with calls.watching_calls():
        Turns(driver, phases).run()
    return driver.batches()


class Driver:
    """The state one pool run shares across its groups and phases (see the module): the
    queue, the per-episode results, each row's policy state and the records.

    The groups' replies come in through :meth:`take_in`, each batch of rows goes to the
    policy through :meth:`act`, and :meth:`batches` returns the results.
    """

    def __init__(self, policy: Policy, jobs: deque[Job], scenarios: Sequence[Scenario],
                 indices: list[int], *, seed: int, record: bool | Collection[str], space: Any,
                 backlog: int) -> None:
        self.policy = policy
        self.jobs = jobs
        self.scenarios = scenarios
        names = [s.name for s in scenarios]
        self.names = [replay_row.shown(name) for name in names]  # as messages name them
        self.indices = indices
        self.seed = seed
        self.backlog = backlog  # queued jobs a group holds beyond its slots
        self.recorded = [record is True or (not isinstance(record, bool) and name in record)
                         for name in names]
        shape = (len(scenarios), len(indices))
        self.returns = np.zeros(shape, dtype=np.float64)
        self.lengths = np.zeros(shape, dtype=np.int64)
        self.env_steps = np.zeros(shape, dtype=np.int64)
        self.capped = np.zeros(shape, dtype=bool)
        self.terminated = np.zeros(shape, dtype=bool)
        self.last_seen: list[list[Any]] = [[None] * shape[1] for _ in scenarios]
        self.traces: list[list[np.ndarray]] = [[np.empty(0)] * shape[1] for _ in scenarios]
        self.seen: list[list[Any]] = [[()] * shape[1] for _ in scenarios]
        self.chosen: list[list[Any]] = [[()] * shape[1] for _ in scenarios]
        self.rows_seen: dict[Job, list[Any]] = {}
        self.rows_chosen: dict[Job, list[Any]] = {}
        # array observations are recorded by call (CallLog), others row by row
        self.log = CallLog() if any(self.recorded) else None
        self.logged = recorded_jobs(record, names, indices)  # by job id
        self.state_of: dict[Job, Any] = {}
        self.check_actions = ActionChecker(space)
        self.stateful = bool(policy.stateful)
        # the per-row pass after a policy call is skipped when it has nothing to keep
        self.keeps_rows = self.stateful or any(self.recorded)
        self.width = shape[1]  # a job's id: scenario x episodes + episode
        self.place = placer(self.names, indices, seed)
        self.sink = progress.current()  # None unless someone shows the audit's progress
        # a seed-replay row's scenario (the last), which the progress does not count
        self.unshown = len(names) - 1 if names[-1] == replay_row.ROW.name else None
        self.steps = 0  # policy calls made while a watcher looks (see .calls)
        self.acting: Reply | None = None  # the rows of the policy call under way
        policy.reset()

    def hand_out(self, wanted: int) -> list[Job]:
        """Up to ``wanted`` jobs from the front of the queue."""
        jobs = self.jobs
        return [jobs.popleft() for _ in range(min(wanted, len(jobs)))]

    def take_in(self, reply: Reply) -> None:
        """A group's reply: store the episodes it finished, start the state and the records
        of those it started."""
        for done in reply.finished:
            self.finish(done)
        for job in reply.started:
            if self.stateful:
                episode = self.indices[job[1]]
                try:
                    self.state_of[job] = self.policy.initial_state(
                        episode_seed_sequence(self.seed, episode, POLICY_STREAM))
                except Exception as exc:
                    raise agent_failed(exc, [(self.names[job[0]], episode, 0)], self.seed,
                                       "its initial_state") from exc
            if self.logged[job[0] * self.width + job[1]]:
                self.rows_seen[job], self.rows_chosen[job] = [], []
        if reply.restarted and self.stateful:
            restart = getattr(self.policy, "restart_state", None)
            if restart is not None:
                for job in reply.restarted:
                    self.state_of[job] = restart(self.state_of[job])
        if self.sink is not None:
            if self.unshown is None:
                self.sink.advance(len(reply.jobs), len(reply.started),
                                  [d.steps for d in reply.finished])
            else:  # the seed-replay row is the check's, not one of the audit's episodes
                self.sink.advance(len(reply.jobs), sum(j[0] != self.unshown for j in reply.started),
                                  [d.steps for d in reply.finished if d.job[0] != self.unshown])

    def finish(self, done: Finished) -> None:
        """Store one ended episode by (scenario, episode)."""
        s, e = done.job
        self.returns[s, e] = done.ret
        self.lengths[s, e] = done.steps
        self.env_steps[s, e] = done.env_steps
        self.capped[s, e] = done.capped
        self.terminated[s, e] = done.terminated
        self.traces[s][e] = done.trace
        self.state_of.pop(done.job, None)
        if self.logged[s * self.width + e]:
            seen, chosen = self.rows_seen.pop(done.job), self.rows_chosen.pop(done.job)
            if seen:  # else recorded by call (see act)
                self.seen[s][e], self.chosen[s][e] = _gather(seen), _gather(chosen)
            # a copy: an env may return its own buffer, which the next episode's reset reuses
            self.last_seen[s][e] = _copied(done.last_obs)

    def act(self, reply: Reply) -> Any:
        """The actions for the rows of ``reply``, from ONE policy call, checked against the
        action space; each row's new state and records kept."""
        obs_batch, jobs = reply.obs, reply.jobs
        if not all_finite(obs_batch):
            self._check_rows(reply)  # rare: find the culprit for the message
        states = [self.state_of[job] for job in jobs] if self.stateful else None
        watch = calls._ACTIVE
        if watch is not None:  # noted as the driver, which says which call when asked
            self.steps += 1
            self.acting = reply
            watch.on = self
        try:
            raw, new_states = self.policy.act(obs_batch, states)
            if watch is not None:
                watch.on = None
            actions, bad = self.check_actions(raw, len(jobs))
        except Exception as exc:
            raise self._failed(exc, reply) from exc
        except Expired as exc:  # the deadline struck in the policy call
            raise self.place(exc, jobs, reply.steps, "in the agent's policy call") from None
        if bad is not None:
            raise self._refused(actions, bad, reply)
        log = self.log
        if log is not None and isinstance(obs_batch, np.ndarray) and isinstance(actions, np.ndarray):
            ids = reply.ids if reply.ids is not None else np.fromiter(
                (s * self.width + e for s, e in jobs), dtype=np.int64, count=len(jobs))
            keep = self.logged[ids]
            if keep.all():
                log.add(obs_batch, actions, ids)
            elif keep.any():
                log.add(obs_batch[keep], actions[keep], ids[keep])
            log = None  # recorded: the pass below keeps the states only
        if self.stateful or (log is not None and self.keeps_rows):
            # One pass over the rows per decision step: locals, not attributes, inside it.
            stateful, state_of = self.stateful, self.state_of
            logged, width = self.logged if log is not None else None, self.width
            rows_seen, rows_chosen = self.rows_seen, self.rows_chosen
            out_states = cast("list[Any]", new_states)
            for i, job in enumerate(jobs):
                if stateful:
                    state_of[job] = out_states[i]
                if logged is not None and logged[job[0] * width + job[1]]:
                    rows_seen[job].append(_row(obs_batch, i))
                    rows_chosen[job].append(actions[i])
        return actions

    def batches(self) -> dict[str, EpisodeBatch]:
        """The results, one batch per scenario, episodes in the order of the indices."""
        seeds = episode_seeds(self.seed, self.indices)
        if self.log is not None:
            for key, (seen, chosen) in self.log.episodes().items():
                s, e = divmod(key, self.width)
                self.seen[s][e], self.chosen[s][e] = seen, chosen
        return {
            name: EpisodeBatch(name, seeds, self.returns[s], self.lengths[s], self.env_steps[s],
                               self.capped[s], tuple(self.traces[s]), tuple(self.seen[s]),
                               tuple(self.chosen[s]), dict(self.scenarios[s].params),
                               self.terminated[s].copy(),
                               tuple(self.last_seen[s]) if self.recorded[s] else ())
            for s, name in enumerate(s.name for s in self.scenarios)
        }

    # ------------------------------------------------------------------ errors
    def waiting_on(self) -> calls.Said:
        """The policy call under way (on the rows of :attr:`acting`), for the watcher
        (:mod:`.calls`: :attr:`steps` counts the calls, so a new one is told apart)."""
        reply = self.acting
        assert reply is not None  # noted only once set
        (s, e), step = reply.jobs[0], reply.steps[0]
        more = f" (and {len(reply.jobs) - 1} more rows)" if len(reply.jobs) > 1 else ""
        return ("the policy call", self.names[s], self.indices[e], step,
                f"for {self._where(reply.jobs[0], step)}{more}")

    def _where(self, job: Job, step: int) -> str:
        s, e = job
        return where(self.names[s], self.indices[e], self.seed, step)

    def _check_rows(self, reply: Reply) -> None:
        """Raise for the first row whose observation is not finite."""
        for i, (s, e) in enumerate(reply.jobs):
            check_obs(_row(reply.obs, i), self.names[s], self.indices[e], self.seed, reply.steps[i])

    def _failed(self, exc: Exception, reply: Reply) -> RolloutError:
        """The error for a policy call that raised ``exc``, naming its first rows (or, for
        a non-finite output, the row's step and observation)."""
        if isinstance(exc, NonFiniteOutputError) and 0 <= exc.row < len(reply.jobs):
            s, e = reply.jobs[exc.row]
            return output_not_finite(exc.output, _row(reply.obs, exc.row), self.names[s],
                                     self.indices[e], self.seed, reply.steps[exc.row])
        rows = [(self.names[s], self.indices[e], reply.steps[i])
                for i, (s, e) in enumerate(reply.jobs[:3])]
        rows += [rows[0]] * (len(reply.jobs) - len(rows))  # counted, not named
        return agent_failed(exc, rows, self.seed)

    def _refused(self, actions: Any, bad: int, reply: Reply) -> RolloutError:
        """The error for row ``bad``'s action, which is not in the action space."""
        s, e = reply.jobs[bad]
        return action_refused(actions[bad], self.check_actions.space, self.names[s],
                              self.indices[e], self.seed, reply.steps[bad], _row(reply.obs, bad))


class Turns:
    """Which groups go when: the phases of a pool take turns (see the module).

    ``ready[k]``: the groups of phase ``k`` whose reply is in hand (in ``replies``, by the
    group's id); ``asked[k]``: the worker groups of phase ``k`` with a reply to come.
    """

    def __init__(self, driver: Driver, phases: list[list[Any]]) -> None:
        self.driver = driver
        self.phases = phases
        self.replies: dict[int, Reply] = {}
        self.ready: list[list[Any]] = [[g for g in phase if isinstance(g, LocalGroup)]
                                       for phase in phases]
        self.asked: list[list[Any]] = [[g for g in phase if not isinstance(g, LocalGroup)]
                                       for phase in phases]
        # Outside the main thread no alarm interrupts a step: the deadline is checked
        # between decision steps (see .deadline); in it, the alarm needs no check here.
        bound = current()
        self.polled = bound if bound is not None and bound.polled else None

    def run(self) -> None:
        """Deal the first jobs, then take turns until every group is out of work."""
        sink = self.driver.sink
        act = self.driver.act if sink is None else sink.timed(self.driver.act)
        self.start()
        p = 0
        while any(self.ready) or any(self.asked):
            if self.polled is not None and self.polled.passed():
                raise self._expired(self.polled, p)
            self.turn(p, act)
            p = (p + 1) % len(self.phases)
            self.collect(p)

    def start(self) -> None:
        """Every group's first jobs: the workers' sent first so they start stepping, each
        worker's phases in turn (a worker replies in the order it was asked); then the
        replies of this process's groups (of every phase) and of phase 0."""
        jobs, backlog = self.driver.jobs, self.driver.backlog
        groups = [group for phase in self.phases for group in phase]
        hands = (deal(jobs, [g.slots + backlog for g in groups]) if backlog
                 else [[jobs.popleft() for _ in range(len(jobs))]])
        for group, first in sorted(zip(groups, hands, strict=True),
                                   key=lambda pair: isinstance(pair[0], LocalGroup)):
            group.send(None, first)
        for group in [*(g for phase in self.ready for g in phase), *self.asked[0]]:
            self.replies[id(group)] = group.receive()
        self.ready[0] += self.asked[0]
        self.asked[0] = []

    def turn(self, p: int, act: Callable[[Reply], Any]) -> None:
        """One decision step of phase ``p``: take in its replies, make ONE policy call for
        the rows of all of them, send the worker groups their actions (and jobs), then step
        this process's own group while they step theirs."""
        driver, replies, backlog = self.driver, self.replies, self.driver.backlog
        due = []
        for group in self.ready[p]:
            reply = replies.pop(id(group))
            driver.take_in(reply)
            more = driver.hand_out(backlog - reply.backlog) if backlog else []
            if reply.jobs or more:
                due.append((group, reply, more))
        acting = [reply for _, reply, _ in due if reply.jobs]
        given = _parted(act(_joined(acting)), acting) if acting else {}
        due.sort(key=lambda d: isinstance(d[0], LocalGroup))  # workers first
        ready: list[Any] = []
        self.ready[p] = ready
        for group, reply, more in due:
            group.send(given.get(id(reply)), more)
            if isinstance(group, LocalGroup):  # steps here and now
                replies[id(group)] = group.receive()
                ready.append(group)
            else:
                self.asked[p].append(group)

    def collect(self, p: int) -> None:
        """Read the replies of phase ``p``'s worker groups."""
        for group in self.asked[p]:
            self.replies[id(group)] = group.receive()
        self.ready[p] += self.asked[p]
        self.asked[p] = []

    def _expired(self, polled: Any, p: int) -> Expired:
        held = [self.replies[id(g)] for g in self.ready[p] if id(g) in self.replies]
        return self.driver.place(polled.expire(), held[0].jobs if held else (),
                                 held[0].steps if held else (), "between two decision steps "
                                 "(checked only there outside the main thread)")


def recorded_jobs(record: bool | Collection[str], names: Sequence[str],
                  indices: Sequence[int]) -> np.ndarray:
    """Which jobs are recorded, by job id (scenario x episodes + episode): every job of
    the scenarios ``record`` names (True: of all), or where it maps a name to episode
    indices, only those episodes (None: all of them).

    >>> recorded_jobs({"nominal": {0}, "delay": None}, ["nominal", "delay", "spike"], [0, 1])
    array([ True, False,  True,  True, False, False])
    """
    rows = np.zeros((len(names), len(indices)), dtype=bool)
    for s, name in enumerate(names):
        if record is True:
            rows[s] = True
        elif not isinstance(record, bool) and name in record:
            only = record[name] if isinstance(record, Mapping) else None
            rows[s] = True if only is None else np.isin(indices, list(only))
    return rows.ravel()


def placer(names: Sequence[str], indices: list[int], seed: int) -> Placer:
    """Where a deadline struck, given the rows of a batch (``jobs`` and their agent
    ``steps``): the first row, in the words of every rollout error, and how many more."""

    def place(exc: Expired, jobs: Sequence[Job], steps: Sequence[int], what: str) -> Expired:
        if not jobs:
            return exc.locate(None, None, None, what)
        (s, e), step = jobs[0], steps[0]
        more = f" (and {len(jobs) - 1} more rows)" if len(jobs) > 1 else ""
        return exc.locate(names[s], indices[e], step,
                          f"{what}, for {where(names[s], indices[e], seed, step)}{more}")

    return place


def deal(jobs: deque[Job], room: list[int]) -> list[list[Job]]:
    """The first jobs of the queue dealt to groups with ``room`` places each, in proportion
    to their room and in turn, so that every group starts with a mix of scenarios (their
    episodes differ in decisions per env step, and so in cost)."""
    hands: list[list[Job]] = [[] for _ in room]
    total = sum(room)
    while jobs and any(len(h) < r for h, r in zip(hands, room, strict=True)):
        # the group furthest behind its proportional share takes the next job
        g = min((i for i, r in enumerate(room) if len(hands[i]) < r),
                key=lambda i: ((len(hands[i]) + 1) * total / room[i], i))
        hands[g].append(jobs.popleft())
    return hands


def _joined(replies: list[Reply]) -> Reply:
    """The active rows of several groups' replies as one (rows in the replies' order)."""
    if len(replies) == 1:
        return replies[0]
    first = replies[0].obs
    obs = ({k: np.concatenate([r.obs[k] for r in replies]) for k in first}
           if isinstance(first, dict) else np.concatenate([r.obs for r in replies]))
    return Reply([job for r in replies for job in r.jobs], obs,
                 [step for r in replies for step in r.steps])  # restarts: taken in already


def _parted(actions: Any, replies: list[Reply]) -> dict[int, Any]:
    """The actions of :func:`_joined` rows, parted again by reply (by the reply's id)."""
    given, at = {}, 0
    for reply in replies:
        given[id(reply)] = actions[at:at + len(reply.jobs)]
        at += len(reply.jobs)
    return given


def _copied(obs: Any) -> Any:
    """A copy of an observation's arrays (an array, or a dict of them); anything else as
    it is (an adversarial attack's pending observation is never recorded as a last one)."""
    if isinstance(obs, dict):
        return {k: _copied(v) for k, v in obs.items()}
    return obs.copy() if isinstance(obs, np.ndarray) else obs


def _row(batch: Any, i: int) -> Any:
    return {k: v[i] for k, v in batch.items()} if isinstance(batch, dict) else batch[i]


def _gather(items: list[Any]) -> Any:
    """Per-step observations or actions as one array when they stack, else a tuple."""
    if not items:
        return np.empty(0)
    try:
        return stack(items)
    except (ValueError, TypeError):
        return tuple(items)
