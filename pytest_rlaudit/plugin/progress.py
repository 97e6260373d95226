"""A running audit's progress on pytest's terminal line, and the hint of ``--rl-workers``.

Every test call runs with a :class:`~pytest_rlaudit.rollout.progress.Progress` installed,
which counts the episodes the test's audits run (zero-config items, ``rl_audit``, a test's
own ``assert_robust``). Once an audit has run about 2 s, its episodes done of total and
the time left show at the end of pytest's current line (after the test's ``rl-audit ..``
or its ``-v`` node id), rewritten in place a few times a second and erased when the test
ends, before pytest writes its outcome: the normal output is what it would be without it.

``--rl-progress`` (ini ``rl_progress``): ``auto`` (the default) shows it when pytest's
output is a terminal, but not under ``-qq`` (the least output was asked for) nor ``-s``
(the test's own output shares the line); ``yes`` shows it anywhere; ``no`` never. An xdist
worker never shows it: its output is not a terminal, the controller's is.

An audit projected to run 30 s or more (once 10% of its steps have run: see
``ESTIMATE_SHARE``) that spends most of it stepping envs in one process (the agent's calls
take less than half of it, and the env work of an agent step 25 us or more: MuJoCo, not
CartPole), on a machine with several cores, is one for ``--rl-workers auto``: the
progress line says so while it runs, and, if it did run 30 s or more, one line after the
run's summary (also where no line was shown, as in a CI log).

Loading this module imports nothing heavy (the counter is standard library only).
"""

from __future__ import annotations

import contextlib
import shutil
from typing import Any

import pytest

from ..rollout import progress as rollout_progress
from ..rollout.progress import Progress, Snapshot, describe, duration, expect, watching
from .xdist import is_worker

__all__ = ["ProgressHooks", "TerminalLine", "shows_progress"]

#: What the line and the summary tell to try.
WORDS = "--rl-workers auto"


def shows_progress(config: pytest.Config, when: str) -> bool:
    """Whether this run shows progress lines (see the module docstring)."""
    if when == "no" or is_worker(config):
        return False
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or getattr(reporter, "_tw", None) is None:
        return False
    if when == "yes":
        return True
    if (config.getoption("verbose") or 0) <= -2 or config.getoption("capture", "fd") in (
            "no", "tee-sys"):
        return False
    file = getattr(reporter._tw, "_file", None)
    try:
        return bool(file is not None and file.isatty())
    except (AttributeError, ValueError, OSError):  # a closed or odd stream
        return False


def columns(tw: Any) -> int:
    """The terminal's width as it is: pytest's ``fullwidth`` says 80 for a terminal under
    40 columns, where our text, written to that width, would wrap onto a row that no
    backspace reaches back from (stale fragments were left at 20 columns)."""
    full = int(tw.fullwidth)
    return min(full, shutil.get_terminal_size((full, 24)).columns)


class TerminalLine:
    """A display for :class:`~pytest_rlaudit.rollout.progress.Progress`: the text after
    pytest's current line, rewritten with backspaces (so pytest's own text and colours
    stay untouched), written past pytest's output capture, and erased by :meth:`close`.

    Written around pytest's terminal writer (its file, not its ``write``), so that what it
    knows of the current line stays true: the line is as it left it when we are done.
    If pytest wrote meanwhile (live logging), the text is begun afresh where it now ends.
    """

    def __init__(self, reporter: Any, capture: Any = None) -> None:
        self.tw = reporter._tw
        self.capture = capture
        self.width = 0  # characters of ours at the end of the line
        self.text = ""  # what they say
        self.line: str | None = None  # pytest's current line when we last wrote

    def __call__(self, snapshot: Snapshot) -> None:
        self._write(lambda room: describe(snapshot, words=WORDS, room=room))

    def close(self, snapshot: Snapshot | None = None) -> None:
        self._write(lambda room: "")

    def _write(self, text_for: Any) -> None:
        tw = self.tw
        with (self.capture.global_and_fixture_disabled() if self.capture is not None
              else contextlib.nullcontext()):
            line = getattr(tw, "_current_line", None)
            if line != self.line:
                self.width = 0  # pytest wrote since: ours is not at the end of the line
            self.line = line
            column, full = tw.width_of_current_line, columns(tw)
            if column < 0 or full <= 0:
                return
            # "  (" and ")" around the words, and the last column stays free: a character
            # there leaves the cursor waiting to wrap, where a backspace is one column short
            room = full - column % full - 1 - 4
            text = text_for(room)
            text = f"  ({text})" if text else ""
            if text == self.text and len(text) == self.width:
                return  # shown already
            pad = max(self.width - len(text), 0)
            tw._file.write("\b" * self.width + text + " " * pad + "\b" * pad)
            tw._file.flush()
            self.width, self.text = len(text), text


class ProgressHooks:
    """The plugin's progress hooks (registered as ``rlaudit-progress``)."""

    def __init__(self, config: pytest.Config, when: str) -> None:
        self.config = config
        self.when = when
        self.shown = False  # decided when the session starts: the terminal is set up then
        self.suggestion: Snapshot | None = None  # the longest audit that suggested workers
        self._ran: set[tuple[Any, ...]] = set()  # rollouts the plugin's cache holds

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.shown = shows_progress(self.config, self.when)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        display = None
        if self.shown:
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            display = TerminalLine(reporter,
                                   self.config.pluginmanager.get_plugin("capturemanager"))
        with watching(Progress(display)) as progress:
            yield
        if progress.suggest_workers:
            shot = progress.snapshot()
            # after the run, said only of an audit that did take SUGGEST_SECONDS (the line
            # said it of one projected to)
            if shot.elapsed >= rollout_progress.SUGGEST_SECONDS and (
                    self.suggestion is None or shot.elapsed > self.suggestion.elapsed):
                self.suggestion = shot

    def expect(self, policy: Any, env: Any, episodes: dict[str, Any], reference: Any) -> None:
        """Before the plugin's ``check_robust`` for an item: the episodes it will run, so
        that the total shown is the item's from the start. The scenario's, and the nominal
        and random-reference ones on the first audit of this agent and env in this process
        (the plugin's cache keeps them for the later ones, keyed as it keys them). An
        estimate: the runner adds what it plans beyond it (adaptive rounds)."""
        n = episodes["n"]
        n_random = (episodes["max_n"] or n) if reference == "random" else n
        agent = (id(policy), env if isinstance(env, str) else id(env))
        count = n
        for key, more in ((("nominal", *agent, n), n), (("random", *agent, n_random), n_random)):
            if key not in self._ran:
                self._ran.add(key)
                count += more
        expect(count)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.suggestion is None or is_worker(self.config):
            return
        from ..rollout.workers import usable_cores

        terminalreporter.write_line(
            f"rl audit: an audit ran {duration(self.suggestion.elapsed)} in one process: "
            f"{WORDS} runs its episodes in {usable_cores()} processes, each with its own "
            "copy of the agent (the numbers do not change)",
            yellow=True)
