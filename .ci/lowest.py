"""Print pip constraints that pin every dependency to the lowest version pyproject.toml admits.

Ranges are claims until tested: CI installs the project under these constraints in a fresh
virtualenv and runs the suite, so a lower bound that no longer works fails CI instead of
a user's install. Covers [project.dependencies] and every extra; torch is pinned to the
local CPU build (2.13.0), the only torch this project installs.

    python .ci/lowest.py [--output lowest.txt]      # default: standard output
    pip install -c lowest.txt torch==2.13.0 -e ".[dev]"
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import tomllib

_LOWER = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([^,;\s]+)")


def lowest(pyproject: Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = [*project.get("dependencies", ()),
                    *(r for extra in project.get("optional-dependencies", {}).values() for r in extra)]
    pins: dict[str, str] = {"torch": "2.13.0"}
    for requirement in requirements:
        match = _LOWER.match(requirement)
        if match is None:
            raise SystemExit(f"{pyproject}: {requirement!r} has no '>=' lower bound to test")
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
        if pins.setdefault(name, match.group(2)) != match.group(2):
            raise SystemExit(f"{pyproject}: {name} has two lower bounds: {pins[name]} and "
                             f"{match.group(2)}; keep one")
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, help="write here instead of standard output")
    args = parser.parse_args()
    text = "\n".join(lowest(Path(__file__).resolve().parent.parent / "pyproject.toml")) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
