"""Whether this run audits: ``--rl-audit`` (ini ``rl_audit``), or an option that only
means something when auditing given on the command line; the reason audit tests are
skipped without it, and the summary line that counts them.

Forgetting ``--rl-audit`` must not pass a gate. ``--rl-agent`` names what to audit
(``pytest --rl-agent=ppo.zip --rl-env=CartPole-v1`` is the zero-config audit);
``--rl-save``, ``--rl-report`` and ``--rl-videos`` ask for audit results. Given on the
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

__all__ = ["SKIP_REASON", "switch", "skipped_line"]

#: Why an audit test is skipped without --rl-audit (also how the summary finds them).
SKIP_REASON = "RL audit test: run it with --rl-audit (or rl_audit = true in the ini file)"

#: Options that only mean something when auditing: on the command line, they turn it on.
_TURN_ON = ("rl_agent", "rl_save", "rl_report", "rl_videos")


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
