"""`citewise serve` starts a real server process that answers on the port it was given, and stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def test_citewise_serve_runs_the_app(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    citewise = Path(sys.executable).parent / "citewise"
    process = subprocess.Popen(
        [str(citewise), "serve", "--port", str(port), "--home", str(tmp_path / "home")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "CITEWISE_SERVER__LOG_QUESTIONS": "false"},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read().decode()
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "citewise serve did not start listening"
                time.sleep(0.2)
        assert health.json()["status"] == "ok"
        ready = httpx.get(f"http://127.0.0.1:{port}/ready")
        assert ready.status_code == 200 and ready.json()["index"]["documents"] == 0
        assert httpx.get(f"http://127.0.0.1:{port}/api/documents").json() == []
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, output
    assert f"http://127.0.0.1:{port}/" in output


def test_serve_rejects_an_unknown_log_level(tmp_path: Path):
    citewise = Path(sys.executable).parent / "citewise"
    result = subprocess.run(
        [str(citewise), "serve", "--log-level", "loud", "--home", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 2 and "--log-level" in result.stderr
