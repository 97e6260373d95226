"""Runs the docs' examples as tests, through Sybil.

Every ```python block of a page under docs/ is an example: the blocks of one page share a
namespace and run in order, from the repository root (so ``examples/ppo_cartpole.zip``
resolves wherever pytest was started), as one test per page (docs/pages.py). A block that
cannot run here (a cluster, a hub download, a long audit) is preceded by
``% skip: next "why"``; bash, yaml, text and json blocks are not executed.
"""

from sybil import Sybil
from sybil.parsers.myst import DocTestDirectiveParser, PythonCodeBlockParser, SkipParser

from docs.pages import collector

# Sphinx's configuration and extensions import sphinx: not test modules (--doctest-modules
# would import them).
collect_ignore = ["conf.py", "make_figures.py", "_build"]
collect_ignore_glob = ["_ext/*.py"]


# one test per page, its examples in order in one process (see docs/pages.py)
pytest_collect_file = collector(Sybil(
    parsers=[PythonCodeBlockParser(), DocTestDirectiveParser(), SkipParser()],
    patterns=["*.md"], excludes=["_build/*"]))
