"""A lock-step batch of envs driven as a group of slots: every running row advances one env
step per tick; a row whose agent does not decide this tick repeats its held action.

A :class:`BatchGroup` answers the runner as a :class:`~.slots.SlotGroup` does
(``step(actions, jobs)`` returns a :class:`~.slots.Reply`), over a batch kind
(:mod:`pytest_rlaudit.world.batches.kinds`): a vector env or a batched simulator steps
all its rows in one call. Timing scenarios become per-row decision masks: after the
agent's action a row holds it for the number of env steps its chain's ``decide`` says,
and only the rows whose hold is over (or whose episode ended) reach the next policy
call. Each row runs its scenario's wrappers by their own hooks
(:class:`~pytest_rlaudit.world.batches.chains.Chain`), seeded as the scalar path seeds
them, so a row's episode does not depend on its neighbours, on the batch size or on the
batch kind: it is the scalar path's, number for number.

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
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._seeding import episode_seed_sequence
from ..errors import EnvContractError, RLAuditError, RolloutError
from ..world.batches.chains import Chain
from ..world.batches.kinds import BatchKind
from ..world.scenarios import Scenario
from .checks import ObservationContract, where
from .slots import Finished, Job, Reply

__all__ = ["BatchGroup"]


class BatchGroup:
    """The rows of ``kind`` running jobs of ``scenarios`` x ``indices`` (see the module).

    ``owned``: whether closing the group closes the kind (one the audit made), or leaves
    it to its owner (a batched env the user gave).
    """

    def __init__(self, kind: BatchKind, scenarios: Sequence[Scenario], indices: Sequence[int], *,
                 seed: int, max_steps: int, owned: bool = True) -> None:
        self.kind = kind
        self.scenarios = list(scenarios)
        self.names = [s.name for s in scenarios]
        self.indices = list(indices)
        self.seed = seed
        self.max_steps = max_steps
        self.owned = owned
        n = kind.num_envs
        self.slots = list(range(n))  # what the runner counts (LocalGroup.slots)
        self.spaces = (kind.observation_space, kind.action_space)
        self.contract = ObservationContract(kind.observation_space, kind.label)
        self.queue: deque[Job] = deque()
        self.job: list[Job | None] = [None] * n
        self.chain: list[Chain | None] = [None] * n
        self.chains: dict[tuple[int, int], Chain] = {}  # by (row, scenario), reused
        self.running = np.zeros(n, dtype=bool)
        self.left = np.zeros(n, dtype=np.int64)  # env steps left in the held action
        self.held = np.zeros(n, dtype=np.float64)  # reward of the agent step under way
        self.ret = np.zeros(n, dtype=np.float64)
        self.steps = np.zeros(n, dtype=np.int64)  # agent steps
        self.actions = kind.idle_actions()  # each row's action, held
        self.trace = np.zeros((n, 64), dtype=np.float64)  # each row's env-step rewards
        self.filled = np.zeros(n, dtype=np.int64)  # columns of trace in use
        self.chained = np.zeros(n, dtype=bool)  # rows whose scenario has wrappers
        self.seen: np.ndarray | None = None  # what each row's agent saw last (made at the first reset)
        self.deciding: list[int] = []  # the rows of the last reply, in its order

    # ------------------------------------------------------------------ episodes
    def _chain(self, row: int, s: int) -> Chain | None:
        if self.scenarios[s].perturbation is None:
            return None
        chain = self.chains.get((row, s))
        if chain is None:
            chain = self.chains[(row, s)] = Chain(self.scenarios[s], self.spaces, self.kind.label)
        return chain

    def _fill(self, started: list[Job], deciding: list[int]) -> None:
        """Start queued jobs in the free rows: they reset and decide at once."""
        if not self.queue:
            return
        free = np.flatnonzero(~self.running)[:len(self.queue)]
        if not len(free):
            return
        jobs = [self.queue.popleft() for _ in range(len(free))]
        episodes = [self.indices[e] for _, e in jobs]
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
        first = np.asarray(first)
        if self.seen is None:
            self.seen = np.zeros((self.kind.num_envs, *first.shape[1:]), dtype=first.dtype)
        seen = self.seen
        seen[free] = first
        for i, (row, job, episode) in enumerate(zip(free.tolist(), jobs, episodes, strict=True)):
            s = job[0]
            chain = self.chain[row] = self._chain(row, s)
            self.chained[row] = chain is not None
            if chain is not None:
                seen[row] = chain.reset(first[i], episode_seed_sequence(
                    self.seed, episode, self.names[s]), self.seed + episode)
            self.job[row] = job
            started.append(job)
            deciding.append(row)
        self.running[free] = True
        self.steps[free] = 0
        self.ret[free] = 0.0
        self.filled[free] = 0

    def _record(self, rows: np.ndarray, rewards: np.ndarray) -> None:
        """Each running row's reward of this env step, in its trace."""
        at = self.filled[rows]
        if at.max(initial=0) >= self.trace.shape[1]:
            self.trace = np.concatenate([self.trace, np.zeros_like(self.trace)], axis=1)
        self.trace[rows, at] = rewards
        self.filled[rows] = at + 1

    def _finish(self, row: int, capped: bool, terminated: bool, last: Any) -> Finished:
        job = self.job[row]
        assert job is not None  # a running row has its job
        self.running[row] = False
        self.job[row] = None
        n = int(self.filled[row])
        return Finished(job, float(self.ret[row]), int(self.steps[row]), n, capped,
                        self.trace[row, :n].copy(), terminated, last)

    def step(self, actions: Any, jobs: Sequence[Job] = ()) -> Reply:
        """Give each row of the last reply its action (``actions[i]`` for its row ``i``),
        queue ``jobs``, and tick the batch until some row's agent decides (see the module)."""
        # The hot path: numpy over the rows, Python only for the rows with wrappers.
        self.queue.extend(jobs)
        if self.deciding:
            given = np.flatnonzero(~self.chained[self.deciding])
            rows = np.asarray(self.deciding)
            self.actions[rows[given]] = np.asarray(actions)[given]
            self.left[rows] = 1
            self.held[rows] = 0.0
            for i in np.flatnonzero(self.chained[rows]).tolist():
                row = self.deciding[i]
                self.actions[row], self.left[row] = self.chain[row].decide(  # type: ignore[union-attr]
                    actions[i])
        started: list[Job] = []
        finished: list[Finished] = []
        deciding: list[int] = []
        self._fill(started, deciding)
        while not deciding and self.running.any():
            obs, rewards, terminated, truncated = self._tick()
            rows = np.flatnonzero(self.running)
            got = rewards[rows]
            if not np.isfinite(got).all():
                bad = int(rows[np.flatnonzero(~np.isfinite(got))[0]])
                raise self._fail(bad, f"{self.kind.label} returned a non-finite reward "
                                      f"{rewards[bad]}")
            self.held[rows] += got
            self._record(rows, got)
            self.left[rows] -= 1
            over = terminated[rows] | truncated[rows]
            due = (self.left[rows] == 0) | over
            rows, over = rows[due], over[due]  # the rows whose agent step is complete
            if not len(rows):
                continue
            self.steps[rows] += 1
            self.ret[rows] += self.held[rows]
            seen = self.seen
            assert seen is not None  # made at the first reset
            seen[rows] = obs[rows]
            for row in rows[self.chained[rows]].tolist():
                seen[row] = self.chain[row].observe(obs[row])
            ending = over | (self.steps[rows] >= self.max_steps)
            for row, cut in zip(rows[ending].tolist(), (~over[ending]).tolist(), strict=True):
                finished.append(self._finish(row, cut, bool(terminated[row]), seen[row].copy()))
            going = rows[~ending]
            self.held[going] = 0.0
            deciding.extend(going.tolist())
            self._fill(started, deciding)
        self.deciding = deciding
        return Reply([self.job[row] for row in deciding],  # type: ignore[misc]
                     self._batch(deciding) if deciding else None,
                     [int(self.steps[row]) for row in deciding], started, finished,
                     len(self.queue))

    def _tick(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        try:
            return self.kind.step(self.actions)
        except RLAuditError:
            raise
        except Exception as exc:
            row = int(np.flatnonzero(self.running)[0])
            raise self._fail(row, f"the step of {self.kind.label} failed ({type(exc).__name__}: "
                                  f"{exc}), with {int(self.running.sum())} episodes running; "
                                  "the first") from exc

    def _fail(self, row: int, what: str) -> RolloutError:
        job = self.job[row]
        assert job is not None
        name, episode = self.names[job[0]], self.indices[job[1]]
        step = int(self.steps[row])
        return RolloutError(f"{what} at {where(name, episode, self.seed, step)}",
                            scenario=name, episode=episode, step=step)

    def _batch(self, rows: list[int]) -> Any:
        """What the deciding ``rows`` see, as one batch of the declared shape."""
        assert self.seen is not None  # made at the first reset
        batch = self.seen[rows]
        if self.contract.fits(batch):
            return batch
        for row in rows:  # rare: find the culprit for the message
            job = self.job[row]
            assert job is not None
            at = where(self.names[job[0]], self.indices[job[1]], self.seed, int(self.steps[row]))
            self.contract.check(self.seen[row], f"at {at}")
        raise EnvContractError(
            f"the observations of {self.kind.label} do not stack into one batch of its "
            f"observation space {self.contract.space}; each must have the declared shape")

    def close(self) -> None:
        """Release what the run made on the batch kind, and close it if the audit made it."""
        self.kind.finish()
        if self.owned:
            self.kind.close()
