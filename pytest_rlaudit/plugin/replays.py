"""The pytest face of replay (DESIGN.md section 22): the ``rl_replay`` fixture and marker,
``--rl-replay=DATASET``'s zero-config items, and ``--rl-record=DIR``.

A replay test leaves a replay record (:func:`~pytest_rlaudit.auditing.replay_records.replay_record`)
in its item's stash; :class:`ReplayHooks` puts it on the test's report as a JSON string (so
it survives xdist's channel, as audit records do) and the controller keeps it in the
session's ``replays`` list, apart from the audit records: a replay has no ratio, rating or
return, and the aggregates and comparisons never see it. A replay that cannot run (a
missing or unreadable recording: :class:`~pytest_rlaudit.errors.DatasetError`) is an ERROR,
never a failed test; a candidate that acts further from the recording than the limits is
a failed test (:class:`~pytest_rlaudit.errors.ReplayError`).

``--rl-record=DIR`` writes each audited scenario's episodes (seeded: the very episodes the
audit ran) as a Minari dataset in ``DIR/<scenario>``, the nominal ones once in
``DIR/nominal``.

Loading it imports nothing heavy; the engine is imported when a replay first runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .markers import MarkerError, replay_marker
from .reporting import guarded
from .rootdir import audit_nodeid
from .stash_keys import PROPERTIES_KEY, RECORD_KEY
from .xdist import is_worker

__all__ = ["REPLAY_KEY", "RECORDED_KEY", "ReplayItem", "ReplayCollector", "ReplayHooks",
           "check_replay_options", "replay_runner", "run_replay", "record_audited", "record_safely",
           "replay_collector"]

REPLAY_KEY = pytest.StashKey[dict[str, Any]]()  # the item's replay record
RECORDED_KEY = pytest.StashKey[list[str]]()  # the folders --rl-record wrote for the item
PROBLEMS_KEY = pytest.StashKey[list[str]]()  # what failed writing them

_UNSET: Any = object()
_OPTIONS = ("max_disagreement", "max_divergence", "mode", "tolerance", "episodes", "state",
            "action")


def _session(config: pytest.Config) -> Any:
    return config.pluginmanager.get_plugin("rlaudit-session")


# ------------------------------------------------------------------------ running


def limits_of(max_disagreement: float | None, max_divergence: float | None,
              mode: str) -> dict[str, Any] | None:
    """The limits a replay is held to, as its record keeps them (None without a limit)."""
    if max_disagreement is None and max_divergence is None:
        return None
    return {"max_disagreement": max_disagreement, "max_divergence": max_divergence,
            "mode": mode}


def run_replay(item: pytest.Item, candidate: Any, dataset: Any, *,
               max_disagreement: float | None = None, max_divergence: float | None = None,
               mode: str = "point", **kwargs: Any) -> Any:
    """Replay ``candidate`` on ``dataset`` for ``item`` through ``assert_replay_close``
    and leave its replay record in the item's stash: its
    :class:`~pytest_rlaudit.errors.ReplayError` fails the test (its record kept) beyond a
    limit, and, limit or not, on an episode the candidate raised on: an agent's exception
    never passes quietly. ``passed`` is the verdict of the limits (None without one: the
    record then says "report only", never PASS)."""
    __tracebackhide__ = True
    from ..auditing.replay_records import replay_record
    from ..errors import ReplayError
    from ..verdicts.replays import assert_replay_close

    limits = limits_of(max_disagreement, max_divergence, mode)
    try:
        result = assert_replay_close(candidate, dataset, max_disagreement=max_disagreement,
                                     max_divergence=max_divergence, mode=mode, **kwargs)
    except ReplayError as exc:
        if exc.result is not None:
            item.stash[REPLAY_KEY] = replay_record(item.nodeid, exc.result, limits=limits,
                                                   passed=False)
        raise
    item.stash[REPLAY_KEY] = replay_record(item.nodeid, result, limits=limits,
                                           passed=None if limits is None else True)
    return result


def replay_runner(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """What the ``rl_replay`` fixture returns (see :func:`.fixtures.rl_replay`)."""
    try:
        marker = replay_marker(request.node.get_closest_marker("rl_replay")) or {}
    except MarkerError as exc:
        pytest.fail(str(exc), pytrace=False)

    def run(candidate: Any = None, dataset: Any = None, *, max_disagreement: Any = _UNSET,
            max_divergence: Any = _UNSET, mode: Any = _UNSET, tolerance: Any = _UNSET,
            episodes: Any = _UNSET, state: Any = _UNSET, action: Any = _UNSET,
            **kwargs: Any) -> Any:
        __tracebackhide__ = True
        given = {"max_disagreement": max_disagreement, "max_divergence": max_divergence,
                 "mode": mode, "tolerance": tolerance, "episodes": episodes, "state": state,
                 "action": action}
        options: dict[str, Any] = {
            k: (marker.get(k, "point" if k == "mode" else None) if v is _UNSET else v)
            for k, v in given.items()}
        if candidate is None:
            candidate = marker.get("candidate")
        if candidate is None:
            candidate = request.getfixturevalue("rl_agent")
        if dataset is None:
            dataset = marker.get("dataset")
        if dataset is None:
            pytest.fail("rl_replay() needs a dataset: rl_replay(dataset=PATH), or "
                        "@pytest.mark.rl_replay(PATH) on the test", pytrace=False)
        return run_replay(request.node, candidate, dataset, **options, **kwargs)

    return run


# ----------------------------------------------------------------- zero-config items


def _dataset_names(datasets: tuple[str, ...]) -> list[str]:
    """Each dataset's item name: ``replay[<basename>]``, the path where two share one."""
    bases = [os.path.basename(os.path.normpath(d)) or d for d in datasets]
    return [f"replay[{base if bases.count(base) == 1 else d}]"
            for base, d in zip(bases, datasets, strict=True)]


class ReplayItem(pytest.Item):
    """A zero-config replay: --rl-agent on one --rl-replay dataset."""

    def __init__(self, *, dataset: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dataset = dataset

    def runtest(self) -> None:
        plugin = _session(self.config)
        settings = plugin.settings
        run_replay(self, plugin.audits.default_agent(), self.dataset,
                   max_disagreement=settings.replay_max_disagreement,
                   max_divergence=settings.replay_max_divergence,
                   state=settings.replay_state, action=settings.replay_action)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None):
        from .items import message_only

        return message_only(excinfo) or super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, None, str]:
        return (self.config.rootpath / self.nodeid.split("::")[0], None,
                f"rl-replay: {self.dataset}")


class ReplayCollector(pytest.Collector):
    """Collects one :class:`ReplayItem` per --rl-replay dataset."""

    def collect(self) -> list[ReplayItem]:
        datasets = tuple(_session(self.config).settings.replay)
        return [ReplayItem.from_parent(self, name=name, dataset=dataset)
                for name, dataset in zip(_dataset_names(datasets), datasets, strict=True)]


def replay_collector(session: pytest.Session, config: pytest.Config) -> ReplayCollector:
    return ReplayCollector.from_parent(session, name="rl-audit", nodeid=audit_nodeid(config))


# -------------------------------------------------------------- configure-time checks


def _minari_root() -> Path:
    """Minari's local store, as minari finds it (without importing minari)."""
    root = os.environ.get("MINARI_DATASETS_PATH")
    return Path(root) if root else Path.home() / ".minari" / "datasets"


def check_replay_options(config: pytest.Config, settings: Any) -> Any:
    """A :class:`pytest.UsageError` naming the fix for --rl-replay without an agent or
    with a dataset that is neither a path nor a dataset in minari's local store, and for
    an --rl-record folder that cannot be written; returns ``settings`` with the datasets
    and the record folder made absolute (from the folder pytest runs in: xdist workers
    and Minari's readers see the same paths)."""
    from dataclasses import replace

    from .reporting import _folder_problem

    here = Path(config.invocation_params.dir)
    datasets = []
    for dataset in settings.replay:
        path = here / os.path.expanduser(dataset)
        if path.exists():
            datasets.append(str(path))
        elif (_minari_root() / dataset).is_dir():  # a local Minari id
            datasets.append(dataset)
        else:
            raise pytest.UsageError(
                f"--rl-replay {dataset}: no such file or folder ({path}), nor a dataset in "
                f"minari's local store ({_minari_root()}); give a Minari dataset folder or "
                "local id, a LeRobot dataset folder or an .npz recording")
    if datasets and not settings.agent:
        raise pytest.UsageError(
            f"--rl-replay {settings.replay[0]} replays --rl-agent on the recording, and no "
            "--rl-agent is given: add --rl-agent PATH_OR_IMPORT (the candidate to replay), or "
            "use the rl_replay fixture in a test of your own")
    record = settings.record
    if record:
        folder = here / os.path.expanduser(record)
        if folder.exists() and not folder.is_dir():
            raise pytest.UsageError(f"--rl-record {record}: is a file; --rl-record takes a "
                                    "folder (created if need be) for the recorded datasets")
        problem = _folder_problem(folder)
        if problem:
            raise pytest.UsageError(f"--rl-record {record}: cannot write the recordings "
                                    f"there: {problem}; give a folder this user can write")
        record = str(folder)
    return replace(settings, replay=tuple(datasets), record=record)


# ----------------------------------------------------------------------- --rl-record


def record_audited(config: pytest.Config, item: pytest.Item, scenario: Any, agent: Any,
                   env: Any) -> None:
    """--rl-record: write the episodes ``item`` audited (its record's seeds) of
    ``scenario``, and the nominal ones once, as Minari datasets in the folder; a folder
    there already (an earlier item, another xdist worker, an earlier run) is kept."""
    from ..auditing.records import Record

    plugin = _session(config)
    folder = plugin.settings.record
    audited: Record | None = item.stash.get(RECORD_KEY, None)
    if not folder or audited is None or "runs" in audited or not audited.get("seeds"):
        return
    from ..auditing.recorder import record

    seeds = audited["seeds"]
    written = item.stash.setdefault(RECORDED_KEY, [])
    names = [("nominal", "nominal")]
    if getattr(scenario, "name", "nominal") != "nominal":
        names.append((scenario.name, scenario))
    for name, what in names:
        path = Path(folder) / name
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        record(agent, env, path, episodes=len(seeds), seed=int(seeds[0]), scenarios=(what,))
        written.append(str(path))


def record_safely(config: pytest.Config, item: pytest.Item, scenario: Any,
                  agent: Callable[[], Any], env: Callable[[], Any]) -> None:
    """:func:`record_audited`, an error in it kept for the report (one line in the rl
    audit section that fails the run), never the test's own outcome."""
    if not _session(config).settings.record or RECORD_KEY not in item.stash:
        return
    from .reporting import caught

    problems = item.stash.setdefault(PROBLEMS_KEY, [])
    with caught(problems, f"--rl-record of {item.nodeid}"):
        record_audited(config, item, scenario, agent(), env())


# ------------------------------------------------------------------------ the hooks


class ReplayHooks:
    """Moves replay records (and the folders --rl-record wrote) from the items to the
    reports and on to the session's ``replays`` (``recorded``) list on the controller."""

    def __init__(self, session: Any) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        keys: tuple[pytest.StashKey[Any], ...] = (REPLAY_KEY, RECORDED_KEY, PROBLEMS_KEY)
        for key in keys:  # an earlier attempt's (pytest-rerunfailures)
            if key in item.stash:
                del item.stash[key]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        yield
        if self.session.settings.record:
            from .items import ScenarioItem

            if isinstance(item, ScenarioItem):
                audits = self.session.audits
                record_safely(self.config, item, item.scenario, audits.default_agent,
                              audits.default_env)

    @property
    def config(self) -> pytest.Config:
        return self.session.config

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        record = item.stash.get(REPLAY_KEY, None) if call.when == "call" else None
        recorded = item.stash.get(RECORDED_KEY, None) if call.when == "call" else None
        problems: list[str] = []
        if call.when == "call" and PROBLEMS_KEY in item.stash:
            kept: list[str] = item.stash[PROBLEMS_KEY]
            problems.extend(kept)
        if record is not None:
            from .reporting import caught

            with caught(problems, f"the rl replay record of {item.nodeid}"):
                from . import junit

                properties = junit.replay_properties(record)
                item.stash.setdefault(PROPERTIES_KEY, []).extend(properties)
                item.user_properties.extend(properties)
        outcome = yield
        report = outcome.get_result()
        if record is not None:
            report.rl_replay = json.dumps(record)
            if report.passed:
                from ..reports.replays import replay_line

                report.sections.append(("rl replay", replay_line(record)))
        if recorded:
            report.rl_recorded = list(recorded)
        if problems:
            report.rl_report_errors = [*getattr(report, "rl_report_errors", []), *problems]

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == "rerun" or report.when != "call" or is_worker(self.config):
            return
        for path in getattr(report, "rl_recorded", None) or ():
            if path not in self.session.recorded:
                self.session.recorded.append(path)
        data = getattr(report, "rl_replay", None)
        if data is None:
            return
        from ..auditing.replay_records import validate_replay

        with guarded(self.session, f"reading the rl replay record of {report.nodeid}"):
            record = validate_replay(json.loads(data))  # this process's, or a worker's
            record["outcome"] = report.outcome
            self.session.replays = [r for r in self.session.replays
                                    if r["nodeid"] != record["nodeid"]]
            self.session.replays.append(record)
