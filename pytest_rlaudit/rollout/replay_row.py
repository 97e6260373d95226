"""The seed-replay row: on a lock-step batch, nominal episode 0 runs a second time in a
row of the audit's own batch, where it costs one row of each batch step instead of a
whole episode of one-row policy calls before the audit.

The seed-replay check (:mod:`.replay`) runs nominal episode 0 whole before the audit, one
policy call of one row per step, and holds the audit's run of it to that. On a batch each
of those steps is a step of every row of the batch (a 1,024-env simulator steps all its
envs in one call) beside a policy call of one row: about a tenth of a 4,096-episode
audit, and a fifth of a 30-episode CartPole one. So where the env can batch, the check
runs only the steps it compares before the audit (:data:`~.replay.PREFIX_STEPS`, twice)
and asks the run for a replay row (:func:`asked`): the batch path runs episode 0 of
nominal twice, in two rows, recorded, and hands the second run back here, for the engine
to hold the first to it step by step. A run that does not take the batch path leaves the
list empty, and the engine runs the whole episode as before.

>>> with asked() as rows:
...     wanted() is rows
True
>>> wanted() is None
True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..world.scenario import Scenario
from ..world.scenarios import NOMINAL
from .batches import EpisodeBatch

__all__ = ["ROW", "asked", "wanted", "shown"]

#: The replay row's scenario: nominal under a name of its own (no perturbation, so no
#: random stream of its own; the name only keeps its results apart from nominal's).
ROW = Scenario("nominal (seed replay)", "nominal",
               description="nominal episode 0 run a second time, in a row of the batch")

_ASKED: ContextVar[list[EpisodeBatch] | None] = ContextVar("replay_rows", default=None)


@contextmanager
def asked() -> Iterator[list[EpisodeBatch]]:
    """Within the block, a run on a batch that has nominal episode 0 adds a replay row and
    appends its batch (the :data:`ROW` scenario's, the episode at episode 0's place) to
    the list yielded."""
    rows: list[EpisodeBatch] = []
    token = _ASKED.set(rows)
    try:
        yield rows
    finally:
        _ASKED.reset(token)


def wanted() -> list[EpisodeBatch] | None:
    """The list a replay row goes to, when a run is asked for one; else None."""
    return _ASKED.get()


def shown(name: str) -> str:
    """A scenario's name as messages give it: the replay row's is nominal's (what runs
    there is nominal episode 0, and that is how to reproduce a failure in it).

    >>> shown(ROW.name), shown("delay")
    ('nominal', 'delay')
    """
    return NOMINAL.name if name == ROW.name else name
