"""Tolerance-curve tests: ``@pytest.mark.rl_tolerance`` on an ``rl_scenario`` test.

The item measures the tolerance curve of its scenario for its agent and env instead of a
single point, records it (the record's numbers are the point at the scenario's own
value; the curve rides in its ``tolerance`` field) and judges it. The verdict: the test
fails when the curve breaks (a ratio below ``min_ratio``) at or below the scenario's own
value of the parameter, the severity a single-point audit of the scenario tests. So a
curve that holds through the scenario's own value and breaks only beyond it passes:
the margin is reported, not gated. A dip below the line at a milder value fails too,
since the reports then say the agent "breaks at" that milder value. The scenario's own
value is always tested (added to ``values`` when they miss it) so the verdict and the
record rest on a measured point.

``min_ratio`` is rl_threshold's ``min_ratio`` (or the floor of its ``min_rating``: MILD
is 0.8; with both, the stricter), over the command line and ini, else 0.8. Each value
is judged on its point ratio, so ``mode`` does not apply. Stress scenarios are measured
and reported but not gated unless ``--rl-fail-stress`` or an ``rl_threshold`` marker
gates them, as for single-point audits.
"""

from __future__ import annotations

from typing import Any

import pytest

from .._format import fixed

__all__ = ["DEFAULT_MIN_RATIO", "curve_min_ratio", "measure_curve"]

#: The curve's line when nothing sets one: the floor of MILD, the plugin's default gate.
DEFAULT_MIN_RATIO = 0.8


def curve_min_ratio(gate: dict[str, Any] | None) -> float:
    """The ratio each tested value must keep, from the item's gate (see the module)."""
    from ..stats.ratings import rating_floor

    if gate is None:
        return DEFAULT_MIN_RATIO
    floors = [gate["min_ratio"]] if gate.get("min_ratio") is not None else []
    if gate.get("min_rating") not in (None, "FAIL"):
        floors.append(rating_floor(gate["min_rating"]))
    return max(floors) if floors else DEFAULT_MIN_RATIO


def measure_curve(session: Any, item: pytest.Item, scenario: Any, policy: Any, spec: Any,
                  gate: dict[str, Any] | None,
                  episodes: dict[str, Any]) -> tuple[dict[str, Any], Exception | None, Any]:
    """Measure ``item``'s tolerance curve: (its record, the RobustnessError to raise or
    None, the :class:`~pytest_rlaudit.auditing.curves.ToleranceCurve`)."""
    from ..auditing.curves import tolerance
    from ..auditing.ladders import ladder
    from ..auditing.records import curve_record
    from .markers import tolerance_marker

    marker = tolerance_marker(item.get_closest_marker("rl_tolerance"))
    assert marker is not None  # the session calls this for marked items only
    steps = ladder(scenario, marker["param"], marker["values"])
    values = sorted({*steps.values, steps.default})  # the scenario's own value, measured
    settings = session.settings
    curve = tolerance(policy, spec, scenario, param=steps.param, values=values,
                      min_ratio=curve_min_ratio(gate), episodes=episodes["n"],
                      seed=settings.seed, reference=settings.reference,
                      batch_size=settings.batch_size, workers=settings.workers,
                      backend=settings.backend, timeout=settings.timeout)
    broken = curve.breaks_at is not None and curve.breaks_at <= curve.default
    unrated = curve.at(curve.default).rating == "INCONCLUSIVE"  # every value is, then
    passed = gate is None or not (broken or unrated)
    record = curve_record(item.nodeid, curve, gate, passed)
    return record, None if passed else _failure(curve, scenario), curve


def _failure(curve: Any, scenario: Any) -> Exception:
    from ..auditing.ladders import amount, tolerance_sentence, value_text
    from ..verdicts.assertions import RobustnessError, _scenario_expr, diagnosis_lines

    own = curve.at(curve.default)
    audited = curve.result
    if own.rating == "INCONCLUSIVE" and own.diagnosis is not None:
        lines = [f"INCONCLUSIVE tolerance of {curve.scenario}: {own.diagnosis.pattern}",
                 *diagnosis_lines(own.diagnosis, pattern=False)]
    else:
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
    # the scenario as given (a calibrated one's params hold what the audit derived)
    lines.append(f"  reproduce: tolerance(agent, {audited.env!r}, {_scenario_expr(scenario)}, "
                 f"param={curve.param!r}, values={values}, min_ratio={curve.min_ratio:g}, "
                 f"episodes={own.episodes}, seed={audited.seed}{reference})")
    return RobustnessError("\n".join(lines), own)
