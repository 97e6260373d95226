"""How an exception raised in another process (a forked worker or shard, a Ray actor)
reaches the runner: as itself, with its ``__cause__`` (the agent's or the env's own
exception, of its own type) and the traceback there as text, since tracebacks do not
pickle and an exception's ``__cause__`` is dropped by pickling.

>>> import pickle
>>> try:
...     try:
...         1 / 0
...     except ZeroDivisionError as exc:
...         raise RuntimeError("the env failed") from exc
... except RuntimeError as exc:
...     sent = pickle.dumps(Travelling(exc, "in worker process 1", pickle.dumps))
>>> got = pickle.loads(sent).exception()
>>> type(got).__name__, type(got.__cause__).__name__, type(got.__cause__.__cause__).__name__
('RuntimeError', 'ZeroDivisionError', 'RemoteTraceback')
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Callable

from ..errors import RolloutError

__all__ = ["Travelling", "RemoteTraceback"]


class RemoteTraceback(Exception):
    """The traceback of an exception raised in another process, as text (it cannot travel)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class Travelling:
    """An exception made to travel to another process: the exception itself and its
    ``__cause__``, each pickled by ``dumps`` when it can be, and the whole traceback as
    text, headed by ``where`` (which process). :meth:`exception` rebuilds the chain there:
    the exception, caused by its cause, caused by the traceback text."""

    def __init__(self, exc: BaseException, where: str,
                 dumps: Callable[[BaseException], bytes]) -> None:
        self.text = f"{where}\n" + "".join(traceback.format_exception(type(exc), exc,
                                                                      exc.__traceback__))
        self.error = _dumped(exc, dumps) or pickle.dumps(RolloutError(
            f"{type(exc).__name__}: {exc} ({where}; the exception itself could not be "
            "pickled back)"))
        self.cause = _dumped(exc.__cause__, dumps) if exc.__cause__ is not None else None

    def exception(self) -> BaseException:
        """The exception, rebuilt on this side, to raise."""
        error: BaseException = pickle.loads(self.error)
        remote = RemoteTraceback(self.text)
        if self.cause is not None:
            cause: BaseException = pickle.loads(self.cause)
            cause.__cause__ = remote
            error.__cause__ = cause
        else:
            error.__cause__ = remote
        return error


def _dumped(exc: BaseException, dumps: Callable[[BaseException], bytes]) -> bytes | None:
    """``exc`` pickled, if it survives the round trip (an exception whose ``__init__``
    takes other arguments than its ``args`` does not unpickle)."""
    try:
        data = dumps(exc)
        pickle.loads(data)
    except Exception:
        return None
    return data
