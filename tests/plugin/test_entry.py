"""The entry point (``pytest11: rlaudit`` -> ``pytest_rlaudit._entry``): a plugin that cannot be
imported on this Python says so in one line, and pytest runs the other tests anyway."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# pytest with the entry module loaded by hand (``-p no:rlaudit`` keeps out whatever entry
# point the installed distribution declares), after ``HIDDEN`` (a module of the plugin) is
# made to fail on import, as a module does that uses what this Python lacks
RUN = """
import sys
if {hidden!r}:
    sys.modules[{hidden!r}] = None  # importing it raises ImportError
import pytest
raise SystemExit(pytest.main(["-p", "no:rlaudit", "-p", "pytest_rlaudit._entry",
                              "-p", "no:cacheprovider", *{args!r}]))
"""


def _pytest(folder: Path, *args: str, hidden: str = "") -> subprocess.CompletedProcess[str]:
    (folder / "test_unrelated.py").write_text("def test_unrelated():\n    assert 1 + 1 == 2\n")
    (folder / "pytest.ini").write_text("[pytest]\n")  # no parent's configuration
    return subprocess.run([sys.executable, "-c", RUN.format(hidden=hidden, args=[str(folder), *args])],
                          capture_output=True, text=True, cwd=folder, timeout=120)


def test_a_plugin_that_cannot_load_leaves_the_other_tests_running_and_says_so_in_one_line(tmp_path):
    out = _pytest(tmp_path, "-q", hidden="pytest_rlaudit.plugin.markers")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout
    lines = [line for line in out.stdout.splitlines() if "pytest-rlaudit could not load" in line]
    assert len(lines) == 1, out.stdout
    python = ".".join(map(str, sys.version_info[:3]))
    assert lines[0].startswith(f"pytest-rlaudit could not load on Python {python} (ModuleNotFoundError: "
                               "import of pytest_rlaudit.plugin.markers halted; None in sys.modules, raised at pytest_rlaudit/plugin/__init__.py:")
    assert lines[0].endswith("-p no:rlaudit turns it off)")  # and, before that, what to do
    assert "pip install --upgrade --force-reinstall pytest-rlaudit" in lines[0]
    assert "INTERNALERROR" not in out.stdout + out.stderr


def test_an_rl_option_is_refused_with_the_cause_when_the_plugin_cannot_load(tmp_path):
    out = _pytest(tmp_path, "--rl-audit", "--rl-episodes=3", hidden="pytest_rlaudit.plugin")
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage error
    assert "--rl-audit, --rl-episodes: pytest-rlaudit could not load on Python" in out.stderr
    assert "so pytest knows none of its options. Fix: pip install" in out.stderr
    assert "unrecognized arguments" not in out.stderr


def test_the_entry_module_loads_the_plugin_when_it_imports(tmp_path):
    out = _pytest(tmp_path, "-q", "--rl-episodes=3")  # an option only the plugin knows
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout and "could not load" not in out.stdout
    markers = _pytest(tmp_path, "--markers")
    assert "@pytest.mark.rl_scenario" in markers.stdout


def test_the_distribution_declares_the_entry_module():
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    if pyproject.is_file():  # in the clone: what the wheel will declare
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10: pytest's own dependency there
            import tomli as tomllib
        declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["entry-points"]["pytest11"]
    else:  # tests copied out of the clone beside an installed wheel (.ci/pythons.sh)
        from importlib.metadata import entry_points

        declared = {e.name: e.value for e in entry_points(group="pytest11")
                    if e.dist is not None and e.dist.name == "pytest-rlaudit"}
    assert declared == {"rlaudit": "pytest_rlaudit._entry"}


def test_an_unrelated_run_in_an_environment_with_the_plugin_installed_warns_of_nothing(tmp_path):
    """The entry module imports the plugin to catch what it raises, then names it in
    ``pytest_plugins``: pytest would warn that it cannot rewrite a module already imported
    (PytestAssertRewriteWarning, in every run of an editable install) unless told not to."""
    (tmp_path / "test_unrelated.py").write_text("def test_unrelated():\n    assert 1 + 1 == 2\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-W", "error::pytest.PytestAssertRewriteWarning", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed in" in out.stdout and "warning" not in out.stdout, out.stdout
