"""What pytest loads first (``pytest11: rlaudit``): the plugin (:mod:`pytest_rlaudit.plugin`),
or, when it cannot be imported, a stand-in that says so in one line and lets the run go on.

Installing a pytest plugin puts it in every pytest run of that environment. A plugin that
raises while pytest loads it ends every run, unrelated tests included (as the plugin did on
Python 3.10 when it imported ``typing.NotRequired``). So this module imports nothing but
the standard library and pytest, and imports the plugin inside a ``try``:

- it loads: the plugin is registered through ``pytest_plugins``, as pytest registers a
  plugin's plugins (under the name ``pytest_rlaudit.plugin``; ``-p no:rlaudit`` still
  turns both off, as this module is never loaded then);
- it does not: every test runs as if the plugin were not installed, the terminal summary
  has one line naming the error, where it arose and the fix (:func:`cannot_load_line`),
  and an ``--rl-*`` option is refused with that line (pytest cannot take an option no
  plugin registered).
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import pytest

__all__ = ["cannot_load_line"]

#: Where the plugin lives (also the name it is registered under).
PLUGIN = "pytest_rlaudit.plugin"


def cannot_load(exc: BaseException) -> str:
    """Why the plugin did not load: the error and the package's line that raised it (the
    innermost in pytest_rlaudit)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "pytest_rlaudit" in f.filename.replace("\\", "/")]
    where = ""
    if frames:
        filename = frames[-1].filename.replace("\\", "/")
        where = f", raised at {filename[filename.rindex('pytest_rlaudit'):]}:{frames[-1].lineno}"
    message = str(exc).splitlines()[0] if str(exc) else ""
    error = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    python = ".".join(map(str, sys.version_info[:3]))
    return f"pytest-rlaudit could not load on Python {python} ({error}{where})"


#: What to do about it.
FIX = ("Fix: pip install --upgrade --force-reinstall pytest-rlaudit; if that does not help, "
       "report this line as a bug (or pip uninstall pytest-rlaudit; -p no:rlaudit turns it off)")


def cannot_load_line(exc: BaseException) -> str:
    """The one line a run prints when the plugin cannot be imported: why, what it means
    for the run, and the fix."""
    return (f"{cannot_load(exc)}: its audits and --rl-* options are off in this run, the "
            f"other tests ran. {FIX}")


#: What importing the plugin raised (None: it loaded).
LOAD_ERROR: Exception | None = None
try:
    from . import plugin as _plugin  # noqa: F401  (imported here to catch what it raises)
except Exception as exc:  # whatever importing it raises on this Python: one line, not a crash
    LOAD_ERROR = exc

    def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                      args: list[str]) -> None:
        """An ``--rl-*`` option would end the run with pytest's "unrecognized arguments":
        refuse it with the cause instead."""
        options = [a.partition("=")[0] for a in args if a.startswith("--rl-")]
        if options and LOAD_ERROR is not None:
            raise pytest.UsageError(f"{', '.join(dict.fromkeys(options))}: {cannot_load(LOAD_ERROR)}, "
                                    f"so pytest knows none of its options. {FIX}")

    def pytest_terminal_summary(terminalreporter: Any) -> None:
        if LOAD_ERROR is not None:
            terminalreporter.write_line(cannot_load_line(LOAD_ERROR), yellow=True, bold=True)
else:
    pytest_plugins = [PLUGIN]
