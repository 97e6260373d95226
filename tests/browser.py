"""Headless Chromium for the tests of HTML pages (the report, the history page)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def chromium(page: Path, out: Path, size: tuple[int, int] = (1280, 3000)
             ) -> tuple[str, list[str], Path]:
    """Render ``page`` in headless Chromium: (the DOM, its console messages, a screenshot
    of its first ``size`` pixels). Chromium logs every console message (script errors,
    blocked loads) as ``:CONSOLE``."""
    if os.environ.get("RLAUDIT_NO_BROWSER") == "1":
        pytest.skip("RLAUDIT_NO_BROWSER=1: the browser test is off")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed: `apt-get install chromium` (or set "
                    "RLAUDIT_NO_BROWSER=1 to skip the browser test)", pytrace=False)
    shot = out / f"{page.stem}.png"
    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={out / 'profile'}", f"--screenshot={shot}", "--dump-dom",
         f"--window-size={size[0]},{size[1]}", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console, shot
