"""Zip archives from strangers, checked before anything reads a member of them.

SB3 model ``.zip`` files, TorchScript files and torch checkpoints (``torch.save``) are zip
archives. A member's expanded size is declared in the archive's directory, and a crafted
file can declare (and deflate to) far more than it weighs: a 0.6 MB zip whose ``data``
expands to 512 MiB. :func:`check_archive` reads the directory only and refuses a member
over its limit, before any reader (ours, SB3's ``load_from_zip_file``, ``torch.load``,
``torch.jit.load``) allocates it:

- a settings member (an SB3 zip's ``data`` JSON, ``_stable_baselines3_version``,
  ``system_info.txt``; a torch archive's pickles, code and version files), kilobytes
  normally: at most :data:`SETTINGS_MB` MiB;
- a weights member (an SB3 zip's ``.pth`` files; a torch archive's tensor records under
  ``data/`` or ``constants/``), megabytes normally: at most :data:`WEIGHTS_MB` MiB each;
- all members together: at most :data:`TOTAL_FACTOR` times the weights limit.

``RLAUDIT_MAX_MEMBER_MB=N`` (:data:`LIMIT_VARIABLE`, read at each check, so it holds in
worker processes too) sets both member limits to ``N`` MiB, for the rare giant model.

An SB3 zip is checked further, since SB3 reads every ``.pth`` member it holds: no member
outside the archive (an absolute path, ``..``) or twice, no ``.pth`` SB3 never writes, a
``data`` and a ``policy.pth``, each ``.pth`` a torch file whose own records keep the limits,
and every member's stream the size and checksum its directory declares (read in chunks,
never whole, so a member that lies about its size is this error, not a failed read
later).

>>> limits()["weights"] == WEIGHTS_MB * MIB or LIMIT_VARIABLE in os.environ
True
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Iterable

from ...errors import AgentFileError, PolicyError

__all__ = ["check_archive", "limits", "LIMIT_VARIABLE", "SETTINGS_MB", "WEIGHTS_MB",
           "TOTAL_FACTOR", "SB3_WEIGHTS", "not_intact"]

MIB = 1 << 20
#: The environment variable that sets every member limit, in MiB.
LIMIT_VARIABLE = "RLAUDIT_MAX_MEMBER_MB"
#: Default limit of a settings member (JSON, text, pickles of a torch archive), MiB.
SETTINGS_MB = 16
#: Default limit of one weights member (a ``.pth``, a tensor record), MiB.
WEIGHTS_MB = 256
#: All members of an archive together: at most this many times the weights limit.
TOTAL_FACTOR = 4
#: The ``.pth`` members SB3 and sb3-contrib write (``_get_torch_save_params``, and the
#: PyTorch variables' file under its current and its pre-0.9 name).
SB3_WEIGHTS = frozenset({
    "policy.pth", "policy.optimizer.pth", "actor.optimizer.pth", "critic.optimizer.pth",
    "ent_coef_optimizer.pth", "pytorch_variables.pth", "tensors.pth"})
#: What reads a member in chunks: the stream check never holds more than this.
_CHUNK = MIB


def limits() -> dict[str, int]:
    """The member limits in bytes now: ``{"settings": ..., "weights": ..., "total": ...}``,
    the defaults or :data:`LIMIT_VARIABLE`'s value for both member kinds."""
    settings, weights = SETTINGS_MB * MIB, WEIGHTS_MB * MIB
    raw = os.environ.get(LIMIT_VARIABLE, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise PolicyError(f"{LIMIT_VARIABLE}={raw!r} is not a size in MiB; set it to a "
                              f"positive number, such as {LIMIT_VARIABLE}=1024, or unset it")
        settings = weights = int(value * MIB)
    return {"settings": settings, "weights": weights, "total": TOTAL_FACTOR * weights}


def _size(size: int) -> str:
    return f"{size / MIB:.1f} MiB" if size >= MIB else f"{size / 1024:.1f} KiB"


def not_intact(path: str | os.PathLike[str], why: str, *,
               what: str = "an intact SB3 model zip", ran: bool = False) -> AgentFileError:
    """The error for an SB3 model zip that is not as SB3's ``save`` writes one; ``ran``:
    found by a trusted load, after SB3 ran the file's pickles."""
    done = "" if ran else "; nothing of it was run or written"
    return AgentFileError(
        f"cannot load {os.fspath(path)!r}: {why}, so it is not {what}{done}. Use the model's "
        ".zip as SB3's save wrote it (model.save), or download it again")


def _too_big(path: str, where: str, size: int, limit: int, kind: str) -> AgentFileError:
    normally = {"settings": "a model's settings are kilobytes",
                "weights": "a model's weights are megabytes",
                "total": f"{TOTAL_FACTOR} times the limit of one member"}[kind]
    # the smallest whole MiB that admits it (the total's limit is TOTAL_FACTOR of it)
    suggest = -(-size // ((TOTAL_FACTOR if kind == "total" else 1) * MIB))
    return AgentFileError(
        f"cannot load {path!r}: {where} expand{'' if kind == 'total' else 's'} to "
        f"{_size(size)}, over the limit of "
        f"{_size(limit)} ({normally}), so it is not read. If this is a model you expect to be "
        f"that large, raise the limit: {LIMIT_VARIABLE}={suggest} (an environment variable, "
        "MiB per member, read at each load, in worker processes too)")


def _tensor_record(name: str) -> bool:
    """Whether a torch archive's member holds a tensor's bytes (``<archive>/data/0``)."""
    parts = name.replace("\\", "/").split("/")
    return len(parts) >= 2 and parts[-2] in ("data", "constants") and "." not in parts[-1]


def _check_sizes(path: str, infos: Iterable[zipfile.ZipInfo], *, sb3: bool,
                 within: str = "") -> None:
    """Every declared size against :func:`limits`; ``within``: the member these records
    are inside (an SB3 zip's ``.pth``), for messages."""
    bounds = limits()
    total = 0
    for info in infos:
        weights = info.filename.endswith(".pth") if sb3 else _tensor_record(info.filename)
        kind = "weights" if weights else "settings"
        where = (f"its member {within!r} holds a record {info.filename!r} that" if within
                 else f"its member {info.filename!r}")
        if info.file_size > bounds[kind]:
            raise _too_big(path, where, info.file_size, bounds[kind], kind)
        total += info.file_size
    if total > bounds["total"]:
        where = (f"the records of its member {within!r} together" if within
                 else "all its members together")
        raise _too_big(path, where, total, bounds["total"], "total")


def _outside(name: str) -> bool:
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in parts


def _check_sb3_names(path: str, infos: list[zipfile.ZipInfo]) -> None:
    names = [info.filename for info in infos]
    seen: set[str] = set()
    for name in names:
        if _outside(name):
            raise not_intact(path, f"it holds an unexpected member {name!r}, a path outside "
                                   "the archive")
        if name.endswith(".pth") and name not in SB3_WEIGHTS:
            raise not_intact(path, f"it holds an unexpected member {name!r}, a weights file "
                                   f"SB3 never writes (it writes {', '.join(sorted(SB3_WEIGHTS))})")
        if name in seen:
            raise not_intact(path, f"it holds the member {name!r} twice")
        seen.add(name)
    for needed, what in (("data", "the model's settings"), ("policy.pth", "the policy's weights")):
        if needed not in names:
            held = ", ".join(repr(n) for n in names[:6]) + (", ..." if len(names) > 6 else "")
            raise not_intact(path, f"it holds no {needed!r} member ({what}), only "
                                   f"{held or 'nothing'}",
                             what="a stable-baselines3 model zip (or it is a truncated one)")


def _check_streams(path: str, archive: zipfile.ZipFile) -> None:
    """Read every member in chunks: its stream must end at its declared size with its
    declared checksum (:mod:`zipfile` checks both), whatever it claims."""
    for info in archive.infolist():
        try:
            with archive.open(info) as stream:
                while stream.read(_CHUNK):
                    pass
        except (zipfile.BadZipFile, EOFError, zlib.error, OSError, NotImplementedError,
                RuntimeError) as exc:  # RuntimeError: an encrypted member
            raise not_intact(path, f"its member {info.filename!r} is damaged or not what its "
                                   f"directory declares ({type(exc).__name__}: {exc})") from exc


def _check_weights_files(path: str, archive: zipfile.ZipFile) -> None:
    """Each ``.pth`` member is a torch file, and a torch archive's records keep the limits."""
    for info in archive.infolist():
        if not info.filename.endswith(".pth"):
            continue
        with archive.open(info) as stream:
            head = stream.read(4)
            if head == b"PK\x03\x04":  # torch's zip format: its records are checked too
                stream.seek(0)
                try:
                    inner = zipfile.ZipFile(stream)
                except zipfile.BadZipFile as exc:
                    raise not_intact(path, f"its member {info.filename!r} is a damaged torch "
                                           f"file ({exc})") from exc
                with inner:
                    _check_sizes(path, inner.infolist(), sb3=False, within=info.filename)
            elif not head.startswith(b"\x80"):  # torch's legacy format is a pickle
                raise not_intact(path, f"its member {info.filename!r} is not a torch file "
                                       "(weights saved by torch.save)")


def check_archive(path: str | os.PathLike[str], *, sb3: bool = False) -> None:
    """Refuse the zip archive at ``path`` before anything reads a member of it when a
    member's declared size is over its limit, or (``sb3=True``, an SB3 model zip) when it
    is not as SB3's ``save`` writes one (see the module docstring). Reads the archive's
    directory, and for an SB3 zip streams each member once in chunks.

    An :class:`~pytest_rlaudit.errors.AgentFileError` names the file, the member, its size and
    the limit, and how to raise it."""
    name = os.fspath(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        what = "a stable-baselines3 model zip" if sb3 else "a zip archive"
        raise AgentFileError(f"cannot load {name!r}: it is not {what} ({exc}): is it truncated, "
                          "or another kind of file?") from exc
    with archive:
        infos = archive.infolist()
        if sb3:
            _check_sb3_names(name, infos)
        _check_sizes(name, infos, sb3=sb3)
        if sb3:
            _check_streams(name, archive)
            _check_weights_files(name, archive)
