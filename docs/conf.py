"""Sphinx configuration of the pytest-rlaudit docs (DESIGN.md section 18).

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs site   # warnings are errors, as in CI (.ci/run)
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE / "_ext"))  # rlaudit_reference: the generated reference

import pytest_rlaudit  # noqa: E402  (after the path: the package is installed, -e or not)

project = "pytest-rlaudit"
author = "the pytest-rlaudit authors"
copyright = "the pytest-rlaudit authors"
release = version = pytest_rlaudit.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "rlaudit_reference",  # writes reference/_generated/*.md from the code at each build
]
source_suffix = {".md": "markdown"}
root_doc = "index"
# _generated holds fragments the reference pages {include}, not pages of their own;
# conftest.py runs the pages' examples in the test suite (sybil), it is not a page.
exclude_patterns = ["_build", "reference/_generated", "conftest.py", "**/.pytest_cache"]

# MyST: ::: fences for directives, definition lists; #anchors on headings to level 3
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc: signatures as written (not the evaluated annotations), members in source order
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_default_options = {"undoc-members": False}
# Cross-references our docstrings make to names outside these pages (numpy, gymnasium,
# private helpers) stay plain text instead of failing the strict build.
nitpicky = False
# Keep -- as typed: docutils' smart quotes would print --rl-agent with an en dash.
smartquotes = False

html_theme = "furo"
html_title = f"pytest-rlaudit {release}"
html_static_path = ["_static"]
