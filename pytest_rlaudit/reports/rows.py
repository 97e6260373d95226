"""Table cells of a record, shared by the terminal and Markdown tables.

>>> rec = {"nodeid": "t", "scenario": "speed_5x", "rating": "FAIL", "gate": None,
...        "diagnosis": {"pattern": "", "cause": "", "fix": "train with Speed(env, k=5); or not"}}
>>> rating_cell(rec), short_diagnosis(rec)
('FAIL (not gated)', 'train with Speed(env, k=5)')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from .._format import fixed, interval, p_value
from ..auditing.records import Record
from ..stats.ratings import INCONCLUSIVE

__all__ = ["order_key", "scenario_label", "test_of", "short_diagnosis", "gated", "rating_cell",
           "table_rows", "tolerance_text",
           "mix_fix", "mix_mark_of", "nominal_mean", "reference_text", "baseline_text", "agg_reference",
           "agg_baseline", "score_text", "episodes_cell", "ratio_cell", "runs_text"]


def order_key(rec: Record) -> tuple[int, str, str, str, str]:
    """Where the test is defined (``order``: collection order before any plugin such as
    pytest-randomly reorders it, the same on every xdist worker and for every seed), then
    the record's identity: never the order in which the tests happened to run."""
    return (rec.get("order", 0), rec.get("nodeid", ""), rec.get("agent", ""), rec.get("env", ""),
            rec.get("scenario", ""))


def scenario_label(rec: Record) -> str:
    """The scenario's name, with the parameters whose values differ from its registered
    defaults: a row of ``obs_noise`` with ``scale="absolute"`` is not the default suite's
    ``obs_noise``, and says so. A scenario not in the registry (or a schedule, whose
    description says what it does) is its name alone.

    >>> scenario_label({"scenario": "obs_noise", "params": {"sigma": 0.1, "scale": "absolute"}})
    "obs_noise(scale='absolute')"
    >>> scenario_label({"scenario": "delay", "params": {"steps": 1}})
    'delay'
    """
    from ..world.scenarios import get  # the registry: standard library and our own only

    name = rec["scenario"]
    params = rec.get("params") or {}
    try:
        defaults = get(name).params
    except (KeyError, LookupError, ValueError):
        return name
    changed = [f"{k}={v!r}" for k, v in params.items() if k in defaults and defaults[k] != v]
    return f"{name}({', '.join(changed)})" if changed else name


def test_of(rec: Record) -> str:
    """The test a record belongs to: its node id without the scenario's parameter, or,
    for a zero-config item (``rl-audit::spike``), without the scenario.

    >>> test_of({"nodeid": "t.py::test_x[delay]"}), test_of({"nodeid": "rl-audit::spike",
    ...                                                        "scenario": "spike"})
    ('t.py::test_x', 'rl-audit')
    """
    nodeid = rec.get("nodeid", "")
    if nodeid.endswith("]"):
        return nodeid.split("[", 1)[0]
    scenario = f"::{rec.get('scenario', '')}"
    return nodeid[:-len(scenario)] if nodeid.endswith(scenario) else nodeid


def short_diagnosis(rec: Record) -> str:
    """The first clause of the fix ("train with Jitter(env, base=2, jitter=1)"), with its
    mark (untested suggestion) if it has one, or ''."""
    from ..auditing.fixes import short_fix

    diagnosis = rec.get("diagnosis")
    return short_fix(diagnosis["fix"]) if diagnosis else ""


def gated(rec: Record) -> bool:
    """Whether the record's verdict counted (stress scenarios are reported ungated unless
    --rl-fail-stress or a marker gates them). Records without the key count."""
    return "gate" not in rec or rec["gate"] is not None


def rating_cell(rec: Record, badges: dict[str, str] | None = None) -> str:
    """The rating as a table shows it, saying "not gated" for a row that gated nothing."""
    rating = rec["rating"]
    if not gated(rec):
        return f"{rating} (not gated)"
    return badges[rating] if badges else rating


def nominal_mean(rec: Record) -> float:
    """The mean nominal return of the record's episodes: what its ratio is a ratio of (of
    a runs record, the IQM of its runs' nominal means, as its ratio is their IQM's)."""
    if "nominal_iqm" in rec:
        return rec["nominal_iqm"]
    returns = rec.get("nominal_returns") or []
    return sum(returns) / len(returns) if returns else float("nan")


def reference_text(rec: Record) -> str:
    """The reference score a ratio is measured from, saying when it is random actions'
    mean on the same seeds: "-1206.3 (random)", "0.0".

    >>> reference_text({"reference": "random", "reference_score": -1206.27})
    '-1206.3 (random)'
    """
    score = fixed(float(rec.get("reference_score", rec.get("reference", 0)) or 0), 1)
    return f"{score} (random)" if rec.get("reference") == "random" else score


def baseline_text(rec: Record) -> str:
    """What a record's ratios are ratios of, in one phrase: "nominal 500.0 over 30
    episodes, reference 0.0".

    >>> baseline_text({"nominal_returns": [500.0, 480.0], "reference": 0, "reference_score": 0})
    'nominal 490.0 over 2 episodes, reference 0.0'
    """
    if "runs" in rec:
        return (f"nominal IQM {fixed(nominal_mean(rec), 1)} across {rec['runs']} runs of "
                f"{rec.get('episodes', '?')} episodes, reference {reference_text(rec)}")
    episodes = len(rec.get("nominal_returns") or []) or rec.get("episodes", "?")
    return (f"nominal {fixed(nominal_mean(rec), 1)} over {episodes} episodes, "
            f"reference {reference_text(rec)}")


def score_text(score: dict[str, Any]) -> str:
    """A category's score as the reports show it: "FAIL 0.208", or "INCONCLUSIVE" alone
    (a ratio that is mostly noise gets no number beside its rating).

    >>> score_text({"score": 0.208, "rating": "FAIL"}), score_text({"score": 1.03, "rating": "INCONCLUSIVE"})
    ('FAIL 0.208', 'INCONCLUSIVE')
    """
    if score["rating"] == INCONCLUSIVE:
        return INCONCLUSIVE
    return f"{score['rating']} {fixed(score['score'])}"


def agg_reference(agg: dict[str, Any]) -> str:
    """An agent's reference score (from :func:`~pytest_rlaudit.reports.summary.aggregates`):
    "-1206.3 (random actions)", "0.0"."""
    kind = " (random actions)" if agg.get("reference_kind") == "random" else ""
    return f"{fixed(agg.get('reference', 0.0), 1)}{kind}"


def agg_baseline(agg: dict[str, Any]) -> str:
    """What an agent's ratios are ratios of, from its aggregate.

    >>> agg_baseline({"nominal": 500.0, "episodes": 30, "reference": 0.0})
    'nominal mean return 500.0 over 30 episodes, reference 0.0'
    >>> agg_baseline({"nominal": 500.0, "episodes": 4, "runs": 3, "reference": 0.0})
    'nominal IQM return 500.0 across 3 runs of 4 episodes, reference 0.0'
    """
    if agg.get("runs"):
        return (f"nominal IQM return {fixed(agg.get('nominal', float('nan')), 1)} across "
                f"{agg['runs']} runs of {agg.get('episodes', '?')} episodes, reference "
                f"{agg_reference(agg)}")
    return (f"nominal mean return {fixed(agg.get('nominal', float('nan')), 1)} over "
            f"{agg.get('episodes', '?')} episodes, reference {agg_reference(agg)}")


def episodes_cell(rec: Record) -> str:
    """The ``n`` cell: paired episodes, and for a runs record the runs ("3 runs x 4").

    >>> episodes_cell({"episodes": 4}), episodes_cell({"episodes": 4, "runs": 3})
    ('4', '3 runs x 4')
    """
    n = str(rec.get("episodes", "?"))
    return f"{rec['runs']} runs x {n}" if "runs" in rec else n


def ratio_cell(rec: Record) -> str:
    """The ``ratio`` cell: a runs record's is the IQM across its runs, and says so.

    >>> ratio_cell({"ratio": 0.5}), ratio_cell({"ratio": 0.5, "runs": 3})
    ('0.500', 'IQM 0.500')
    """
    return f"IQM {fixed(rec['ratio'])}" if "runs" in rec else fixed(rec["ratio"])


def runs_text(rec: Record) -> str:
    """A runs record's runs, each label and ratio: "runs/a.zip 1.000, runs/b.zip 0.105".

    >>> runs_text({"labels": ["a", "b"], "per_run": [1.0, 0.105], "runs": 2})
    'a 1.000, b 0.105'
    """
    return ", ".join(f"{label} {fixed(r)}"
                     for label, r in zip(rec.get("labels", []), rec.get("per_run", []),
                                         strict=False))


def table_rows(records: Sequence[Record]) -> list[tuple[list[str], str]]:
    """Terminal rows (cells, rating): a header, then one row per record. ``n``: paired
    episodes (a runs record: runs x episodes); ``nominal``: their mean nominal return (a
    runs record: the IQM of the runs'); ``ref``: the reference score; ``ratio``: a runs
    record's is the IQM ratio, its CI the IQM's interval."""
    level = records[0].get("confidence", 0.95) if records else 0.95
    rows: list[tuple[list[str], str]] = [(
        ["agent", "env", "scenario", "n", "nominal", "ref", "ratio", f"{level:.0%} CI", "rating",
         "p", "diagnosis"], "")]
    for rec in sorted(records, key=order_key):
        rows.append(([rec["agent"], rec["env"], scenario_label(rec), episodes_cell(rec),
                      fixed(nominal_mean(rec), 1), reference_text(rec), ratio_cell(rec),
                      interval(rec["ci_low"], rec["ci_high"]), rating_cell(rec),
                      p_value(rec.get("p_value")), short_diagnosis(rec) or "-"], rec["rating"]))
    return rows


def tolerance_text(rec: Record) -> tuple[str, str]:
    """A tolerance curve's sentence and its points, as every report shows them:
    ("delay: tolerates 1 step, breaks at 2", "ratio by steps: 1 1.000, 2 0.100").

    >>> rec = {"scenario": "delay", "tolerance": {"param": "steps", "tolerated": 1,
    ...        "breaks_at": 2, "curve": [[1, 1.0, 1.0, 1.0], [2, 0.1, 0.1, 0.1]]}}
    >>> tolerance_text(rec)
    ('delay: tolerates 1 step, breaks at 2', 'ratio by steps: 1 1.000, 2 0.100')
    """
    from ..auditing.ladders import tolerance_sentence, value_text  # standard library only

    t = rec["tolerance"]
    assert t is not None  # the records of tolerance curves only
    points = ", ".join(f"{value_text(v)} {fixed(r)}" for v, r, _, _ in t["curve"])
    return (tolerance_sentence(rec["scenario"], t["param"], t["tolerated"], t["breaks_at"]),
            f"ratio by {t['param']}: {points}")


def mix_fix(records: Sequence[Record]) -> tuple[str, str] | None:
    """The one line that trains an agent under every scenario that broke it (rated FAIL or
    DEGRADED), gated or not, as its records ran them, with the nominal env kept in the
    mix and weighted by episode length
    (:func:`~pytest_rlaudit.auditing.fixes.mix_weights`; uniform when a record lacks
    the lengths), and its mark (benchmarked or an untested suggestion); None when none
    broke it or none can be mixed by name (``mixable``).

    >>> broke = {"scenario": "spike", "rating": "FAIL", "mixable": True, "env": "Acrobot-v1",
    ...          "mean_env_steps": 100.0, "nominal_mean_env_steps": 500.0}
    >>> mix_fix([broke, {**broke, "scenario": "delay", "rating": "PASS"}])
    ('ScenarioMix(gym.make("Acrobot-v1"), ["nominal", "spike"], weights=[1, 5])', 'untested suggestion')
    """
    from ..auditing.fixes import mix_line, mix_mark, mix_weights

    broke: dict[str, Record] = {}
    for r in sorted(records, key=order_key):
        if r.get("mixable") and r["rating"] in ("FAIL", "DEGRADED"):
            broke.setdefault(r["scenario"], r)
    if not broke:
        return None
    nominal = [r.get("nominal_mean_env_steps") for r in broke.values()]
    steps = [r.get("mean_env_steps") for r in broke.values()]
    weights = None
    if all(isinstance(x, (int, float)) and x > 0 for x in (*nominal, *steps)):
        # the most a record saw of the nominal episodes: they are the same episodes
        weights = mix_weights(max(cast(float, x) for x in nominal), cast(list[float], steps))
    env, names = records[0]["env"], list(broke)
    return mix_line(env, names, weights), mix_mark(env, names, weights)


def mix_mark_of(agg: dict[str, Any]) -> str:
    """An aggregate's mark of its ScenarioMix line (``mix_mark``); a summary written
    before lines were marked printed uniform weights, which no benchmark backs.

    >>> mix_mark_of({"mix": 'ScenarioMix(env, ["nominal", "delay"])'})
    'untested suggestion'
    """
    from ..auditing.fixes import UNTESTED

    return str(agg.get("mix_mark") or UNTESTED)
