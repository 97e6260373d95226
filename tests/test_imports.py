"""Loading the plugin or importing the package must not import heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "stable_baselines3", "sb3_contrib", "hypothesis")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_and_plugin_load_import_nothing_heavy():
    loaded = _modules_after("import pytest_rlaudit, pytest_rlaudit.plugin")
    assert not loaded & {*HEAVY, "gymnasium", "scipy"}


def test_a_schedule_is_plain_data():
    loaded = _modules_after("from pytest_rlaudit import Schedule\n"
                            "Schedule.spike(at=3, duration=2, speed=4).describe()")
    assert not loaded & {*HEAVY, "gymnasium", "scipy", "numpy"}


def test_a_numpy_agent_audit_imports_no_torch():
    loaded = _modules_after(
        "import numpy as np\n"
        "from pytest_rlaudit import audit\n"
        "audit(lambda o: (o[:, 2] > 0).astype(int), 'CartPole-v1', scenarios=['delay'], episodes=2)"
    )
    assert "gymnasium" in loaded  # the audit really ran
    assert not loaded & set(HEAVY)


def test_pytest_with_the_plugin_imports_nothing_heavy(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        f"    heavy = [m for m in {(*HEAVY, 'gymnasium', 'scipy')!r} if m in sys.modules]\n"
        "    print('HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                          str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert "HEAVY=\n" in out.stdout, out.stdout
