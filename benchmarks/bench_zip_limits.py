"""Peak memory of loading a crafted model zip: the bound on what a default load reads.

Why this workload. A model ``.zip`` from a stranger declares each member's expanded size,
and deflate packs 512 MiB of one repeated byte into half a megabyte: a 0.6 MB zip whose
``data`` member (the model's JSON settings, kilobytes normally) expands to 512 MiB is
read in full by a load that does not look first (read, decoded, parsed: more than twice
its size at once). pytest-rlaudit checks every member's declared size against a limit
before reading any (``world/agents/archives.py``); this shows what that saves, on the
bundled PPO zip's own members with its ``data`` padded (valid JSON still).

What it does. Each case is a fresh ``python -c`` subprocess that imports the package,
takes its peak resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), calls
``as_policy(zip, env="CartPole-v1")`` and takes the peak again; it prints both, the
growth, and how the load ended. With ``--base REV`` the crafted case runs at that commit
too (its ``pytest_rlaudit`` exported with ``git archive`` to a temporary folder), for the
before/after figures. Cases:

    intact zip      the bundled examples/ppo_cartpole.zip
    crafted zip     the same members, ``data`` padded with spaces to --mib MiB (deflated)

Run (from the repository root; about 20 s, most of it the base's full read)::

    python benchmarks/bench_zip_limits.py --base be56bd9
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "examples" / "ppo_cartpole.zip"

CHILD = """
import json, resource, sys
from pytest_rlaudit.world.agents import as_policy
import pytest_rlaudit.world.agents.sb3_load  # noqa: F401 (imports torch and SB3 first)
import stable_baselines3, torch  # noqa: F401
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    as_policy(sys.argv[1], env="CartPole-v1")
    outcome = "loaded"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:150]}"
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "after_kib": after, "outcome": outcome}))
"""


def crafted_zip(dst: Path, mib: int) -> Path:
    """The bundled zip with its ``data`` padded to ``mib`` MiB, written deflated in chunks."""
    with zipfile.ZipFile(BUNDLED) as src, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            payload = src.read(info)
            if info.filename != "data":
                out.writestr(info.filename, payload)
                continue
            with out.open("data", "w", force_zip64=True) as stream:
                stream.write(payload)
                left = mib * (1 << 20) - len(payload)
                chunk = b" " * (1 << 20)
                while left > 0:
                    stream.write(chunk[:left])
                    left -= len(chunk)
    return dst


def measure(path: Path, source: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(source))
    env.pop("RLAUDIT_MAX_MEMBER_MB", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, cwd=source,
                          capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=512, help="expanded size of data (MiB)")
    parser.add_argument("--base", help="a commit to measure the crafted zip at too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        crafted = crafted_zip(Path(tmp) / "crafted.zip", args.mib)
        print(f"crafted zip: {crafted.stat().st_size / 1e6:.2f} MB on disk, data expands to "
              f"{args.mib} MiB")
        sources = [("work tree", ROOT)]
        if args.base:
            base = Path(tmp) / "base"
            base.mkdir()
            archive = subprocess.run(["git", "archive", args.base, "pytest_rlaudit"], cwd=ROOT,
                                     capture_output=True, check=True).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(base, filter="data")
            sources.append((f"base {args.base}", base))
        growth = {}
        for label, source in sources:
            for case, path in (("intact zip", BUNDLED), ("crafted zip", crafted)):
                r = measure(path, source)
                grew = (r["after_kib"] - r["before_kib"]) / 1024
                growth[(label, case)] = grew
                print(f"{label:>16} | {case:<11} | peak {r['after_kib'] / 1024:7.0f} MiB | "
                      f"load grew it {grew:7.1f} MiB | {r['outcome']}")
        if args.base:
            before = growth[(sources[1][0], "crafted zip")]
            after = growth[("work tree", "crafted zip")]
            print(f"growth of the crafted load: base {before:.0f} MiB, work tree {after:.1f} MiB "
                  f"(ratio base / work tree {before / max(after, 0.1):.0f})")


if __name__ == "__main__":
    main()
