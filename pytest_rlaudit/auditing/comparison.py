"""Paired comparisons of two runs on the same seeds: regressions, improvements, ship or hold.

Two runs of the same audit on the same episode seeds (a saved baseline and this run, or
a baseline agent and a candidate) are compared episode by episode, per scenario and for
nominal. A *regression* is a drop that is both statistically significant and larger
than a tolerance:

* mean return: a one-sided paired sign-flip test of "the candidate does not lower the
  mean return" (:func:`~pytest_rlaudit.stats.degradation_p_value`), Holm-adjusted across
  the comparison's rows; the drop is measured against ``return:5%`` (relative to the
  baseline's mean) or ``return:10`` (in return units);
* return ratio: a paired bootstrap interval of the change
  (:func:`~pytest_rlaudit.stats.ratio_change_ci`) at Bonferroni-adjusted level; a drop
  is significant when the whole interval is below 0; tolerance ``ratio:0.05`` (absolute)
  or ``ratio:5%`` (relative).

A significant drop within the tolerance is reported as ``worse``, a significant rise as
``improved``, the rest as ``same``. The decision (:attr:`Comparison.decision`, the one
place every view and :func:`~pytest_rlaudit.verdicts.assert_no_regression` read it from):
*hold* when anything regressed or could not be paired; *inconclusive* when the gate could
not have failed (nothing was paired, or too few episodes for a drop beyond a ``return``
tolerance to be significant); *ship* only otherwise; *report* when no tolerance was given.

>>> import numpy as np
>>> base, cand = np.full(10, 500.0), np.full(10, 500.0)
>>> rows = compare_scenario("t::x", "nominal", base, cand, tolerances=[parse_tolerance("return:5%")])
>>> rows[0].status
'same'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._format import fixed
from ..stats import degradation_p_value, holm, ratio, ratio_change_ci
from ..world.calibration import definition
from .records import Record, plain
from .tolerances import Metric, Tolerance, parse_tolerance

__all__ = ["Tolerance", "parse_tolerance", "Change", "Comparison", "compare_scenario",
           "compare_records", "compare_audits", "scenario_difference"]

@dataclass(frozen=True)
class Change:
    """One compared quantity: a scenario's mean return, or its return ratio."""

    key: str  # what was compared: a test node id, or "nominal (agent on env)"
    scenario: str
    metric: Metric
    baseline: float
    current: float
    status: str = "same"  # "regressed" | "worse" | "improved" | "same"
    p_value: float | None = None  # returns: one-sided p of the change's direction
    ci: tuple[float, float] | None = None  # ratios: interval of current - baseline
    exceeded: tuple[str, ...] = ()  # tolerances a regression is beyond
    episodes: int = 0

    @property
    def delta(self) -> float:
        return self.current - self.baseline

    def describe(self) -> str:
        """``spike: mean return 103.8 -> 80.2 (-22.7%, p = 0.003)``."""
        if self.metric == "return":
            rel = f", {self.delta / abs(self.baseline):+.1%}" if self.baseline else ""
            p = "" if self.p_value is None else f", p = {self.p_value:.3g}"
            what = f"mean return {self.baseline:.1f} -> {self.current:.1f} ({self.delta:+.1f}{rel}{p})"
        else:
            ci = "" if self.ci is None else f", CI {self.ci[0]:+.3f} to {self.ci[1]:+.3f}"
            what = f"ratio {fixed(self.baseline)} -> {fixed(self.current)} ({self.delta:+.3f}{ci})"
        beyond = f" beyond {', '.join(self.exceeded)}" if self.exceeded else ""
        return f"{self.scenario}: {what}{beyond}"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "scenario": self.scenario, "metric": self.metric,
                "baseline": self.baseline, "current": self.current, "delta": self.delta,
                "status": self.status, "p_value": self.p_value,
                "ci": None if self.ci is None else list(self.ci),
                "exceeded": list(self.exceeded), "episodes": self.episodes}


@dataclass
class Comparison:
    """Every compared row, and what could not be compared."""

    changes: list[Change] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)  # pairs that cannot be compared
    new: list[str] = field(default_factory=list)  # in this run, not in the baseline
    missing: list[str] = field(default_factory=list)  # in the baseline, not in this run
    tolerances: tuple[Tolerance, ...] = ()
    alpha: float = 0.05

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.status == "regressed"]

    @property
    def improvements(self) -> list[Change]:
        return [c for c in self.changes if c.status == "improved"]

    @property
    def power_note(self) -> str | None:
        """Why no mean-return drop could be significant here, if so: the exact sign-flip
        test's smallest p with n paired episodes is 2^-n, times the number of return rows
        under Holm."""
        rows = [c for c in self.changes if c.metric == "return"]
        if not rows:
            return None
        return too_few_episodes(min(c.episodes for c in rows), len(rows), self.alpha)

    @property
    def drops(self) -> list[Change]:
        """Significant drops, whether or not beyond a tolerance (regressed or worse)."""
        return [c for c in self.changes if c.status in ("regressed", "worse")]

    @property
    def inconclusive(self) -> str | None:
        """Why this comparison could not have found a regression, in one line that says
        what to do; None when it could have. Nothing paired (the baseline shares no test
        with this run, or one of them has no results), or a ``return`` tolerance that no
        drop could exceed significantly with this few episodes (:attr:`power_note`)."""
        if not self.changes and not self.mismatches:
            return f"nothing was compared: {self._unpaired()}"
        return blind_tolerances(self.tolerances, self.power_note)

    def _unpaired(self) -> str:
        """Why no result of this run was paired with the baseline, and what to do."""
        if not self.new and not self.missing:
            return ("neither the baseline nor this run has audit results; save the baseline "
                    "with --rl-save from a run that audits (--rl-audit), and audit in this run")
        if not self.missing:
            return ("the baseline holds no results; save it again with --rl-save from a run "
                    "that audits")
        if not self.new:
            return (f"this run has no audit results to pair with the baseline's "
                    f"{len(self.missing)} (is --rl-audit given, and are the audit tests selected?)")
        return (f"the baseline shares no test with this run (baseline: {_some(self.missing)}; "
                f"this run: {_some(self.new)}); check the baseline's node ids, and pass the "
                "baseline as --rl-compare=PATH (in the form '--rl-compare PATH' pytest can take "
                "PATH for a test path, which renames every test)")

    @property
    def decision(self) -> str:
        """``"hold"`` when anything regressed or could not be paired; ``"report"`` when no
        tolerance was given, so nothing was gated; ``"inconclusive"`` when the gate could
        not have failed (:attr:`inconclusive` says why); else ``"ship"``."""
        if self.regressions or self.mismatches:
            return "hold"
        if not self.tolerances:
            return "report"
        return "inconclusive" if self.inconclusive else "ship"

    def summary(self, listed: str = "") -> str:
        """One line: the decision and why (the rows say by how much). ``listed``: where the
        rows are printed beside it (``"above"``, ``"below"``), so that the line counts the
        regressions and drops instead of naming each test again; empty: the line names
        them, as where it stands alone (summary.json, JUnit)."""
        tolerances = ", ".join(map(str, self.tolerances))
        decision = self.decision

        def where(changes: list[Change]) -> str:
            if listed:
                return f" (listed {listed})"
            return ": " + ", ".join(dict.fromkeys(f"{c.key} ({c.metric})" for c in changes))

        if decision == "report":
            found = (f"{len(self.drops)} significant drop(s){where(self.drops)}" if self.drops
                     else f"no significant drop in {len(self.changes)} comparisons")
            if not self.changes:
                found = f"nothing was compared: {self._unpaired()}"
            note = f" (note: {self.power_note})" if self.power_note else ""
            return f"report only: nothing gated (no --rl-compare-fail); {found}{note}"
        if decision == "inconclusive":
            return f"inconclusive: {self.inconclusive}"
        if decision == "ship":
            better = f"; {len(self.improvements)} improved" if self.improvements else ""
            note = f" (note: {self.power_note})" if self.power_note else ""
            return (f"ship: no significant regression beyond {tolerances} in "
                    f"{len(self.changes)} comparisons{better}{note}")
        reasons = []
        if self.regressions:
            reasons.append(f"{len(self.regressions)} significant regression(s) beyond "
                           f"{tolerances}{where(self.regressions)}")
        if self.mismatches:
            reasons.append(f"{len(self.mismatches)} result(s) cannot be paired with the baseline")
        return "hold: " + "; ".join(reasons)

    def __str__(self) -> str:
        lines = [self.summary(listed="below")]
        lines += [f"  {c.status.upper():9} {'' if c.key == c.scenario else c.key + ': '}"
                  f"{c.describe()}" for c in self.changes if c.status != "same"]
        same = sum(c.status == "same" for c in self.changes)
        if same:
            lines.append(f"  {same} of {len(self.changes)} comparisons show no significant change")
        lines += [f"  CANNOT COMPARE {m}" for m in self.mismatches]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "summary": self.summary(),
                "inconclusive": self.inconclusive, "alpha": self.alpha,
                "power_note": self.power_note, "tolerances": [str(t) for t in self.tolerances],
                "changes": [c.to_dict() for c in self.changes], "mismatches": self.mismatches,
                "new": self.new, "missing": self.missing}


@dataclass(frozen=True)
class _Row:
    """A quantity to compare, before the comparison's multiplicity is known."""

    key: str
    scenario: str
    metric: Metric
    baseline: float
    current: float
    episodes: int
    p_value: float | None = None  # returns
    ratio_inputs: tuple[Any, ...] | None = None  # ratios: what ratio_change_ci needs


def too_few_episodes(episodes: int, rows: int, alpha: float = 0.05) -> str | None:
    """Why no mean-return drop can be significant (the sign-flip test's least p, 2^-n,
    times ``rows`` under Holm, is not below ``alpha``), with the episodes that would do.

    >>> too_few_episodes(3, 2)  # doctest: +ELLIPSIS
    'with 3 paired episodes no mean-return drop can be significant over 2 ...; use at least 6 episodes'
    >>> too_few_episodes(6, 2) is None
    True
    """
    need = episodes
    while rows * 0.5 ** need >= alpha:
        need += 1
    return None if need == episodes else (
        f"with {episodes} paired episodes no mean-return drop can be significant over "
        f"{rows} comparisons at alpha {alpha:g}; use at least {need} episodes")


def blind_tolerances(tolerances: Iterable[Tolerance], note: str | None) -> str | None:
    """``"return:5% could not fail: <note of too_few_episodes>"``, or None."""
    blind = [str(t) for t in tolerances if t.metric == "return"]
    return f"{', '.join(blind)} could not fail: {note}" if blind and note else None


def _rows(key: str, scenario: str, base_returns: Any, returns: Any, *, base_nominal: Any = None,
          nominal: Any = None, base_reference: float = 0.0, reference: float = 0.0,
          seed: int = 0) -> list[_Row]:
    base, cur = np.asarray(base_returns, float), np.asarray(returns, float)
    if cur.mean() == base.mean():
        p = 1.0
    else:  # one-sided, in the direction of the change
        p = (degradation_p_value(base, cur, seed=seed) if cur.mean() < base.mean()
             else degradation_p_value(cur, base, seed=seed))
    rows = [_Row(key, scenario, "return", float(base.mean()), float(cur.mean()), len(cur), p)]
    if base_nominal is not None and nominal is not None:
        bn, cn = np.asarray(base_nominal, float), np.asarray(nominal, float)
        rows.append(_Row(key, scenario, "ratio", ratio(bn, base, base_reference),
                         ratio(cn, cur, reference), len(cur),
                         ratio_inputs=(bn, base, cn, cur, base_reference, reference, seed)))
    return rows


def compare_scenario(
    key: str,
    scenario: str,
    base_returns: Sequence[float] | np.ndarray,
    returns: Sequence[float] | np.ndarray,
    *,
    base_nominal: Sequence[float] | np.ndarray | None = None,
    nominal: Sequence[float] | np.ndarray | None = None,
    base_reference: float = 0.0,
    reference: float = 0.0,
    tolerances: Iterable[Tolerance] = (),
    alpha: float = 0.05,
    seed: int = 0,
) -> list[Change]:
    """The judged mean-return row (and, given both nominal returns, ratio row) of one
    scenario: ``returns[i]`` and ``base_returns[i]`` come from the same episode seed."""
    return _judge(_rows(key, scenario, base_returns, returns, base_nominal=base_nominal,
                        nominal=nominal, base_reference=base_reference, reference=reference,
                        seed=seed), tuple(tolerances), alpha)


def _judge(rows: list[_Row], tolerances: tuple[Tolerance, ...], alpha: float) -> list[Change]:
    """Holm-adjusted p-values for returns, Bonferroni-level intervals for ratios, then
    regressed / worse / improved / same against the tolerances."""
    adjusted = holm({str(i): r.p_value for i, r in enumerate(rows) if r.p_value is not None})
    n_ratio = max(1, sum(r.metric == "ratio" for r in rows))
    out = []
    for i, r in enumerate(rows):
        p, ci = None, None
        if r.metric == "return":
            p = adjusted[str(i)]
            down = r.current < r.baseline and p < alpha
            up = r.current > r.baseline and p < alpha
        else:
            assert r.ratio_inputs is not None  # every ratio row has them
            bn, bp, cn, cp, bref, ref, seed = r.ratio_inputs
            ci = ratio_change_ci(bn, bp, cn, cp, base_reference=bref, reference=ref,
                                 confidence=1.0 - 2.0 * alpha / n_ratio, seed=seed)
            down, up = ci[1] < 0, ci[0] > 0
        beyond = tuple(str(t) for t in tolerances
                       if t.metric == r.metric and t.exceeded(r.baseline, r.current))
        status = ("regressed" if down and beyond else "worse" if down
                  else "improved" if up else "same")
        out.append(Change(r.key, r.scenario, r.metric, r.baseline, r.current, status, p, ci,
                          beyond if down else (), r.episodes))
    return out


def compare_records(
    baseline: Sequence[Record],
    records: Sequence[Record],
    tolerances: Iterable[Tolerance] = (),
    *,
    alpha: float = 0.05,
) -> Comparison:
    """Compare this run's audit records with a baseline's, matched by test node id.

    Each record needs ``returns``, ``seeds``, ``nominal_returns`` and ``reference_score``
    (the pytest plugin's records have them). Nominal is compared once per (agent, env,
    seeds). A pair made on other seeds or another env cannot be paired: a mismatch.
    Multiplicity spans the whole comparison.
    """
    tolerances = tuple(tolerances)
    by_id = {r["nodeid"]: r for r in baseline}
    rows: list[_Row] = []
    nominal_done: set[tuple[Any, ...]] = set()
    out = Comparison(tolerances=tolerances, alpha=alpha)
    for rec in records:
        base = by_id.get(rec["nodeid"])
        if base is None:
            out.new.append(rec["nodeid"])
            continue
        problem = _pairing_problem(base, rec)
        if problem:
            out.mismatches.append(f"{rec['nodeid']}: {problem}")
            continue
        group = (rec["agent"], rec["env"], tuple(rec["seeds"]))
        if group not in nominal_done:
            nominal_done.add(group)
            rows += _rows(f"nominal ({rec['agent']} on {rec['env']})", "nominal",
                          base["nominal_returns"], rec["nominal_returns"])
        rows += _rows(rec["nodeid"], rec["scenario"], base["returns"], rec["returns"],
                      base_nominal=base["nominal_returns"], nominal=rec["nominal_returns"],
                      base_reference=base.get("reference_score", 0.0),
                      reference=rec.get("reference_score", 0.0), seed=int(rec.get("seed", 0)))
    current = {rec["nodeid"] for rec in records}
    out.missing = [nodeid for nodeid in by_id if nodeid not in current]
    out.changes = _judge(rows, tolerances, alpha)
    return out


def scenario_difference(scenario: str, params: Any, other_scenario: str, other_params: Any,
                        sides: tuple[str, str] = ("the baseline", "this run")) -> str | None:
    """What makes two audits' scenarios different ones, in words naming the scenario and
    both parameter sets, or None when they are the same scenario: the same name and the
    same chosen parameters (a spread calibrated on each side's own nominal episodes may
    differ: another agent keeps the pole stiller; :func:`~.calibration.definition`).

    >>> scenario_difference("jitter", {"base": 2, "jitter": 1}, "jitter", {"base": 3, "jitter": 2})
    "the baseline ran scenario 'jitter' with {'base': 2, 'jitter': 1}, this run with {'base': 3, 'jitter': 2}"
    >>> scenario_difference("obs_noise", {"sigma": 0.1, "spread": [1.0]},
    ...                     "obs_noise", {"sigma": 0.1, "spread": [2.0]}) is None
    True
    """
    mine, theirs = definition(plain(dict(params or {}))), definition(
        plain(dict(other_params or {})))
    if scenario == other_scenario and mine == theirs:
        return None
    first, second = sides
    if scenario != other_scenario:
        return (f"{first} ran scenario {scenario!r} with {mine}, {second} scenario "
                f"{other_scenario!r} with {theirs}")
    return f"{first} ran scenario {scenario!r} with {mine}, {second} with {theirs}"


def _pairing_problem(base: Record, rec: Record) -> str | None:
    runs = _runs_problem(base, rec)
    if runs:
        return runs
    if base["env"] != rec["env"]:
        return (f"the baseline ran on {base['env']}, this run on {rec['env']}; runs on "
                "different envs cannot be paired")
    if list(base["seeds"]) != list(rec["seeds"]):
        return (f"the baseline used {_seeds(base['seeds'])}, this run {_seeds(rec['seeds'])}; "
                "paired comparison needs the same episode seeds: run with the baseline's "
                "--rl-seed and --rl-episodes (or rl_episodes marker), or save a new baseline")
    differ = scenario_difference(base["scenario"], base.get("params"), rec["scenario"],
                                 rec.get("params"))
    if differ:
        return (f"{differ}; the ratios of two different perturbations are not a change: "
                "audit this run with the baseline's scenario parameters (its rl_scenario "
                "marker, --rl-scenarios and --rl-severity), or save a new baseline with "
                "--rl-save")
    return None


def _runs_problem(base: Record, rec: Record) -> str | None:
    """Why a runs record (``--rl-agent`` a glob of training runs: its episodes are every
    run's, run after run) cannot pair with a one-agent record or with other runs, with one
    fix; None when neither is a runs record, or both hold as many runs of as many
    episodes."""
    base_runs, runs = base.get("runs"), rec.get("runs")
    if base_runs is None and runs is None:
        return None

    def what(r: Record, n: Any, side: str) -> str:
        if n is None:
            return f"{side} audits one agent, {r['agent']} ({_seeds(r['seeds'])})"
        per = len(r["seeds"]) // max(1, int(n))
        return (f"{side} holds {n} training runs of {r['agent']} ({per} episodes each, "
                f"env seeds {r['seeds'][0]}-{r['seeds'][per - 1]})")
    said = f"{what(base, base_runs, 'the baseline')}, {what(rec, runs, 'this run')}"
    if base_runs is not None and runs is None:
        fix = ("compare runs with runs: pass --rl-agent a glob matching the baseline's runs "
               f"({_some(list(base.get('labels') or []))}), or save a new baseline with "
               "--rl-save from a run of this one agent")
        return f"{said}; a runs baseline pairs only with runs: {fix}"
    if runs is not None and base_runs is None:
        return (f"{said}; a baseline of one agent pairs only with one agent: save a new "
                "baseline with --rl-save from a run of these runs' glob, or pass "
                f"--rl-agent the baseline's agent ({base['agent']})")
    if base_runs != runs or list(base["seeds"]) != list(rec["seeds"]):
        return (f"{said}; runs pair run for run, seed for seed: audit as many runs as the "
                "baseline (its --rl-agent glob) with its --rl-seed and --rl-episodes (the "
                "episodes of each run), or save a new baseline")
    return None


def _some(names: Sequence[str], shown: int = 2) -> str:
    """``a, b and 3 more``: a few names of a list that may be long."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _seeds(seeds: Sequence[int]) -> str:
    return f"{len(seeds)} episodes with env seeds {seeds[0]}-{seeds[-1]}" if seeds else "no episodes"


def compare_audits(baseline: Any, candidate: Any, tolerances: Iterable[Tolerance] = (), *,
                   alpha: float = 0.05) -> Comparison:
    """Compare two :class:`~pytest_rlaudit.auditing.results.AuditResult` run on the same seeds:
    nominal's mean return, then each scenario's mean return and ratio. A scenario the two
    ran with other parameters (:func:`scenario_difference`) is not paired: a mismatch,
    which holds."""
    if list(baseline.nominal.seeds) != list(candidate.nominal.seeds) or baseline.env != candidate.env:
        raise ValueError("the two audits must run on the same env and episode seeds "
                         f"({baseline.env} seeds {list(baseline.nominal.seeds)[:3]}... vs "
                         f"{candidate.env} seeds {list(candidate.nominal.seeds)[:3]}...)")
    rows = _rows("nominal", "nominal", baseline.nominal.returns, candidate.nominal.returns,
                 seed=candidate.seed)
    mismatches = []
    for name, result in candidate.scenarios.items():
        if name not in baseline.scenarios:
            continue
        differ = scenario_difference(name, baseline[name].params, name, result.params,
                                     sides=("the baseline", "the candidate"))
        if differ:  # two perturbations: a change in ratio would not be the agent's
            mismatches.append(f"{name}: {differ}; audit both with the same scenarios")
            continue
        rows += _rows(name, name, baseline[name].returns, result.returns,
                      base_nominal=baseline.nominal.returns, nominal=candidate.nominal.returns,
                      base_reference=baseline.reference, reference=candidate.reference,
                      seed=candidate.seed)
    tolerances = tuple(tolerances)
    return Comparison(_judge(rows, tolerances, alpha), mismatches, tolerances=tolerances,
                      alpha=alpha, new=[n for n in candidate.scenarios if n not in baseline.scenarios],
                      missing=[n for n in baseline.scenarios if n not in candidate.scenarios])
