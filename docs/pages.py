"""The README's and the docs' examples as tests, through Sybil: one test per page.

Sybil parses a page into its examples, which share one namespace and run in order; a
skip directive applies to the example after it. Sybil's own pytest integration makes each
example a test, and pytest-xdist then sends each to whichever worker is free (the suite
runs ``--dist worksteal``): a page's examples would run apart, out of order, and past
their skip directives (a skipped minute-long MuJoCo audit ran so). So each page is one
test here, its examples evaluated by Sybil in order, in one process, from the repository
root (examples name ``examples/ppo_cartpole.zip``); a failure names the example's line.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sybil import Sybil

__all__ = ["ROOT", "collector"]

ROOT = Path(__file__).resolve().parent.parent


class PageFailure(AssertionError):
    """An example of a page failed: where, and why."""


class PageItem(pytest.Item):
    """Every example of one page, in order."""

    def __init__(self, *, sybil: Sybil, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sybil = sybil
        self.skipped: list[int] = []  # lines of the examples a skip directive left out

    def runtest(self) -> None:
        from registries import restored  # tests/ is on the ini's pythonpath

        document = self.sybil.parse(self.path)
        # a page's scenarios and env ids (custom-scenarios registers "noisy_imu") are
        # undone after it, as each test's are: later tests read the registries
        with restored(), pytest.MonkeyPatch.context() as patch:
            patch.chdir(ROOT)
            for example in document:  # its examples (Sybil 6 has no .examples())
                try:
                    example.evaluate()
                except (unittest.SkipTest, pytest.skip.Exception):
                    # a skip directive's example: not run here (its reason is on the page)
                    self.skipped.append(example.line)
                except Exception as exc:  # the page's line, then the example's own error
                    raise PageFailure(f"{self.path.name}, the example at line {example.line}: "
                                      f"{type(exc).__name__}: {exc}") from exc

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None):
        if isinstance(excinfo.value, PageFailure):
            return excinfo.getrepr(style="short", chain=True)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"the examples of {self.path.name}"


class PageFile(pytest.File):
    def __init__(self, *, sybil: Sybil, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sybil = sybil

    def collect(self) -> list[PageItem]:
        return [PageItem.from_parent(self, name="examples", sybil=self.sybil)]


def collector(sybil: Sybil, only: Path | None = None
              ) -> Callable[[Path, pytest.Collector], PageFile | None]:
    """A ``pytest_collect_file`` hook making one test of each page ``sybil`` parses
    (``only``: of that one file)."""

    def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> PageFile | None:
        if (only is None or file_path == only) and sybil.should_parse(file_path):
            return PageFile.from_parent(parent, path=file_path, sybil=sybil)
        return None

    return pytest_collect_file
