"""Replay records as terminal lines (the "rl audit" section's ``replay`` rows).

Open-loop replay measures how differently a candidate acts from a recording; nothing here
claims the candidate's return or success (DESIGN.md section 22). Standard library only.

>>> est = {"value": 0.146, "ci_low": 0.111, "ci_high": 0.176}
>>> rec = {"candidate": "PPO(new.zip)", "recording": "/data/rec", "divergence": est,
...        "disagreement": est, "ood_actions": {"value": 0.0, "ci_low": 0.0, "ci_high": 0.0},
...        "failed": [], "diagnosis": "the candidate departs most at episode 0 step 3",
...        "passed": None}
>>> line, diagnosis = replay_lines([rec])
>>> line[:58]
'replay  PPO(new.zip) vs rec: divergence 0.146 [0.111, 0.17'
>>> line[58:]
'6], disagreement 14.6% [11.1%, 17.6%], out of space 0.0%, 0 failed episode(s)'
>>> diagnosis
'    the candidate departs most at episode 0 step 3'
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

__all__ = ["replay_lines", "replay_line"]

_VERDICT = {True: "passed", False: "FAILED", None: ""}


def _basename(path: str) -> str:
    return os.path.basename(os.path.normpath(path)) or path


def replay_line(record: dict[str, Any]) -> str:
    """One replay record's line: its measures with their intervals, no diagnosis."""
    d, g, o = record["divergence"], record["disagreement"], record["ood_actions"]
    verdict = "" if record.get("limits") is None else f" ({_VERDICT[record.get('passed')]})"
    return (f"replay  {record['candidate']} vs {_basename(record['recording'])}: divergence "
            f"{_shown(d, '.3g')}, disagreement {_shown(g, '.1%')}, out of space "
            f"{_shown(o, '.1%', interval=False)}, {len(record['failed'])} failed episode(s)"
            + verdict.replace(" ()", ""))


def _shown(est: dict[str, Any], spec: str, interval: bool = True) -> str:
    """``value [low, high]`` in ``spec``; "n/a" for what was not measured (null)."""
    if est["value"] is None:
        return "n/a"
    text = format(est["value"], spec)
    if interval:
        text += f" [{format(est['ci_low'], spec)}, {format(est['ci_high'], spec)}]"
    return text


def replay_lines(records: Iterable[dict[str, Any]]) -> list[str]:
    """Each replay record's line, then its diagnosis indented."""
    lines: list[str] = []
    for record in records:
        lines.append(replay_line(record))
        if record.get("diagnosis"):
            lines.append(f"    {record['diagnosis']}")
    return lines
