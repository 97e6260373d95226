"""The README badges (pytest_rlaudit.reports.badges): valid SVG, coloured by rating, the
worst (agent, env) pair of each category, written with or without matplotlib."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_rlaudit.reports.badges import COLOURS, badge, badge_value, badges
from pytest_rlaudit.reports.summary import summary, write_report

SVG = "{http://www.w3.org/2000/svg}"
THRESHOLDS = {"pass": 0.95, "mild": 0.8, "degraded": 0.5}


def rec(scenario: str, ratio: float, agent: str = "PPO", env: str = "CartPole-v1",
        category: str = "deployment") -> dict[str, Any]:
    return {"nodeid": f"t.py::t[{agent}-{scenario}]", "agent": agent, "env": env,
            "scenario": scenario, "category": category, "ratio": ratio, "ci_low": ratio - 0.1,
            "ci_high": ratio, "thresholds": THRESHOLDS,
            "rating": next((n for limit, n in ((0.95, "PASS"), (0.8, "MILD"), (0.5, "DEGRADED"))
                            if ratio > limit), "FAIL")}


def parts(svg: str) -> tuple[list[str], list[str], int]:
    """(the texts drawn, the fills of the two halves, the width) of a badge."""
    root = ET.fromstring(svg)  # valid XML, or this raises
    assert root.tag == f"{SVG}svg"
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    group = next(g for g in root.iter(f"{SVG}g") if g.get("clip-path"))  # the drawn halves
    halves = [r for r in group.iter(f"{SVG}rect") if not r.get("fill", "").startswith("url(")]
    return texts[1::2], [r.get("fill", "") for r in halves], int(root.get("width", "0"))


@pytest.mark.parametrize(("ratio", "rating"), [(0.97, "PASS"), (0.9, "MILD"),
                                                 (0.6, "DEGRADED"), (0.2, "FAIL")])
def test_the_value_is_coloured_by_rating(ratio: float, rating: str):
    files = badges(summary([rec("jitter", ratio)], version="1"))
    texts, fills, _ = parts(files["badge-deployment.svg"])
    assert texts == ["deployment", f"{rating} {ratio:.3f}"]
    assert fills == ["#555", COLOURS[rating]]


def test_each_badge_shows_the_worst_pair_of_its_category_or_na():
    doc = summary([rec("jitter", 0.97), rec("delay", 0.85, agent="SAC"),
                   rec("spike", 0.9, env="Acrobot-v1"),
                   rec("speed_5x", 0.3, agent="SAC", category="stress")], version="1")
    files = badges(doc)
    assert sorted(files) == ["badge-deployment.svg", "badge-stress.svg"]
    assert parts(files["badge-deployment.svg"])[0] == ["deployment", "MILD 0.850"]
    assert parts(files["badge-stress.svg"])[0] == ["stress", "FAIL 0.300"]
    assert "SAC on CartPole-v1, delay" in files["badge-deployment.svg"]  # the tooltip says who
    value, colour, _ = badge_value(summary([rec("jitter", 0.97)], version="1")["aggregates"],
                                   "stress")
    assert (value, colour) == ("n/a", COLOURS[None])
    assert parts(badges(summary([], version="1"))["badge-stress.svg"])[0] == ["stress", "n/a"]


def test_the_width_fits_the_text_and_the_text_is_escaped():
    short, wide = badge("x", "PASS 1.000", "#4c1"), badge("deployment <&>", "PASS 1.000", "#4c1")
    assert parts(wide)[2] > parts(short)[2] + 50
    texts, _, width = parts(wide)
    assert texts[0] == "deployment <&>"  # escaped in the file, literal when parsed
    root = ET.fromstring(wide)
    lengths = [float(t.get("textLength", 0)) / 10 for t in root.iter(f"{SVG}text")]
    assert sum(lengths[1::2]) + 20 == pytest.approx(width, abs=2)  # 5 px padding each side


def test_write_report_writes_the_badges_without_matplotlib(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    paths = write_report(summary([rec("jitter", 0.4)], version="1"), tmp_path)
    assert [p.name for p in paths][-2:] == ["badge-deployment.svg", "badge-stress.svg"]
    assert parts((tmp_path / "badge-deployment.svg").read_text(encoding="utf-8"))[0] == [
        "deployment", "FAIL 0.400"]
