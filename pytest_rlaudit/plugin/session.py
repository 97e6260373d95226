"""The plugin's session: one run's settings, items and records, and their reports.

``pytest_rlaudit.plugin`` registers one :class:`AuditSession` per pytest run. It collects
the audit items (skipped without --rl-audit; the zero-config ones added), hands the
audits the items ask for to :class:`~.audits.ItemAudits`, captures the checks a test
makes itself, puts each test's record on its report as a JSON string (so it survives
xdist's channel), gathers the records on the controller, and after the run prints the
"rl audit" section, sets the JUnit suite properties and writes ``--rl-report``'s files.
Baselines are :mod:`.baselines`'; renderers live in :mod:`pytest_rlaudit.reports`.

Loading it imports nothing heavy; the engine is imported when an audit first runs.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .._capture import capture_checks
from . import fixtures, junit
from .audits import ItemAudits
from .items import (
    ErrorCollector,
    ScenarioCollector,
    could_not_audit,
    is_hypothesis_test,
    is_ours,
    is_rl_item,
    plain_crash_line,
)
from .options import Settings
from .replays import check_replay_options, replay_collector
from .reporting import caught, fail_run, guarded
from .rootdir import audit_nodeid
from .runs import RunsAudit, resolve_agent
from .stash_keys import PROPERTIES_KEY, RECORD_KEY, SAME_AS_KEY
from .switch import AGENT_ONLY_LINE, SKIP_REASON, agent_only, skipped_line, switch
from .terminal import write_lines
from .xdist import is_worker

if TYPE_CHECKING:
    from ..auditing.records import Record
    from .baselines import BaselineGate

__all__ = ["AuditSession", "RECORD_KEY"]

CHECKS_KEY = pytest.StashKey[list[Any]]()


class AuditSession:
    """Per-run state of the plugin (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # --rl-agent, --rl-save, --rl-report, --rl-videos on the command line: auditing on
        self.settings = switch(config, Settings.read(config))
        # --rl-replay without an agent, a dataset or --rl-record folder that is not there:
        # a usage error now; the paths made absolute
        self.settings = check_replay_options(config, self.settings)
        self.enabled = bool(self.settings.audit)
        runs: list[str] = []
        self.agent_note: str | None = None  # how a glob-like --rl-agent was read
        if self.enabled:  # a glob --rl-agent: one match is that agent, 2+ the runs
            self.settings, runs, self.agent_note = resolve_agent(self.settings)
        self.audits = ItemAudits(config, self.settings)  # what the items ask to be audited
        if runs:
            assert self.settings.agent is not None
            self.audits.runs = RunsAudit(self.settings.agent, runs)
        if self.enabled:  # a missing agent file: a usage error, not a failed test each
            self.audits.check_agent()
        self.records: list[Record] = []
        # replay records (kind "replay"): never among the audit records, which the
        # aggregates and comparisons read
        self.replays: list[dict[str, Any]] = []
        self.recorded: list[str] = []  # the dataset folders --rl-record wrote
        self.report_paths: list[Any] = []
        # definition order (collection order before any plugin reorders): rows follow it,
        # on any worker, under pytest-randomly's shuffles too
        self.order: dict[str, int] = {}
        self._defined: dict[str, int] = {}
        self.session: pytest.Session | None = None
        self.report_errors: list[str] = []  # reporting steps that failed (reporting.guarded)
        self.lost: list[dict[str, str]] = []  # audits lost with a crashed xdist worker
        self.expected: list[str] = []  # audit items that should each leave a record
        self.errors: list[dict[str, Any]] = []  # audit tests that failed without a result
        self._overridden: set[str] = set()  # rl_agent / rl_env overrides already warned of
        self.skipped = 0  # audit tests skipped for want of --rl-audit
        self.could_not: list[str] = []  # tests whose audit could not run (CouldNotAuditError)
        self.agent_only = self.enabled and agent_only(config)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Any, config: pytest.Config) -> bool | None:
        # --rl-agent without test paths: the zero-config audit alone, nothing imported
        return True if self.agent_only else None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        late = len(self._defined)  # items another plugin added after us: in run order
        self.order = {item.nodeid: self._defined.get(item.nodeid, late + i)
                      for i, item in enumerate(session.items)}
        if self.enabled:
            self.expected = [item.nodeid for item in session.items if is_rl_item(item)]

    # ------------------------------------------------------------------ collection

    # A wrapper, and registered after every plugin loaded from an entry point or -p: it runs
    # before pytest-randomly's (a tryfirst wrapper too) shuffles the items, so the order it
    # notes is the definition order, the same whatever the seed.
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]):
        self._defined = {item.nodeid: i for i, item in enumerate(items)}
        self._skip_or_generate(session, items)
        self._defined.update({item.nodeid: i for i, item in enumerate(items)
                              if item.nodeid not in self._defined})
        yield

    def _skip_or_generate(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        """Skip audit items without --rl-audit; add the zero-config items."""
        if self.agent_only and items:  # a file path in testpaths is collected all the same
            session.config.hook.pytest_deselected(items=items[:])
            items.clear()
        if self.settings.replay:  # --rl-replay: one item per dataset, asked for by name
            items.extend(session.genitems(replay_collector(session, self.config)))
        audit_items = [item for item in items if is_rl_item(item)]
        if not self.enabled:
            skip = pytest.mark.skip(reason=SKIP_REASON)
            for item in audit_items:
                item.add_marker(skip)
            return
        problem = self.audits.env_problem()
        if problem is not None:  # a collection error before any rollout (xdist workers too)
            items.extend(session.genitems(ErrorCollector.from_parent(
                session, name="rl-audit", nodeid=audit_nodeid(self.config), message=problem)))
            return
        if audit_items or not (self.settings.agent and self.settings.env):
            return
        if any(f in getattr(item, "fixturenames", ()) for item in items
               for f in ("rl_agent", "rl_env")):
            return  # tests of the repo's own take the agent (--rl-agent turned auditing on)
        # Zero-config: an agent and an env and no audit test of the repo's own.
        self.default_scenarios()  # a bad --rl-scenarios is a usage error, not a collection error
        collector = ScenarioCollector.from_parent(session, name="rl-audit",
                                                  nodeid=audit_nodeid(self.config))
        items.extend(session.genitems(collector))

    def default_scenarios(self) -> list[Any]:
        from ..world import scenarios as registry

        names = self.settings.scenarios or registry.DEFAULT
        try:
            chosen = list(registry.resolve(names))
        except LookupError as exc:
            raise pytest.UsageError(f"--rl-scenarios: {exc}") from None
        if self.settings.severity:  # the level's sizes for the scenarios it sizes
            leveled = {s.name: s for s in registry.preset(self.settings.severity)}
            chosen = [leveled.get(s.name, s) for s in chosen]
        return chosen

    # --------------------------------------------------------------------- running

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any):
        outcome = yield
        fixtures.warn_if_overridden(self.settings, self._overridden, fixturedef, outcome)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """Capture the robustness checks the test makes itself (``assert_robust`` in a unit
        or hypothesis test), to report them like audits. A hypothesis test's examples
        share one cache, so the nominal episodes run once, not once per example."""
        cache: dict[Any, Any] | None = {} if is_hypothesis_test(item) else None
        with capture_checks(cache=cache) as checks:
            yield
        if checks:
            item.stash[CHECKS_KEY] = checks

    # ------------------------------------------------------------------- reporting

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """A new attempt at the test (pytest-rerunfailures runs the same item again): an
        earlier attempt's record and JUnit properties must not stick to one that may run
        no audit."""
        if RECORD_KEY in item.stash:
            del item.stash[RECORD_KEY]
        if CHECKS_KEY in item.stash:
            del item.stash[CHECKS_KEY]
        added = item.stash.get(PROPERTIES_KEY, [])
        item.user_properties[:] = [p for p in item.user_properties
                                   if not any(p is q for q in added)]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        record = item.stash.get(RECORD_KEY, None) if call.when == "call" else None
        checks = item.stash.get(CHECKS_KEY, None) if call.when == "call" else None
        problems: list[str] = []  # they ride on the report, to the controller under xdist
        with caught(problems, f"the rl audit record of {item.nodeid}"):
            if record is None and checks:
                failed = call.excinfo is not None
                record = captured_record(item, checks, failed=failed)
                if self.settings.videos and self.settings.report and not record["passed"]:
                    # after the test, here (an xdist worker too): the check the record
                    # reports, replayed from what it kept
                    from .videos import film_check

                    record["video"] = film_check(self.settings.report, record,
                                                 chosen_check(checks, failed))
            if record is not None:  # before the report exists: JUnit reads user_properties
                record["order"] = self.order.get(item.nodeid, len(self.order))
                properties = junit.properties(record)
                item.stash[PROPERTIES_KEY] = properties
                item.user_properties.extend(properties)
        if checks is not None:  # they hold the agents they ran: not for the whole run
            del item.stash[CHECKS_KEY]
        outcome = yield
        report = outcome.get_result()
        ours = call.excinfo is not None and is_ours(call.excinfo.value)
        if call.excinfo is not None and could_not_audit(call.excinfo.value) and report.failed:
            report.rl_could_not = True  # an ERROR, not a robustness failure (teststatus)
        if ours and report.failed:
            plain_crash_line(report, call.excinfo.value)  # type: ignore[union-attr]
        if record is not None:
            with caught(problems, f"the rl audit lines of {item.nodeid}"):
                from ..reports.terminal import diagnosis_text, scenario_line

                report.rl_audit = json.dumps(record)
                # a failure of ours already says it: the diagnosis is printed once
                if report.failed and record["diagnosis"] and not ours:
                    report.sections.append(("rl audit diagnosis", diagnosis_text(record)))
                elif report.passed:  # what pytest-html and -rP show of a passed audit
                    report.sections.append(("rl audit", scenario_line(record)))
        elif report.failed and self.enabled and is_rl_item(item):
            # an audit that left no result: the reports list it, in collection order
            report.rl_error = self.order.get(item.nodeid, len(self.order))
            report.rl_same_as = item.stash.get(SAME_AS_KEY, None)
        if problems:
            report.rl_report_errors = problems

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        outcome = yield
        report = outcome.get_result()
        if report.failed and isinstance(collector, (ScenarioCollector, ErrorCollector)):
            report.rl_could_not = True  # rides to the controller under xdist

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if getattr(report, "rl_could_not", False):
            self.could_not.append(report.nodeid)
            if not any(e["nodeid"] == report.nodeid for e in self.errors):  # once, not per worker
                crash = getattr(report.longrepr, "longrepr", report.longrepr)
                self.errors.insert(0, {"nodeid": report.nodeid, "when": "collect",
                                       "message": (str(crash).strip().splitlines() or ["?"])[0],
                                       "order": -1, "same_as": None})

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == "rerun":  # pytest-rerunfailures: only the last attempt counts
            return
        if report.skipped and not self.enabled and SKIP_REASON in str(report.longrepr):
            self.skipped += 1
        if getattr(report, "rl_could_not", False):
            self.could_not.append(report.nodeid)
        if getattr(report, "rl_report_errors", None) and not is_worker(self.config):
            self.report_errors += report.rl_report_errors
            fail_run(self.session)
        if getattr(report, "rl_error", None) is not None:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
            self.errors.append({"nodeid": report.nodeid, "when": report.when,
                                "message": (message.strip().splitlines() or ["?"])[0],
                                "order": report.rl_error,
                                "same_as": getattr(report, "rl_same_as", None)})
            self.errors.sort(key=lambda e: (e["order"], e["nodeid"]))
        data = getattr(report, "rl_audit", None)
        if data is None or report.when != "call":
            return
        from ..auditing.records import validate

        with guarded(self, f"reading the rl audit record of {report.nodeid}"):
            record = validate(json.loads(data))  # from this process or an xdist worker
            record["outcome"] = (("xfailed" if report.skipped else "xpassed")
                                 if hasattr(report, "wasxfail") else report.outcome)
            # one record per test: the last attempt of one run more than once
            self.records = [r for r in self.records if r["nodeid"] != record["nodeid"]]
            self.records.append(record)
            if self.config.getoption("verbose") > 0 and not is_worker(self.config):
                writer = self.config.pluginmanager.get_plugin("terminalreporter")
                if writer is not None:
                    from ..reports.terminal import progress_line

                    write_lines(writer, [progress_line(record)])

    def scenario_of(self, nodeid: str) -> str | None:
        """The scenario an audit item's node id names (``rl-audit::jitter``,
        ``test_x.py::test_y[jitter]``), or None for other tests."""
        if not self.enabled:
            return None
        if nodeid.startswith(f"{audit_nodeid(self.config)}::"):
            return nodeid.split("::", 1)[1]
        if not nodeid.endswith("]") or "[" not in nodeid:
            return None
        from ..world import scenarios as registry

        known = set(registry.names())
        parts = nodeid[nodeid.rindex("[") + 1:-1].split("-")
        return next((part for part in parts if part in known), None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: Any, config: pytest.Config) -> Any:
        if getattr(report, "rl_lost", None) or getattr(report, "rl_could_not", False):
            # a plain word: pytest 7.4's short summary prints a (word, markup) pair as a tuple
            return "error", "E", "ERROR"
        return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if is_worker(self.config):
            return
        if self.skipped:
            terminalreporter.write_line(skipped_line(self.skipped), yellow=True)
        if self.agent_note:
            terminalreporter.write_line(self.agent_note, yellow=True)
        if self.agent_only:
            terminalreporter.write_line(AGENT_ONLY_LINE, yellow=True)
        if not (self.records or self.lost or self.errors or self.report_paths
                or self.report_errors or self.replays or self.recorded):
            return
        from ..reports.terminal import audit_section

        terminalreporter.section("rl audit", sep="=", bold=True)
        with guarded(self, "the rl audit section"):
            if self.records or self.lost or self.errors:
                write_lines(terminalreporter, audit_section(self.records, lost=self.lost,
                                                            errors=self.errors))
        with guarded(self, "the rl replay lines"):
            from ..reports.replays import replay_lines

            for line in replay_lines(self.replays):
                terminalreporter.write_line(line)
        if self.recorded:
            terminalreporter.write_line(f"rl audit: recorded the audited episodes as Minari "
                                        f"datasets: {', '.join(self.recorded)}")
        write_lines(terminalreporter, [[(f"error: {e}", "error")] for e in self.report_errors])
        videos: list[dict[str, Any]] = [v for rec in self.records if (v := rec.get("video"))]
        # why a failure has no video (pygame missing, an env that does not render): said
        # here too, not only in index.html, where nobody looks for a missing GIF
        for why, count in Counter(v["skipped"] for v in videos if v.get("skipped")).items():
            terminalreporter.write_line(f"rl audit: no video of {count} failing audit(s): {why}",
                                        yellow=True)
        if self.report_paths:
            paths = [str(p) for p in self.report_paths]
            if any(v.get("file") for v in videos):
                paths.append(str(Path(str(self.settings.report)) / "videos"))
            terminalreporter.write_sep("-", f"rl audit report: {', '.join(paths)}")

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if is_worker(self.config):
            return
        if self.could_not and session.exitstatus == pytest.ExitCode.TESTS_FAILED:
            # could not audit: a configuration to fix, not a robustness finding (a test's
            # ERROR; under xdist, a worker's collection error too)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        gate: BaselineGate | None = self.config.pluginmanager.get_plugin("rlaudit-baselines")
        assert gate is not None  # registered beside the session
        if self.settings.report:  # always: a CI artifact step expects the folder
            with guarded(self, f"writing the report to {self.settings.report}", session):
                from .. import __version__
                from ..reports.summary import summary, write_report

                extra: dict[str, Any] = {"seed": self.settings.seed, "lost": self.lost,
                                         "errors": self.errors}
                if not self.enabled:
                    extra["note"] = "audit tests were skipped: run with --rl-audit"
                extra.update(gate.summary_extra())
                if self.replays:
                    extra["replays"] = self.replays
                doc = summary(self.records, version=__version__, extra=extra)
                self.report_paths = write_report(doc, self.settings.report)
        with guarded(self, "the JUnit suite properties", session):
            junit.add_suite_properties(self.config, self.records, gate.comparison)


def captured_record(item: pytest.Item, checks: list[Any], failed: bool) -> Record:
    """The record of a test that called ``assert_robust`` (or ``check_robust``) itself:
    when it failed, its last failing check (for a hypothesis test, the minimal example,
    which hypothesis replays last); otherwise its worst check (the closest call)."""
    from ..auditing.records import record_of

    chosen = chosen_check(checks, failed)
    record = record_of(item.nodeid, chosen, chosen.gate)
    record["checks"] = len(checks)
    record["hypothesis"] = is_hypothesis_test(item)
    return record


def chosen_check(checks: list[Any], failed: bool) -> Any:
    """The check a test's record reports (see :func:`captured_record`)."""
    missed = [c for c in checks if not c.passed]
    return missed[-1] if failed and missed else min(  # ties: the later check
        reversed(checks), key=lambda c: float(c.result.ratio))
