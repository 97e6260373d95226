"""The plugin's record of each audit of an in-process pytester run, read from its reports:
what summary.json lists, without drawing a report (for tests that read numbers)."""

from __future__ import annotations

import json
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
