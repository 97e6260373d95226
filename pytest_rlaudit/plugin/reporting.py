"""The reporting boundary: the summary is never lost.

Two promises (DESIGN section 16). Where ``--rl-report`` and ``--rl-save`` write is checked
in ``pytest_configure``, before any audit runs, so an unwritable place is a usage error
naming the path, not a traceback after an hour of audits. And an error while reporting
(a renderer's bug, a disk that fills up while the files are written) is caught where the
plugin hands over to pytest: it becomes one line in the "rl audit" section and fails the
run the pytest way (like pytest-cov's ``--cov-fail-under``), while pytest's failures
section, its short summary and the rest of the rl audit section are still printed.
"""

from __future__ import annotations

import os
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["check_destinations", "caught", "guarded", "fail_run", "describe"]


def _folder_problem(folder: Path) -> str | None:
    """Why files cannot be written into ``folder`` (created with its parents if need be),
    or None. The nearest folder that exists is probed with a temporary file: permission
    bits do not tell (root, read-only mounts, ACLs)."""
    existing = folder
    try:
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        if not existing.is_dir():
            return f"{existing} is a file, not a folder"
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"{existing} is not writable ({exc.strerror or exc})"
    return None


def _check_folder(flag: str, folder: Path, example: str, holds: str, does: str) -> None:
    """A usage error when ``flag``'s ``folder`` is a file or cannot be written."""
    if folder.exists() and not folder.is_dir():
        raise pytest.UsageError(
            f"{flag} {folder}: is a file; {flag} takes a folder (created if need be) {holds}, "
            f"e.g. {flag} {folder.with_name(example)}")
    problem = _folder_problem(folder)
    if problem:
        raise pytest.UsageError(f"{flag} {folder}: cannot {does} there: {problem}; give a "
                                "folder this user can write")


def check_destinations(settings: Any) -> None:
    """A :class:`pytest.UsageError` naming the path and the fix when ``--rl-report``'s
    or ``--rl-history``'s folder or ``--rl-save``'s file cannot be written (checked at
    ``pytest_configure``)."""
    if settings.report:
        _check_folder("--rl-report", Path(settings.report), "rl-report",
                      "for index.html, summary.json and summary.md", "write the report")
    if settings.history:
        _check_folder("--rl-history", Path(settings.history), ".rlaudit-history",
                      "that keeps one file per run", "keep the history")
    if settings.save:
        from ..auditing.baselines import check_writable
        from ..errors import BaselineError

        try:
            check_writable(settings.save)
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        save = Path(settings.save)
        problem = _folder_problem(save.parent)
        if problem:
            raise pytest.UsageError(f"--rl-save {save}: cannot save the baseline there: "
                                    f"{problem}; give a path this user can write")


def fail_run(session: pytest.Session | None) -> None:
    """Fail the run the pytest way: while the tests run, a failure pytest's exit status
    counts; after them (writing the files, the terminal summary), the exit status itself."""
    if session is None:
        return
    session.testsfailed += 1
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def describe(what: str, exc: BaseException) -> str:
    """One line for an error while reporting: what failed, the exception, and where it was
    raised (the innermost frame), instead of a traceback that would bury the summary."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        parts = Path(frames[-1].filename).parts
        name = (os.path.join(*parts[parts.index("pytest_rlaudit"):])
                if "pytest_rlaudit" in parts else parts[-1])
        where = f" (at {name}:{frames[-1].lineno})"
    message = (str(exc).strip().splitlines() or [""])[0]
    advice = ("check the path and the free space" if isinstance(exc, OSError) else
              "a bug in pytest-rlaudit: please report it with this line")
    return (f"{what} failed: {type(exc).__name__}"
            f"{': ' + message if message else ''}{where}; {advice}; the run fails")


@contextmanager
def caught(into: list[str], what: str) -> Iterator[None]:
    """Run one reporting step; an ``Exception`` in it becomes a line in ``into`` (for the
    caller to report and fail the run: :func:`guarded` does both). ``KeyboardInterrupt``
    and pytest's own outcomes pass through."""
    try:
        yield
    except Exception as exc:
        into.append(describe(what, exc))


@contextmanager
def guarded(audits: Any, what: str, session: pytest.Session | None = None) -> Iterator[None]:
    """Run one reporting step of ``audits`` (the AuditSession); an ``Exception`` in it is
    kept in ``audits.report_errors`` for the rl audit section and fails the run."""
    before = len(audits.report_errors)
    with caught(audits.report_errors, what):
        yield
    if len(audits.report_errors) > before:
        fail_run(session if session is not None else audits.session)
