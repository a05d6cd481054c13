"""A static documentation site on loopback, written for the tests: a real HTTP/1.1 server (http.server in a thread)
serving pages from a dict that a test may edit between two syncs.

Every 200 carries an ETag and a Last-Modified; a request whose If-None-Match (or If-Modified-Since) matches gets a
304, as a real static host answers. Every request is logged with its headers, so a test can assert what the crawler
asked for and what it sent.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    location: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False  # no Content-Length: the body runs until the connection closes
    version: int = 1  # bumped on every change: Last-Modified follows it


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    status: int
    at: float = 0.0  # time.monotonic() when the request arrived


class DocsSite:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.log: list[Hit] = []
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                site._serve(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> DocsSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, path: str) -> str:
        return self.base + path

    # -- editing the site --------------------------------------------------------------------------------------
    def page(self, path: str, body: str | bytes, content_type: str = "text/html; charset=utf-8", **extra) -> None:
        data = body.encode() if isinstance(body, str) else body
        with self._lock:
            old = self.routes.get(path)
            version = (old.version + 1) if old is not None else 1
            self.routes[path] = Route(body=data, content_type=content_type, version=version, **extra)

    def redirect(self, path: str, to: str, status: int = 301) -> None:
        with self._lock:
            self.routes[path] = Route(status=status, location=to)

    def remove(self, path: str) -> None:
        with self._lock:
            self.routes.pop(path, None)

    def requests_for(self, path: str) -> list[Hit]:
        return [hit for hit in self.log if hit.path == path]

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    # -- serving -----------------------------------------------------------------------------------------------
    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        path = handler.path.split("#", 1)[0]
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            route = self.routes.get(path)
        if route is None:
            status, body, extra, ctype = 404, b"<html><body><h1>Not found</h1></body></html>", {}, "text/html"
        elif route.location is not None:
            status, body, extra, ctype = route.status, b"", {"Location": route.location}, "text/html"
        else:
            etag = '"' + hashlib.sha1(route.body).hexdigest()[:16] + '"'
            modified = formatdate(1_700_000_000 + route.version * 86400, usegmt=True)
            extra = {"ETag": etag, "Last-Modified": modified, **route.headers}
            status, body, ctype = route.status, route.body, route.content_type
            if headers.get("if-none-match") == etag or (
                "if-none-match" not in headers and headers.get("if-modified-since") == modified
            ):
                status, body = 304, b""
        with self._lock:
            self.log.append(Hit(path=path, headers=headers, status=status, at=arrived))
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        for key, value in extra.items():
            handler.send_header(key, value)
        if route is not None and route.stream and status == 200:
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True
            for start in range(0, len(body), 65536):
                try:
                    handler.wfile.write(body[start : start + 65536])
                except OSError:  # the crawler hung up at its cap
                    return
            return
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if status != 304:
            handler.wfile.write(body)
