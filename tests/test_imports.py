"""Loading the plugin or importing the package must not import heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "stable_baselines3", "sb3_contrib", "hypothesis", "ray", "tqdm", "ale_py", "cv2")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_and_plugin_load_import_nothing_heavy():
    loaded = _modules_after("import pytest_rlaudit, pytest_rlaudit._entry")  # what pytest loads
    assert "pytest_rlaudit.plugin" in loaded
    assert not loaded & {*HEAVY, "gymnasium", "scipy", "numpy"}
    assert not {m for m in loaded if m.startswith("pytest_rlaudit.reports")}


def test_a_schedule_is_plain_data():
    loaded = _modules_after("from pytest_rlaudit import Schedule\n"
                            "Schedule.spike(at=3, duration=2, speed=4).describe()")
    assert not loaded & {*HEAVY, "gymnasium", "scipy", "numpy"}


def test_the_public_api_imports_scipy_stats_only_when_a_statistic_is_computed():
    # a test file's import at collection, in every xdist worker, also when audits are skipped
    api = "from pytest_rlaudit import assert_robust, audit, check_robust, tolerance\n"
    assert not _modules_after(api) & {"scipy", "scipy.stats", "scipy.optimize"}
    computed = _modules_after(api + "from pytest_rlaudit.stats.paired import paired_ratio_ci\n"
                              "paired_ratio_ci([1.0, 2.0, 3.0], [1.0, 2.0, 2.5], seed=0)")
    assert "scipy.stats" in computed


@pytest.mark.needs_torch  # SB3 in a subprocess
def test_loading_an_sb3_zip_for_an_audit_builds_no_optimizer():
    # a torch optimizer's first add_param_group imports torch._dynamo: 1.5-2.5 s a process
    zip_path = Path(__file__).parents[1] / "examples" / "ppo_cartpole.zip"
    loaded = _modules_after(
        "import numpy as np\nfrom pytest_rlaudit import as_policy\n"
        f"policy = as_policy({str(zip_path)!r}, env='CartPole-v1')\n"
        "policy.act(np.zeros((1, 4), np.float32), None)")
    assert "torch" in loaded and "torch._dynamo" not in loaded


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


def test_an_unrelated_pytest_run_imports_no_report_renderer(tmp_path):
    # the renderers (summary, rows, badges, html, chart, markdown) serve audits: a run
    # without one, with or without a JUnit file, never imports them
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        "def pytest_unconfigure(config):\n"  # after every plugin's sessionfinish
        "    ours = sorted(m for m in sys.modules if m.startswith('pytest_rlaudit.'))\n"
        "    print('OURS=' + ','.join(ours))\n"
    )
    for extra in ([], ["--junitxml", str(tmp_path / "junit.xml")]):
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                              *extra, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
        (line,) = [x for x in out.stdout.splitlines() if x.startswith("OURS=")]
        loaded = set(line[len("OURS="):].split(","))
        assert "pytest_rlaudit.plugin" in loaded  # the plugin did load
        assert not {m for m in loaded if m.startswith("pytest_rlaudit.reports")}, extra


def test_the_public_hall_lists_the_design_names_and_every_error_still_imports_from_the_top():
    import pytest_rlaudit
    from pytest_rlaudit import errors

    design = {"audit", "assert_robust", "assert_no_regression", "assert_deterministic",
              "Scenario", "Schedule", "AuditResult", "RobustnessError", "as_policy", "scenarios"}
    assert design <= set(pytest_rlaudit.__all__)
    # errors live in pytest_rlaudit.errors; the hall lists the two a test catches
    listed = set(errors.__all__) & set(pytest_rlaudit.__all__)
    assert listed == {"RobustnessError", "RLAuditError"}
    for name in errors.__all__:  # earlier releases listed them at the top: they still work
        assert getattr(pytest_rlaudit, name) is getattr(errors, name)
    from pytest_rlaudit import MisloadedAgentError  # noqa: F401
    from pytest_rlaudit.verdicts.assertions import RobustnessError

    assert RobustnessError is errors.RobustnessError and issubclass(RobustnessError, AssertionError)


def test_the_import_lines_of_the_readme_and_the_docs_work():
    import importlib
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for module, names in re.findall(r"^\s*from (pytest_rlaudit[\w.]*) import ([\w, ]+)$",
                                        text, re.M):
            imported = importlib.import_module(module)
            for name in (n.strip() for n in names.split(",")):
                assert hasattr(imported, name), f"{page.name}: from {module} import {name}"


def test_without_hypothesis_the_strategies_name_the_extra_that_installs_it(monkeypatch):
    import sys

    import pytest

    from pytest_rlaudit import find_breaking_schedule

    monkeypatch.setitem(sys.modules, "hypothesis", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "pytest_rlaudit.strategies", raising=False)
    monkeypatch.delitem(sys.modules, "pytest_rlaudit.world.strategies", raising=False)
    with pytest.raises(ImportError, match=r"pytest_rlaudit\.strategies needs hypothesis, which "
                                          r"is not installed: pip install 'pytest-rlaudit\[hypothesis\]'"):
        import pytest_rlaudit.strategies  # noqa: F401
    with pytest.raises(ImportError, match=r"find_breaking_schedule needs hypothesis.*\[hypothesis\]"):
        find_breaking_schedule("random", "CartPole-v1")


def test_ratings_and_verdicts_need_neither_numpy_nor_scipy():
    loaded = _modules_after("from pytest_rlaudit.stats.ratings import rating, verdict, RATINGS\n"
                            "assert rating(0.83) == 'MILD'\n"
                            "assert verdict(0.9, (0.85, 0.95), 0.8, 'confident').passed")
    assert not loaded & {"numpy", "scipy", "gymnasium", *HEAVY}


def test_the_stats_facade_keeps_every_public_name():
    import pytest_rlaudit.stats as stats
    from pytest_rlaudit.stats import paired, ratings, runs, sequential

    homes = {name: getattr(stats, name) for name in stats.__all__}
    # by name, not identity: an in-process pytester run earlier in this process may have
    # dropped a submodule the facade had already read, and it is imported afresh here
    def home(obj):
        return obj.__module__, obj.__qualname__

    assert home(homes["paired_ratio_ci"]) == home(paired.paired_ratio_ci)
    assert home(homes["adaptive_sample"]) == home(sequential.adaptive_sample)
    assert homes["RATINGS"] == ratings.RATINGS
    assert set(stats.__all__) == {*paired.__all__, *sequential.__all__, *runs.__all__,
                                  *(n for n in ratings.__all__ if n not in ("Rating", "Mode"))}
