"""The progress line at a narrow terminal (issue 42, point 10): at 20 columns every update
fully overwrites the one before, and the close leaves pytest's line as it was. A small
emulator of a VT100/xterm screen renders what the line writes (wrapping at the width,
with the pending-wrap column: a backspace from there goes one column short)."""

from __future__ import annotations

import pytest

from pytest_rlaudit.plugin.progress import TerminalLine, columns
from pytest_rlaudit.rollout.progress import Snapshot


class Screen:
    """Rows of ``width`` cells; printable characters, ``\\b``, ``\\r`` and ``\\n``."""

    def __init__(self, width: int) -> None:
        self.width, self.rows, self.r, self.c, self.pending = width, [[]], 0, 0, False

    def feed(self, text: str) -> None:
        for ch in text:
            if ch == "\b":
                self.pending = False
                self.c = max(self.c - 1, 0)  # never back onto the row above
            elif ch == "\r":
                self.c, self.pending = 0, False
            elif ch == "\n":
                self._down()
            else:
                if self.pending:
                    self._down()
                row = self.rows[self.r]
                row.extend(" " * (self.c + 1 - len(row)))
                row[self.c] = ch
                if self.c == self.width - 1:
                    self.pending = True  # the cursor stays on the last column
                else:
                    self.c += 1

    def _down(self) -> None:
        self.r, self.c, self.pending = self.r + 1, 0, False
        if self.r == len(self.rows):
            self.rows.append([])

    def text(self) -> list[str]:
        lines = ["".join(row).rstrip() for row in self.rows]
        while lines and not lines[-1]:
            lines.pop()
        return lines


class Writer:
    """pytest's terminal writer as TerminalLine uses it; ``fullwidth`` 80, as pytest says
    for any terminal under 40 columns."""

    fullwidth = 80

    def __init__(self, screen: Screen, line: str) -> None:
        self._current_line = line
        self.width_of_current_line = len(line)
        self._file = self
        self.screen = screen
        screen.feed(line)

    def write(self, text: str) -> None:
        self.screen.feed(text)

    def flush(self) -> None:
        pass


def rendered(width: int, text: str) -> list[str]:
    screen = Screen(width)
    screen.feed(text)
    return screen.text()


SHOTS = [
    Snapshot(done=3, total=300, elapsed=3.0, left=4000.0),
    Snapshot(done=37, total=300, elapsed=9.0, left=80.0, suggest_workers=True),
    Snapshot(done=38, total=300, elapsed=30.0, left=80.0,
             waiting="waiting on env.step (scenario delay, episode 3, step 41) for 12 s"),
    Snapshot(done=120, total=300, elapsed=40.0, left=5.0),
    Snapshot(done=300, total=300, elapsed=41.0, left=0.0),
]


@pytest.mark.parametrize("width", [20, 33, 80])
@pytest.mark.parametrize("line", ["tests/test_narrow.py ", "t.py ", "tests/test_wide.py .",
                                  "x" * 19, "x" * 20, "x" * 38])
def test_each_update_fully_overwrites_the_one_before(monkeypatch, width, line):
    monkeypatch.setenv("COLUMNS", str(width))
    screen = Screen(width)
    tw = Writer(screen, line)
    reporter = type("Reporter", (), {"_tw": tw})()
    shown = TerminalLine(reporter)
    for shot in SHOTS:
        shown(shot)
        assert screen.text() == rendered(width, line + shown.text), (shot, shown.text)
    shown.close()
    assert screen.text() == rendered(width, line)  # the close leaves pytest's line


def test_a_wait_shows_at_a_narrow_terminal_in_a_form_that_fits(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    screen = Screen(40)
    shown = TerminalLine(type("Reporter", (), {"_tw": Writer(screen, "t.py ")})())
    shown(SHOTS[2])
    assert shown.text and len("t.py " + shown.text) < 40


def test_the_width_is_the_terminals_under_pytests_80(monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    assert columns(Writer(Screen(20), "")) == 20
    monkeypatch.setenv("COLUMNS", "200")
    assert columns(Writer(Screen(200), "")) == 80  # never wider than pytest writes


def test_the_emulator_goes_one_short_from_the_last_column():
    screen = Screen(5)
    screen.feed("abcde\b\bX")
    assert screen.text() == ["abXde"]
