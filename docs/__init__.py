"""The documentation site; a package only so that pytest imports docs/conftest.py as
docs.conftest, apart from tests/conftest.py (--doctest-modules imports both)."""
