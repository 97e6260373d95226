"""The docs' generated reference (docs/_ext/rlaudit_reference.py) covers the code: every
option, scenario, record field and public name. Cheap: the generating functions alone, no
Sphinx build (CI builds the site strictly: .ci/run's docs stage)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_rlaudit import scenarios
from pytest_rlaudit.auditing.records import FIELDS
from pytest_rlaudit.plugin.markers import MARKERS
from pytest_rlaudit.plugin.options import OPTIONS

_PATH = Path(__file__).resolve().parent.parent / "docs" / "_ext" / "rlaudit_reference.py"


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location("rlaudit_reference", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_option_with_its_ini_key_and_help(reference):
    text = reference.options()
    for option in OPTIONS:
        assert f"`{option.flag}" in text and f"`{option.dest}`" in text
        assert option.help.split()[0] in text
    assert "%%" not in text  # argparse's escape, undone


def test_every_scenario_and_its_parameters(reference):
    text = reference.scenarios()
    for name in scenarios.names():
        assert f"`{name}`" in text
        for param in scenarios.get(name).params:
            assert f"{param}=" in text


def test_every_record_field_and_summary_key(reference):
    text = reference.records()
    for key in FIELDS:
        assert f"`{key}`" in text
    summary = reference.summary()  # raises when aggregates() and the docs disagree
    assert "`aggregates`" in summary and "`reference_kind`" in summary


def test_markers_fixtures_errors_and_the_public_api(reference):
    markers = reference.markers()
    for line in MARKERS:
        assert f"## `{line.split('(')[0].split(':')[0]}`" in markers
    fixtures = reference.fixtures()
    for name in ("rl_agent", "rl_env", "rl_scenario", "rl_audit"):
        assert f"## `{name}`" in fixtures
    assert "warn_if_overridden" not in fixtures  # a hook helper, not a fixture
    import pytest_rlaudit
    import pytest_rlaudit.errors as errors

    documented = reference.api() + reference.errors()
    for name in pytest_rlaudit.__all__:
        if not name.startswith("_") and name != "scenarios":
            assert f"pytest_rlaudit.{name}\n" in documented or \
                f"pytest_rlaudit.errors.{name}\n" in documented, name
    for name in errors.__all__:
        assert f"pytest_rlaudit.errors.{name}\n" in reference.errors()


def test_write_only_rewrites_what_changed(reference, tmp_path):
    first = reference.write(tmp_path)
    assert sorted(p.name for p in first) == sorted(f"{n}.md" for n in reference.PAGES)
    stamps = {p: p.stat().st_mtime_ns for p in first}
    reference.write(tmp_path)
    assert {p: p.stat().st_mtime_ns for p in first} == stamps


def test_a_page_is_one_test_its_examples_run_in_order_past_their_skips(pytester):
    """docs/pages.py: under xdist a page's examples must not part (they share a namespace,
    and a skip directive applies to the next one); a failure names the example's line."""
    pytester.makeconftest(
        "from sybil import Sybil\n"
        "from sybil.parsers.myst import PythonCodeBlockParser, SkipParser\n"
        "from docs.pages import collector\n"
        "pytest_collect_file = collector(Sybil(parsers=[PythonCodeBlockParser(), "
        "SkipParser()], patterns=['*.md']))\n")
    block = "```python\n{}\n```\n\n"
    pytester.makefile(".md", good=block.format("x = 1") + '% skip: next "not here"\n\n'
                      + block.format("raise SystemExit('ran')") + block.format("assert x == 1"),
                      bad=block.format("y = 1") + block.format("assert y == 2"))
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*PageFailure: bad.md, the example at line 5: "
                                 "AssertionError*"])
