"""The error of an agent path that does not exist: the folder a relative path was
resolved against (the current directory: a CI job that forgot to fetch its model, or a
run started from another folder) and the close matches there, so the fix is on screen.

>>> import os, tempfile
>>> folder = tempfile.TemporaryDirectory()
>>> open(os.path.join(folder.name, "ppo_cartpole.zip"), "w").close()
>>> print(agent_not_found(os.path.join(folder.name, "ppo_cartpol.zip")))  # doctest: +ELLIPSIS
agent file '.../ppo_cartpol.zip' does not exist; did you mean 'ppo_cartpole.zip' (in ...)?
>>> folder.cleanup()
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from ...errors import AgentNotFoundError

__all__ = ["agent_not_found"]


def agent_not_found(path: str | os.PathLike[str], what: str = "agent file") -> AgentNotFoundError:
    """The :class:`~pytest_rlaudit.errors.AgentNotFoundError` of ``path`` (which does not
    exist): a relative path names the folder it was resolved against; the closest names
    in the path's folder are offered, or else the nearest folder that exists."""
    given = Path(path)
    absolute = given if given.is_absolute() else Path.cwd() / given
    where = "" if given.is_absolute() else f" (a relative path, resolved against {Path.cwd()})"
    folder = absolute.parent
    close: list[str] = []
    if folder.is_dir():
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        close = difflib.get_close_matches(absolute.name, names, n=3, cutoff=0.6)
        hint = (f"; did you mean {', '.join(repr(c) for c in close)} (in {folder})?" if close
                else f"; nothing in {folder} has a close name.")
    else:
        existing = next((p for p in folder.parents if p.is_dir()), None)
        hint = f"; its folder {str(folder)!r} does not exist either" + (
            f" (the nearest that does: {str(existing)!r})." if existing else ".")
    fix = "" if close else " Fetch or train the model first, or give the path it has."
    return AgentNotFoundError(f"{what} {str(path)!r} does not exist{where}{hint}{fix}")
