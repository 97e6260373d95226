"""What installing pytest-rlaudit costs an unrelated pytest run, as a user pays it.

Builds fresh virtualenvs (``python -m venv``, with pip) and times, in each, the collection
of a throwaway project that has one plain test and nothing of ours::

    VENV/bin/python -m pytest --co -q -p no:cacheprovider --rootdir P -c P/pytest.ini

as the wall time of the whole subprocess (interpreter start-up, plugin loading, collection).
The venvs:

    base                  pytest alone
    base+hypothesis       base plus hypothesis (which registers a pytest plugin)
    base+xdist            base plus pytest-xdist
    plugin                ``pip install <repo>``: a regular (non-editable) install of the
                          project, with whatever [project.dependencies] declare
    plugin -p no:rlaudit  the plugin venv with our plugin disabled: our dependencies' pytest
                          plugins without our own modules
    plugin[hypothesis]    plugin plus the project's [hypothesis] extra, when pyproject.toml
                          defines one

The plugin venv is built first and ``pip freeze`` of it constrains the others, so every
package they share (pytest, pluggy, hypothesis, pytest-xdist, ...) has the same version;
what the plugin venv lacks comes at its newest. The project is copied out of the repo and
built into a wheel once, so the build leaves nothing in the work tree. A constraint that no
torch release satisfies makes any install that would pull torch fail at once.

PYTHONDONTWRITEBYTECODE (and PYTHONPATH, PYTEST_ADDOPTS, ...) are removed from the timed
runs' environment, and each variant runs once untimed first, so every venv imports from
.pyc files. Variants then alternate round-robin, each run starting one further along, to
spread machine noise; the table gives medians and their differences from base. Exit code
0 whatever the figures (a failed build or run is an error). Target: the plugin venv at most
30 ms slower than base.

    python benchmarks/bench_startup.py [--runs 15] [--repo PATH] [--keep DIR] [--against PATH]

``--against PATH`` times another checkout of the project too (``git archive BASE | tar -x
-C PATH``), in a venv of its own with the same pins, in the same round-robin: on a busy
machine only a difference measured in the same rounds means anything.

``--keep DIR`` builds the venvs in DIR and leaves them there; a later run reuses each venv
whose requirements are unchanged (and reinstalls only the project when just its source
changed). Without it everything lives in a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

TARGET_MS = 30.0
DEFAULT_REPO = Path(__file__).resolve().parent.parent
# Dropped from the timed runs' environment: bytecode must be written and read alike in every
# venv, and nothing from outside may add paths, options or plugins (or turn autoload off).
DROPPED_ENV = ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "VIRTUAL_ENV",
               "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
COPY_IGNORE = (".git", "__pycache__", "*.pyc", "*.egg-info", "build", "dist", ".tox", ".venv", ".nox",
               ".pytest_cache", ".ruff_cache", ".hypothesis", "rlaudit-report")
NO_TORCH = "torch<0  # no release matches: the core install must never pull torch\n"
PLUGINS_SCRIPT = (
    "import importlib.metadata as m\n"
    "print(' '.join(sorted({f'{e.dist.name}=={e.dist.version}' for e in m.entry_points(group='pytest11')}))"
    " or '-')\n"
)


@dataclass
class Variant:
    name: str
    venv: Path
    args: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}


def _run(cmd: Sequence[str | Path], cwd: Path | None = None) -> str:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=_env(), cwd=cwd)
    if out.returncode != 0:
        raise SystemExit(f"failed ({out.returncode}): {' '.join(map(str, cmd))}\n{out.stdout}{out.stderr}")
    return out.stdout


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()


def _build_project(repo: Path, work: Path, name: str = "") -> tuple[Path, str]:
    """Copy the project out of the repo, build its wheel; return the wheel and a source digest."""
    src, wheels = work / f"src{name}", work / f"wheel{name}"
    for d in (src, wheels):
        shutil.rmtree(d, ignore_errors=True)
    ignore_names = shutil.ignore_patterns(*COPY_IGNORE)

    def ignore(folder: str, names: list[str]) -> set[str]:  # never copy the work folder into itself
        skipped = set(ignore_names(folder, names))
        return skipped | {n for n in names if (Path(folder) / n).resolve() == work.resolve()}

    shutil.copytree(repo, src, ignore=ignore)
    files = sorted(p for p in src.rglob("*") if p.is_file())
    digest = _digest(*(part for p in files for part in (str(p.relative_to(src)), p.read_bytes())))
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, src])
    (wheel,) = wheels.glob("*.whl")
    return wheel, digest


def _venv(path: Path, requirements: list[str], constraints: str, deps_key: str,
          project: tuple[Path, str] | None = None) -> bool:
    """Create (or reuse, when built from the same inputs) a venv; True if it was (re)built.

    ``project`` is the wheel and source digest of a venv holding the project: when only the
    source changed, the project alone is reinstalled.
    """
    stamp, src_stamp = path / "bench-deps.txt", path / "bench-src.txt"
    key = _digest(deps_key, constraints, *requirements)
    if stamp.is_file() and stamp.read_text() == key:
        if project is not None and src_stamp.read_text() != project[1]:
            _run([path / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps",
                  "--force-reinstall", project[0]])
            src_stamp.write_text(project[1])
        return False
    shutil.rmtree(path, ignore_errors=True)
    _run([sys.executable, "-m", "venv", path])
    constraints_file = path / "bench-constraints.txt"
    constraints_file.write_text(constraints)
    _run([path / "bin" / "python", "-m", "pip", "install", "--quiet", "-c", constraints_file, *requirements])
    if project is not None:
        src_stamp.write_text(project[1])
    stamp.write_text(key)
    return True


def _build_venvs(repo: Path, work: Path, against: Path | None = None) -> tuple[list[Variant], list[str]]:
    """The variants to time, and notes on how the venvs were made."""
    wheel, src_digest = _build_project(repo, work)
    with zipfile.ZipFile(wheel) as zf:  # what pip will see: Requires-Dist and Provides-Extra
        (name,) = (n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(name).decode().splitlines()
    deps_key = "\n".join(line for line in metadata if line.startswith(("Requires-Dist:", "Provides-Extra:")))
    has_extra = "Provides-Extra: hypothesis" in metadata
    venvs, notes = work / "venvs", []
    built = [_venv(venvs / "plugin", [str(wheel)], NO_TORCH, deps_key, (wheel, src_digest))]
    freeze = _run([venvs / "plugin" / "bin" / "python", "-m", "pip", "freeze"]).splitlines()
    pins = NO_TORCH + "".join(f"{line}\n" for line in freeze
                              if "==" in line and not line.startswith("pytest-rlaudit"))
    variants = [Variant("base", venvs / "base"), Variant("base+hypothesis", venvs / "base-hypothesis"),
                Variant("base+xdist", venvs / "base-xdist"), Variant("plugin", venvs / "plugin"),
                Variant("plugin -p no:rlaudit", venvs / "plugin", ["-p", "no:rlaudit"])]
    built += [_venv(venvs / "base", ["pytest"], pins, ""),
              _venv(venvs / "base-hypothesis", ["pytest", "hypothesis"], pins, ""),
              _venv(venvs / "base-xdist", ["pytest", "pytest-xdist"], pins, "")]
    if has_extra:
        variants.append(Variant("plugin[hypothesis]", venvs / "plugin-hypothesis"))
        built.append(_venv(venvs / "plugin-hypothesis", [f"{wheel}[hypothesis]"], pins, deps_key,
                           (wheel, src_digest)))
    else:
        notes.append("pyproject.toml has no [hypothesis] extra: plugin[hypothesis] not measured")
    if against is not None:  # the same venv but for the project: another commit's
        other, other_digest = _build_project(against, work, "-against")
        variants.append(Variant("plugin (--against)", venvs / "plugin-against"))
        built.append(_venv(venvs / "plugin-against", [str(other)], pins, deps_key, (other, other_digest)))
        notes.append(f"plugin (--against): {against}")
    pytest_pin = next((line for line in freeze if line.startswith("pytest==")), "pytest")
    notes.insert(0, f"venvs in {venvs}: {sum(built)} built, {len(built) - sum(built)} reused; "
                    f"{pytest_pin} in all (pins from the plugin venv)")
    return variants, notes


def _time(variant: Variant, proj: Path) -> float:
    cmd: list[str | Path] = [variant.python, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                             "--rootdir", proj, "-c", proj / "pytest.ini", *variant.args]
    start = time.perf_counter()
    out = _run(cmd, cwd=proj)
    elapsed = time.perf_counter() - start
    if "1 test collected" not in out:
        raise SystemExit(f"{variant.name}: unexpected output\n{out}")
    return elapsed


def _measure(variants: list[Variant], work: Path, runs: int) -> None:
    proj = work / "project"
    shutil.rmtree(proj, ignore_errors=True)
    proj.mkdir(parents=True)
    (proj / "pytest.ini").write_text("[pytest]\n")  # stops the search for a parent's config
    (proj / "test_plain.py").write_text("def test_one():\n    assert True\n")
    for v in variants:  # untimed: writes the .pyc files, warms the file cache
        _time(v, proj)
    for i in range(runs):
        k = i % len(variants)
        for v in variants[k:] + variants[:k]:
            v.times.append(_time(v, proj))


def _report(variants: list[Variant], runs: int) -> None:
    med = {v.name: statistics.median(v.times) * 1000 for v in variants}
    base = med["base"]
    print(f"\n`python -m pytest --co -q` on one plain test: whole-process wall time, {runs} runs per "
          "variant, round-robin")
    print(f"{'variant':<22}{'median ms':>10}{'min ms':>9}{'vs base':>10}{'ratio':>7}  pytest11 plugins")
    seen: dict[Path, str] = {}
    for v in variants:
        if v.venv not in seen:
            seen[v.venv] = _run([v.python, "-I", "-c", PLUGINS_SCRIPT]).strip()  # -I: not the cwd
        plugins = seen[v.venv] + (f" ({' '.join(v.args)})" if v.args else "")
        diff = "" if v.name == "base" else f"{med[v.name] - base:+.1f}"
        print(f"{v.name:<22}{med[v.name]:10.1f}{min(v.times) * 1000:9.1f}{diff:>10}"
              f"{med[v.name] / base:7.2f}  {plugins}")
    own = med["plugin"] - med["plugin -p no:rlaudit"]
    print(f"our own modules (plugin vs plugin -p no:rlaudit): {own:+.1f} ms; our dependencies' plugins "
          f"(plugin -p no:rlaudit vs base): {med['plugin -p no:rlaudit'] - base:+.1f} ms")
    if "plugin (--against)" in med:
        print(f"this tree vs --against: {med['plugin'] - med['plugin (--against)']:+.1f} ms "
              f"(medians); --against adds {med['plugin (--against)'] - base:.1f} ms to base")
    extra = med["plugin"] - base
    print(f"installing pytest-rlaudit adds {extra:.1f} ms (target <= {TARGET_MS:.0f} ms): "
          f"{'PASS' if extra <= TARGET_MS else 'MISS'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per variant (default 15)")
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO,
                        help="project to install (default: the repo holding this script)")
    parser.add_argument("--against", type=Path, metavar="PATH",
                        help="also time another checkout of the project (a base commit: "
                             "git archive BASE | tar -x -C PATH), in the same rounds")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="build the venvs in DIR and keep them; reuse those already built there")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        variants, notes = _build_venvs(args.repo.resolve(), work,
                                       args.against.resolve() if args.against else None)
        built = time.perf_counter()
        _measure(variants, work, args.runs)
        for note in notes:
            print(note)
        _report(variants, args.runs)
    end = time.perf_counter()
    print(f"(venvs {built - start:.0f} s, timing {end - built:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
