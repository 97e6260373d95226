"""Writes the renderers' lines (:mod:`pytest_rlaudit.reports.terminal`) in pytest's colours."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["write_lines", "COLOURS"]

#: Colours by style: ratings as pytest colours outcomes, comparison statuses, emphasis.
COLOURS: dict[str, dict[str, bool]] = {
    "PASS": {"green": True}, "MILD": {"yellow": True}, "DEGRADED": {"yellow": True, "bold": True},
    "FAIL": {"red": True, "bold": True}, "INCONCLUSIVE": {"purple": True, "bold": True},
    "bold": {"bold": True}, "error": {"red": True, "bold": True},
    "warn": {"yellow": True, "bold": True}, "regressed": {"red": True, "bold": True},
    "worse": {"yellow": True}, "improved": {"green": True}, "": {},
}


def write_lines(terminalreporter: Any, lines: Iterable[list[tuple[str, str]]]) -> None:
    for line in lines:
        for text, style in line[:-1]:
            terminalreporter.write(text, **COLOURS[style])
        text, style = line[-1]
        terminalreporter.write_line(text, **COLOURS[style])
