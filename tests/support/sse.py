"""A client of the SSE stream that follows docs/server.md's rule literally: show `token` text as it comes, clear it
on `discard`, stop at `complete` or `error`. The tests and `make chaos` both check that it ends with the answer."""

from __future__ import annotations

import json

import httpx
from httpx_sse import connect_sse


def literal_client(url: str, body: dict) -> tuple[str, dict, list[str]]:
    """(the text shown at the end, the terminal event's data, the event names) — by the documented rules only."""
    shown = ""
    names: list[str] = []
    with (
        httpx.Client(base_url=url, timeout=120) as client,
        connect_sse(client, "POST", "/api/agent/stream", json=body) as source,
    ):
        for event in source.iter_sse():
            names.append(event.event)
            if event.event == "token":
                shown += json.loads(event.data)["text"]
            elif event.event == "discard":
                shown = ""
            elif event.event in ("complete", "error"):
                return shown, json.loads(event.data), names
    raise AssertionError("the stream ended without a terminal event")
