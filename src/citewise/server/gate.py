"""The request gate: everything decided before a request's body is read, as pure ASGI middleware.

FastAPI reads and parses a body before it resolves a route's dependencies (fastapi/routing.py: the body is read,
then `solve_dependencies` runs), so an API key checked in a dependency came after a 200 MB body was buffered. Here,
in order, with nothing read but the headers:

1. routing: a path that only the API serves, with a method it does not take → 405 with the right `Allow`
   (the web page mounted at `/` would otherwise answer for it, with its own `Allow: GET, HEAD`);
2. authentication, for the routes that act as a caller (those depending on `get_caller`, and every plain ASGI route
   handed to the gate, such as the MCP endpoint): no or a wrong key → 401; once a client address has used up
   `server.auth_failures_per_minute` failures, every request from it → 429, whatever key it carries, until its
   allowance refills (a right key must not stand out from the wrong ones, or a guesser would learn it);
3. the caller's rate limit, per key and client address → 429 with Retry-After; then its role: a route that
   changes documents (marked with `auth.writes`) → 403 for an ask-only key (`ask_only_keys`);
4. the body: over the route's limit by its Content-Length → 413 at once; a streamed (chunked) body is counted as it
   arrives and cut off at the limit with 413; a body not complete within `server.body_timeout_s` → 408.

Afterwards, an error that is only the fallout of a client that went away (a stream writing into a closed pipe) is
logged at debug level: a disconnect is the client's choice, not a server error.

The caller found here is handed to the route through the ASGI scope (`deps.get_caller` reads it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import HTTPException, status
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citewise.server.auth import Caller, refuse_ask_only, resolve_caller, retry_after_header, writes
from citewise.server.http_errors import error_body

if TYPE_CHECKING:
    from citewise.server.deps import ServerState

log = logging.getLogger(__name__)

CALLER_SCOPE_KEY = "citewise.caller"
_TOO_MANY_FAILURES = "Too many failed authentications from this address."


class RequestGate:
    def __init__(self, app: ASGIApp, state: ServerState, routes: Sequence[tuple[BaseRoute, int]]) -> None:
        """`routes`: every API route with the most bytes its body may have."""
        self.app = app
        self.state = state
        self.routes = list(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.state.settings.server
        route, limit, allowed = self._match(scope)
        if route is None and allowed:
            await _reply(scope, send, 405, "Method Not Allowed", {"allow": ", ".join(sorted(allowed))})
            return
        if route is not None and _needs_caller(route):
            rejection = await self._admit(scope, route)
            if rejection is not None:
                await _reply(scope, send, *rejection)
                return
        limit = limit or int(settings.max_body_mb * 1024 * 1024)
        length = _content_length(scope)
        if length is not None and length > limit:
            await _reply(scope, send, *_too_large(limit))
            return
        reader = _BodyReader(receive, limit, settings.body_timeout_s)
        try:
            await self.app(scope, reader, send)
        except Exception as exc:
            if not (reader.disconnected and _disconnect_fallout(exc)):
                raise
            # A client that stopped reading and then hung up: the stream's writer finds its pipe closed. That is
            # the client's choice, not a server error (the stream already counted and logged the disconnect).
            log.debug("%s %s: client gone (%r)", scope.get("method"), scope.get("path"), exc)

    def _match(self, scope: Scope) -> tuple[BaseRoute | None, int | None, set[str]]:
        """(the API route this request is for, or None; its body limit; the methods the path takes when the method
        is wrong)."""
        allowed: set[str] = set()
        for route, limit in self.routes:
            match, _ = Route.matches(route, scope) if isinstance(route, APIRoute) else route.matches(scope)
            if match is Match.FULL:
                return route, limit, set()
            if match is Match.PARTIAL:
                allowed |= getattr(route, "methods", None) or set()
        return None, None, allowed

    async def _admit(self, scope: Scope, route: BaseRoute) -> tuple[int, str, dict[str, str]] | None:
        """Authenticate, rate-limit and check the caller's role; None when the request may go on (the caller is
        then in the scope)."""
        state, settings = self.state, self.state.settings
        client = _client(scope)
        failures = f"ip:{client}"
        if settings.api_keys:
            # Failed checks are limited per address, and an address that has used up its failures is refused before
            # its key is looked at: were a right key still let through, each 429 would tell a guesser "wrong key",
            # and the one 200 which guess was right. Only looked at, not counted: the key may be right.
            wait = await state.auth_failures.apeek(failures)
            if wait > 0:
                return _rate_limited(_TOO_MANY_FAILURES, wait)
        headers = Headers(scope=scope)
        try:
            caller = resolve_caller(headers, settings.api_keys, settings.admin_keys, settings.ask_only_keys)
        except HTTPException as exc:
            wait = await state.auth_failures.aacquire(failures)
            if wait > 0:
                return _rate_limited(_TOO_MANY_FAILURES, wait)
            return exc.status_code, str(exc.detail), dict(exc.headers or {})
        # Per key and client address: one key may be shared by many clients (a widget's key is in every reader's
        # page), and one reader must not use up the others' allowance. Without keys, per client address. With
        # PostgreSQL the buckets are shared by every replica.
        wait = await state.limiter.aacquire(f"{caller.key_id}@{client}" if caller.key_id else f"ip:{client}")
        if wait > 0:
            per_minute = settings.server.rate_limit_per_minute
            return _rate_limited(f"Rate limit of {per_minute} requests per minute exceeded.", wait)
        if caller.ask_only and _writes(route):
            refused = refuse_ask_only()
            return refused.status_code, str(refused.detail), {}
        scope[CALLER_SCOPE_KEY] = caller
        return None


def _disconnect_fallout(exc: BaseException) -> bool:
    """Whether an error is what writing to a client that went away raises (possibly inside a task group)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_disconnect_fallout(e) for e in exc.exceptions)
    return isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError | ClientDisconnect | ConnectionError)


def caller_of(scope: Scope) -> Caller | None:
    return scope.get(CALLER_SCOPE_KEY)


def _needs_caller(route: BaseRoute) -> bool:
    from citewise.server.deps import get_caller

    if not isinstance(route, APIRoute):
        return True  # a plain ASGI app (the MCP endpoint) acts as its caller on every request

    cached = getattr(route, "_citewise_needs_caller", None)
    if cached is None:
        cached = _depends_on(route.dependant, get_caller)
        route._citewise_needs_caller = cached  # type: ignore[attr-defined]
    return cached


def _writes(route: BaseRoute) -> bool:
    """Whether a route changes documents (depends on `auth.writes`). A plain ASGI route (MCP) only reads."""
    if not isinstance(route, APIRoute):
        return False
    cached = getattr(route, "_citewise_writes", None)
    if cached is None:
        cached = _depends_on(route.dependant, writes)
        route._citewise_writes = cached  # type: ignore[attr-defined]
    return cached


def _depends_on(dependant: Any, call: Any) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


def _content_length(scope: Scope) -> int | None:
    value = Headers(scope=scope).get("content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _too_large(limit: int) -> tuple[int, str, dict[str, str]]:
    detail = f"The request body is larger than this endpoint's limit of {limit} bytes."
    return status.HTTP_413_CONTENT_TOO_LARGE, detail, {"connection": "close"}


def _rate_limited(detail: str, wait: float) -> tuple[int, str, dict[str, str]]:
    return status.HTTP_429_TOO_MANY_REQUESTS, detail, {"retry-after": retry_after_header(wait)}


async def _reply(scope: Scope, send: Send, code: int, detail: str, headers: dict[str, str]) -> None:
    """A JSON error sent without reading the body. An unread body ends the connection (the server closes it rather
    than read what is left), so say so."""
    body = json.dumps(error_body(scope.get("path", ""), code, detail)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    if "connection" not in headers:
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": code, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class _BodyReader:
    """`receive` with the body bounded: at most `limit` bytes, all of it within `timeout_s` of the first read."""

    def __init__(self, receive: Receive, limit: int, timeout_s: float) -> None:
        self._receive = receive
        self._limit = limit
        self._timeout_s = timeout_s
        self._deadline: float | None = None
        self._read = 0
        self._done = False
        self.disconnected = False

    async def __call__(self) -> Message:
        if self._done:  # the body is complete: what is left to receive is the disconnect
            message = await self._receive()
            self.disconnected = message["type"] == "http.disconnect"
            return message
        if self._deadline is None:
            self._deadline = time.monotonic() + self._timeout_s
        try:
            message = await asyncio.wait_for(self._receive(), max(0.0, self._deadline - time.monotonic()))
        except TimeoutError:
            raise HTTPException(
                status.HTTP_408_REQUEST_TIMEOUT,
                detail=f"The request body did not arrive within {self._timeout_s:g} s.",
                headers={"connection": "close"},
            ) from None
        if message["type"] == "http.request":
            self._read += len(message.get("body", b""))
            if self._read > self._limit:
                code, detail, headers = _too_large(self._limit)
                raise HTTPException(code, detail=detail, headers=headers)
            self._done = not message.get("more_body", False)
        else:
            self._done = True
            self.disconnected = message["type"] == "http.disconnect"
        return message
