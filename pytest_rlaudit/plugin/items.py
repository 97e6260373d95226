"""The items the plugin adds, and which items are audits.

Zero-config audits (``--rl-agent`` and ``--rl-env`` and no audit test of the repo's own)
are one :class:`ScenarioItem` per scenario, under one :class:`ScenarioCollector`.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["ScenarioItem", "ScenarioCollector", "ErrorCollector", "is_rl_item",
           "is_hypothesis_test", "is_ours", "plain_crash_line", "could_not_audit"]

_RL_MARKERS = ("rl_audit", "rl_scenario", "rl_threshold", "rl_episodes", "rl_tolerance")
_RL_FIXTURES = ("rl_audit", "rl_scenario")


def is_rl_item(item: pytest.Item) -> bool:
    """An audit test: marked with an rl marker, using an rl fixture, or generated."""
    return (isinstance(item, ScenarioItem)
            or any(item.get_closest_marker(m) for m in _RL_MARKERS)
            or any(f in getattr(item, "fixturenames", ()) for f in _RL_FIXTURES))


def is_hypothesis_test(item: pytest.Item) -> bool:
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))


def is_ours(exc: BaseException) -> bool:
    """An error pytest-rlaudit raised (a RobustnessError, an RLAuditError, a bad argument):
    its message says what broke and what to do, so a report shows that message first."""
    return type(exc).__module__.startswith("pytest_rlaudit.")


def could_not_audit(exc: BaseException) -> bool:
    """Whether ``exc`` says the audit could not run (a missing agent file, an unknown env,
    an agent for other spaces; or the repeat of one): pytest's ERROR, not a failure."""
    if type(exc).__module__ != "pytest_rlaudit.errors":  # not ours: no need to import them
        return False
    from ..errors import CouldNotAuditError

    return isinstance(exc, CouldNotAuditError) or bool(getattr(exc, "could_not_audit", False))


def message_only(excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
    """The failure of one of our errors as its message alone, or None for any other.
    Our errors say what went wrong and what to do; a traceback would bury that (the
    "value" style; its crash line: see :func:`plain_crash_line`)."""
    from ..errors import RLAuditError, RobustnessError

    if isinstance(excinfo.value, (RobustnessError, RLAuditError)):
        return excinfo.getrepr(style="value")
    return None


def plain_crash_line(report: pytest.TestReport, exc: BaseException) -> None:
    """Give ``report``'s crash line (pytest's short summary, JUnit's failure message) the
    message alone, without the exception's class path
    (``pytest_rlaudit.errors.RobustnessError: ...``): at 80 columns the path
    would leave no room for what broke."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        crash.message = str(exc)


class ScenarioItem(pytest.Item):
    """A zero-config audit item: one scenario for --rl-agent on --rl-env."""

    def __init__(self, *, scenario: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario

    def runtest(self) -> None:
        plugin: Any = self.config.pluginmanager.get_plugin("rlaudit-session")
        plugin.audits.run(self, self.scenario)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None):
        return message_only(excinfo) or super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, None, str]:
        # where its node id says it is (pytest makes a relative path absolute from the
        # folder it runs in, not from the rootdir)
        return (self.config.rootpath / self.nodeid.split("::")[0], None,
                f"rl-audit: {self.scenario.name}")


class ErrorCollector(pytest.Collector):
    """A collection error of the run's options (an unknown --rl-env): reported as pytest
    reports a module that does not import, by the worker that found it under xdist."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message

    def collect(self) -> list[pytest.Item]:
        raise self.CollectError(self.message)


class ScenarioCollector(pytest.Collector):
    """Collects the zero-config items (one per scenario of the default suite)."""

    def collect(self) -> list[ScenarioItem]:
        plugin: Any = self.config.pluginmanager.get_plugin("rlaudit-session")
        if plugin.audits.runs is None:
            # Loaded here (once: the items use it): an agent made for other spaces than
            # the env's is a collection error, not a failed robustness test per scenario.
            # Another error loading it is each item's to report, as before.
            try:
                plugin.audits.default_agent()
            except Exception as exc:
                if could_not_audit(exc):
                    raise self.CollectError(f"--rl-agent {plugin.settings.agent} on "
                                            f"--rl-env {plugin.settings.env}: {exc}") from None
        items = [ScenarioItem.from_parent(self, name=s.name, scenario=s)
                 for s in plugin.default_scenarios()]
        for item in items:  # audit tests, as the repo's own: -m rl_audit selects them too
            item.add_marker("rl_audit")
        return items
