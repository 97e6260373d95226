"""``--rl-save``, ``--rl-history``, ``--rl-compare`` and ``--rl-compare-fail``: the run
against a baseline, and the history of runs (:mod:`~pytest_rlaudit.auditing.history`).

The controller alone loads, compares and writes (xdist workers only audit). A regression,
an unpairable result, or with ``--rl-compare-fail`` a comparison that could not have failed
(``INCONCLUSIVE``: nothing paired, or too few episodes) fails the run the pytest way
(``session.testsfailed += 1``). ``--rl-save``'s and ``--rl-history``'s targets are
checked at ``pytest_configure`` (:mod:`.reporting`). ``--rl-compare last`` (a run number,
a commit prefix) is read from the history before the run saves itself there.
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
        self.kept: str | None = None  # what --rl-history did, for the terminal
        self.compared: str | None = None  # the file --rl-compare's value named
        self.skipped: list[str] = []  # files of the history folder that are not runs
        self.first: str | None = None  # --rl-compare last, with no earlier run to pair with
        self.trend: list[Any] = []  # --rl-history-show's lines

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
            self.compared = self._compared(compare)
            if self.compared is None:  # the history's first run of these settings
                return
            self.baseline = load_baseline(self.compared)
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

    def _compared(self, compare: str) -> str | None:
        """The file ``--rl-compare``'s value names: a path that exists, else (with
        ``--rl-history``) the run that ``last``, a number or a commit prefix names there.
        None for ``last`` where no earlier run has this run's settings: nothing to compare
        with, which :attr:`first` says (a gate then fails: it could not have failed)."""
        from pathlib import Path

        from ..auditing import history
        from ..errors import BaselineError

        folder = self.settings.history
        if Path(compare).exists() or not history.is_reference(compare):
            return compare
        if not folder:
            raise BaselineError(
                f"--rl-compare {compare}: no such file, and {compare!r} names a run of a "
                "history folder only with --rl-history DIR (or rl_history = DIR in the ini "
                "file)")
        runs = history.read_runs(folder)
        self.skipped = runs.skipped
        key = history.pairing_key(self.settings.as_options())
        if compare == "last" and not runs.paired_with(key):
            others = len(runs.runs)
            self.first = (f"nothing to compare with: {folder} holds no earlier run with this "
                          "run's settings" + (f" ({others} of other settings, never paired)"
                                              if others else "")
                          + "; this run starts its history")
            return None
        return str(history.resolve(folder, compare, key))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        """After the tests (all results are in, under xdist too), compare with the baseline;
        a regression or an unpairable result fails the run the pytest way."""
        yield
        if is_worker(session.config):
            return
        if self.first and self.settings.compare_fail:  # a gate that could not have failed
            session.testsfailed += 1
        if self.baseline is None:
            return
        from ..auditing.comparison import compare_records
        from ..reports.rows import order_key

        with guarded(self.audits, f"comparing with the baseline {self.compared}",
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
        if is_worker(session.config):
            return
        if self.settings.save:
            with guarded(self.audits, f"saving the baseline to {self.settings.save}", session):
                self._save(session, exitstatus)
        if self.settings.history:
            with guarded(self.audits, f"keeping the run in the history {self.settings.history}",
                         session):
                self._keep(session, exitstatus)

    @pytest.hookimpl(trylast=True)  # after the rl audit section
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if is_worker(terminalreporter.config):
            return
        for skipped in self.skipped:  # before the comparison read from that folder
            terminalreporter.write_line(f"rl audit history: skipped {skipped}", yellow=True)
        if self.comparison is not None:
            from ..reports.terminal import comparison_section
            from .terminal import write_lines

            terminalreporter.section("rl audit comparison", sep="=", bold=True)
            errors = len(self.audits.report_errors)
            failed = sum(len(terminalreporter.stats.get(k, [])) for k in ("failed", "error"))
            with guarded(self.audits, "the rl audit comparison section"):
                write_lines(terminalreporter, comparison_section(
                    self.comparison, self.baseline or {}, str(self.compared), failed))
            write_lines(terminalreporter, [[(f"error: {e}", "error")]
                                           for e in self.audits.report_errors[errors:]])
        if self.saved:
            terminalreporter.write_sep("-", f"rl audit baseline: {self.saved}",
                                       yellow="PARTIAL" in self.saved or "nothing" in self.saved)
        if self.first:
            gate = (": --rl-compare-fail gated nothing, so the run fails"
                    if self.settings.compare_fail else "")
            terminalreporter.write_sep("-", f"rl audit comparison: {self.first}{gate}",
                                       yellow=True)
        if self.trend:
            from .terminal import write_lines

            terminalreporter.section("rl audit history", sep="=", bold=True)
            write_lines(terminalreporter, self.trend)
        if self.kept:
            terminalreporter.write_sep("-", f"rl audit history: {self.kept}",
                                       yellow="partial" in self.kept or "nothing" in self.kept)

    def _nothing(self, path: str) -> str | None:
        """Why nothing is saved to ``path`` (no audit ran), or None."""
        if self.audits.records:
            return None
        return (f"nothing saved to {path}: no audit ran" + (
            " (no test here audits: mark one rl_audit, or give --rl-agent and --rl-env)"
            if self.audits.enabled else " (pass --rl-audit)"))

    def _document(self, session: pytest.Session, exitstatus: int) -> tuple[dict[str, Any], str]:
        """The run as a baseline document, and why it is partial ("" when complete)."""
        from .. import __version__
        from ..auditing.baselines import baseline_document

        recorded = {r["nodeid"] for r in self.audits.records}
        missing = [n for n in self.audits.expected if n not in recorded]
        missing += [lost["nodeid"] for lost in self.audits.lost if lost["nodeid"] not in missing]
        stopped = session.shouldstop or session.shouldfail
        incomplete = (f"the run stopped early ({stopped})" if stopped
                      else "the run was interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED
                      else None)
        doc = baseline_document(self.audits.records, version=__version__,
                                options=self.settings.as_options(), missing=missing,
                                incomplete=incomplete)
        why = "" if doc["complete"] else (
            incomplete or f"{len(missing)} audit(s) have no result: {', '.join(missing[:3])}")
        return doc, why

    def _keep(self, session: pytest.Session, exitstatus: int) -> None:
        """Save the run into --rl-history's folder, numbered and named by its commit."""
        from ..auditing import history

        folder = str(self.settings.history)
        self.kept = self._nothing(folder)
        if self.kept:
            return
        doc, why = self._document(session, exitstatus)
        numprocesses = getattr(session.config.option, "numprocesses", None)
        workers = numprocesses if isinstance(numprocesses, int) else 0
        commit = history.commit_of(session.config.rootpath)
        path = history.save_run(doc, folder, commit, workers=workers)
        self.kept = (f"run {path.name.split('_')[0]} ({commit.name[:12]}"
                     + (", uncommitted changes" if commit.dirty else "") + f") saved to {path}"
                     + (f"; partial: {why}" if why else ""))
        if self.settings.history_show or self.settings.report:
            self._trend(folder)

    def _trend(self, folder: str) -> None:
        """The trend of the runs with this run's settings: --rl-history-show's lines, and
        the page history.html in --rl-report's folder."""
        from pathlib import Path

        from ..auditing import history
        from ..auditing.trend import trends
        from ..reports.history import PAGE_RUNS, SHOWN_RUNS, history_page, trend_lines

        runs = history.read_runs(folder)
        mine = runs.paired_with(history.pairing_key(self.settings.as_options()))
        found = trends(mine, last=PAGE_RUNS if self.settings.report else SHOWN_RUNS)
        if self.settings.history_show:
            self.trend = trend_lines(found)
        if self.settings.report:
            page = Path(self.settings.report) / "history.html"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(history_page(found, history.Runs(mine, runs.skipped), folder),
                            encoding="utf-8")

    def _save(self, session: pytest.Session, exitstatus: int) -> None:
        """Write --rl-save's baseline; a partial run is saved marked and said to be partial."""
        from ..auditing.baselines import write_baseline

        path = self.settings.save
        self.saved = self._nothing(path)
        if self.saved:
            return
        doc, why = self._document(session, exitstatus)
        write_baseline(doc, path)
        if not why:
            self.saved = f"saved {len(self.audits.records)} results to {path}"
        else:
            self.saved = (f"PARTIAL run saved to {path} (marked complete: false): {why}; "
                          "a comparison against it skips what it lacks")

    def summary_extra(self) -> dict[str, Any]:
        """What summary.json adds for the comparison, and where the history page is (the
        page the history writes into the report folder once the run is kept)."""
        extra: dict[str, Any] = {}
        if self.comparison is not None:
            extra["comparison"] = {"baseline": str(self.compared), **self.comparison.to_dict()}
        if self.settings.history and self.audits.records:
            extra["history"] = {"folder": str(self.settings.history), "page": "history.html"}
        return extra
