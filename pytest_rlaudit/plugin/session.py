"""The plugin's session object: settings, audit runs, results, and every report.

``plugin.py`` registers one :class:`AuditSession` per pytest run and forwards to it. The
session runs scenario audits for the ``rl_audit`` fixture and for zero-config items,
keeps the nominal rollouts of each (agent, env, seed, episodes) for the whole process,
puts each test's numbers on its report as a JSON string (so they survive xdist's
channel), and after the run prints the "rl audit" section, sets JUnit properties and
writes ``--rl-report`` files.

Loading it imports nothing heavy; the engine is imported when an audit first runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._capture import capture_checks
from .._format import fixed, interval
from ..auditing.records import record_of, validate
from .options import option_value

__all__ = ["AuditSession", "ScenarioItem", "XdistHooks", "RECORD_KEY", "is_rl_item"]

RECORD_KEY = pytest.StashKey[dict[str, Any]]()
CHECKS_KEY = pytest.StashKey[list[Any]]()
_RL_MARKERS = ("rl_audit", "rl_scenario", "rl_threshold", "rl_episodes")
_RL_FIXTURES = ("rl_audit", "rl_scenario")
_COLOURS = {"PASS": {"green": True}, "MILD": {"yellow": True}, "DEGRADED": {"yellow": True,
            "bold": True}, "FAIL": {"red": True, "bold": True}}


def is_rl_item(item: pytest.Item) -> bool:
    """An audit test: marked with an rl marker, using an rl fixture, or generated."""
    return (isinstance(item, ScenarioItem)
            or any(item.get_closest_marker(m) for m in _RL_MARKERS)
            or any(f in getattr(item, "fixturenames", ()) for f in _RL_FIXTURES))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class AuditSession:
    """Per-run state of the plugin (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.enabled = bool(option_value(config, "rl_audit"))
        self.settings = {dest: option_value(config, dest) for dest in (
            "rl_agent", "rl_algo", "rl_env", "rl_episodes", "rl_seed", "rl_scenarios",
            "rl_reference", "rl_min_ratio", "rl_min_rating", "rl_mode", "rl_fail_stress",
            "rl_report", "rl_batch_size")}
        self.records: list[dict[str, Any]] = []
        self.report_paths: list[Any] = []
        self.cache: dict[Any, Any] = {}  # nominal and reference rollouts, per process
        self._policies: dict[Any, tuple[Any, Any]] = {}
        self._envs: dict[Any, tuple[Any, Any]] = {}
        self.order: dict[str, int] = {}  # collection order: rows follow it, on any worker
        self.lost: list[dict[str, str]] = []  # audits lost with a crashed xdist worker
        self.settings.update({dest: option_value(config, dest) for dest in (
            "rl_save", "rl_compare", "rl_compare_fail")})
        self.expected: list[str] = []  # audit items that should each leave a record
        self.baseline: dict[str, Any] | None = None  # --rl-compare's document
        self.comparison: Any = None
        self.saved: str | None = None  # what --rl-save did, for the terminal
        self.errors: list[dict[str, Any]] = []  # audit tests that failed without a result
        self._overridden: set[str] = set()  # rl_agent / rl_env overrides already warned of

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Check --rl-save's target and load --rl-compare's baseline before anything runs."""
        if _is_worker(self.config):
            return
        save, compare = self.settings["rl_save"], self.settings["rl_compare"]
        if self.settings["rl_compare_fail"] and not compare:
            raise pytest.UsageError("--rl-compare-fail needs --rl-compare PATH (the baseline to "
                                    "compare with)")
        if not (save or compare):
            return
        from ..auditing.baselines import check_writable, load_baseline
        from ..errors import BaselineError

        try:
            if save:
                check_writable(save)
            if compare:
                self.baseline = load_baseline(compare)
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        options = (self.baseline or {}).get("options") or {}
        for dest in ("rl_seed", "rl_episodes", "rl_env"):
            theirs, ours = options.get(dest), self.settings[dest]
            if theirs is not None and ours is not None and theirs != ours:
                flag = "--" + dest.replace("_", "-")
                raise pytest.UsageError(
                    f"--rl-compare {compare}: the baseline was made with {flag} {theirs}, this "
                    f"run uses {ours}; a paired comparison needs the same seeds, episodes and "
                    f"env: add {flag} {theirs} (or save a new baseline)")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.order = {item.nodeid: i for i, item in enumerate(session.items)}
        if self.enabled:
            self.expected = [item.nodeid for item in session.items if is_rl_item(item)]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        """After the tests (all results are in, under xdist too), compare with the baseline;
        a regression or an unpairable result fails the run the pytest way."""
        yield
        if self.baseline is None or _is_worker(self.config):
            return
        from ..auditing.comparison import compare_records

        records = sorted(self.records, key=lambda r: (r.get("order", 0), r["nodeid"]))
        self.comparison = compare_records(self.baseline["results"], records,
                                          self.settings["rl_compare_fail"])
        if self.comparison.regressions or self.comparison.mismatches:
            session.testsfailed += 1

    # ------------------------------------------------------------------ collection

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        audit_items = [item for item in items if is_rl_item(item)]
        if not self.enabled:
            skip = pytest.mark.skip(reason="RL audit test: run it with --rl-audit "
                                           "(or rl_audit = true in the ini file)")
            for item in audit_items:
                item.add_marker(skip)
            return
        if audit_items or not (self.settings["rl_agent"] and self.settings["rl_env"]):
            return
        # Zero-config: an agent and an env and no audit test of the repo's own.
        self.default_scenarios()  # a bad --rl-scenarios is a usage error, not a collection error
        collector = ScenarioCollector.from_parent(session, name="rl-audit", nodeid="rl-audit")
        items.extend(session.genitems(collector))

    def default_scenarios(self) -> list[Any]:
        from ..world import scenarios as registry

        names = self.settings["rl_scenarios"] or registry.DEFAULT
        try:
            return list(registry.resolve(names))
        except LookupError as exc:
            raise pytest.UsageError(f"--rl-scenarios: {exc}") from None

    # --------------------------------------------------------------------- running

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any):
        """Say so when a conftest fixture overrides rl_agent or rl_env although --rl-agent or
        --rl-env was given, and returns something else: the option would otherwise be
        ignored without a word."""
        outcome = yield
        name = fixturedef.argname
        if name not in ("rl_agent", "rl_env") or name in self._overridden:
            return
        given = self.settings[name]
        func = getattr(fixturedef, "func", None)
        if not given or getattr(func, "__module__", None) == f"{__package__}.plugin":
            return
        try:
            if outcome.get_result() == given:  # the fixture passes the option on
                return
        except BaseException:  # the fixture failed: pytest reports that
            return
        self._overridden.add(name)
        import inspect
        import warnings

        try:
            where = f"{inspect.getsourcefile(func)}:{inspect.getsourcelines(func)[1]}"
        except (TypeError, OSError):
            where = getattr(func, "__qualname__", "a fixture of the repo's own")
        flag = "--" + name.replace("_", "-")
        warnings.warn(pytest.PytestConfigWarning(
            f"{flag} {given} is not used: the {name} fixture at {where} overrides it, and the "
            f"audit tests use what that fixture returns. To audit {given} with these tests, "
            f"make that fixture take pytestconfig and return "
            f"pytestconfig.getoption({name!r}) when it is set."), stacklevel=1)

    def default_agent(self) -> Any:
        if not self.settings["rl_agent"]:
            pytest.fail("no agent to audit: pass --rl-agent PATH_OR_IMPORT (or set rl_agent "
                        "in the ini file), or override the rl_agent fixture in conftest.py",
                        pytrace=False)
        return self.policy_for(self.settings["rl_agent"])

    def default_env(self) -> Any:
        if not self.settings["rl_env"]:
            pytest.fail("no env to audit on: pass --rl-env ID (or set rl_env in the ini "
                        "file), or override the rl_env fixture in conftest.py", pytrace=False)
        return self.spec_for(self.settings["rl_env"])

    def policy_for(self, agent: Any) -> Any:
        """One policy adapter per agent object for the whole run (the nominal cache keys on
        it); agents given by path or import string are loaded once."""
        key = agent if isinstance(agent, str) else id(agent)
        if key not in self._policies:
            from ..world.agents import as_policy

            algo = self.settings["rl_algo"] if isinstance(agent, str) else None
            self._policies[key] = (agent, as_policy(agent, algo=algo))
        return self._policies[key][1]

    def spec_for(self, env: Any) -> Any:
        key = env if isinstance(env, str) else id(env)
        if key not in self._envs:
            from ..world.envs import env_spec

            self._envs[key] = (env, env_spec(env))
        return self._envs[key][1]

    def gates(self, item: pytest.Item, scenario: Any) -> dict[str, Any] | None:
        """Thresholds for ``item``: marker > command line > ini; MILD when none is set.
        Stress scenarios are only reported unless --rl-fail-stress or a marker gates them."""
        from .options import threshold_marker

        marker = item.get_closest_marker("rl_threshold")
        explicit = threshold_marker(marker) if marker is not None else None
        if explicit is None and scenario.category == "stress" and not self.settings[
                "rl_fail_stress"]:
            return None
        gate = {"min_ratio": self.settings["rl_min_ratio"],
                "min_rating": self.settings["rl_min_rating"], "mode": self.settings["rl_mode"]}
        if marker is not None:
            given = dict(zip(("min_ratio", "min_rating", "mode"), marker.args, strict=False))
            given.update(marker.kwargs)
            gate.update({k: explicit[k] for k in given})
        if gate["min_ratio"] is None and gate["min_rating"] is None:
            gate["min_rating"] = "MILD"
        return gate

    def run(self, item: pytest.Item, scenario: Any, agent: Any = None, env: Any = None) -> Any:
        """Audit ``scenario`` for ``item`` and record it; raise RobustnessError on a miss."""
        __tracebackhide__ = True
        from ..errors import ReferenceScoreError
        from ..verdicts.assertions import RobustnessError
        from .options import episodes_marker

        policy = self.default_agent() if agent is None else self.policy_for(agent)
        spec = self.default_env() if env is None else self.spec_for(env)
        episodes = episodes_marker(item.get_closest_marker("rl_episodes")) or {
            "n": self.settings["rl_episodes"], "max_n": None, "target_ci_width": None}
        gate = self.gates(item, scenario)
        try:
            check = self._check(policy, spec, scenario, gate, episodes)
        except ReferenceScoreError as exc:
            raise ReferenceScoreError(
                f"{exc} From pytest: --rl-reference random (or rl_reference = random in the "
                "ini file), or --rl-reference <number>.") from None
        record = record_of(item.nodeid, check, gate)
        record["order"] = self.order.get(item.nodeid, len(self.order))
        item.stash[RECORD_KEY] = record
        if not check.passed:
            raise RobustnessError(check.message, check.result)
        return check.result

    def _check(self, policy: Any, spec: Any, scenario: Any, gate: dict[str, Any] | None,
               episodes: dict[str, Any]) -> Any:
        from ..verdicts.assertions import check_robust

        return check_robust(
            policy, spec, scenario, min_ratio=(gate or {}).get("min_ratio"),
            min_rating=(gate or {}).get("min_rating"), mode=(gate or {}).get("mode", "point"),
            episodes=episodes["n"], max_episodes=episodes["max_n"],
            target_ci_width=episodes["target_ci_width"], seed=self.settings["rl_seed"],
            reference=self.settings["rl_reference"], batch_size=self.settings["rl_batch_size"],
            cache=self.cache)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """Capture the robustness checks the test makes itself (``assert_robust`` in a unit
        or hypothesis test), to report them like audits. A hypothesis test's examples
        share one cache, so the nominal episodes run once, not once per example."""
        cache: dict[Any, Any] | None = {} if _is_hypothesis_test(item) else None
        with capture_checks(cache=cache) as checks:
            yield
        if checks:
            item.stash[CHECKS_KEY] = checks

    # ------------------------------------------------------------------- reporting

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        record = item.stash.get(RECORD_KEY, None) if call.when == "call" else None
        checks = item.stash.get(CHECKS_KEY, None) if call.when == "call" else None
        if record is None and checks:
            record = _captured_record(item, checks, failed=call.excinfo is not None)
            record["order"] = self.order.get(item.nodeid, len(self.order))
        if record is not None:  # before the report exists: JUnit reads user_properties
            item.user_properties.extend(_junit_properties(record))
        outcome = yield
        report = outcome.get_result()
        if record is not None:
            report.rl_audit = json.dumps(record)
            if report.failed and record["diagnosis"]:
                report.sections.append(("rl audit diagnosis", _diagnosis_text(record)))
        elif report.failed and self.enabled and is_rl_item(item):
            # an audit that left no result: the reports list it, in collection order
            report.rl_error = self.order.get(item.nodeid, len(self.order))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if getattr(report, "rl_error", None) is not None:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
            self.errors.append({"nodeid": report.nodeid, "when": report.when,
                                "message": (message.strip().splitlines() or ["?"])[0],
                                "order": report.rl_error})
            self.errors.sort(key=lambda e: (e["order"], e["nodeid"]))
        data = getattr(report, "rl_audit", None)
        if data is None or report.when != "call":
            return
        record = validate(json.loads(data))  # from this process or an xdist worker
        record["outcome"] = (("xfailed" if report.skipped else "xpassed")
                             if hasattr(report, "wasxfail") else report.outcome)
        self.records.append(record)
        if self.config.getoption("verbose") > 0 and not _is_worker(self.config):
            writer = self.config.pluginmanager.get_plugin("terminalreporter")
            if writer is not None:
                writer.write_line(
                    f"    rl audit: {record['agent']} / {record['scenario']}: ratio "
                    f"{fixed(record['ratio'])} ({interval(record['ci_low'], record['ci_high'])}) "
                    f"{record['rating']}", **_COLOURS[record["rating"]])

    def scenario_of(self, nodeid: str) -> str | None:
        """The scenario an audit item's node id names (``rl-audit::jitter``,
        ``test_x.py::test_y[jitter]``), or None for other tests."""
        if not self.enabled:
            return None
        if nodeid.startswith("rl-audit::"):
            return nodeid.split("::", 1)[1]
        if not nodeid.endswith("]") or "[" not in nodeid:
            return None
        from ..world import scenarios as registry

        known = set(registry.names())
        parts = nodeid[nodeid.rindex("[") + 1:-1].split("-")
        return next((part for part in parts if part in known), None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: Any, config: pytest.Config) -> Any:
        if getattr(report, "rl_lost", None):
            return "error", "E", ("ERROR", {"red": True})
        return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if _is_worker(self.config):
            return
        self._audit_section(terminalreporter)
        if self.comparison is not None:
            self._comparison_section(terminalreporter)
        if self.saved:
            terminalreporter.write_sep("-", f"rl audit baseline: {self.saved}",
                                       yellow="PARTIAL" in self.saved or "nothing" in self.saved)

    def _comparison_section(self, tr: Any) -> None:
        c, base = self.comparison, self.baseline
        tr.section("rl audit comparison", sep="=", bold=True)
        partial = "" if base.get("complete", True) else " (a PARTIAL run)"
        tr.write_line(f"baseline {self.settings['rl_compare']}: pytest-rlaudit "
                      f"{base.get('version', '?')}, {base.get('created', '?')}{partial}")
        colours = {"regressed": {"red": True, "bold": True}, "worse": {"yellow": True},
                   "improved": {"green": True}}
        for change in c.changes:
            if change.status != "same":
                tr.write_line(f"{change.status.upper():9}  {change.key}  {change.describe()}",
                              **colours[change.status])
        same = sum(ch.status == "same" for ch in c.changes)
        if same:
            tr.write_line(f"{same} of {len(c.changes)} comparisons show no significant change")
        for problem in c.mismatches:
            tr.write_line(f"CANNOT COMPARE  {problem}", red=True, bold=True)
        if c.new:
            tr.write_line(f"new (not in the baseline): {', '.join(c.new)}")
        if c.missing:
            tr.write_line(f"in the baseline, not in this run: {', '.join(c.missing)}")
        if c.power_note:
            tr.write_line(f"note: {c.power_note}", yellow=True, bold=True)
        decision, _, why = c.summary().partition(": ")
        colour = {"ship": {"green": True}, "hold": {"red": True, "bold": True}}.get(
            c.decision, {"yellow": True} if c.drops else {})
        tr.write_line(f"{decision.upper()}: {why}", **colour)

    def _audit_section(self, terminalreporter: Any) -> None:
        if not (self.records or self.lost or self.errors or self.report_paths):
            return
        from ..reports.summary import aggregates, table_rows

        terminalreporter.section("rl audit", sep="=", bold=True)
        for lost in self.lost:
            terminalreporter.write_line(
                f"lost: scenario {lost['scenario']} ({lost['nodeid']}): its xdist worker "
                "crashed, so it has no result", red=True, bold=True)
        for error in self.errors:
            terminalreporter.write_line(f"error: {error['nodeid']}: {error['message']}",
                                        red=True, bold=True)
        if not self.records:
            self._report_line(terminalreporter)
            return
        rows = table_rows(self.records)
        widths = [max(len(cells[i]) for cells, _ in rows) for i in range(len(rows[0][0]) - 1)]
        for cells, rated in rows:
            text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False))
            terminalreporter.write_line(f"{text}  {cells[-1]}".rstrip(),
                                        **_COLOURS.get(rated, {"bold": True}))
        for rec in sorted(self.records, key=lambda r: r.get("order", 0)):
            if rec.get("schedule") and not (rec["passed"] and rec["rating"] == "PASS"):
                what = ("smallest failing schedule" if not rec["passed"] and rec.get("hypothesis")
                        else "schedule")
                verb = "breaks" if rec["rating"] in ("FAIL", "DEGRADED") else (
                    "degrades" if rec["rating"] == "MILD" else "holds")
                terminalreporter.write_line(
                    f"{rec['nodeid']}: {what}: {verb} when {rec['schedule']['description']} "
                    f"(ratio {fixed(rec['ratio'])}, {rec['rating']}): {rec['schedule']['repr']}",
                    **_COLOURS[rec["rating"]])
        for agg in aggregates(self.records):
            if not (agg["deployment"] or agg["stress"]):
                continue
            terminalreporter.write(f"{agg['agent']} on {agg['env']}:")
            for category in ("deployment", "stress"):
                if agg[category]:
                    a = agg[category]
                    terminalreporter.write(f"  {category} ", bold=True)
                    terminalreporter.write(a["rating"], **_COLOURS[a["rating"]])
                    terminalreporter.write(f" (min ratio {fixed(a['score'])}, {a['scenario']})")
            terminalreporter.write_line("")
        self._report_line(terminalreporter)

    def _report_line(self, terminalreporter: Any) -> None:
        if self.report_paths:
            terminalreporter.write_sep(
                "-", f"rl audit report: {', '.join(str(p) for p in self.report_paths)}")

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if _is_worker(self.config):
            return
        if self.settings["rl_save"]:
            self._save(session, exitstatus)
        if self.settings["rl_report"]:  # always: a CI artifact step expects the folder
            from .. import __version__
            from ..reports.summary import summary, write_report

            extra: dict[str, Any] = {"seed": self.settings["rl_seed"], "lost": self.lost,
                                     "errors": self.errors}
            if not self.enabled:
                extra["note"] = "audit tests were skipped: run with --rl-audit"
            if self.comparison is not None:
                extra["comparison"] = {"baseline": str(self.settings["rl_compare"]),
                                       **self.comparison.to_dict()}
            doc = summary(self.records, version=__version__, extra=extra)
            self.report_paths = write_report(doc, self.settings["rl_report"])
        xml = _junit_writer(self.config)
        if xml is not None and self.records:
            from ..reports.summary import aggregates

            groups = aggregates(self.records)
            for agg in groups:
                suffix = "" if len(groups) == 1 else f"[{agg['agent']}@{agg['env']}]"
                for category in ("deployment", "stress"):
                    if agg[category]:
                        xml.add_global_property(f"rl.{category}{suffix}", agg[category]["rating"])
            if self.comparison is not None:
                xml.add_global_property("rl.compare", self.comparison.decision)

    def _save(self, session: pytest.Session, exitstatus: int) -> None:
        """Write --rl-save's baseline; a partial run is saved marked and said to be partial."""
        from .. import __version__
        from ..auditing.baselines import baseline_document, write_baseline

        path = self.settings["rl_save"]
        if not self.records:
            self.saved = (f"nothing saved to {path}: no audit ran"
                          + ("" if self.enabled else " (pass --rl-audit)"))
            return
        recorded = {r["nodeid"] for r in self.records}
        missing = [n for n in self.expected if n not in recorded]
        missing += [lost["nodeid"] for lost in self.lost if lost["nodeid"] not in missing]
        stopped = session.shouldstop or session.shouldfail
        incomplete = (f"the run stopped early ({stopped})" if stopped
                      else "the run was interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED
                      else None)
        options = {k: (list(map(str, v)) if isinstance(v, tuple) else v)
                   for k, v in self.settings.items()}
        doc = baseline_document(self.records, version=__version__, options=options,
                                missing=missing, incomplete=incomplete)
        write_baseline(doc, path)
        if doc["complete"]:
            self.saved = f"saved {len(self.records)} results to {path}"
        else:
            why = incomplete or f"{len(missing)} audit(s) have no result: {', '.join(missing[:3])}"
            self.saved = (f"PARTIAL run saved to {path} (marked complete: false): {why}; "
                          "a comparison against it skips what it lacks")

class XdistHooks:
    """Hooks of pytest-xdist's controller, registered only when xdist is loaded.

    Results need no xdist hook: they ride on the test reports. This one handles a worker
    that dies mid-audit (an agent calling os._exit, a segfault in native code): xdist
    reports the item it was running as crashed; for an audit item the report becomes an
    error that names the lost scenario, and the rl audit section lists it. The other
    items are rescheduled by xdist and reported as usual.
    """

    def __init__(self, session: AuditSession) -> None:
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        scenario = self.session.scenario_of(crashitem)
        if scenario is None:
            return
        report.rl_lost = scenario
        report.longrepr = (f"{report.longrepr}: the audit of scenario {scenario!r} was lost with "
                           "the worker (an agent or env that ended the process, such as "
                           "os._exit or a crash in native code); the other scenarios are "
                           "reported")
        self.session.lost.append({"nodeid": crashitem, "scenario": scenario})


def _junit_writer(config: pytest.Config) -> Any:
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - pytest moved it
        return None
    return config.stash.get(xml_key, None)


def _captured_record(item: pytest.Item, checks: list[Any], failed: bool) -> dict[str, Any]:
    """The record of a test that called ``assert_robust`` (or ``check_robust``) itself:
    when it failed, its last failing check (for a hypothesis test, the minimal example,
    which hypothesis replays last); otherwise its worst check (the closest call)."""
    missed = [c for c in checks if not c.passed]
    chosen = missed[-1] if failed and missed else min(  # ties: the later check
        reversed(checks), key=lambda c: float(c.result.ratio))
    record = record_of(item.nodeid, chosen, chosen.gate)
    record["checks"] = len(checks)
    record["hypothesis"] = _is_hypothesis_test(item)
    return record


def _is_hypothesis_test(item: pytest.Item) -> bool:
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))


def _junit_properties(record: dict[str, Any]) -> list[tuple[str, str]]:
    d = record["diagnosis"]
    return [
        ("rl.scenario", record["scenario"]),
        ("rl.ratio", f"{record['ratio']:.6f}"),
        ("rl.ci_low", f"{record['ci_low']:.6f}"),
        ("rl.ci_high", f"{record['ci_high']:.6f}"),
        ("rl.rating", record["rating"]),
        ("rl.p_value", "" if record["p_value"] is None else f"{record['p_value']:.6g}"),
        ("rl.episodes", str(record["episodes"])),
        ("rl.diagnosis", "" if d is None else f"{d['pattern']}. Likely cause: {d['cause']}. "
                                              f"Fix: {d['fix']}."),
    ] + ([] if not record.get("schedule") else [
        ("rl.schedule", record["schedule"]["description"]),
        ("rl.schedule_repr", record["schedule"]["repr"]),
    ])


def _diagnosis_text(record: dict[str, Any]) -> str:
    d = record["diagnosis"]
    return (f"{record['agent']} on {record['env']}, scenario {record['scenario']}: ratio "
            f"{fixed(record['ratio'])} ({interval(record['ci_low'], record['ci_high'])}), "
            f"{record['rating']}\n"
            f"what broke:   {d['pattern']}\nlikely cause: {d['cause']}\nfix:          {d['fix']}\n")


class ScenarioItem(pytest.Item):
    """A zero-config audit item: one scenario for --rl-agent on --rl-env."""

    def __init__(self, *, scenario: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario

    def runtest(self) -> None:
        plugin: AuditSession = self.config.pluginmanager.get_plugin("rlaudit-session")
        plugin.run(self, self.scenario)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None):
        from ..errors import RLAuditError
        from ..verdicts.assertions import RobustnessError

        # Our errors say what went wrong and what to do; a traceback would bury that. The
        # "value" style shows the message alone; its crash line (pytest's short summary,
        # JUnit's message attribute) gets the message without the exception's class path.
        if isinstance(excinfo.value, (RobustnessError, RLAuditError)):
            shown = excinfo.getrepr(style="value")
            crash = getattr(shown, "reprcrash", None)
            if crash is not None:
                crash.message = str(excinfo.value)
            return shown
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[str, None, str]:
        return "rl-audit", None, f"rl-audit: {self.scenario.name}"


class ScenarioCollector(pytest.Collector):
    """Collects the zero-config items (one per scenario of the default suite)."""

    def collect(self) -> list[ScenarioItem]:
        plugin: AuditSession = self.config.pluginmanager.get_plugin("rlaudit-session")
        return [ScenarioItem.from_parent(self, name=s.name, scenario=s)
                for s in plugin.default_scenarios()]
