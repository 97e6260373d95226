"""``--rl-agent`` as a glob of training runs (``'logs/ppo/CartPole-v1_*'``): the
zero-config items rate each scenario on the runs' IQM (:func:`~pytest_rlaudit.audit_runs`).

A pattern (it has ``*``, ``?`` or ``[``) that matches one agent is that agent; one that
matches none is a usage error naming it. Matching 2 or more, the runs are audited once
per process, every scenario at once (each xdist worker that runs an item audits them
all: the same seeds give the same numbers in every process, so the items' records are
those of one process), and each item judges its scenario's IQM with the item's gate,
by the rules of a single agent's item (:func:`~pytest_rlaudit.verdicts.runs.runs_verdict`).
A test of the repo's own (the ``rl_audit`` fixture) audits one agent: with runs it fails
saying to call ``audit_runs`` itself.
"""

from __future__ import annotations

import glob
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from .options import Settings
from .stash_keys import RECORD_KEY

if TYPE_CHECKING:
    from ..auditing.records import Gate


class ItemAudits(Protocol):
    """What a runs audit asks of the session's audits (:class:`.audits.ItemAudits` has it;
    named here so that this module does not import that one, which imports this one)."""

    settings: Settings

    def default_env(self) -> Any: ...

    def gate(self, item: pytest.Item, scenario: Any) -> Gate | None: ...

__all__ = ["is_pattern", "resolve_agent", "RunsAudit"]


def is_pattern(agent: str | None) -> bool:
    """Whether ``--rl-agent`` reads as a glob (an import string or a plain path does not;
    :func:`resolve_agent` takes a path that exists as it is, brackets and all).

    >>> is_pattern("logs/ppo/CartPole-v1_*"), is_pattern("agent.zip"), is_pattern(None)
    (True, False, False)
    """
    return bool(agent) and any(c in agent for c in "*?[")  # type: ignore[operator]


def _shown(paths: list[str], most: int = 3) -> str:
    """Up to ``most`` paths, and how many more."""
    more = f" and {len(paths) - most} more" if len(paths) > most else ""
    return ", ".join(repr(p) for p in paths[:most]) + more


def resolve_agent(settings: Settings) -> tuple[Settings, list[str], str | None]:
    """``settings`` with a glob ``--rl-agent`` resolved, the runs, and a line for the
    terminal saying how the text was read when a glob reading differs from a literal one.

    A path that exists is that agent, even with ``*?[`` in its name (``agent[1].zip``);
    otherwise a glob: a single match becomes the agent, 2 or more are the runs (sorted,
    so their order, and every number, does not depend on the file system's). Not a glob:
    no runs. No match: a usage error.
    """
    if not is_pattern(settings.agent):
        return settings, [], None
    pattern = settings.agent
    assert pattern is not None
    matches = sorted(glob.glob(pattern))
    if os.path.exists(pattern):
        others = [m for m in matches if os.path.normpath(m) != os.path.normpath(pattern)]
        note = None if not others else (
            f"rl audit: --rl-agent {pattern!r} is an existing path, audited as it is; read "
            f"as a glob it would match {_shown(others)} instead (to audit those, name them)")
        return settings, [], note
    if not matches:
        raise pytest.UsageError(
            f"--rl-agent {pattern!r}: no file or folder matches this pattern (relative to "
            f"{os.getcwd()}); give one agent, or a glob of the training runs' models such "
            "as 'logs/ppo/CartPole-v1_*'")
    if len(matches) == 1:
        return replace(settings, agent=matches[0]), [], (
            f"rl audit: --rl-agent {pattern!r} is no file: read as a glob, it matches "
            f"{matches[0]!r} only, the agent audited")
    return settings, matches, (
        f"rl audit: --rl-agent {pattern!r} is no file: read as a glob, it matches "
        f"{len(matches)} training runs ({_shown(matches)}), audited together")


class RunsAudit:
    """The runs of a glob ``--rl-agent``, audited once per process (see the module)."""

    def __init__(self, pattern: str, runs: list[str]) -> None:
        self.pattern = pattern
        self.runs = runs
        self._result: Any = None
        self._error: Exception | None = None

    def result(self, audits: ItemAudits, scenarios: list[Any]) -> Any:
        """The :class:`~pytest_rlaudit.auditing.runs.RunsResult` of every scenario (an
        error raised once is raised again for every item: the same message)."""
        if self._error is not None:
            raise self._error
        if self._result is None:
            try:
                self._result = self._audit(audits, scenarios)
            except Exception as exc:
                self._error = exc
                raise
        return self._result

    def _audit(self, audits: ItemAudits, scenarios: list[Any]) -> Any:
        from ..auditing.runs import audit_runs
        from ..world.agents import as_policy

        s = audits.settings
        env = audits.default_env()
        given = s.vec_normalize
        # each run loaded as --rl-agent would be, and named by its path (the run's label)
        policies = [as_policy(path, env=env, algo=s.algo, name=path, trusted=s.trusted,
                              deterministic=(False if s.stochastic else
                                             True if s.deterministic else None),
                              vec_normalize="auto" if given is None else (
                                  None if given.lower() == "none" else given))
                    for path in self.runs]
        return audit_runs(policies, env, scenarios=scenarios, episodes=s.episodes,
                          seed=s.seed, reference=s.reference, batch_size=s.batch_size,
                          workers=s.workers, backend=s.backend, timeout=s.timeout,
                          call_timeout=s.call_timeout, progress=False, name=s.agent_name or s.agent)

    def run(self, audits: ItemAudits, item: pytest.Item, scenario: Any,
            scenarios: list[Any]) -> Any:
        """Judge ``scenario``'s IQM for ``item`` and record it; RobustnessError on a miss."""
        __tracebackhide__ = True
        from ..auditing.records import runs_record
        from ..errors import RobustnessError
        from ..verdicts.runs import runs_verdict

        result = self.result(audits, scenarios)
        gate = audits.gate(item, scenario)
        passed, message = runs_verdict(result[scenario.name], gate, result.thresholds)
        record = runs_record(item.nodeid, result, scenario.name, gate, passed,
                             reference=audits.settings.reference)
        if audits.settings.videos and not passed:  # say so, rather than film nothing silently
            record["video"] = {"skipped": "training runs are not filmed: film one run with "
                               "--rl-agent PATH --rl-videos"}
        item.stash[RECORD_KEY] = record
        if not passed:
            raise RobustnessError(message, result[scenario.name])
        return result[scenario.name]

    def refuse(self) -> None:
        """A test of the repo's own asked for the one agent: say what to use."""
        pytest.fail(f"--rl-agent {self.pattern!r} matches {len(self.runs)} training "
                    "runs: the zero-config audit (--rl-audit with no audit tests of the "
                    "repo's own) rates each scenario on their IQM, but a test using the "
                    "rl_agent or rl_audit fixture audits one agent; give --rl-agent one "
                    "agent, or call pytest_rlaudit.audit_runs(pattern, env) in the test",
                    pytrace=False)
