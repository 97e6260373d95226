"""A Ray that cannot be reached (issue 23, point 4): a RAY_ADDRESS that does not answer, or
where something other than a Ray head answers, is an error naming it, soon; a local
address needs no network.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from stuck_envs import POSIX_TIMERS

from pytest_rlaudit import RLAuditError
from pytest_rlaudit.rollout import ray_connect

pytestmark = POSIX_TIMERS


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1", "192.0.2.1:6379"])
def test_a_ray_address_that_does_not_answer_is_named(monkeypatch, address):
    monkeypatch.setenv("RAY_ADDRESS", address)
    began = time.monotonic()
    with pytest.raises(RLAuditError, match=rf"RAY_ADDRESS={address}\b.*unset it"):
        ray_connect.check_reachable()
    assert time.monotonic() - began < 30


@pytest.mark.parametrize("address", ["", "auto", "local"])
def test_a_local_ray_address_needs_no_network(monkeypatch, address):
    monkeypatch.setenv("RAY_ADDRESS", address)
    ray_connect.check_reachable()


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_an_audit_on_an_unreachable_ray_fails_within_30_s_naming_ray_address():
    code = textwrap.dedent("""
        import numpy as np
        from pytest_rlaudit import audit
        audit(lambda o: np.zeros(len(o), dtype=np.int64), "CartPole-v1", scenarios=["delay"],
              episodes=2, backend="ray")
    """)
    began = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "RAY_ADDRESS": "127.0.0.1:1"})
    assert time.monotonic() - began < 30
    assert out.returncode != 0
    assert "RLAuditError: backend=\"ray\" cannot reach the Ray cluster at RAY_ADDRESS=127.0.0.1:1" \
        in out.stderr
    assert "Failed to connect to GCS" not in out.stderr  # Ray never started retrying


@pytest.mark.parametrize("says", [b"", b"SSH-2.0-OpenSSH_9.6\r\n"], ids=["silent", "ssh"])
def test_something_other_than_ray_at_ray_address_is_named(monkeypatch, says):
    # A port that accepts connections but is no Ray head (a proxy, another service): Ray
    # would retry for minutes, blocked in its own code.
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        conn.sendall(says)
        stop.wait(10)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setattr(ray_connect, "CONNECT_SECONDS", 1.0)
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{server.getsockname()[1]}")
    try:
        with pytest.raises(RLAuditError, match=r"something answers at RAY_ADDRESS=127\.0\.0\.1:"
                                               r"\d+, but not a Ray head node"):
            ray_connect.check_reachable()
    finally:
        stop.set()
        thread.join()
        server.close()
