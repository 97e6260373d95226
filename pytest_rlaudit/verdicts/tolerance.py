"""The verdict on a tolerance curve: it fails when the curve breaks (a ratio below its
line) at or below the scenario's own value of the parameter, the severity a single-point
audit of the scenario tests. A curve that holds through the scenario's own value and
breaks only beyond it passes: the margin is reported, not gated. A dip below the line at
a milder value fails too, since the reports then say the agent "breaks at" that milder
value. A curve whose scenario's own value is INCONCLUSIVE fails (every value is, then).

>>> curve_min_ratio(None), curve_min_ratio({"min_ratio": 0.9, "min_rating": "MILD",
...                                        "mode": "point"})
(0.8, 0.9)
"""

from __future__ import annotations

from .._format import fixed
from ..auditing.curves import ToleranceCurve
from ..auditing.ladders import amount, tolerance_sentence, value_text
from ..auditing.records import Gate
from ..errors import RobustnessError
from ..stats import INCONCLUSIVE
from ..stats.ratings import rating_floor
from ..world.scenarios import Scenario
from .messages import diagnosis_lines, scenario_expr

__all__ = ["DEFAULT_MIN_RATIO", "curve_min_ratio", "curve_holds", "curve_failure"]

#: The curve's line when nothing sets one: the floor of MILD, the plugin's default gate.
DEFAULT_MIN_RATIO = 0.8


def curve_min_ratio(gate: Gate | None) -> float:
    """The ratio each tested value must keep: the gate's ``min_ratio``, or the floor of
    its ``min_rating`` (MILD is 0.8; with both, the stricter), else 0.8."""
    if gate is None:
        return DEFAULT_MIN_RATIO
    floors = [gate["min_ratio"]] if gate.get("min_ratio") is not None else []
    min_rating = gate.get("min_rating")
    if min_rating is not None and min_rating != "FAIL":
        floors.append(rating_floor(min_rating))
    return max(f for f in floors if f is not None) if floors else DEFAULT_MIN_RATIO


def curve_holds(curve: ToleranceCurve) -> bool:
    """Whether ``curve`` holds through its scenario's own value (see the module)."""
    broken = curve.breaks_at is not None and curve.breaks_at <= curve.default
    return not broken and curve.at(curve.default).rating != INCONCLUSIVE


def curve_failure(curve: ToleranceCurve, scenario: Scenario) -> RobustnessError:
    """The error a curve that does not hold fails its test with: the essence first, then
    the diagnosis, the curve, what was required, the episodes and the reproducing call.
    ``scenario``: as the test gave it (a calibrated one's params hold what the audit
    derived)."""
    own = curve.at(curve.default)
    audited = curve.result
    assert audited is not None  # curves that hold a value's result
    if own.rating == INCONCLUSIVE and own.diagnosis is not None:
        lines = [f"{INCONCLUSIVE} tolerance of {curve.scenario}: {own.diagnosis.pattern}",
                 *diagnosis_lines(own.diagnosis, pattern=False)]
    else:
        assert curve.breaks_at is not None  # else it holds
        broken = curve.at(curve.breaks_at)
        lines = [f"{tolerance_sentence(curve.scenario, curve.param, curve.tolerated, curve.breaks_at)}"
                 f": at or below the scenario's own {amount(curve.param, curve.default)} (ratio "
                 f"{fixed(broken.ratio)} < {curve.min_ratio:g} at {value_text(curve.breaks_at)})"]
        if broken.diagnosis is not None:  # early: JUnit keeps a message's first 500 characters
            lines += diagnosis_lines(broken.diagnosis)
    lines.append("  curve: " + ", ".join(f"{value_text(v)}: {fixed(r)}" for v, r, _ in curve.curve)
                 + f" ({curve.param}: ratio)")
    lines.append(f"  required: ratio >= {curve.min_ratio:g} at every tested value up to the "
                 f"scenario's own ({amount(curve.param, curve.default)})")
    seeds = own.seeds
    lines.append(f"  episodes: {own.episodes} paired per value (env seeds {seeds[0]}-{seeds[-1]}), "
                 f"the nominal ones shared; the scenario's own value: ratio {fixed(own.ratio)}, "
                 f"rated {own.rating}")
    values = "[" + ", ".join(value_text(v) for v in curve.values) + "]"
    reference = "" if curve.reference == 0 else f", reference={curve.reference!r}"
    lines.append(f"  reproduce: tolerance(agent, {audited.env!r}, {scenario_expr(scenario)}, "
                 f"param={curve.param!r}, values={values}, min_ratio={curve.min_ratio:g}, "
                 f"episodes={own.episodes}, seed={audited.seed}{reference})")
    return RobustnessError("\n".join(lines), own)
