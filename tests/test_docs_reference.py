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

    # every public name, in the page a code host shows and in the site's full docstrings
    shown = reference.api() + reference.errors()
    full = reference.api_autodoc() + reference.errors_autodoc()
    for name in pytest_rlaudit.__all__:
        if not name.startswith("_") and name != "scenarios":
            assert f"`{name}`" in shown, name
            assert f"pytest_rlaudit.{name}\n" in full or \
                f"pytest_rlaudit.errors.{name}\n" in full, name
    for name in errors.__all__:
        assert f"| `{name}` |" in reference.errors()
        assert f"pytest_rlaudit.errors.{name}\n" in reference.errors_autodoc()


def test_write_only_rewrites_what_changed(reference, tmp_path):
    import shutil

    pages = tmp_path / "reference"
    shutil.copytree(reference.REFERENCE, pages, ignore=shutil.ignore_patterns("_generated"))
    (pages / "options.md").write_text((pages / "options.md").read_text().replace(
        "- `--rl-audit`: ", "- `--rl-audit`: stale "))
    first = reference.write(pages, tmp_path / "generated")
    assert sorted(p.name for p in first) == ["api.md", "errors.md", "options.md"]
    assert "stale" not in (pages / "options.md").read_text()
    stamps = {p: p.stat().st_mtime_ns for p in first}
    assert reference.write(pages, tmp_path / "generated") == []
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


def test_the_committed_reference_pages_are_the_code_s(reference):
    """The reference pages hold their generated parts, so that a code host shows them;
    a change to an option, marker, fixture, scenario, record field or public docstring
    must refresh them."""
    stale = reference.stale()
    assert stale == [], (f"docs/reference/ pages {stale} are stale: run "
                         f"`{reference.REFRESH}` and commit them")


def test_the_reference_pages_read_on_a_code_host(reference):
    """No Sphinx role, include or autodoc directive in what a code host shows of the
    pages the README links to: their content is plain Markdown."""
    import re

    for page in ("options", "markers", "fixtures", "scenarios", "api", "records", "errors"):
        text = (reference.REFERENCE / f"{page}.md").read_text(encoding="utf-8")
        shown = text.split("## Full docstrings")[0]  # the site alone adds these
        assert re.findall(r"\{[a-z:]+\}`|:[a-z]+:`|```\{(?:include|eval-rst)", shown) == [], page
        assert reference.plain(":mod:`x`") == "`x`"
