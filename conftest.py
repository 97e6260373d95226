"""Root conftest: test-suite plugins. The rlaudit plugin itself loads via its entry point."""

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's pytester, with pytest-randomly (in the dev extra, for the tests that run
    beside it) off in the inner runs, which assert an order; a test that wants it passes
    ``-p randomly``. (pytester clears PYTEST_ADDOPTS when it starts, so it is set here.)"""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester
