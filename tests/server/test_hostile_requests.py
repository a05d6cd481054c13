"""Hostile and careless HTTP clients, against a real uvicorn server where the socket matters: bodies are bounded
and never read for a caller without a valid key, failed keys and forged addresses don't get around rate limits,
slow clients are cut off, and odd input is a 4xx, never a 500."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import psutil
import pytest
from pydantic import ValidationError
from tests.server.conftest import KEYS, auth

from citewise.server import create_app
from citewise.server.auth import RateLimiter
from citewise.settings import Settings

MB = 1024 * 1024


def raw_request(url: str, head: str, body: bytes = b"", *, wait_s: float = 10.0) -> tuple[bytes, bool]:
    """Send `head` (request line + headers) and `body` on a fresh connection, then read until the server answers
    and closes. Returns (what came back, whether the server closed the connection)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=wait_s)
    try:
        # The server may answer and close before the body is all sent (a refusal before reading): then read what it
        # answered.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                return received, True
            if not chunk:
                return received, True
            received += chunk
    finally:
        sock.close()


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0


def head(method: str, path: str, *, length: int | None = None, chunked: bool = False, extra: str = "") -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: test", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    if extra:
        lines.append(extra)
    return "\n".join(lines) + "\n"


@pytest.fixture
def keyed_server(keyed_settings, make_kb, live_server):
    return live_server(create_app(keyed_settings, kb=make_kb(keyed_settings)))


def test_a_huge_body_without_a_key_is_refused_before_it_is_read(keyed_server):
    """200 MB announced, 1 MB sent: the 401 comes at once and the server closes the connection instead of reading
    the rest. (The server runs in this process, so its memory is this process's.)"""
    rss = psutil.Process().memory_info().rss
    for path in ("/api/agent/run", "/chat", "/api/documents"):
        started = time.monotonic()
        response, closed = raw_request(keyed_server.url, head("POST", path, length=200 * MB), b"{" + b" " * MB)
        assert status_of(response) == 401, response[:300]
        assert b"WWW-Authenticate: Bearer" in response or b"www-authenticate: Bearer" in response
        assert closed and time.monotonic() - started < 5
    assert psutil.Process().memory_info().rss - rss < 50 * MB


def test_an_ask_only_key_is_refused_a_write_before_its_body_is_read(keyed_settings, make_kb, live_server):
    """An upload of 200 MB (under the ~1 GB an upload may send) with a valid ask-only key: the 403 comes from the
    headers at once, the connection is closed, nothing of the body is read or stored."""
    settings = keyed_settings.model_copy(update={"ask_only_keys": ("key-alice",)})
    server = live_server(create_app(settings, kb=make_kb(settings)))
    key = "Authorization: Bearer key-alice"
    rss = psutil.Process().memory_info().rss
    started = time.monotonic()
    multipart = "Content-Type: multipart/form-data; boundary=x"
    upload = head("POST", "/api/documents", length=200 * MB, extra=key).replace(
        "Content-Type: application/json", multipart
    )
    response, closed = raw_request(server.url, upload, b"--x\r\n" + b" " * MB)
    assert status_of(response) == 403 and b"ask_only_keys" in response, response[:300]
    assert closed and time.monotonic() - started < 5
    delete = head("DELETE", "/api/documents/0b9e3a52-7d1c-5f4e-9a6b-2c8d1e0f3a47", length=10 * MB, extra=key)
    response, closed = raw_request(server.url, delete, b" " * MB)
    assert status_of(response) == 403 and closed
    assert psutil.Process().memory_info().rss - rss < 50 * MB
    assert not settings.uploads_path.exists()


def test_bodies_over_the_limit_are_413_with_a_key(keyed_server):
    key = "Authorization: Bearer key-alice"
    response, closed = raw_request(keyed_server.url, head("POST", "/api/agent/run", length=200 * MB, extra=key))
    assert status_of(response) == 413 and closed
    assert b"limit of 1048576 bytes" in response
    # A chunked body has no length to check up front: it is counted as it arrives and cut off past the limit.
    chunk = b" " * (256 * 1024)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(8)) + b"0\r\n\r\n"
    response, closed = raw_request(keyed_server.url, head("POST", "/chat", chunked=True, extra=key), chunks)
    assert status_of(response) == 413


def test_a_slow_client_is_cut_off(served_home, agent_app, live_server):
    app = agent_app(server={"header_timeout_s": 1.0, "body_timeout_s": 1.0})
    server = live_server(app)
    # Headers that never end (slowloris): the connection is closed after header_timeout_s.
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(b"POST /chat HTTP/1.1\r\nHost: test\r\nX-Slow: ")
    started = time.monotonic()
    assert sock.recv(1024) == b""
    assert 0.5 < time.monotonic() - started < 5
    sock.close()
    # A body that never completes: 408 after body_timeout_s.
    response, closed = raw_request(server.url, head("POST", "/chat", length=100), b'{"message": ')
    assert status_of(response) == 408 and closed


def test_failed_authentication_is_rate_limited_per_address(keyed_settings, make_client):
    settings = keyed_settings.model_copy(
        update={"server": keyed_settings.server.model_copy(update={"auth_failures_per_minute": 3})}
    )
    client = make_client(settings)
    now = [0.0]
    client.app.state.citewise.auth_failures = RateLimiter(3, clock=lambda: now[0])  # a token every 20 s
    codes = [client.get("/api/documents", headers=auth(f"guess-{i}")).status_code for i in range(5)]
    assert codes == [401, 401, 401, 429, 429]
    limited = client.get("/api/documents", headers=auth("guess-9"))
    assert int(limited.headers["Retry-After"]) >= 1
    # Once the address's failures are used up, the right key is refused like the wrong ones: a 200 among the 429s
    # would tell a guesser which of its guesses was the key.
    right = client.get("/api/documents", headers=auth("key-alice"))
    assert right.status_code == 429 and int(right.headers["Retry-After"]) >= 1
    assert right.json() == limited.json()
    assert client.post("/api/agent/run", headers=auth("key-bob"), json={"question": "x"}).status_code == 429
    # Looking at the bucket takes nothing from it: when it refills, the right key gets in, and keeps getting in.
    now[0] = 20.0
    assert [client.get("/api/documents", headers=auth("key-alice")).status_code for _ in range(3)] == [200] * 3
    assert client.get("/api/documents", headers=auth("guess-10")).status_code == 401
    assert client.get("/api/documents", headers=auth("key-alice")).status_code == 429
    assert client.get("/health").status_code == 200  # probes are never limited


@pytest.mark.parametrize("trusted", [False, True])
def test_x_forwarded_for_counts_only_from_a_trusted_proxy(served_home, agent_app, live_server, trusted):
    import httpx

    server_opts = {"rate_limit_per_minute": 3}
    if trusted:
        server_opts["trusted_proxies"] = ["127.0.0.1"]
    server = live_server(agent_app(server=server_opts))
    codes = [
        httpx.get(f"{server.url}/api/documents", headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code
        for i in range(6)
    ]
    # Spoofed addresses from an untrusted peer share the peer's own bucket; a trusted proxy's are real clients.
    assert codes == ([200] * 6 if trusted else [200, 200, 200, 429, 429, 429])


def test_one_key_shared_by_many_clients_is_limited_per_client(served_home, agent_app, live_server):
    """A widget's key is in every reader's page: one reader using up its allowance must not stop the others."""
    import httpx

    server_opts = {"rate_limit_per_minute": 2, "trusted_proxies": ["127.0.0.1"]}
    server = live_server(agent_app(api_keys=KEYS, server=server_opts))

    def get(client: str, key: str = "key-alice") -> int:
        headers = {**auth(key), "X-Forwarded-For": client}
        return httpx.get(f"{server.url}/api/documents", headers=headers).status_code

    assert [get("203.0.113.1") for _ in range(3)] == [200, 200, 429]
    assert [get("203.0.113.2") for _ in range(3)] == [200, 200, 429]  # the same key, another reader
    assert get("203.0.113.1", "key-bob") == 200  # the same reader, another key


@pytest.mark.parametrize("path", ["/chat", "/api/agent/run", "/api/agent/stream"])
def test_lone_surrogates_are_422_not_500(agent_app, started, path):
    client = started(agent_app())
    field = "message" if path == "/chat" else "question"
    for body in (
        f'{{"{field}": "\\ud800"}}',
        f'{{"{field}": "abc \\udfff def", "session_id": "\\ud800"}}',  # two errors, both echoing the input
        f'{{"{field}": "ok", "selected_text": "\\ud83d"}}',
    ):
        response = client.post(path, content=body.encode(), headers={"content-type": "application/json"})
        assert response.status_code == 422, (body, response.text)
        assert isinstance(response.json()["detail"], list)


def test_lone_surrogates_are_a_validation_error_for_library_callers(make_kb, settings):
    from citewise.agent.runner import Citewise
    from citewise.errors import ValidationError as CitewiseValidationError

    cw = Citewise(settings, kb=make_kb(settings))
    for options in ({"question": "a\ud800b"}, {"question": "ok", "selected_text": "\udc00"}):
        with pytest.raises(CitewiseValidationError, match="lone surrogate"):
            cw.request(**options)
    with pytest.raises(CitewiseValidationError, match="lone surrogate"):
        cw.request("ok", history=[{"role": "user", "content": "\ud800"}])


def test_wrong_methods_get_405_with_the_methods_the_route_takes(agent_app, started):
    client = started(agent_app())
    for method, path, allow in [
        ("OPTIONS", "/chat", "POST"),
        ("GET", "/api/agent/run", "POST"),
        ("PUT", "/api/documents", "GET, POST"),
        ("PATCH", "/api/documents/0b9e3a52-7d1c-5f4e-9a6b-2c8d1e0f3a47", "DELETE"),
    ]:
        response = client.request(method, path)
        assert response.status_code == 405, (method, path)
        assert response.headers["allow"] == allow
    # The web page keeps its own answer for its own files.
    assert client.options("/index.html").headers.get("allow") == "GET, HEAD"


def test_a_windows_path_in_an_upload_name_is_400(server_settings, make_client):
    client = make_client(server_settings)
    for name in ("C:\\evil.md", "\\\\server\\share\\evil.md", "..\\evil.md"):
        response = client.post("/api/documents", files=[("files", (name, b"# Evil\n\nText.", "text/markdown"))])
        assert response.status_code == 400, (name, response.text)
    assert client.get("/api/documents").json() == []


def test_invalid_owner_ids_in_api_keys_fail_at_start_up(tmp_path):
    for owner in ("alice smith", "", "..", "a" * 129, "eve/../bob"):
        with pytest.raises(ValidationError, match="invalid owner id"):
            Settings(home=tmp_path, api_keys={"k-1": owner})
    done = subprocess.run(
        [sys.executable, "-m", "citewise.cli", "serve", "--home", str(tmp_path)],
        env={**os.environ, "CITEWISE_API_KEYS": json.dumps({"k-1": "alice smith"})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    message = " ".join(done.stderr.split())
    assert "api_keys" in message and "invalid owner id 'alice smith'" in message and "k-1" not in message


def test_keys_are_still_required_and_accepted(keyed_settings, make_client):
    client = make_client(keyed_settings)
    assert client.get("/api/documents").status_code == 401
    assert client.get("/api/documents", headers=auth("nope")).status_code == 401
    assert client.get("/api/documents", headers={"X-API-Key": next(iter(KEYS))}).status_code == 200
    assert client.get("/health").status_code == 200  # probes stay open
