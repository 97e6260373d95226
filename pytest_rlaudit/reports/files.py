"""Writing the report folder's files."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so that whatever
    reads the folder (a CI artifact step, another xdist worker) never sees half a file.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.txt"
    >>> atomic_write(target, "ok"); target.read_text()
    'ok'
    """
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data, encoding="utf-8")
    os.replace(tmp, path)
