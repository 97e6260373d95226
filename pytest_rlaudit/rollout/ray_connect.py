"""Reaching the Ray cluster ``RAY_ADDRESS`` names, in bounded time.

``ray.init()`` against an address where nothing listens, or where something other than a
Ray head answers, retries for minutes, printing a line each time, blocked in Ray's own
code. Here a ``RAY_ADDRESS`` that does not answer is an error naming it within
:data:`CONNECT_SECONDS` (nothing accepts a connection there), or :data:`INIT_SECONDS`
more (something does, but ``ray.init`` cannot join a cluster through it; bounded in the
main thread only, where :mod:`.deadline`'s alarm reaches).

>>> import os
>>> "RAY_ADDRESS" in os.environ or check_reachable() is None  # unset: a local Ray, no network
True
"""

from __future__ import annotations

import logging
import os
import socket
from time import perf_counter
from typing import Any

from ..errors import RLAuditError, RolloutTimeoutError
from .deadline import within

__all__ = ["CONNECT_SECONDS", "INIT_SECONDS", "check_reachable", "init"]

#: How long the cluster named by ``RAY_ADDRESS`` has to accept a connection before
#: ``ray.init`` is tried (:func:`check_reachable`): a head node answers in milliseconds.
CONNECT_SECONDS = 5.0
#: How long ``ray.init`` may try to join the cluster ``RAY_ADDRESS`` names (it joins in
#: seconds; a proxy or another service on that port keeps it retrying for minutes).
INIT_SECONDS = 20.0


#: An HTTP/2 client's opening (the preface and an empty SETTINGS frame): a gRPC server, as
#: a Ray head's GCS and a Ray Client server are, answers it with a SETTINGS frame at once.
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4


def check_reachable() -> None:
    """Nothing, if ``RAY_ADDRESS`` is unset, ``auto`` or ``local``, or names a
    ``host:port`` (``ray://host:port`` for a Ray Client server) where a gRPC server, as a
    Ray head is, answers within :data:`CONNECT_SECONDS`; else an
    :class:`~pytest_rlaudit.errors.RLAuditError` naming it and the fix (``ray.init``
    would retry for minutes, blocked in Ray's own code where no timeout reaches it).
    """
    address = os.environ.get("RAY_ADDRESS", "").strip()
    if address in ("", "auto", "local"):
        return  # a local Ray (started, or found by Ray's own files), no network
    host, sep, port = address.partition("://")[2 if "://" in address else 0].rpartition(":")
    if not sep or not port.isdigit():
        return  # not host:port: Ray says what is wrong with it
    began = perf_counter()
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS)
    except OSError as exc:
        reason = (f"no answer within {CONNECT_SECONDS:g} s" if isinstance(exc, TimeoutError)
                  else (exc.strerror or type(exc).__name__).lower())
        raise RLAuditError(
            f'backend="ray" cannot reach the Ray cluster at RAY_ADDRESS={address} ({reason}; '
            "Ray itself would retry for minutes). Start the "
            "cluster there (ray start --head on that machine), correct RAY_ADDRESS, or unset "
            "it to start a local Ray on this machine."
        ) from None
    head = b""
    with sock:
        try:
            sock.settimeout(max(0.1, CONNECT_SECONDS - (perf_counter() - began)))
            sock.sendall(_HTTP2_HELLO)
            while len(head) < 9 and (chunk := sock.recv(9 - len(head))):
                head += chunk
        except OSError:  # silence, or a reset: not a gRPC server either way
            pass
    if len(head) < 9 or head[3] != _SETTINGS:
        raise RLAuditError(
            f'backend="ray": something answers at RAY_ADDRESS={address}, but not a Ray head '
            "node (no gRPC server there; Ray itself would retry for minutes). Give the head's "
            "GCS address (port 6379 by default; ray://host:10001 for Ray Client), or unset "
            "RAY_ADDRESS to start a local Ray on this machine."
        )


def init(ray: Any) -> None:
    """``ray.init()``, for a ``RAY_ADDRESS`` that names a cluster bounded in time (see the
    module): an error naming it rather than minutes of Ray's retries."""
    check_reachable()
    address = os.environ.get("RAY_ADDRESS", "").strip()
    remote = address not in ("", "auto", "local")
    try:
        with within(INIT_SECONDS if remote else None):
            ray.init(include_dashboard=False, logging_level=logging.ERROR)
    except RolloutTimeoutError:  # this bound's, not the audit's (that one comes as Expired)
        ray.shutdown()
        raise RLAuditError(
            f'backend="ray" could not join the Ray cluster at RAY_ADDRESS={address} within '
            f"{INIT_SECONDS:g} s: something answers there, but ray.init cannot join it (not a "
            "Ray head node, another Ray version, or a cluster that wants an auth token this "
            "process lacks). Check the address and port (the head's GCS port, 6379 by "
            "default; ray://host:10001 for Ray Client) and the cluster, or unset RAY_ADDRESS "
            "to start a local Ray on this machine."
        ) from None
