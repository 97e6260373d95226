"""Whether this run audits: ``--rl-audit`` (ini ``rl_audit``), or an option that only
means something when auditing given on the command line; the reason audit tests are
skipped without it, and the summary line that counts them.

Forgetting ``--rl-audit`` must not pass a gate. ``--rl-agent`` names what to audit
(``pytest --rl-agent=ppo.zip --rl-env=CartPole-v1`` is the zero-config audit);
``--rl-save``, ``--rl-history``, ``--rl-report`` and ``--rl-videos`` ask for audit results. Given on the
command line, each turns auditing on, rather than being refused: a repo's own
``assert_robust`` tests make records without ``--rl-audit``, so ``--rl-report`` or
``--rl-save`` without it is not always a mistake; turning auditing on costs nothing where
there is nothing to audit, and where there is, the report or baseline asked for is
written. Values from the ini file do neither: an ini holds defaults for runs that may not
audit (``rl_agent`` for the fixture), and a plain ``pytest`` of the repo's unit tests must
not start auditing.

Loading it imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from .options import Settings

__all__ = ["SKIP_REASON", "switch", "skipped_line", "agent_only", "AGENT_ONLY_LINE"]

#: Why an audit test is skipped without --rl-audit (also how the summary finds them).
SKIP_REASON = "RL audit test: run it with --rl-audit (or rl_audit = true in the ini file)"

#: Options that only mean something when auditing: on the command line, they turn it on.
_TURN_ON = ("rl_agent", "rl_save", "rl_history", "rl_report", "rl_videos")


def switch(config: pytest.Config, settings: Settings) -> Settings:
    """``settings`` with auditing on where the command line asks for audit results (see
    the module)."""
    if settings.audit or all(config.getoption(dest) is None for dest in _TURN_ON):
        return settings
    return replace(settings, audit=True)


def skipped_line(count: int) -> str:
    """The terminal summary's line counting the audit tests skipped without --rl-audit.

    >>> skipped_line(5)
    'rl audit: 5 tests skipped: auditing is off; run with --rl-audit (or ini rl_audit = true)'
    """
    tests = "1 test" if count == 1 else f"{count} tests"
    return (f"rl audit: {tests} skipped: auditing is off; run with --rl-audit "
            "(or ini rl_audit = true)")


#: The terminal summary's line when :func:`agent_only` held.
AGENT_ONLY_LINE = ("rl audit: only the --rl-agent audit ran, not the ini's testpaths; name paths "
                   "to run tests with it too (pytest tests/ --rl-agent=...)")


def agent_only(config: pytest.Config) -> bool:
    """Whether this run audits the ``--rl-agent`` alone: given on the command line where
    pytest took its paths from the ini file's ``testpaths`` (no path on the command line),
    it is the zero-config audit, not the project's whole suite (a clone of this project
    ran its own suite instead, for minutes). Without ``testpaths``, a run from a folder
    collects that folder as before: the zero-config audit beside plain tests, or the tests
    that take ``rl_agent``. An xdist worker, which gets the controller's paths as its own
    arguments, is told by the controller."""
    if config.getoption("rl_agent") is None:
        return False
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return bool(workerinput.get("rlaudit_agent_only"))
    return config.args_source is pytest.Config.ArgsSource.TESTPATHS
