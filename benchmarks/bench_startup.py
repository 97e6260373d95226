"""Start-up cost of the plugin: pytest with it installed vs ``-p no:rlaudit``.

Runs ``python -m pytest -q -p no:cacheprovider <dir>`` on a throwaway directory of 50
trivial tests, alternating the two variants, and prints the median wall time of each and
their difference. Target: at most 50 ms more with the plugin loaded (it registers its
options, markers and session object, and imports nothing heavy).

    python benchmarks/bench_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 50.0


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per variant (default 15)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "test_plain.py").write_text(
            "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(50)))
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root)]
        variants = {"with rlaudit": base, "-p no:rlaudit": [*base, "-p", "no:rlaudit"]}
        for cmd in variants.values():  # warm the file cache and bytecode
            _time(cmd, root)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(args.runs):
            order = list(variants.items()) if i % 2 == 0 else list(variants.items())[::-1]
            for name, cmd in order:
                times[name].append(_time(cmd, root))
    medians = {name: statistics.median(t) * 1000 for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:<16} median {medians[name]:7.1f} ms   min {min(t) * 1000:7.1f} ms   "
              f"({len(t)} runs)")
    extra = medians["with rlaudit"] - medians["-p no:rlaudit"]
    verdict = "PASS" if extra <= TARGET_MS else "MISS"
    print(f"plugin start-up cost: {extra:+.1f} ms (median difference; target <= {TARGET_MS:.0f} "
          f"ms): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
