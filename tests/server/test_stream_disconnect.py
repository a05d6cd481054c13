"""A streaming client that stops reading and then hangs up is an ordinary disconnect: the request ends quietly (it
is counted and logged at INFO), not as an ERROR with a traceback. Driven at the ASGI level so the stall is exact:
the client takes two body chunks, stops reading, and disconnects while the stream still has events to write."""

from __future__ import annotations

import asyncio
import json
import logging

from tests.agent.agent_support import WORKER_QUESTION


async def stalled_client(app, body: bytes) -> None:
    first = True
    stalled = asyncio.Event()

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": body, "more_body": False}
        await stalled.wait()
        await asyncio.sleep(0.3)
        return {"type": "http.disconnect"}

    chunks = 0

    async def send(message):
        nonlocal chunks
        if message["type"] == "http.response.body":
            chunks += 1
            if chunks >= 2:
                stalled.set()
                await asyncio.Event().wait()  # never returns: the client stopped reading

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/agent/stream",
        "raw_path": b"/api/agent/stream",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    async with app.router.lifespan_context(app):
        await app(scope, receive, send)  # returns: nothing for the server to report


def test_a_stalled_then_gone_client_is_not_a_server_error(agent_app, caplog):
    app = agent_app()
    body = json.dumps({"question": WORKER_QUESTION, "mode": "quote", "returnTrace": True}).encode()
    with caplog.at_level(logging.DEBUG):
        asyncio.run(stalled_client(app, body))
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("Client disconnected" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
