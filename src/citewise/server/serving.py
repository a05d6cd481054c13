"""How `citewise serve` runs the app: uvicorn with every connection-level bound set from `server.*` settings.

- `header_timeout_s`: a connection must deliver a request's complete headers within this time (also each next
  request on a kept-alive connection), or it is closed. uvicorn has no such timeout of its own, so a client that
  sends one header byte at a time (slowloris) held its connection for ever.
- `keep_alive_s`: idle keep-alive connections are closed after it (uvicorn's `timeout_keep_alive`).
- `max_connections`: open connections and requests in progress before new requests get 503 (`limit_concurrency`).
- Proxy headers are off in uvicorn (it trusts X-Forwarded-For from 127.0.0.1 by default); the app honours them
  from `server.trusted_proxies` only.

The body's own bounds (size, time) are the request gate's (gate.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from citewise.settings import Settings


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline for each request's headers."""

    header_timeout_s: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_timed_out)

    def _cancel_header_timer(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request line and headers are in
            self._cancel_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()  # the next request on this connection gets the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.debug("Closing a connection that sent no complete request headers in time")
            self.transport.close()


def uvicorn_config(app: Any, settings: Settings, *, host: str, port: int, log_level: str = "info") -> uvicorn.Config:
    server = settings.server
    protocol = type(
        "CitewiseH11Protocol", (HeaderTimeoutH11Protocol,), {"header_timeout_s": float(server.header_timeout_s)}
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol,
        proxy_headers=False,
        timeout_keep_alive=server.keep_alive_s,
        limit_concurrency=server.max_connections,
        h11_max_incomplete_event_size=16 * 1024,  # request line + headers
    )
