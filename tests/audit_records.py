"""What the tests read from an in-process pytester run: the plugin's record of each audit,
from its reports (what summary.json lists, without drawing a report), and each module's
collection error (of the one run of bad markers a test module makes)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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


#: The exit code of a run whose collection failed (a bad marker, say): pytest interrupts it.
INTERRUPTED = pytest.ExitCode.INTERRUPTED

_BAD_MARKER_RUNS: dict[tuple[Any, ...], tuple[pytest.ExitCode | int, str]] = {}


def bad_marker_run(pytester: pytest.Pytester, markers: Sequence[str], scenario: str,
                   args: tuple[str, ...], modules: Sequence[str] = ()) -> tuple[
                       pytest.ExitCode | int, str]:
    """The exit code and output of one run with ``args`` of a module per marker
    (test_bad_<i>.py holds ``markers[i]`` on an audit of ``scenario``, beside a plain
    test), of ``modules`` only if given; made once per process. Each collection error is
    its module's, so each case reads its own module's section (:func:`collection_errors`)
    where it would make a run of its own."""
    key = (tuple(markers), scenario, args, tuple(modules))
    if key not in _BAD_MARKER_RUNS:
        pytester.makepyfile(**{f"test_bad_{i}": (
            f"import pytest\n\n{marker}\n@pytest.mark.rl_scenario({scenario!r})\n"
            "def test_x(rl_audit):\n    rl_audit()\n\ndef test_plain():\n    pass\n")
            for i, marker in enumerate(markers)})
        result = pytester.runpytest(*args, *modules)
        _BAD_MARKER_RUNS[key] = result.ret, "\n".join(result.outlines + result.errlines)
    return _BAD_MARKER_RUNS[key]
