"""HTTP for sources: only the addresses a source may reach, bounded in size and time, carrying nothing of ours.

- Schemes other than http and https (file://, ftp://, data:) are refused.
- Every request goes to an address checked here first: the host is resolved, every address it resolves to must be
  public (not loopback, private, link-local, shared, multicast or reserved) unless the source allows private
  networks, and the request is then sent to that very address, with the Host header and TLS server name keeping the
  host's name. A DNS answer that changes between the check and the connection (rebinding) cannot reach inside.
- Redirects are followed here, hop by hop: each hop is checked like the first (scheme, address, and the source's
  scope), and the chain is returned so the sync can record it.
- Bodies are read as a stream and abandoned past the cap (decompressed bytes are counted: a gzip bomb stops there).
- Requests carry a User-Agent and conditional headers only: no Authorization, no cookies kept between requests, and
  no proxy or netrc credentials from the environment (`trust_env=False`). Citewise's API keys never leave.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from citewise.errors import SourceError

REDIRECTS = frozenset({301, 302, 303, 307, 308})


class Refused(SourceError):
    """The network policy refused a URL (scheme, address or scope): never retried, never fetched."""


class TooLarge(SourceError):
    """A response was bigger than the cap."""


@dataclass
class Response:
    url: str  # the final URL, after redirects
    status: int
    headers: httpx.Headers
    body: bytes = b""
    redirects: list[str] = field(default_factory=list)  # the URLs that redirected, in order


def _mb(size: int) -> str:
    return f"{round(size / 1048576, 2):g}"


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def without_userinfo(url: str) -> str:
    """`url` without a user name or password: httpx would turn them into an Authorization header."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query, parts.fragment))


def check_scheme(url: str) -> None:
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        shown = f"{scheme}://" if scheme else "a URL without http:// or https://"
        raise Refused(f"{url}: {shown} is not fetched; sources crawl http:// and https:// only")


def resolve_checked(host: str, port: int, *, allow_private: bool) -> list[str]:
    """Every address `host` resolves to, once all of them passed the policy (blocking: DNS)."""
    try:
        addresses = [ipaddress.ip_address(host.strip("[]")).compressed]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise SourceError(f"{host}: cannot resolve the name ({exc.strerror or exc})") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise SourceError(f"{host}: the name resolves to no address")
    if not allow_private:
        inside = [a for a in addresses if not is_public(a)]
        if inside:
            raise Refused(
                f"{host} resolves to {inside[0]}, a loopback, private or link-local address: refused. Add the source "
                "with --allow-private-network if it really is on your network."
            )
    return addresses


def checked_pool_manager(*, allow_private: bool, user_agent: str, timeout_s: float):
    """A urllib3 pool manager for dulwich's HTTP client (Git sources) that opens every connection to an address
    `resolve_checked` passed, the one it connects to (no second DNS lookup in between). dulwich lets urllib3 follow
    redirects and then rebases the repository URL on the last hop, so each hop opens its connection here too: a
    redirect to a private address is refused like a first request to it. No proxy from the environment, as for
    web sources; TLS names and certificates are still those of the host name."""
    import urllib3
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class CheckedConnection(HTTPConnection):
        def _new_conn(self):
            name = self._dns_host
            address = resolve_checked(name.strip("[]"), self.port, allow_private=allow_private)[0]
            self._dns_host = address  # only the TCP connect reads it; TLS verifies `host`, restored below
            try:
                return super()._new_conn()
            finally:
                self._dns_host = name

    class CheckedTLSConnection(CheckedConnection, HTTPSConnection):
        pass

    class CheckedPool(HTTPConnectionPool):
        ConnectionCls = CheckedConnection

    class CheckedTLSPool(HTTPSConnectionPool):
        ConnectionCls = CheckedTLSConnection

    manager = urllib3.PoolManager(
        headers={"User-Agent": user_agent}, timeout=urllib3.Timeout(timeout_s), cert_reqs="CERT_REQUIRED"
    )
    manager.pool_classes_by_scheme = {"http": CheckedPool, "https": CheckedTLSPool}
    return manager


class Fetcher:
    """One sync's HTTP client (use `async with`). `in_scope(url)` says whether a redirect may go to `url`."""

    def __init__(
        self,
        *,
        allow_private: bool,
        user_agent: str,
        timeout_s: float,
        max_redirects: int,
        concurrency: int,
        in_scope: Callable[[str], bool] | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.max_redirects = max_redirects
        self.in_scope = in_scope or (lambda url: True)
        self.requests = 0
        self.log: list[tuple[str, int]] = []  # (url, status) of every request sent, in order
        self._client = httpx.AsyncClient(
            headers={"User-Agent": user_agent, "Accept-Encoding": "gzip, deflate"},
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._resolved: dict[tuple[str, int], list[str]] = {}
        self._delays: dict[str, float] = {}  # host → seconds between requests (robots.txt Crawl-delay)
        self._next_slot: dict[str, float] = {}
        self._slot_lock = asyncio.Lock()

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    def set_delay(self, host: str, seconds: float) -> None:
        self._delays[host] = max(0.0, seconds)

    async def get(
        self,
        url: str,
        *,
        max_bytes: int,
        conditional: Callable[[str], dict[str, str]] | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> Response:
        """GET `url`, following redirects that `allowed` (default: the source's scope) accepts. `conditional(url)`
        gives the If-None-Match / If-Modified-Since headers to send to each hop. Raises Refused, TooLarge, or
        SourceError for a network failure."""
        allowed = allowed or self.in_scope
        chain: list[str] = []
        current = without_userinfo(url)
        while True:
            check_scheme(current)
            if chain and not allowed(current):
                raise Refused(f"{chain[0]} redirects to {current}, outside the source: not followed")
            response = await self._get_once(current, max_bytes, (conditional or (lambda u: {}))(current))
            location = response.headers.get("location")
            if response.status not in REDIRECTS or not location:
                response.redirects = chain
                return response
            chain.append(current)
            if len(chain) > self.max_redirects:
                raise SourceError(f"{url}: more than {self.max_redirects} redirects (sync.max_redirects)")
            current = without_userinfo(urljoin(current, location.strip()).split("#", 1)[0])

    async def _get_once(self, url: str, max_bytes: int, extra: dict[str, str]) -> Response:
        target = httpx.URL(url)
        host, port = target.host, target.port or (443 if target.scheme == "https" else 80)
        key = (host, port)
        if key not in self._resolved:
            self._resolved[key] = await asyncio.to_thread(resolve_checked, host, port, allow_private=self.allow_private)
        address = self._resolved[key][0]
        headers = {"Host": target.netloc.decode("ascii"), **extra}
        extensions = {"sni_hostname": host} if target.scheme == "https" else {}
        await self._wait_turn(host)
        self.requests += 1
        try:
            async with self._client.stream(
                "GET", target.copy_with(host=address), headers=headers, extensions=extensions
            ) as reply:
                self.log.append((url, reply.status_code))
                length = reply.headers.get("content-length")
                if length and length.isdigit() and int(length) > max_bytes:
                    raise TooLarge(f"{url}: {int(length) / 1048576:.2f} MB is over the {_mb(max_bytes)} MB cap")
                body = bytearray()
                if reply.status_code not in REDIRECTS and reply.status_code != 304:
                    async for part in reply.aiter_bytes():
                        body += part
                        if len(body) > max_bytes:
                            raise TooLarge(f"{url}: over the {_mb(max_bytes)} MB cap")
                return Response(url=url, status=reply.status_code, headers=reply.headers, body=bytes(body))
        except httpx.TimeoutException as exc:
            raise SourceError(f"{url}: timed out ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise SourceError(f"{url}: {type(exc).__name__}: {exc}") from exc

    async def _wait_turn(self, host: str) -> None:
        """Crawl-delay: requests to one host start at least that many seconds apart."""
        delay = self._delays.get(host, 0.0)
        if delay <= 0:
            return
        async with self._slot_lock:
            now = time.monotonic()
            start = max(now, self._next_slot.get(host, 0.0))
            self._next_slot[host] = start + delay
        if start > now:
            await asyncio.sleep(start - now)
