"""The audit record: one audited test as plain JSON types, and the one place its fields live.

A record travels on a pytest report (so it survives xdist's channel), fills
``summary.json``'s ``results``, is what ``--rl-save`` keeps and what ``--rl-compare``
pairs. :data:`FIELDS` lists every field with its JSON types; :func:`validate` checks a
record against it (baselines read from disk, records received from xdist workers);
:func:`record_of` builds one from a robustness check, :func:`curve_record` from a tolerance
curve. Adding a field is a change here.
Standard library only: the plugin's controller reads records without the engine.

>>> rec = {"nodeid": "t::x", "agent": "PPO", "env": "CartPole-v1", "scenario": "jitter",
...        "seeds": [0, 1], "returns": [500.0, 480.0], "nominal_returns": [500.0, 500.0],
...        "ratio": 0.98}
>>> validate(rec) is rec
True
>>> try:
...     validate({**rec, "returns": [1.0]})
... except RecordError as exc:
...     print(exc)
(t::x) has seeds, returns and nominal_returns of different lengths
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from types import GenericAlias, UnionType
from typing import (
    Annotated,
    Any,
    TypedDict,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from ..errors import RLAuditError
from ..stats.ratings import ALL_RATINGS

if sys.version_info >= (3, 11):
    from typing import NotRequired, Required
else:  # Python 3.10: typing has neither (3.11+, PEP 655), and the plugin loads this module.

    class Required:
        """A stand-in for 3.11's ``typing.Required``, enough for :func:`_fields`, which
        reads it: ``Required[X]`` is an alias whose origin is this class and whose one
        argument is ``X``. TypedDict itself ignores it on 3.10 (``Record`` is
        ``total=False``; :data:`REQUIRED` is what says which keys a record must have)."""

        __class_getitem__ = classmethod(GenericAlias)

    class NotRequired(Required):
        """3.11's ``typing.NotRequired``, as :class:`Required`."""

__all__ = ["Gate", "Record", "FIELDS", "VIDEO_KEYS", "REQUIRED", "RecordError", "validate", "record_of",
           "curve_record", "runs_record", "RUNS_KEYS", "plain", "ATTRIBUTION_KEYS",
           "CONTRAST_KEYS", "valid_attribution"]



class Gate(TypedDict):
    """What a check must meet: ``min_ratio`` (ratio >= it), ``min_rating`` (at least that
    rating), either or both, judged in ``mode`` (point, confident or not_worse)."""

    min_ratio: float | None
    min_rating: str | None
    mode: str


_NUMBER = (int, float)
_NONE = (type(None),)

# One definition of the record: each field's type (what mypy checks) and what it holds
# (what the docs and the schema say); FIELDS, REQUIRED and validate() are derived from it.
Number = float  # a JSON number: an int is one too (see _json_types)


class Record(TypedDict, total=False):
    """An audited test as plain JSON types (see the module). The ``Required`` fields are
    in every record (a comparison needs them); the plugin writes all the others, and
    tests that call ``assert_robust`` themselves add ``checks`` and ``hypothesis``."""

    nodeid: Required[Annotated[str, "the pytest node id of the audited test"]]
    agent: Required[Annotated[str, "the policy's name"]]
    agent_details: Annotated[list[str], "what the policy says of itself beyond its name, a "
                             "line each (an ONNX policy: how it runs batches, and an exported "
                             "robot policy's joint names and action scale); [] when it says "
                             "nothing"]
    env: Required[Annotated[str, "the env's name"]]
    scenario: Required[Annotated[str, "the scenario's name"]]
    category: Annotated[str, "deployment, stress or custom"]
    params: Annotated[dict[str, Any], "the scenario's parameters"]
    schedule: Annotated[dict[str, Any] | None,
                        "null, or {description, repr, timeline} for a Schedule"]
    mixable: Annotated[bool, "whether ScenarioMix(env, [scenario]) trains under this very "
                       "scenario (a registered one with these parameters that can be mixed)"]
    episodes: Annotated[int, "paired episodes"]
    seed: Annotated[int, "the audit seed: episode i resets with seed + i"]
    seeds: Required[Annotated[list[int], "the env seed of each episode"]]
    returns: Required[Annotated[list[float], "the perturbed return of each episode"]]
    nominal_returns: Required[Annotated[list[float],
                                        "the nominal return of each episode, paired"]]
    reference: Annotated[float | str, "0, a number or 'random'"]
    reference_score: Annotated[Number, "the reference as a number"]
    mean_return: Annotated[Number, "the mean perturbed return"]
    mean_env_steps: Annotated[Number, "the perturbed episodes' mean length in env steps "
                              "(what the ScenarioMix line's weights are computed from)"]
    nominal_mean_env_steps: Annotated[Number, "the paired nominal episodes' mean length in "
                                      "env steps"]
    ratio: Required[Annotated[Number, "(mean perturbed - ref) / (mean nominal - ref)"]]
    ci_low: Annotated[Number, "the interval's low end"]
    ci_high: Annotated[Number, "the interval's high end"]
    confidence: Annotated[Number, "the interval's level"]
    p_value: Annotated[Number | None, "one-sided, Holm-adjusted; null for nominal"]
    rating: Annotated[str, "PASS, MILD, DEGRADED, FAIL, or INCONCLUSIVE when the nominal "
                      "return is not clearly above the reference (no threshold passes it; "
                      "its diagnosis says why)"]
    diagnosis: Annotated[dict[str, str] | None, "null, or {pattern, cause, fix}"]
    gate: Annotated[Gate | None,
                    "{min_ratio, min_rating, mode}, or null when nothing was gated"]
    passed: Annotated[bool, "the threshold verdict"]
    thresholds: Annotated[dict[str, float], "the rating scale: {pass, mild, degraded}"]
    order: Annotated[int, "collection order"]
    outcome: Annotated[str, "pytest's outcome: passed, failed, xfailed or xpassed"]
    checks: Annotated[int, "assert_robust calls (or hypothesis examples) of the test"]
    hypothesis: Annotated[bool, "whether the test is a hypothesis property test"]
    tolerance: Annotated[dict[str, Any] | None,
                         "null, or a tolerance curve's {param, default, min_ratio, tolerated, "
                         "breaks_at, curve: [[value, ratio, ci_low, ci_high], ...]}; its "
                         "record's numbers are the point at the scenario's own value"]
    video: Annotated[dict[str, Any] | None,
                     "null (not filmed: no --rl-videos, or the test passed), {skipped: why}, "
                     "or the worst episode's GIF beside its nominal twin: {file (relative to "
                     "the report folder), episode (its index), seed (its env seed), "
                     "parting_step (null if they never part), start, stop (it shows env "
                     "steps start to stop - 1; 0 is the reset)}"]
    attribution: Annotated[dict[str, Any] | None,
                           "null, or (--rl-attribute, rl_attribute: a failing observation "
                           "scenario) the record of kind 'attribution': which observation "
                           "groups the failure comes through (its keys: ATTRIBUTION_KEYS; "
                           "Attribution.to_dict)"]
    # A runs record (``--rl-agent`` a glob of training runs: audit_runs) has these too;
    # its ratio, ci_low, ci_high and rating are then the IQM across runs and its interval.
    runs: Annotated[int, "a runs record only: how many training runs; its ratio, ci_low, "
                    "ci_high and rating are their IQM ratio and its interval, and seeds, "
                    "returns and nominal_returns are every run's episodes, run after run"]
    labels: Annotated[list[str], "a runs record only: each run's label (its path)"]
    per_run: Annotated[list[float], "a runs record only: each run's ratio, in the order of "
                       "labels"]
    nominal_means: Annotated[list[float], "a runs record only: each run's nominal mean "
                             "return"]
    nominal_iqm: Annotated[Number, "a runs record only: the IQM of the runs' nominal mean "
                           "returns (what the IQM ratio is a ratio of)"]


def _json_types(annotation: Any) -> tuple[type, ...]:
    """The Python types a JSON value of a field's type loads as (a float may be an int).

    >>> _json_types(float | None)
    (<class 'int'>, <class 'float'>, <class 'NoneType'>)
    """
    if annotation is float:
        return (int, float)
    if annotation is type(None):
        return _NONE
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return tuple(t for arg in get_args(annotation) for t in _json_types(arg))
    if is_typeddict(annotation):
        return (dict,)
    return (origin or annotation,)


def _fields() -> tuple[dict[str, tuple[tuple[type, ...], str]], tuple[str, ...]]:
    """:class:`Record`'s fields as (JSON types, what it holds), and the required ones
    (read from the hints: under postponed annotations ``__required_keys__`` cannot see
    ``Required``)."""
    fields, required = {}, []
    for key, hint in get_type_hints(Record, include_extras=True).items():
        if get_origin(hint) is Required:
            required.append(key)
        while get_origin(hint) in (Required, NotRequired):
            hint = get_args(hint)[0]
        base, what = get_args(hint)  # Annotated[type, description]
        fields[key] = (_json_types(base), what)
    return fields, tuple(required)


#: Every field: (JSON types, what it holds), from :class:`Record`; and those every
#: record has.
FIELDS, REQUIRED = _fields()
#: The fields only a runs record has (:func:`runs_record`).
RUNS_KEYS = ("runs", "labels", "per_run", "nominal_means", "nominal_iqm")
#: The keys of an ``attribution`` record and their JSON types (Attribution.to_dict); its
#: ``full`` and each of its ``only`` and ``all_but`` contrasts have :data:`CONTRAST_KEYS`.
ATTRIBUTION_KEYS: dict[str, tuple[type, ...]] = {
    "kind": (str,), "agent": (str,), "env": (str,), "scenario": (str,), "episodes": (int,),
    "seed": (int,), "confidence": _NUMBER, "reference": _NUMBER, "groups": (dict,),
    "groups_source": (str,), "full": (dict,), "only": (dict,), "all_but": (dict,),
    "family": (int,),
    "shapley": (dict,), "shapley_method": (str,), "culprit_groups": (list,),
    "culprits": (list,), "culprits_ratio": (*_NUMBER, type(None)),
    "confirmed": (bool, type(None)), "interactions": (list,), "notes": (list,),
    "runs": (int,), "diagnosis": (str,)}
CONTRAST_KEYS: dict[str, tuple[type, ...]] = {
    "groups": (list,), "ratio": _NUMBER, "ci_low": _NUMBER, "ci_high": _NUMBER,
    "p_value": _NUMBER, "rating": (str,)}
#: The keys of a filmed record's ``video`` and their JSON types (see :data:`FIELDS`).
VIDEO_KEYS: dict[str, tuple[type, ...]] = {
    "file": (str,), "episode": (int,), "seed": (int,), "parting_step": (int, *_NONE),
    "start": (int,), "stop": (int,)}


class RecordError(RLAuditError, ValueError):
    """A record that lacks a field, has one of the wrong type, or unpaired episodes."""


def validate(rec: Any) -> Record:
    """``rec`` if it is a valid record, else a :class:`RecordError` naming the field."""
    if not isinstance(rec, dict):
        raise RecordError("is not an object")
    nodeid = rec.get("nodeid", "?")
    for key, (kinds, _) in FIELDS.items():
        if key not in rec and key not in REQUIRED:
            continue
        value = rec.get(key)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise RecordError(f"({nodeid}) lacks a valid {key!r}")
    if "rating" in rec and rec["rating"] not in ALL_RATINGS:
        raise RecordError(f"({nodeid}) has rating {rec['rating']!r}, not one of "
                          f"{', '.join(ALL_RATINGS)}")
    lengths = {len(rec[k]) for k in ("seeds", "returns", "nominal_returns")}
    if len(lengths) != 1 or not rec["seeds"]:
        raise RecordError(f"({nodeid}) has seeds, returns and nominal_returns of different "
                          "lengths")
    numbers = [*rec["returns"], *rec["nominal_returns"]]
    if not all(isinstance(x, _NUMBER) and not isinstance(x, bool) and math.isfinite(x)
               for x in numbers):
        raise RecordError(f"({nodeid}) has a non-finite or non-numeric return")
    if rec.get("video") is not None and not _valid_video(rec["video"]):
        raise RecordError(f"({nodeid}) has a 'video' that is neither {{skipped: why}} nor "
                          f"{{{', '.join(VIDEO_KEYS)}}}")
    if rec.get("attribution") is not None and not valid_attribution(rec["attribution"]):
        raise RecordError(f"({nodeid}) has an 'attribution' that is not a record of kind "
                          f"'attribution' with {', '.join(ATTRIBUTION_KEYS)}")
    return cast(Record, rec)


def valid_attribution(doc: Any) -> bool:
    """Whether ``doc`` is an attribution record: :data:`ATTRIBUTION_KEYS`, each of the
    right type, kind ``"attribution"``, and each contrast with :data:`CONTRAST_KEYS`."""
    def typed(value: Any, keys: dict[str, tuple[type, ...]]) -> bool:
        return isinstance(value, dict) and set(keys) <= set(value) and all(
            isinstance(value[k], kinds) and (bool in kinds or not isinstance(value[k], bool))
            for k, kinds in keys.items())

    if not typed(doc, ATTRIBUTION_KEYS) or doc["kind"] != "attribution":
        return False
    contrasts = [doc["full"], *doc["only"].values(), *doc["all_but"].values()]
    return all(typed(c, CONTRAST_KEYS) for c in contrasts)


def _valid_video(video: dict[str, Any]) -> bool:
    """Whether ``video`` has exactly one of the two shapes :data:`FIELDS` describes.

    >>> _valid_video({"skipped": "no rgb_array"}), _valid_video({"skipped": 1})
    (True, False)
    >>> _valid_video({"file": "videos/a.gif", "episode": 2, "seed": 2, "parting_step": None,
    ...               "start": 0, "stop": 81})
    True
    """
    if set(video) == {"skipped"}:
        return isinstance(video["skipped"], str)
    return set(video) == set(VIDEO_KEYS) and all(
        isinstance(video[k], kinds) and not isinstance(video[k], bool)
        for k, kinds in VIDEO_KEYS.items())


def record_of(nodeid: str, check: Any, gate: Gate | None) -> Record:
    """The record of ``check`` (a :class:`~pytest_rlaudit.verdicts.assertions.RobustnessCheck`)
    for the test ``nodeid``, gated by ``gate`` (None: reported only)."""
    return _record(nodeid, check.result, check.nominal, agent=check.agent, env=check.env,
                   seed=check.seed, reference=check.reference,
                   reference_score=check.reference_score, confidence=check.level,
                   thresholds=check.thresholds, gate=gate, passed=check.passed,
                   agent_details=check.agent_details)


def curve_record(nodeid: str, curve: Any, gate: Gate | None, passed: bool) -> Record:
    """The record of ``curve`` (a :class:`~pytest_rlaudit.auditing.curves.ToleranceCurve`
    that tested the scenario's own value) for the test ``nodeid``: the numbers of that
    point, as the scenario's single-point audit records them (its p-value Holm-adjusted
    across the curve's values), with the curve in ``tolerance``. ``passed``: the verdict."""
    audited = curve.result
    rec = _record(nodeid, curve.at(curve.default), audited.nominal, agent=audited.agent,
                  env=audited.env, seed=audited.seed, reference=curve.reference,
                  reference_score=audited.reference, confidence=audited.confidence,
                  thresholds=audited.thresholds, gate=gate, passed=passed,
                  agent_details=audited.agent_details)
    rec["tolerance"] = curve.to_dict()
    return rec


def runs_record(nodeid: str, runs: Any, name: str, gate: Gate | None, passed: bool,
                reference: float | str) -> Record:
    """The record of scenario ``name`` of ``runs`` (a
    :class:`~pytest_rlaudit.auditing.runs.RunsResult`) for the test ``nodeid``: its
    ratio, interval and rating are the IQM's; its episodes every run's, run after run
    (paired, seed for seed, with the same run's nominal episodes). ``reference``: as
    given (0, a number or "random")."""
    s = runs[name]
    first = runs.runs[0]
    rec = _record(nodeid, first[name], first.nominal, agent=runs.name, env=runs.env,
                  seed=runs.seed, reference=reference,
                  reference_score=runs.reference, confidence=runs.confidence,
                  thresholds=runs.thresholds, gate=gate, passed=passed)
    members = [r[name] for r in runs.runs]
    rec["seeds"] = [int(x) for m in members for x in m.seeds]
    rec["returns"] = [float(x) for m in members for x in m.returns]
    rec["nominal_returns"] = [float(x) for r in runs.runs for x in r.nominal.returns]
    rec["mean_return"] = sum(rec["returns"]) / len(rec["returns"])
    rec.update(_env_steps(members, [r.nominal for r in runs.runs]))
    rec.update({"ratio": float(s.iqm), "ci_low": float(s.ci[0]), "ci_high": float(s.ci[1]),
                "rating": s.rating, "p_value": None, "diagnosis": None, "runs": s.runs,
                "labels": list(s.labels), "per_run": [float(x) for x in s.per_run],
                "nominal_means": [float(x) for x in s.nominal],
                "nominal_iqm": float(s.nominal_iqm)})
    return rec


def _env_steps(results: Any, nominal: Any) -> Record:
    """``mean_env_steps`` and ``nominal_mean_env_steps`` of a scenario result and its
    nominal one (or lists of them: every run's episodes), left out where unmeasured."""
    def mean(found: Any) -> float | None:
        steps = [int(x) for r in (found if isinstance(found, list) else [found])
                 if r is not None for x in getattr(r, "env_steps", ())]
        return sum(steps) / len(steps) if steps else None

    # a part of a record, merged into one: its required keys come from the caller
    out: Record = {}  # type: ignore[typeddict-item]
    perturbed, paired = mean(results), mean(nominal)
    if perturbed is not None:
        out["mean_env_steps"] = perturbed
    if paired is not None:
        out["nominal_mean_env_steps"] = paired
    return out


def _mixable(name: str, params: Any) -> bool:
    from ..world.mix import mixable_by_name  # here, not at import: records stay light

    return mixable_by_name(name, params)


def _record(nodeid: str, r: Any, nominal: Any, *, agent: str, env: str, seed: int,
            reference: float | str, reference_score: float, confidence: float,
            thresholds: Any, gate: Gate | None, passed: bool,
            agent_details: Sequence[str] = ()) -> Record:
    """A record of the scenario result ``r`` paired with the ``nominal`` one."""
    schedule = r.params.get("schedule")
    t = thresholds
    return {
        "nodeid": nodeid,
        "agent": agent,
        "agent_details": [str(line) for line in agent_details],
        "env": env,
        "scenario": r.name,
        "category": r.category,
        "params": plain(dict(r.params)),
        "mixable": _mixable(r.name, r.params),
        "schedule": None if not hasattr(schedule, "describe") else {
            "description": schedule.describe(), "repr": repr(schedule),
            "timeline": schedule.to_dict()},
        "episodes": r.episodes,
        "seed": int(seed),
        "seeds": [int(x) for x in r.seeds],
        "returns": [float(x) for x in r.returns],
        "nominal_returns": [] if nominal is None else [float(x) for x in nominal.returns],
        "reference": reference,
        "reference_score": float(reference_score),
        "mean_return": r.mean_return,
        **_env_steps(r, nominal),
        "ratio": float(r.ratio),
        "ci_low": float(r.ci[0]),
        "ci_high": float(r.ci[1]),
        "confidence": confidence,
        "p_value": None if r.p_value is None else float(r.p_value),
        "rating": r.rating,
        "diagnosis": None if r.diagnosis is None else r.diagnosis.to_dict(),
        "gate": gate,
        "passed": bool(passed),
        "thresholds": {"pass": t.pass_, "mild": t.mild, "degraded": t.degraded},
        "tolerance": None,
        "video": None,
        "attribution": None,
    }


def plain(value: Any) -> Any:
    """A parameter as JSON types: numpy scalars as Python numbers, sequences and mappings
    element-wise, a Schedule as its ``to_dict()``, anything else as its repr.

    >>> plain({"k": 5, "speeds": (1, 2), "cls": int})
    {'k': 5, 'speeds': [1, 2], 'cls': "<class 'int'>"}
    """
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()  # a numpy scalar (np.float64 is a float too: convert it first)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "to_dict"):  # a Schedule: its JSON form
        return value.to_dict()
    return repr(value)
