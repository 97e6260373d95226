"""Make the docs' pictures of the report from the bundled agents, in one command:

    python docs/make_figures.py

It runs the plugin's zero-config audit of ``examples/ppo_cartpole.zip`` (the fragile
bundled agent) with ``--rl-report`` and ``--rl-videos`` into a temporary folder, then
writes ``docs/_static/report.png`` (the first screen of ``index.html`` as headless
Chromium draws it) and ``docs/_static/failure.gif`` (the GIF of its worst failure: the
perturbed episode beside its nominal twin). Nothing is drawn by hand, so a change to the
report shows in the docs the next time this runs.

Needs the ``plot`` extra, pygame (``pip install "gymnasium[classic-control]"``, for
CartPole to render) and ``chromium`` on the PATH.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "docs" / "_static"
AUDIT = ["--rl-audit", f"--rl-agent={ROOT / 'examples' / 'ppo_cartpole.zip'}",
         "--rl-env=CartPole-v1", "--rl-episodes=10", "--rl-scenarios=jitter,delay,spike,speed_5x",
         "--rl-videos", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]


def report(folder: Path) -> dict:
    """Run the audit into ``folder``; its summary.json. The run fails (the agent breaks
    under spike and speed_5x): that is what the pictures show."""
    run = subprocess.run([sys.executable, "-m", "pytest", *AUDIT, f"--rl-report={folder}"],
                         cwd=folder.parent, capture_output=True, text=True, check=False)
    summary = folder / "summary.json"
    if not summary.exists():
        sys.exit(f"the audit wrote no report:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return json.loads(summary.read_text())


def screenshot(page: Path, out: Path, size: tuple[int, int] = (1280, 900)) -> None:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu",
                        f"--user-data-dir={profile}", f"--screenshot={out}",
                        f"--window-size={size[0]},{size[1]}", "--hide-scrollbars",
                        page.resolve().as_uri()], check=True, capture_output=True, timeout=120)


def main() -> None:
    STATIC.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "report"
        doc = report(folder)
        screenshot(folder / "index.html", STATIC / "report.png")
        filmed = [r["video"] for r in doc["results"] if (r.get("video") or {}).get("file")]
        if not filmed:
            sys.exit("no failure was filmed: is pygame installed (gymnasium[classic-control])?")
        shutil.copyfile(folder / filmed[0]["file"], STATIC / "failure.gif")
    print(f"wrote {STATIC / 'report.png'} and {STATIC / 'failure.gif'}")


if __name__ == "__main__":
    main()
