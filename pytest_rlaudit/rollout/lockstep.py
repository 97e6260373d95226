"""A lock-step batch of envs driven as a group of slots: every running row advances one env
step per tick; a row whose agent does not decide this tick repeats its held action.

A :class:`BatchGroup` is every group the runner drives (``step(actions, jobs)`` returns
a :class:`~.slots.Reply`), over a batch kind (:mod:`pytest_rlaudit.world.batches.kinds`):
a vector env or a batched simulator steps all its rows in one call; the scalar path's
rows (:class:`~.slots.SlotRows`) are one gymnasium env each, stepped in a loop, each
wrapped whole by its scenario (dynamics, pushes and adversarial attacks act inside an
env's step), and give their own observations, reward traces and lives.

Timing scenarios on a batch become per-row decision masks: after the agent's action a
row holds it for the number of env steps its chain's ``decide`` says, and only the rows
whose hold is over (or whose episode ended) reach the next policy call. Each row runs its
scenario's wrappers by their own hooks
(:class:`~pytest_rlaudit.world.batches.chains.Chain`), seeded as the scalar path seeds
them, so a row's episode does not depend on its neighbours, on the batch size or on the
batch kind: it is the scalar path's, number for number. (On the scalar path's rows the
same hooks run inside each env's step, by the scenario's gymnasium wrappers: with one env
per row there is no batched step to share, and a hold costs no policy call either way.)

>>> import numpy as np
>>> from pytest_rlaudit import scenarios
>>> from pytest_rlaudit.world.batches.kinds import CartPoleRows
>>> group = BatchGroup(CartPoleRows("CartPole-v1", 2), scenarios.resolve(["nominal", "spike"]),
...                    [0], seed=0, max_steps=10_000)
>>> reply = group.step(None, [(0, 0), (1, 0)])
>>> reply.obs.shape, reply.started
((2, 4), [(0, 0), (1, 0)])
>>> group.close()
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from .._seeding import episode_seed_sequence
from ..errors import EnvContractError, RLAuditError, RolloutError
from ..world.batches.chains import Chain
from ..world.batches.kinds import BatchKind
from ..world.rows import as_rows, blank, copied, put, row_of, take
from ..world.scenarios import Scenario
from . import calls, replay_row
from .checks import ObservationContract, where
from .slots import Finished, Job, Reply, SlotRows

__all__ = ["BatchGroup"]

_NONE = np.zeros(0, dtype=np.int64)  # no rows


class BatchGroup:
    """The rows of ``kind`` running jobs of ``scenarios`` x ``indices`` (see the module).

    ``owned``: whether closing the group closes the kind (one the audit made), or leaves
    it to its owner (a batched env the user gave).
    """

    def __init__(self, kind: BatchKind, scenarios: Sequence[Scenario], indices: Sequence[int], *,
                 seed: int, max_steps: int, owned: bool = True) -> None:
        self.kind = kind
        self.scenarios = list(scenarios)
        self.names = [replay_row.shown(s.name) for s in scenarios]  # as messages name them
        self.indices = list(indices)
        self.seed = seed
        self.max_steps = max_steps
        self.owned = owned
        n = kind.num_envs
        self.slots = list(range(n))  # what the runner counts (LocalGroup.slots)
        self.spaces = (kind.observation_space, kind.action_space)
        # one env per row, each wrapped whole by its scenario (the scalar path): its rows
        # are told their jobs, and give their own observations, traces and lives
        self.whole = kind if isinstance(kind, SlotRows) else None
        self.contract = None if self.whole else ObservationContract(kind.observation_space,
                                                                     kind.label)
        self.queue: deque[Job] = deque()
        self.job: list[Job | None] = [None] * n
        self.ids = np.zeros(n, dtype=np.int64)  # each row's job as one number (Reply.ids)
        self.chain: list[Chain | None] = [None] * n
        self.chains: dict[tuple[int, int], Chain] = {}  # by (row, scenario), reused
        self.running = np.zeros(n, dtype=bool)
        self.left = np.zeros(n, dtype=np.int64)  # env steps left in the held action
        self.held = np.zeros(n, dtype=np.float64)  # reward of the agent step under way
        self.ret = np.zeros(n, dtype=np.float64)
        self.agent_steps = np.zeros(n, dtype=np.int64)  # each row's agent steps
        self.actions = kind.idle_actions()  # each row's action, held
        self.rewards = np.zeros((64, n))  # every row's reward by tick, from tick `base` on
        self.tick = self.base = 0
        self.start = np.zeros(n, dtype=np.int64)  # the tick each row's episode started at
        # rows whose scenario's wrappers change the action (or its hold), what is seen
        self.decides = np.zeros(n, dtype=bool)
        self.observes = np.zeros(n, dtype=bool)
        # what each row's agent saw last (made at the first reset): an array, or a dict of
        # arrays for a Dict observation space (see pytest_rlaudit.world.rows)
        self.seen: Any = None
        self.deciding = _NONE  # the rows of the last reply, in its order
        self.every = np.arange(n)  # every row, in row order (never written to)

    # ------------------------------------------------------------------ episodes
    def _chain(self, row: int, s: int) -> Chain | None:
        if self.whole or self.scenarios[s].perturbation is None:
            return None
        chain = self.chains.get((row, s))
        if chain is None:
            chain = self.chains[(row, s)] = Chain(self.scenarios[s], self.spaces, self.kind.label)
        return chain

    def _fill(self, started: list[Job], deciding: list[int]) -> None:
        """Start queued jobs in the free rows: they reset and decide at once."""
        if not self.queue or self.running.all():
            return
        free = np.flatnonzero(~self.running)[:len(self.queue)]
        if not len(free):
            return
        jobs = [self.queue.popleft() for _ in range(len(free))]
        episodes = [self.indices[e] for _, e in jobs]
        whole = self.whole
        if whole is not None:
            for row, job in zip(free.tolist(), jobs, strict=True):
                whole.assign(row, job)
        try:
            first = self.kind.reset(free, [self.seed + e for e in episodes])
        except RLAuditError:
            raise
        except Exception as exc:
            s = jobs[0][0]
            raise RolloutError(
                f"the reset of {self.kind.label} failed ({type(exc).__name__}: {exc}) at "
                f"{where(self.names[s], episodes[0], self.seed, 0)}",
                scenario=self.names[s], episode=episodes[0], step=0) from exc
        if whole is None:
            first = as_rows(first)
            if self.seen is None:
                self.seen = blank(first, self.kind.num_envs)
            put(self.seen, free, first)
        for i, (row, job, episode) in enumerate(zip(free.tolist(), jobs, episodes, strict=True)):
            s = job[0]
            chain = self.chain[row] = self._chain(row, s)
            self.decides[row] = chain is not None and chain.decides
            self.observes[row] = chain is not None and chain.observes
            if chain is not None:
                put(self.seen, row, chain.reset(row_of(first, i), episode_seed_sequence(
                    self.seed, episode, self.names[s]), self.seed + episode))
            self.job[row] = job
            self.ids[row] = s * len(self.indices) + job[1]
            started.append(job)
            deciding.append(row)
        self.running[free] = True
        self.agent_steps[free] = 0
        self.ret[free] = 0.0
        self.start[free] = self.tick

    def _record(self, rewards: np.ndarray) -> None:
        """This tick's rewards, every row's: a running row's trace is its column from the
        tick its episode started (:meth:`_finish`); rows of one env each keep their own."""
        if self.whole is not None:
            self.tick += 1
            return
        at = self.tick - self.base
        if at == len(self.rewards):  # full: drop the ticks no running episode needs
            first = int(self.start[self.running].min(initial=self.tick))
            kept = self.rewards[first - self.base:at]
            size = len(self.rewards) * (2 if 2 * len(kept) >= len(self.rewards) else 1)
            self.rewards = np.zeros((size, self.kind.num_envs))
            self.rewards[:len(kept)] = kept
            self.base, at = first, len(kept)
        self.rewards[at] = rewards
        self.tick += 1

    def _finish(self, row: int, capped: bool, terminated: bool) -> Finished:
        job = self.job[row]
        assert job is not None  # a running row has its job
        self.running[row] = False
        self.job[row] = None
        whole = self.whole
        if whole is not None:
            whole.end(row)
            trace, last = whole.trace(row), whole.last(row)
        else:
            first = int(self.start[row]) - self.base
            trace = self.rewards[first:self.tick - self.base, row].copy()
            last = copied(row_of(self.seen, row))
        return Finished(job, float(self.ret[row]), int(self.agent_steps[row]), len(trace), capped,
                        trace, terminated, last)

    def step(self, actions: Any, jobs: Sequence[Job] = ()) -> Reply:
        """Give each row of the last reply its action (``actions[i]`` for its row ``i``),
        queue ``jobs``, and tick the batch until some row's agent decides (see the module)."""
        # The hot path: numpy over whole rows, Python only for the rows with wrappers.
        self.queue.extend(jobs)
        rows = self.deciding
        if len(rows) == len(self.running) and self.plain():
            self._act(rows, actions)  # rows: every row, not always in row order
            return self._plain()
        if len(rows):
            self.left[rows] = 1
            self.held[rows] = 0.0
            self._act(rows, actions)
            if self.decides.any():
                chained = np.flatnonzero(self.decides[rows])
                if len(chained):
                    self._decide(rows[chained], np.asarray(actions)[chained])
        started: list[Job] = []
        finished: list[Finished] = []
        restarted: list[Job] = []
        fresh: list[int] = []
        going = _NONE
        self._fill(started, fresh)
        run = self.running
        n = len(run)
        while not fresh and not len(going) and run.any():
            obs, rewards, terminated, truncated = self._tick()
            if not np.isfinite(rewards).all() and not np.isfinite(rewards[run]).all():
                bad = int(np.flatnonzero(run & ~np.isfinite(rewards))[0])
                raise self._fail(bad, f"{self.kind.label} returned a non-finite reward "
                                      f"{rewards[bad]}")
            np.add(self.held, rewards, out=self.held, where=run)
            self._record(rewards)
            self.left -= run
            over = (terminated | truncated) & run
            due = np.flatnonzero(run & ((self.left <= 0) | over))  # agent steps complete
            if not len(due):
                continue
            if len(due) == n:  # every row (no timing scenario): whole arrays, no indices
                self.agent_steps += 1
                self.ret += self.held
                self._see(slice(None), obs)
            else:
                self.agent_steps[due] += 1
                self.ret[due] += self.held[due]
                self._see(due, obs)
            watched = due[self.observes[due]]
            if len(watched):
                self._observe(watched, obs)
            ending = over[due] | (self.agent_steps[due] >= self.max_steps)
            self._lives(restarted)
            if ending.any():
                for row in due[ending].tolist():
                    finished.append(self._finish(row, not over[row], bool(terminated[row])))
                going = due[~ending]
                self._fill(started, fresh)
            else:
                going = due
        return self._reply(going, fresh, started, finished, restarted)

    def _act(self, rows: np.ndarray, actions: Any) -> None:
        """The agents' ``actions`` for ``rows``: held in the batch's array, or, on rows of
        one env each, given to each env as its own row of the policy's output (an env may
        keep the action it was given: a shared array would change it under the env)."""
        if self.whole is not None:
            self.whole.give(rows, actions)
        else:
            self.actions[rows] = actions

    def _see(self, rows: Any, obs: Any) -> None:
        """``rows`` (indices, or every row's slice) see their rows of ``obs``, the batch's
        observations; rows of one env each keep their own (:meth:`_batch` asks)."""
        if self.whole is None:
            put(self.seen, rows, obs if isinstance(rows, slice) else take(obs, rows))

    def _lives(self, restarted: list[Job]) -> None:
        """The jobs of rows of one env each whose agent restarts within its episode this
        tick (an Atari life lost; the rows say so of episodes their env goes on with),
        save those the step cap ends."""
        whole = self.whole
        if whole is not None and whole.restarted:
            restarted.extend(self.job[row] for row in whole.restarted  # type: ignore[misc]
                             if self.agent_steps[row] < self.max_steps)

    def _by_scenario(self, rows: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, list[Chain]]]:
        """``rows`` (rows with chains) by scenario: each group's positions in ``rows``, its
        rows and their chains."""
        scenario = self.ids[rows] // len(self.indices)
        every = np.arange(len(rows))
        groups = np.unique(scenario)
        for s in groups.tolist():
            at = every if len(groups) == 1 else every[scenario == s]
            mine = rows[at]
            yield at, mine, [self.chain[row] for row in mine.tolist()]

    def _decide(self, rows: np.ndarray, actions: np.ndarray) -> None:
        """The actions ``rows`` execute for their agents' ``actions``, and how long each is
        held: each scenario's rows at once where its chain is one wrapper (its
        ``decide_rows``), else row by row through the chain."""
        for at, mine, chains in self._by_scenario(rows):
            if len(chains[0].layers) == 1:
                layers = [c.layers[0] for c in chains]
                executed, holds = type(layers[0]).decide_rows(layers, actions[at])
                self.actions[mine] = executed
                self.left[mine] = holds
            else:
                for row, c, action in zip(mine.tolist(), chains, actions[at], strict=True):
                    self.actions[row], self.left[row] = c.decide(action)

    def _observe(self, rows: np.ndarray, obs: np.ndarray) -> None:
        """What the agents of ``rows`` see of ``obs``, put in ``seen``: each scenario's
        rows at once where its chain is one wrapper (its ``observe_rows``), else row by
        row through the chain."""
        seen = self.seen
        assert seen is not None  # made at the first reset
        for _, mine, chains in self._by_scenario(rows):
            if len(chains[0].layers) == 1 and not isinstance(obs, dict):
                layers = [c.layers[0] for c in chains]
                seen[mine] = type(layers[0]).observe_rows(layers, obs[mine])
            else:  # a Dict observation: each row's chain on its row, key by key inside
                for row, c in zip(mine.tolist(), chains, strict=True):
                    put(seen, row, c.observe(copied(row_of(obs, row))))

    def plain(self) -> bool:
        """Whether every row runs an episode without wrappers (nominal's, or another
        batch's, or one env each wrapped whole), so that every row's agent decides at
        every tick."""
        if self.whole is not None:
            return bool(self.running.all())
        return bool(self.running.all()) and not (self.decides.any() or self.observes.any())

    def _plain(self) -> Reply:
        """:meth:`step` when the last reply had every row and every row is :meth:`plain`,
        their actions set: one tick, over whole arrays. The same numbers as the general
        way (a reward added to a return directly is what adding it to a held 0.0 first
        gives, bit for bit); ``left`` and ``held`` are reset for every row at the next
        general step."""
        obs, rewards, terminated, truncated = self._tick()
        if self.whole is None and not np.isfinite(rewards).all():  # rows of one env check theirs
            bad = int(np.flatnonzero(~np.isfinite(rewards))[0])
            raise self._fail(bad, f"{self.kind.label} returned a non-finite reward {rewards[bad]}")
        self._record(rewards)
        self.agent_steps += 1
        self.ret += rewards
        self._see(slice(None), obs)
        restarted: list[Job] = []
        self._lives(restarted)
        over = terminated | truncated
        ending = over | (self.agent_steps >= self.max_steps)
        if not ending.any():
            return self._reply(None, [], [], [], restarted)
        finished = [self._finish(row, not over[row], bool(terminated[row]))
                    for row in np.flatnonzero(ending).tolist()]
        started: list[Job] = []
        fresh: list[int] = []
        self._fill(started, fresh)
        return self._reply(np.flatnonzero(~ending), fresh, started, finished, restarted)

    def _reply(self, going: np.ndarray | None, fresh: list[int], started: list[Job],
               finished: list[Finished], restarted: list[Job]) -> Reply:
        """The reply of a step: the rows whose agent decides next (``going``, then the
        ``fresh`` ones; None: every row, in row order), what started, what ended and whose
        agent restarts."""
        if going is None:
            self.deciding = self.every
            return Reply(list(self.job), self._batch(None), self.agent_steps.tolist(),  # type: ignore[arg-type]
                         started, finished, len(self.queue), restarted, ids=self.ids.copy())
        self.deciding = deciding = np.concatenate([going, fresh]).astype(np.int64, copy=False)
        if not len(deciding):
            return Reply([], None, [], started, finished, len(self.queue), restarted)
        picked: Any = itemgetter(*deciding.tolist())(self.job)  # a tuple of jobs, or one job
        return Reply(list(picked) if len(deciding) > 1 else [picked], self._batch(deciding),
                     self.agent_steps[deciding].tolist(), started, finished, len(self.queue),
                     restarted, ids=self.ids[deciding])

    def _tick(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        watch = calls._ACTIVE
        if watch is not None:  # noted as the group, which says which step when asked
            watch.on = self
        try:
            return self.kind.step(self.actions)
        except RLAuditError:
            raise
        except Exception as exc:
            row = int(np.flatnonzero(self.running)[0])
            raise self._fail(row, f"the step of {self.kind.label} failed ({type(exc).__name__}: "
                                  f"{exc}), with {int(self.running.sum())} episodes running; "
                                  "the first") from exc
        finally:
            if watch is not None:
                watch.on = None

    @property
    def steps(self) -> int:
        """Ticks so far: what tells the call watcher one batch step from the next."""
        return self.tick

    def waiting_on(self) -> calls.Said:
        """The batch step under way, for the call watcher (:mod:`.calls`)."""
        row = int(np.flatnonzero(self.running)[0])
        job = self.job[row]
        assert job is not None
        name, episode, step = self.names[job[0]], self.indices[job[1]], int(self.agent_steps[row])
        return ("env.step", name, episode, step,
                f"in the step of {self.kind.label} ({int(self.running.sum())} of its rows "
                f"running), the first at {where(name, episode, self.seed, step)}")

    def _fail(self, row: int, what: str) -> RolloutError:
        job = self.job[row]
        assert job is not None
        name, episode = self.names[job[0]], self.indices[job[1]]
        step = int(self.agent_steps[row])
        return RolloutError(f"{what} at {where(name, episode, self.seed, step)}",
                            scenario=name, episode=episode, step=step)

    def _batch(self, rows: np.ndarray | None) -> Any:
        """What the deciding ``rows`` (None: every row) see, as one batch of the declared
        shape: a copy, which the rows' next observations do not overwrite."""
        if self.whole is not None:
            return self.whole.batch(range(self.kind.num_envs) if rows is None else rows.tolist())
        assert self.seen is not None and self.contract is not None  # made at the first reset
        batch = copied(self.seen) if rows is None else take(self.seen, rows)
        if self.contract.fits(batch):
            return batch
        for row in range(self.kind.num_envs) if rows is None else rows:  # rare: the culprit
            job = self.job[row]
            assert job is not None
            at = where(self.names[job[0]], self.indices[job[1]], self.seed, int(self.agent_steps[row]))
            self.contract.check(row_of(self.seen, row), f"at {at}")
        raise EnvContractError(
            f"the observations of {self.kind.label} do not stack into one batch of its "
            f"observation space {self.contract.space}; each must have the declared shape")

    def close(self) -> None:
        """Release what the run made on the batch kind, and close it if the audit made it."""
        self.kind.finish()
        if self.owned:
            self.kind.close()
