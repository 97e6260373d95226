"""``audit(progress=...)``: a running audit's progress in scripts and notebooks, via tqdm.

Once an audit has run about 2 s, a tqdm bar (``tqdm.auto``: a widget in Jupyter) shows its
episodes done of total and the time left (the runner's estimate, :mod:`..rollout.progress`,
rather than tqdm's: episodes run side by side and end in bursts). ``progress=None`` (the
default) shows it when standard error is a terminal or the audit runs in a Jupyter kernel,
and tqdm is installed; ``True`` always (without tqdm: a plain line on standard error, and
once how to install tqdm); ``False`` never. tqdm is imported only when a bar is shown.

When an audit projected to run 30 s or more spends most of it stepping envs in one
process, on a machine with several cores (the rule: :mod:`..rollout.progress`), the bar
says to try ``workers="auto"``, and once per process a line after it does.

>>> from contextlib import nullcontext
>>> isinstance(showing(False, expected=10), nullcontext)
True
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TextIO

from .._optional import install_hint
from ..rollout.progress import Progress, Snapshot, describe, duration, watching

__all__ = ["showing", "TqdmBar", "PlainLine"]

WORDS = 'workers="auto"'
INSTALL = f"{install_hint('progress')} (or pip install tqdm)"

_told: set[str] = set()  # what was said once per process


def showing(progress: Any, *, expected: int) -> AbstractContextManager[Any]:
    """The context in which an audit's rollouts report their progress to a display, as
    ``progress`` asks (see the module docstring); ``expected``: the episodes the audit
    will run (the total shown from the start)."""
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None (on for a terminal or a "
                        f"notebook), got {progress!r}")
    tqdm_here = _has_tqdm()
    if progress is False or (progress is None and not (tqdm_here and _interactive())):
        return nullcontext()
    display: Any = TqdmBar() if tqdm_here else PlainLine(sys.stderr)
    return _watch(Progress(display), expected)


@contextmanager
def _watch(progress: Progress, expected: int) -> Iterator[Progress]:
    """:func:`~..rollout.progress.watching`, with the expected episodes announced."""
    with watching(progress):
        progress.expect(expected)
        yield progress


def _has_tqdm() -> bool:
    return importlib.util.find_spec("tqdm") is not None


def _interactive() -> bool:
    """Standard error is a terminal, or this is a Jupyter kernel."""
    try:
        if sys.stderr is not None and sys.stderr.isatty():
            return True
    except (AttributeError, ValueError, OSError):
        pass
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def _postfix(snapshot: Snapshot) -> str:
    ended = snapshot.done >= snapshot.total
    text = "" if snapshot.left is None or ended else f"~{duration(snapshot.left)} left"
    if snapshot.suggest_workers:
        text += f"; one process: try {WORDS}"
    if snapshot.waiting is not None:
        text = snapshot.waiting
    return text


def _suggest(write: Any, snapshot: Snapshot) -> None:
    if snapshot.suggest_workers and "workers" not in _told:
        _told.add("workers")
        write(f"rl audit: this audit ran {duration(snapshot.elapsed)} in one process; "
              f"audit(..., {WORDS}) runs its episodes in a process per core, each with its "
              "own copy of the agent (the numbers do not change)")


class TqdmBar:
    """A display of :class:`~..rollout.progress.Progress` as a tqdm bar, made when first
    shown (tqdm imported then)."""

    def __init__(self) -> None:
        self.bar: Any = None

    def __call__(self, snapshot: Snapshot) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=snapshot.total, desc="rl audit", mininterval=0,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "episodes [{elapsed}{postfix}]")
            self.bar.start_t -= snapshot.elapsed  # it began with the audit
        self.bar.total = snapshot.total
        self.bar.n = snapshot.done
        self.bar.set_postfix_str(_postfix(snapshot), refresh=False)
        self.bar.refresh()

    def close(self, snapshot: Snapshot) -> None:
        if self.bar is None:
            return
        self(snapshot)
        self.bar.close()
        _suggest(lambda line: type(self.bar).write(line, file=sys.stderr), snapshot)


class PlainLine:
    """A display of :class:`~..rollout.progress.Progress` without tqdm: one line on
    ``file``, rewritten with a carriage return, after a line saying how to get the bar."""

    def __init__(self, file: TextIO) -> None:
        self.file = file
        self.width = 0

    def __call__(self, snapshot: Snapshot) -> None:
        if "tqdm" not in _told:
            _told.add("tqdm")
            self.file.write(f"rl audit: progress=True shows a progress bar with tqdm, which is "
                            f"not installed: {INSTALL}\n")
        text = f"rl audit: {describe(snapshot, words=WORDS)}"
        self.file.write("\r" + text + " " * max(self.width - len(text), 0))
        self.file.flush()
        self.width = len(text)

    def close(self, snapshot: Snapshot) -> None:
        self(snapshot)
        self.file.write("\n")
        self.file.flush()
        _suggest(lambda line: print(line, file=self.file), snapshot)
