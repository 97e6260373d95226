"""Baseline files: a run's audit results saved for later comparison.

A baseline is one JSON document: per audited test its scenario, per-episode returns with
their env seeds, the nominal returns they pair with, ratio, interval and rating; plus the
agent and env of each, the run's options, the plugin version and the machine. It is
written atomically (a temporary file renamed over the target) and read back with every
field checked, so a truncated or hand-broken file is a clear error, never a wrong number.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "baseline.json"
>>> doc = baseline_document([], version="0.1.0", options={"rl_seed": 0})
>>> _ = write_baseline(doc, path)
>>> load_baseline(path)["complete"]
True
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import BaselineError
from .records import Record, RecordError, validate

__all__ = ["BASELINE_SCHEMA", "SCHEMAS", "KIND", "baseline_document", "write_baseline", "load_baseline",
           "check_writable", "machine_info"]

#: Version of the baseline layout this version writes.
BASELINE_SCHEMA = 1
#: The layouts it reads; any other (a newer one, or a number no version wrote) is refused,
#: not misread.
SCHEMAS = (1,)
#: The JSON types of the top-level fields besides ``results``, checked when present.
_TOP: dict[str, tuple[type, ...]] = {
    "complete": (bool,), "incomplete": (str, type(None)), "missing": (list,),
    "options": (dict,), "version": (str,), "created": (str,), "machine": (dict,),
    "run": (dict,),  # a run of a history folder (.history)
}
KIND = "pytest-rlaudit baseline"
#: What every saved result must carry for a paired comparison.
_PACKAGES = ("numpy", "scipy", "gymnasium", "torch", "stable-baselines3", "sb3-contrib",
             "hypothesis", "pytest")


def machine_info() -> dict[str, Any]:
    """Python, platform, CPU count and the versions of the numerical stack (read from
    package metadata: nothing is imported)."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "node": platform.node(), "packages": versions}


def baseline_document(records: Iterable[Record], *, version: str,
                      options: dict[str, Any], missing: Sequence[str] = (),
                      incomplete: str | None = None) -> dict[str, Any]:
    """The baseline of a run. ``missing`` lists audits that ran no result and
    ``incomplete`` says why the run stopped early; either marks it ``complete: false``."""
    results = sorted(records, key=lambda r: (r.get("order", 0), r["nodeid"]))
    return {
        "schema": BASELINE_SCHEMA, "kind": KIND, "tool": "pytest-rlaudit", "version": version,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "complete": not missing and incomplete is None,
        "incomplete": incomplete, "missing": list(missing),
        "options": options, "machine": machine_info(), "results": results,
    }


def write_baseline(doc: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``doc`` to ``path`` atomically: readers see the old file or the new, whole."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


def check_writable(path: str | os.PathLike[str]) -> None:
    """Refuse to overwrite a file that exists and is not a baseline (a typo in the path,
    a truncated baseline worth a look): the caller turns this into a usage error."""
    target = Path(path)
    if target.is_dir():
        raise BaselineError(f"--rl-save {target}: is a directory; give a file path such as "
                            f"{target / 'rl-baseline.json'}")
    if target.exists():
        try:
            load_baseline(target)
        except BaselineError as exc:
            raise BaselineError(f"--rl-save {target}: the file exists and is not a valid "
                                f"baseline, so it is not overwritten ({exc}). Move it away or "
                                "save elsewhere.") from None


_JSON = {bool: "true or false", str: "a string", type(None): "null", list: "a list",
         dict: "an object"}


def load_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a baseline; anything malformed is a :class:`BaselineError` that
    names the file, the problem and the fix."""
    source = Path(path)
    fix = "re-create it with --rl-save on the baseline commit"
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"baseline {source} does not exist; create it with "
                            f"pytest --rl-audit --rl-save {source}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"baseline {source} cannot be read ({exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline {source} is not valid JSON ({exc}); it may be truncated "
                            f"or edited by hand: {fix}") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise BaselineError(f"{source} is not a pytest-rlaudit baseline (no \"kind\": "
                            f"\"{KIND}\"); {fix}")
    schema = doc.get("schema")
    if type(schema) is not int or schema not in SCHEMAS:  # bool is an int, and no schema
        newer = type(schema) is int and schema > max(SCHEMAS)
        raise BaselineError(
            f"baseline {source} has schema {schema!r}, " + (
                "from a newer pytest-rlaudit: upgrade pytest-rlaudit or " if newer else
                "which no pytest-rlaudit writes: ")
            + f"{fix} (this version reads schema {', '.join(map(str, SCHEMAS))})")
    for key, kinds in _TOP.items():
        value = doc.get(key)
        if key in doc and (not isinstance(value, kinds)
                           or (isinstance(value, bool) and bool not in kinds)):
            raise BaselineError(f"baseline {source}: {key!r} is {_JSON.get(type(value), 'a number')}"
                                f", not {' or '.join(_JSON[k] for k in kinds)}; {fix}")
    results = doc.get("results")
    if not isinstance(results, list):
        raise BaselineError(f"baseline {source} has no results list; {fix}")
    seen: set[str] = set()
    for i, rec in enumerate(results):
        try:
            validate(rec)
        except RecordError as exc:
            raise BaselineError(f"baseline {source}: result {i} {exc}; {fix}") from None
        if rec["nodeid"] in seen:  # which of the two would a comparison pair with?
            raise BaselineError(f"baseline {source} holds test {rec['nodeid']} twice (saved "
                                f"with every attempt of a rerun?); {fix}")
        seen.add(rec["nodeid"])
    doc.setdefault("complete", True)
    return doc
