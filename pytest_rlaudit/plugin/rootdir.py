"""Where pytest roots the run: the plugin's options written as two words, and the node id
of the zero-config items.

pytest chooses its rootdir and ini file from the arguments that look like test paths
*before* it loads plugins from entry points, so it does not know yet that ``../x.zip`` in
``--rl-agent ../x.zip`` is an option's value: a value that exists on disk counts as a test
path there, and one outside the folder pytest runs in moves the rootdir up to a common
ancestor, and the ini file with it (the user's ``rl_`` settings and addopts are lost, the
cache and every node id move). Once the plugin is loaded nothing of that can be redone
cleanly (addopts, ``pythonpath`` and the initial conftests came from the other ini file),
so :func:`check_path_options` makes it a usage error naming the one-word form, which
pytest never takes for a path. The one-word form, and a value inside the folder, leave
the rootdir and ini file where they belong.

Loading it imports nothing heavy (pytest's own discovery is imported only when an option
of the plugin was written as two words with a value that exists).
"""

from __future__ import annotations

import inspect
import itertools
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from .options import OPTIONS, _flag

__all__ = ["check_path_options", "audit_nodeid", "two_word_values"]

#: The plugin's options that take a value (a path, an id, names, ...).
_VALUED = frozenset(o.flag for o in OPTIONS if o.parse is not _flag)


def two_word_values(args: list[str]) -> list[tuple[str, str]]:
    """(option, value) for each option of the plugin written as two words in ``args``:
    the values pytest read as positional arguments before it knew the plugin's options.

    >>> two_word_values(["--rl-agent", "../x.zip", "--rl-env=CartPole-v1", "-q"])
    [('--rl-agent', '../x.zip')]
    """
    return [(flag, value) for flag, value in itertools.pairwise(args)
            if flag in _VALUED and not value.startswith("-")]


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for a path, a NUL byte, ...
        return False


def _discovered(config: pytest.Config, args: list[str]) -> tuple[Path, Path | None] | None:
    """(rootdir, ini file) pytest's own discovery finds for the positional ``args`` and this
    run's -c / --rootdir / -o; None when this pytest's discovery cannot be called so."""
    try:
        from _pytest.config.findpaths import determine_setup

        # Its keyword arguments changed across pytest 7.4 - 9 (config, invocation_dir,
        # override_ini); the first two results are the rootdir and the ini file in all.
        params = inspect.signature(determine_setup).parameters
        given: dict[str, Any] = {"inifile": config.option.inifilename, "args": args,
                                 "rootdir_cmd_arg": config.option.rootdir or None,
                                 "invocation_dir": config.invocation_params.dir,
                                 "override_ini": config.option.override_ini, "config": config}
        found = determine_setup(**{k: v for k, v in given.items() if k in params})
        return Path(found[0]), None if found[1] is None else Path(found[1])
    except Exception:  # a pytest whose discovery changed: this check is not worth a crash
        return None


def check_path_options(config: pytest.Config) -> None:
    """A :class:`pytest.UsageError` when an option of the plugin written as two words
    (``--rl-agent ../x.zip``) moved pytest's rootdir or ini file (see the module), naming
    what moved and the one-word form that does not."""
    args = [str(a) for a in (*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
                             *config.invocation_params.args)]
    here = config.invocation_params.dir
    given = [(flag, value) for flag, value in two_word_values(args)
             if _exists(here / value)]  # pytest counts only paths that exist
    if not given:
        return
    positional = [str(a) for a in (config.getoption("file_or_dir") or [])]
    meant = _discovered(config, positional)
    taken = _discovered(config, positional + [value for _, value in given])
    if meant is None or taken is None or meant == taken:
        return
    movers = [(flag, value) for flag, value in given
              if _discovered(config, [*positional, value]) != meant] or given
    moved = []
    if taken[0] != meant[0]:
        moved.append(f"the rootdir {taken[0]} instead of {meant[0]}")
    if taken[1] != meant[1]:
        moved.append(f"{'no ini file' if taken[1] is None else f'the ini file {taken[1]}'} "
                     f"instead of {'none' if meant[1] is None else meant[1]}")
    lost = []
    if meant[1] is not None and taken[1] != meant[1]:
        lost.append(f"the settings of {meant[1].name} (rl_ options, addopts) would not apply")
    if taken[0] != meant[0]:
        lost.append("every test id would change")
    written = ", ".join(f"'{flag} {value}'" for flag, value in movers)
    raise pytest.UsageError(
        f"pytest read {written} as a test path too when it chose its rootdir and ini file "
        f"(it does so before it loads this plugin), so it took {' and '.join(moved)}"
        + (f": {' and '.join(lost)}" if lost else "")
        + ". Write the option and its value as one word, which pytest never takes for a "
        "test path: " + " ".join(f"{flag}={value}" for flag, value in movers))


def audit_nodeid(config: pytest.Config) -> str:
    """The node id of the zero-config items' collector: ``rl-audit``, in the folder pytest
    runs in. Node ids are relative to the rootdir and pytest shows them relative to that
    folder, so from a folder below the rootdir the collector is that folder's
    (``sub/rl-audit``, shown as ``rl-audit::<scenario>``, never ``../rl-audit::...``)."""
    try:
        below = config.invocation_params.dir.relative_to(config.rootpath)
    except ValueError:  # pytest runs outside its rootdir: shown as <rootdir>/rl-audit
        return "rl-audit"
    return "rl-audit" if below == Path() else f"{below.as_posix()}/rl-audit"
