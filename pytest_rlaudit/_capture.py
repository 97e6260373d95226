"""Who is listening to robustness checks: the pytest plugin, to report ``assert_robust``.

Kept free of heavy imports: the plugin opens a capture around every test, and loading it
must cost test runs that never audit nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["capture_checks", "notify", "shared_cache"]


class _Capture:
    __slots__ = ("cache", "checks")

    def __init__(self, cache: dict[Any, Any] | None) -> None:
        self.checks: list[Any] = []
        self.cache = cache


_ACTIVE: ContextVar[tuple[_Capture, ...]] = ContextVar("pytest_rlaudit_captures", default=())


@contextmanager
def capture_checks(*, cache: dict[Any, Any] | None = None) -> Iterator[list[Any]]:
    """Collect every :class:`~pytest_rlaudit.verdicts.assertions.RobustnessCheck` made in the block.

    ``cache``: rollouts that checks made in the block may share (nominal episodes, policy
    adapters), for example across the examples of one hypothesis test.

    >>> with capture_checks() as checks:
    ...     pass
    >>> checks
    []
    """
    capture = _Capture(cache)
    token = _ACTIVE.set((*_ACTIVE.get(), capture))
    try:
        yield capture.checks
    finally:
        _ACTIVE.reset(token)


def notify(check: Any) -> None:
    """Hand ``check`` to the innermost capture: it belongs to the innermost test (a test
    that runs pytest in-process must not collect its inner tests' checks)."""
    active = _ACTIVE.get()
    if active:
        active[-1].checks.append(check)


def shared_cache() -> dict[Any, Any] | None:
    """The cache of the innermost capture that has one, or None."""
    for capture in reversed(_ACTIVE.get()):
        if capture.cache is not None:
            return capture.cache
    return None
