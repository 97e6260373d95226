"""What the pytest runs this suite starts itself (pytester's, ``python -m pytest``
subprocesses, and their xdist workers) load beside this plugin.

The dev extra installs plugins that only some tests are about: hypothesis' (which imports
all of hypothesis at the end of every run), pytest-randomly (numpy and an entry-point scan
in every process), pytest-html with pytest-metadata, and anyio's. Loading them in every
inner run and every xdist worker took about 4 of the 6 CPU seconds of an empty ``-n 2``
run on this project's 2-core machine. An inner run leaves them out unless its test keeps
them with ``@pytest.mark.inner_plugins("randomly", ...)`` (tests/conftest.py applies it).

Inner runs also leave pytest's assertion rewriting out (``--assert=plain``), unless their
test keeps ``"rewrite"``: no assertion here reads how an inner test's ``assert`` is
explained, and with rewriting on, every in-process run read the file list of every
installed pytest plugin's distribution (hypothesis' is long) to mark its modules for
rewriting, and rewrote its test files again. tests/plugin/test_neighbours.py keeps it, as
it keeps every neighbour.

:func:`without_figures` writes an in-process run's report without drawing it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

UNRELATED = ("hypothesispytest", "randomly", "anyio", "html", "html_fixtures", "metadata")


def addopts(keep: tuple[str, ...] = ()) -> str:
    """``PYTEST_ADDOPTS`` for an inner run that loads none of :data:`UNRELATED` but ``keep``,
    and rewrites no assertions unless ``keep`` has ``"rewrite"``.

    >>> addopts(keep=("randomly", "hypothesispytest", "anyio", "html", "html_fixtures"))
    '--assert=plain -p no:metadata'
    >>> addopts(keep=("rewrite", "randomly", "hypothesispytest", "anyio", "html", "metadata"))
    '-p no:html_fixtures'
    """
    plain = () if "rewrite" in keep else ("--assert=plain",)
    return " ".join((*plain, *(f"-p no:{name}" for name in UNRELATED if name not in keep)))


def kept(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The plugins the requesting test's ``inner_plugins`` marks keep in its inner runs."""
    return tuple(name for mark in request.node.iter_markers("inner_plugins") for name in mark.args)


@contextmanager
def without_figures() -> Iterator[None]:
    """In-process runs inside write their ``--rl-report`` as on a machine without
    matplotlib: summary.json and .md, and the page without figures. Drawing costs about a
    CPU second a report; for runs whose figures no assertion reads (another run's, or
    none).

    >>> with without_figures():
    ...     import matplotlib
    Traceback (most recent call last):
    ...
    ModuleNotFoundError: import of matplotlib halted; None in sys.modules
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "matplotlib", None)
        yield
