"""What the tests read from an in-process pytester run: the plugin's record of each audit,
from its reports (what summary.json lists, without drawing a report), and each module's
collection error."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest


def records(result: pytest.RunResult) -> dict[str, dict[str, Any]]:
    """The plugin's JSON record of each audited test, by node id, from the reports."""
    out = {}
    for rep in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        data = getattr(rep, "rl_audit", None)
        if data is not None and rep.when == "call":
            out[rep.nodeid] = json.loads(data)
    return out


def collection_errors(out: str) -> dict[str, str]:
    """Each module's "ERROR collecting" section of a run's output, by file name."""
    sections, name = {}, None
    for line in out.splitlines():
        header = re.fullmatch(r"_+ ERROR collecting (\S+) _+", line)
        if header:
            name = header.group(1)
            sections[name] = ""
        elif line.startswith("=") or re.fullmatch(r"_+ .* _+", line):
            name = None
        elif name is not None:
            sections[name] += line + "\n"
    return sections
