"""Who is calling, and how often: API keys → owners, and a per-key rate limit.

These run in the request gate (gate.py), before the request's body is read: a caller without a valid key costs
the server a header parse, never a body.

With `CITEWISE_API_KEYS` set (JSON object, key → owner) every API request must carry a key, as
`Authorization: Bearer <key>` or `X-API-Key: <key>`, and acts as that key's owner: it sees and retrieves its own
documents plus public ones. Without keys the server is a single-user local tool: every request acts as the
`public` owner, so what anyone uploads is visible to everyone who can reach the port.

Two roles on top of a key: `admin_keys` may also read their owner's analytics; `ask_only_keys` may only ask (a key
in public page source, such as the widget's): the routes that change documents are marked with the `writes`
dependency, and the gate refuses them to such a key (403) before their body is read.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import HTTPException, status

from citewise.types import PUBLIC, Owner

if TYPE_CHECKING:
    from citewise.settings import Settings
    from citewise.state.database import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caller:
    owner: Owner  # whose documents this caller sees (Owner.sees), and owns
    key_id: str | None  # a non-secret label for the key (used for rate limiting and logs), None without keys
    # May read its owner's answer analytics: a key in `admin_keys`, or anyone when no keys are set (a local tool).
    admin: bool = False
    # May ask, search, rate and open citations, but not upload or delete: a key in `ask_only_keys`.
    ask_only: bool = False


def writes() -> None:
    """Marks a route that changes documents (`dependencies=[Depends(writes)]`): the request gate refuses it to an
    ask-only key with 403, from the headers, before the body is read."""


def refuse_ask_only() -> HTTPException:
    return HTTPException(
        status.HTTP_403_FORBIDDEN,
        detail="This API key may only ask questions: uploads and deletes need another key (settings: ask_only_keys).",
    )


def presented_key(headers: Mapping[str, str]) -> str | None:
    header = headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key") or None


def resolve_caller(
    headers: Mapping[str, str],
    api_keys: dict[str, str],
    admin_keys: Collection[str] = (),
    ask_only_keys: Collection[str] = (),
) -> Caller:
    """The caller's owner and roles; 401 when keys are configured and none (or an unknown one) was presented."""
    if not api_keys:
        return Caller(owner=PUBLIC, key_id=None, admin=True)
    key = presented_key(headers)
    if key is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="An API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    for candidate, owner in api_keys.items():
        # Constant-time comparison: response timing must not reveal how much of a key was right.
        if hmac.compare_digest(candidate.encode(), key.encode()):
            ask_only = any(hmac.compare_digest(candidate.encode(), k.encode()) for k in ask_only_keys)
            admin = not ask_only and any(hmac.compare_digest(candidate.encode(), k.encode()) for k in admin_keys)
            return Caller(owner=Owner.of(owner), key_id=_key_label(candidate), admin=admin, ask_only=ask_only)
    raise HTTPException(status.HTTP_401_UNAUTHORIZED, detail="Invalid API key.", headers={"WWW-Authenticate": "Bearer"})


def _key_label(key: str) -> str:
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:12]


class RateLimiter:
    """A token bucket per caller: `per_minute` requests in a burst, refilled continuously at per_minute/60 per second.

    A dozen lines of our own instead of the `limits` package: one process, in memory, and one policy, so a dependency
    would add nothing but another thing to pin. Replicas sharing a PostgreSQL share their buckets instead
    (`SharedRateLimiter`).
    """

    def __init__(self, per_minute: int, *, clock=time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # caller → (tokens, last refill time)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def acquire(self, caller: str) -> float:
        """Take one token: 0.0 when allowed, else the seconds until the next token (the Retry-After)."""
        if not self.enabled:
            return 0.0
        with self._lock:
            now = self._clock()
            if len(self._buckets) > 10_000:  # callers idle for a minute are back to a full bucket: forget them
                full_after = 60.0
                self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full_after}
            tokens, last = self._buckets.get(caller, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[caller] = (tokens - 1.0, now)
                return 0.0
            self._buckets[caller] = (tokens, now)
            return (1.0 - tokens) / self.rate

    async def aacquire(self, caller: str) -> float:
        return self.acquire(caller)

    def peek(self, caller: str) -> float:
        """Like `acquire` without taking a token: 0.0 while the caller's bucket holds one, else the seconds until
        it does."""
        if not self.enabled:
            return 0.0
        with self._lock:
            if caller not in self._buckets:
                return 0.0
            tokens, last = self._buckets[caller]
            tokens = min(self.capacity, tokens + (self._clock() - last) * self.rate)
            return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    async def apeek(self, caller: str) -> float:
        return self.peek(caller)


# A bucket's tokens now, as `state.tables.take_token` refills them, read without changing or locking the row.
_PEEK = """
SELECT least(%(capacity)s, tokens + (extract(epoch FROM clock_timestamp()) - refilled_at) * %(rate)s)
FROM rate_buckets WHERE bucket = %(bucket)s
"""


class SharedRateLimiter:
    """The same token buckets in PostgreSQL (`rate_buckets`), so a caller's limit holds across every replica: a
    client spreading requests over three replicas gets `per_minute`, not three times it. One statement per request,
    run off the event loop. If the database can't be reached the request is let through (and logged): an outage
    of the limiter must not turn into an outage of the API.
    """

    def __init__(self, per_minute: int, db: Database, *, prefix: str) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._db = db
        self._prefix = prefix  # one table, several limiters (per key, failed authentications per address)
        self._calls = 0

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def acquire(self, caller: str) -> float:
        if not self.enabled:
            return 0.0
        from citewise.state.tables import forget_idle_buckets, take_token

        try:
            self._calls += 1
            if self._calls % 10_000 == 0:  # callers idle for a minute are back to a full bucket: forget them
                forget_idle_buckets(self._db, 60.0)
            return take_token(self._db, f"{self._prefix}:{caller}", self.capacity, self.rate)
        except Exception as exc:
            log.warning("Rate limit not checked (database unavailable): %s", exc)
            return 0.0

    async def aacquire(self, caller: str) -> float:
        return await asyncio.to_thread(self.acquire, caller) if self.enabled else 0.0

    def peek(self, caller: str) -> float:
        if not self.enabled:
            return 0.0
        try:
            with self._db.transaction() as conn:
                params = {"bucket": f"{self._prefix}:{caller}", "capacity": self.capacity, "rate": self.rate}
                row = conn.execute(_PEEK, params).fetchone()
        except Exception as exc:
            log.warning("Rate limit not checked (database unavailable): %s", exc)
            return 0.0
        tokens = self.capacity if row is None else row[0]
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    async def apeek(self, caller: str) -> float:
        return await asyncio.to_thread(self.peek, caller) if self.enabled else 0.0


def retry_after_header(wait_s: float) -> str:
    return str(max(1, math.ceil(wait_s)))


def rate_limiters(settings: Settings) -> tuple[RateLimiter | SharedRateLimiter, RateLimiter | SharedRateLimiter]:
    """(requests per key, failed authentications per address): in memory, or shared through PostgreSQL."""
    server = settings.server
    if settings.uses_postgres:
        from citewise.state.database import database

        db = database(settings)
        return (
            SharedRateLimiter(server.rate_limit_per_minute, db, prefix="requests"),
            SharedRateLimiter(server.auth_failures_per_minute, db, prefix="auth-failures"),
        )
    return RateLimiter(server.rate_limit_per_minute), RateLimiter(server.auth_failures_per_minute)
