"""Root conftest: test-suite plugins, and the README's examples as tests (through Sybil).
The rlaudit plugin itself loads via its entry point."""

from pathlib import Path

import pytest

try:  # the dev extra's: the demo (quick start, first command) runs here without it
    from sybil import Sybil
    from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
except ImportError:
    Sybil = None

pytest_plugins = ["pytester"]


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's pytester, with pytest-randomly (in the dev extra, for the tests that run
    beside it) off in the inner runs, which assert an order; a test that wants it passes
    ``-p randomly``. (pytester clears PYTEST_ADDOPTS when it starts, so it is set here.)"""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester


# The README's ```python blocks run in order in one namespace, as one test (docs/pages.py);
# a block that cannot run here is preceded by <!-- skip: next "why" --> (an HTML comment
# GitHub does not show).
if Sybil is not None:
    from docs.pages import collector

    pytest_collect_file = collector(Sybil(parsers=[PythonCodeBlockParser(), SkipParser()],
                                          patterns=["README.md"]),
                                    only=Path(__file__).resolve().parent / "README.md")
