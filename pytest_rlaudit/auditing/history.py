"""A history folder: every auditing run's results kept, numbered and named by commit, as
pytest-benchmark keeps speed (``--rl-history=DIR``).

Each run is one baseline document (:mod:`.baselines`, so any one of them is also a file
``--rl-compare`` takes) with a ``run`` block: its number, the commit it ran on (git's
``HEAD``; a CI variable; else the time), whether the tree had uncommitted changes, how
many xdist workers ran it, and its pairing key (the settings that decide which episodes
ran: env, episodes, seed, scenarios). Files are named ``NNNN_<commit>[_dirty].json``.
A number is claimed by linking a whole, written file to its name, which fails if another
run took the name first: two runs saving at once get two numbers, never one file.

``--rl-compare`` resolves ``last``, a run number or a commit prefix against the folder
(:func:`resolve`), only among runs with this run's pairing key: runs of other settings are
kept, never paired. A file in the folder that is not a run (corrupt, foreign, of a newer
schema) is named in :attr:`Runs.skipped` and otherwise ignored.

>>> import tempfile
>>> from pytest_rlaudit.auditing.baselines import baseline_document
>>> folder = tempfile.mkdtemp()
>>> doc = baseline_document([], version="0.1.0", options={"rl_seed": 0})
>>> save_run(doc, folder, Commit("0123456789abcdef", "git", dirty=True)).name
'0001_0123456789ab_dirty.json'
>>> save_run(doc, folder, Commit("fedcba9876543210", "git")).name
'0002_fedcba987654.json'
>>> [(run.number, run.commit[:4]) for run in read_runs(folder).runs]
[(1, '0123'), (2, 'fedc')]
>>> resolve(folder, "last", pairing_key({"rl_seed": 0})).name
'0002_fedcba987654.json'
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BaselineError
from .baselines import load_baseline

__all__ = ["Commit", "Run", "Runs", "commit_of", "pairing_key", "save_run", "read_runs",
           "resolve", "find_run", "is_reference", "settings_text", "PAIRING_OPTIONS", "CI_COMMIT_VARIABLES"]

#: The options whose values decide which episodes a run's audits ran: runs that differ in
#: any are never paired (their episodes are other episodes).
PAIRING_OPTIONS = ("rl_env", "rl_episodes", "rl_seed", "rl_scenarios", "rl_severity")

#: Where CI services put the commit they build, read in this order when git cannot say
#: (a source tarball, a container without ``.git``).
CI_COMMIT_VARIABLES = ("GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "CIRCLE_SHA1",
                       "TRAVIS_COMMIT", "BITBUCKET_COMMIT", "GIT_COMMIT")

_NAME = re.compile(r"^(\d{4,})_([^/\\]+?)(_dirty)?\.json$")
_NUMBERED = re.compile(r"^(\d{4,})_")


@dataclass(frozen=True)
class Commit:
    """What a run ran on: ``name`` (a commit hash, or a time stamp when nothing says),
    ``source`` (``git``, the CI variable read, or ``time``), ``dirty`` (uncommitted
    changes to tracked files) and ``branch`` where git names one."""

    name: str
    source: str
    dirty: bool = False
    branch: str | None = None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):  # no git, or it hung
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_of(root: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Commit:
    """The commit the project at ``root`` is on (see :class:`Commit`): git's ``HEAD`` and
    whether tracked files have uncommitted changes (untracked files do not count: the
    history folder itself is often one); else the first of :data:`CI_COMMIT_VARIABLES`
    set; else the UTC time.

    >>> import tempfile
    >>> commit_of(tempfile.mkdtemp(), environ={"GITHUB_SHA": "abc123"})
    Commit(name='abc123', source='GITHUB_SHA', dirty=False, branch=None)
    """
    env = os.environ if environ is None else environ
    folder = Path(root)
    head = _git(folder, "rev-parse", "HEAD")
    if head and re.fullmatch(r"[0-9a-f]{40,64}", head):
        status = _git(folder, "status", "--porcelain", "--untracked-files=no")
        branch = _git(folder, "rev-parse", "--abbrev-ref", "HEAD")
        return Commit(head, "git", dirty=bool(status),
                      branch=branch if branch and branch != "HEAD" else None)
    for variable in CI_COMMIT_VARIABLES:
        value = env.get(variable, "").strip()
        if value:
            return Commit(value, variable)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Commit(now, "time")


def pairing_key(options: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a run's options that decides its episodes (:data:`PAIRING_OPTIONS`)."""
    return {name: options.get(name) for name in PAIRING_OPTIONS}


@dataclass(frozen=True)
class Run:
    """One run of a history folder: its file, number, commit and the ``run`` block."""

    path: Path
    number: int
    commit: str
    dirty: bool
    complete: bool
    key: dict[str, Any]
    created: str = ""
    workers: int = 0
    branch: str | None = None
    doc: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        """``#0003 (0123456789ab, dirty)``: how messages and tables name it."""
        marks = [self.commit[:12]] + (["dirty"] if self.dirty else []) + (
            [] if self.complete else ["partial"])
        return f"#{self.number:04d} ({', '.join(marks)})"


@dataclass
class Runs:
    """A history folder read: its runs in number order, and the files skipped, each
    with why."""

    runs: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def paired_with(self, key: Mapping[str, Any]) -> list[Run]:
        """The runs with the pairing ``key`` (:func:`pairing_key`)."""
        return [run for run in self.runs if run.key == dict(key)]


def _safe(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z.-]+", "-", name)[:40] or "unnamed"


def save_run(doc: dict[str, Any], folder: str | os.PathLike[str], commit: Commit, *,
             workers: int = 0) -> Path:
    """Write ``doc`` (a baseline document) into ``folder`` as its next run, with the run
    block (see the module); returns the file. The number is one past the highest any
    file there carries, and is claimed atomically (see the module)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    name = _safe(commit.name[:12] if commit.source != "time" else commit.name)
    tmp = target / f".run.{os.getpid()}.{id(doc)}.tmp"
    try:
        for _ in range(1000):
            number = 1 + max((int(m.group(1)) for p in target.iterdir()
                              if (m := _NUMBERED.match(p.name))), default=0)
            run = {"number": number, "commit": commit.name, "source": commit.source,
                   "dirty": commit.dirty, "branch": commit.branch, "workers": workers,
                   "key": pairing_key(doc.get("options") or {})}
            tmp.write_text(json.dumps({**doc, "run": run}, indent=1) + "\n", encoding="utf-8")
            path = target / f"{number:04d}_{name}{'_dirty' if commit.dirty else ''}.json"
            try:
                os.link(tmp, path)  # fails if the name is taken: the number is someone's
            except FileExistsError:
                continue
            return path
        raise BaselineError(f"--rl-history {target}: could not claim a run number after "
                            "1000 tries; is another process writing there in a loop?")
    finally:
        tmp.unlink(missing_ok=True)


def read_runs(folder: str | os.PathLike[str]) -> Runs:
    """The runs of ``folder`` (empty if it does not exist), each file checked as
    :func:`~.baselines.load_baseline` checks a baseline; one that fails is skipped, named
    with why."""
    out = Runs()
    source = Path(folder)
    if not source.is_dir():
        return out
    for path in sorted(source.glob("*.json")):
        if not _NAME.match(path.name):
            out.skipped.append(f"{path.name}: not named as a run (NNNN_<commit>.json)")
            continue
        try:
            doc = load_baseline(path)
        except BaselineError as exc:
            out.skipped.append(f"{path.name}: {exc}")
            continue
        run = doc.get("run")
        if not isinstance(run, dict) or not isinstance(run.get("number"), int) \
                or not isinstance(run.get("commit"), str) or not isinstance(run.get("key"), dict):
            out.skipped.append(f"{path.name}: a baseline without a run block (number, "
                               "commit, key): not saved by --rl-history")
            continue
        out.runs.append(Run(path, run["number"], run["commit"], bool(run.get("dirty")),
                            bool(doc.get("complete", True)), run["key"], str(doc.get("created", "")),
                            int(run.get("workers") or 0), run.get("branch"), doc))
    out.runs.sort(key=lambda r: (r.number, r.path.name))
    return out


def is_reference(text: str) -> bool:
    """Whether ``--rl-compare``'s value reads as a history reference (``last``, a run
    number, a commit prefix of 4 or more hex digits) rather than a file path.

    >>> [is_reference(t) for t in ("last", "3", "0003", "a1b2c3", "base.json", "ab")]
    [True, True, True, True, False, False]
    """
    return text == "last" or text.isdigit() or bool(re.fullmatch(r"[0-9a-f]{4,64}", text))


def resolve(folder: str | os.PathLike[str], ref: str, key: Mapping[str, Any]) -> Path:
    """The file of the run ``ref`` names in ``folder`` among runs with the pairing ``key``
    (:func:`find_run`); a :class:`~pytest_rlaudit.errors.BaselineError` naming what the
    folder holds when none fits, or when the run named has other settings."""
    return find_run(read_runs(folder), ref, key, where=f"--rl-compare {ref} (history {folder})").path


def find_run(runs: Runs, ref: str, key: Mapping[str, Any] | None = None, *,
             where: str = "") -> Run:
    """The run ``ref`` names: ``last``, the newest complete run (the newest partial one if
    none is complete); digits, that run number (or, when no run has that number, a commit
    prefix: short hashes can be all digits); else the newest run whose commit starts with
    ``ref``. Given a pairing ``key``, ``last`` and a
    prefix look only among runs with it, and a number naming a run without it is refused:
    runs of other settings are never paired. ``where`` starts each message."""
    where = where or f"run {ref}"
    pool = runs.runs if key is None else runs.paired_with(key)
    if ref == "last":
        whole = [run for run in pool if run.complete]  # a partial run only if nothing else
        if pool:
            return (whole or pool)[-1]
        others = f"; it holds {len(runs.runs)} run(s) of other settings" if runs.runs else ""
        mine = "" if key is None else f" with this run's settings ({settings_text(key)})"
        raise BaselineError(f"{where}: no earlier run{mine}{others}. Run once with "
                            "--rl-history to start the history.")
    # About one short hash in 27 is all digits, so 4 or more digits that are no run's number
    # still name a commit; digits that are both are refused rather than guessed.
    short = ref.isdigit() and len(ref) < 4
    by_commit = [run for run in runs.runs if not short and run.commit.startswith(ref)]
    found = [run for run in runs.runs if ref.isdigit() and run.number == int(ref)]
    if found and by_commit:
        raise BaselineError(f"{where}: {ref!r} is both run number {int(ref)} and the start "
                            f"of commit {by_commit[-1].commit[:12]}; give more of the hash, "
                            f"or the run's file ({found[-1].path})")
    if ref.isdigit() and not by_commit:
        if not found:
            numbers = ", ".join(str(run.number) for run in runs.runs[-5:]) or "none"
            raise BaselineError(f"{where}: no run number {int(ref)} (the last ones: {numbers})")
        chosen = found[-1]
        if key is not None and chosen.key != dict(key):
            raise BaselineError(f"{where}: run {chosen.label} was made with other settings "
                                f"({settings_text(chosen.key)}; this run: {settings_text(key)}), so its "
                                "episodes are not this run's and cannot be paired")
        return chosen
    found = by_commit
    if not found:
        raise BaselineError(f"{where}: no run of a commit starting {ref!r}; {_recent(runs)}")
    if len({run.commit for run in found}) > 1:
        raise BaselineError(f"{where}: {ref!r} starts several commits "
                            f"({', '.join(sorted({r.commit[:12] for r in found}))}); give "
                            "more of the hash")
    paired = [run for run in found if key is None or run.key == dict(key)]
    if not paired:
        raise BaselineError(f"{where}: the runs of commit {found[-1].commit[:12]} were made "
                            f"with other settings ({settings_text(found[-1].key)}; this run: "
                            f"{settings_text(key or {})}), so their episodes are not this run's and "
                            "cannot be paired")
    return paired[-1]


def settings_text(key: Mapping[str, Any]) -> str:
    """A pairing key in words.

    >>> settings_text({"rl_env": "CartPole-v1", "rl_episodes": 6, "rl_scenarios": ["spike", "delay"]})
    'env CartPole-v1, episodes 6, scenarios spike,delay'
    """
    return ", ".join(
        f"{name.removeprefix('rl_')} {','.join(map(str, value)) if isinstance(value, list) else value}"
        for name, value in key.items() if value is not None) or "the defaults"


def _recent(runs: Runs) -> str:
    if not runs.runs:
        return "the folder holds no run"
    return "the last runs: " + ", ".join(run.label for run in runs.runs[-5:])
