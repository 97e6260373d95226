"""``--rl-save``, ``--rl-compare`` and ``--rl-compare-fail``: the run against a baseline.

The controller alone loads, compares and writes (xdist workers only audit). A regression,
an unpairable result, or with ``--rl-compare-fail`` a comparison that could not have failed
(``INCONCLUSIVE``: nothing paired, or too few episodes) fails the run the pytest way
(``session.testsfailed += 1``). ``--rl-save``'s target is checked at ``pytest_configure``
(:mod:`.reporting`).
"""

from __future__ import annotations

from typing import Any

import pytest

from .reporting import guarded
from .xdist import is_worker

__all__ = ["BaselineGate"]


class BaselineGate:
    """Plugin object of one run's baseline options; reads the records of ``audits``."""

    def __init__(self, audits: Any) -> None:
        self.audits = audits  # the AuditSession: settings, records, expected, lost
        self.settings = audits.settings
        self.baseline: dict[str, Any] | None = None  # --rl-compare's document
        self.comparison: Any = None
        self.saved: str | None = None  # what --rl-save did, for the terminal

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Load --rl-compare's baseline before anything runs."""
        if is_worker(session.config):
            return
        compare = self.settings.compare
        if self.settings.compare_fail and not compare:
            raise pytest.UsageError("--rl-compare-fail needs --rl-compare PATH (the baseline to "
                                    "compare with)")
        if not compare:
            return
        from ..auditing.baselines import load_baseline
        from ..errors import BaselineError

        try:
            self.baseline = load_baseline(compare)
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        options = (self.baseline or {}).get("options") or {}
        for dest in ("rl_seed", "rl_episodes", "rl_env"):
            theirs, ours = options.get(dest), getattr(self.settings, dest.removeprefix("rl_"))
            if theirs is not None and ours is not None and theirs != ours:
                flag = "--" + dest.replace("_", "-")
                raise pytest.UsageError(
                    f"--rl-compare {compare}: the baseline was made with {flag} {theirs}, this "
                    f"run uses {ours}; a paired comparison needs the same seeds, episodes and "
                    f"env: add {flag} {theirs} (or save a new baseline)")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        """After the tests (all results are in, under xdist too), compare with the baseline;
        a regression or an unpairable result fails the run the pytest way."""
        yield
        if self.baseline is None or is_worker(session.config):
            return
        from ..auditing.comparison import compare_records
        from ..reports.rows import order_key

        with guarded(self.audits, f"comparing with the baseline {self.settings.compare}",
                     session):
            records = sorted(self.audits.records, key=order_key)
            self.comparison = compare_records(self.baseline["results"], records,
                                              self.settings.compare_fail)
            # "report" gates nothing; "inconclusive" could not have failed, which the user
            # who gave --rl-compare-fail must hear as a failure, never as a pass
            if self.comparison.decision in ("hold", "inconclusive"):
                session.testsfailed += 1

    @pytest.hookimpl(tryfirst=True)  # with the report files, before junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.settings.save and not is_worker(session.config):
            with guarded(self.audits, f"saving the baseline to {self.settings.save}", session):
                self._save(session, exitstatus)

    @pytest.hookimpl(trylast=True)  # after the rl audit section
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if is_worker(terminalreporter.config):
            return
        if self.comparison is not None:
            from ..reports.terminal import comparison_section
            from .terminal import write_lines

            terminalreporter.section("rl audit comparison", sep="=", bold=True)
            errors = len(self.audits.report_errors)
            failed = sum(len(terminalreporter.stats.get(k, [])) for k in ("failed", "error"))
            with guarded(self.audits, "the rl audit comparison section"):
                write_lines(terminalreporter, comparison_section(
                    self.comparison, self.baseline or {}, str(self.settings.compare), failed))
            write_lines(terminalreporter, [[(f"error: {e}", "error")]
                                           for e in self.audits.report_errors[errors:]])
        if self.saved:
            terminalreporter.write_sep("-", f"rl audit baseline: {self.saved}",
                                       yellow="PARTIAL" in self.saved or "nothing" in self.saved)

    def _save(self, session: pytest.Session, exitstatus: int) -> None:
        """Write --rl-save's baseline; a partial run is saved marked and said to be partial."""
        from .. import __version__
        from ..auditing.baselines import baseline_document, write_baseline

        path = self.settings.save
        if not self.audits.records:
            self.saved = (f"nothing saved to {path}: no audit ran" + (
                " (no test here audits: mark one rl_audit, or give --rl-agent and --rl-env)"
                if self.audits.enabled else " (pass --rl-audit)"))
            return
        recorded = {r["nodeid"] for r in self.audits.records}
        missing = [n for n in self.audits.expected if n not in recorded]
        missing += [lost["nodeid"] for lost in self.audits.lost if lost["nodeid"] not in missing]
        stopped = session.shouldstop or session.shouldfail
        incomplete = (f"the run stopped early ({stopped})" if stopped
                      else "the run was interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED
                      else None)
        options = self.settings.as_options()
        doc = baseline_document(self.audits.records, version=__version__, options=options,
                                missing=missing, incomplete=incomplete)
        write_baseline(doc, path)
        if doc["complete"]:
            self.saved = f"saved {len(self.audits.records)} results to {path}"
        else:
            why = incomplete or f"{len(missing)} audit(s) have no result: {', '.join(missing[:3])}"
            self.saved = (f"PARTIAL run saved to {path} (marked complete: false): {why}; "
                          "a comparison against it skips what it lacks")

    def summary_extra(self) -> dict[str, Any]:
        """What summary.json adds for the comparison (nothing without one)."""
        if self.comparison is None:
            return {}
        return {"comparison": {"baseline": str(self.settings.compare),
                               **self.comparison.to_dict()}}
