"""Whether this run audits: ``--rl-audit`` (ini ``rl_audit``), or ``--rl-agent`` on the
command line; the options that mean something only when auditing refused without it; the
reason audit tests are skipped, and the summary line that counts them.

Forgetting ``--rl-audit`` must not pass a gate. ``--rl-agent`` given on the command line
names what to audit (``pytest --rl-agent=ppo.zip --rl-env=CartPole-v1`` is the zero-config
audit), so it turns auditing on. ``--rl-save``, ``--rl-report`` and ``--rl-videos`` say where
results go; a CI script may pass them on every run, and starting audits (minutes, hours)
from a destination would surprise it, while exiting 0 having saved nothing would lie: they
are refused with the fix. Values from the ini file do neither: an ini holds defaults for
runs that may not audit (``rl_agent`` for the fixture), and a plain ``pytest`` of the
repo's unit tests must not start auditing or fail.

Loading it imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from .options import Settings

__all__ = ["SKIP_REASON", "switch", "skipped_line"]

#: Why an audit test is skipped without --rl-audit (also how the summary finds them).
SKIP_REASON = "RL audit test: run it with --rl-audit (or rl_audit = true in the ini file)"

#: Options that only mean something when auditing, refused without it (see the module).
_REFUSED = (("rl_save", "--rl-save"), ("rl_report", "--rl-report"), ("rl_videos", "--rl-videos"))


def switch(config: pytest.Config, settings: Settings) -> Settings:
    """``settings`` with auditing on where the command line asks for it (``--rl-agent``);
    a :class:`pytest.UsageError` for a destination given without auditing."""
    if settings.audit:
        return settings
    if config.getoption("rl_agent") is not None:
        return replace(settings, audit=True)
    given = [flag for dest, flag in _REFUSED if config.getoption(dest) is not None]
    if given:
        raise pytest.UsageError(
            f"{' and '.join(given)} {'keep' if len(given) > 1 else 'keeps'} the results of "
            "audits, and auditing is off, so nothing would be kept: add --rl-audit (or "
            f"rl_audit = true in the ini file), or drop {' and '.join(given)}")
    return settings


def skipped_line(count: int) -> str:
    """The terminal summary's line counting the audit tests skipped without --rl-audit.

    >>> skipped_line(5)
    'rl audit: 5 tests skipped: auditing is off; run with --rl-audit (or ini rl_audit = true)'
    """
    tests = "1 test" if count == 1 else f"{count} tests"
    return (f"rl audit: {tests} skipped: auditing is off; run with --rl-audit "
            "(or ini rl_audit = true)")
