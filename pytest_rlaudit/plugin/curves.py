"""Tolerance-curve tests: ``@pytest.mark.rl_tolerance`` on an ``rl_scenario`` test.

The item measures the tolerance curve of its scenario for its agent and env instead of a
single point (:func:`~pytest_rlaudit.auditing.curves.tolerance_curve`), records it (the
record's numbers are the point at the scenario's own value; the curve rides in its
``tolerance`` field) and has :mod:`pytest_rlaudit.verdicts.tolerance` judge it: the test
fails when the curve breaks at or below the scenario's own value of the parameter. The
scenario's own value is always tested (added to ``values`` when they miss it) so the
verdict and the record rest on a measured point.

The curve's line is rl_threshold's ``min_ratio`` (or the floor of its ``min_rating``:
MILD is 0.8; with both, the stricter), over the command line and ini, else 0.8. Each value
is judged on its point ratio, so ``mode`` does not apply. Stress scenarios are measured
and reported but not gated unless ``--rl-fail-stress`` or an ``rl_threshold`` marker
gates them, as for single-point audits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..auditing.curves import ToleranceCurve
    from ..auditing.records import Gate, Record
    from ..auditing.settings import AuditSettings
    from ..world.scenarios import Scenario

__all__ = ["measure_curve"]


def measure_curve(item: pytest.Item, scenario: Scenario, policy: Any, spec: Any,
                  gate: Gate | None, settings: AuditSettings,
                  ) -> tuple[Record, Exception | None, ToleranceCurve]:
    """Measure ``item``'s tolerance curve: (its record, the RobustnessError to raise or
    None, the :class:`~pytest_rlaudit.auditing.curves.ToleranceCurve`)."""
    from ..auditing.curves import tolerance_curve
    from ..auditing.ladders import ladder
    from ..auditing.records import curve_record
    from ..verdicts.tolerance import curve_failure, curve_holds, curve_min_ratio
    from .markers import tolerance_marker

    marker = tolerance_marker(item.get_closest_marker("rl_tolerance"))
    assert marker is not None  # the session calls this for marked items only
    steps = ladder(scenario, marker["param"], marker["values"])
    values = sorted({*steps.values, steps.default})  # the scenario's own value, measured
    curve = tolerance_curve(policy, spec, scenario, settings, param=steps.param, values=values,
                            min_ratio=curve_min_ratio(gate))
    passed = gate is None or curve_holds(curve)
    record = curve_record(item.nodeid, curve, gate, passed)
    return record, None if passed else curve_failure(curve, scenario), curve
