"""Shared by the browser tests: Debian's Chromium driven by Playwright (never a browser download), a real uvicorn server
on a loopback port, the fixture corpus ingested once per module, and where screenshots go.

Screenshots go to a temporary folder, so a test run leaves the working tree as it found it; with
CITEWISE_SCREENSHOTS set they go there instead (a relative path is taken from the repository root):
`CITEWISE_SCREENSHOTS=bench/results/screenshots` regenerates the committed ones docs/widget.md describes."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import uvicorn
from tests.support.settings import make_settings

from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS_ENV = "CITEWISE_SCREENSHOTS"
CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"

ANSWERABLE = "What port does the Orbitron daemon listen on by default?"
UNANSWERABLE = "What is the recommended recipe for sourdough bread with rye flour?"


class HostSite:
    """A static site on its own loopback port (its own origin): every path answers with `page(path)`."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.default = ""
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = site.pages.get(self.path.split("?")[0], site.default).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="host-site", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class LiveServer:
    """uvicorn on a free loopback port, in a background thread."""

    def __init__(self, app) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, name="uvicorn-web", daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


@pytest.fixture(scope="module")
def site() -> Iterator[HostSite]:
    """A docs site on another loopback origin, to embed the widget in."""
    host = HostSite()
    yield host
    host.close()


def serve(indexed: KnowledgeBase, *, key: str | None = None, owner: str = "public", site: HostSite | None = None):
    """A real server in quote mode on the module's index: with `key`, API keys on (that key acting as `owner`); with
    `site`, that site's origin allowed by CORS (a page embedding the widget). Use as a context manager."""
    from citewise.agent.runner import Citewise
    from citewise.server import create_app

    settings = indexed.settings
    update: dict = {}
    if key:
        update["api_keys"] = {key: owner}
    if site is not None:
        update["server"] = settings.server.model_copy(update={"cors_origins": (site.origin,)})
    settings = settings.model_copy(update=update) if update else settings
    return LiveServer(create_app(settings, citewise=Citewise(settings, kb=indexed)))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, embedder) -> KnowledgeBase:
    """The fixture corpus ingested once for every server in this module."""
    kb = KnowledgeBase(make_settings(tmp_path_factory.mktemp("web") / "home"), embedder=embedder)
    corpus = tmp_path_factory.mktemp("web-corpus") / "corpus"
    shutil.copytree(CORPUS, corpus)
    Ingestor(kb).ingest_paths([corpus])
    assert kb.store.count() > 0
    return kb


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
        pytest.skip("Debian Chromium is not installed at /usr/bin/chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory) -> Path:
    """$CITEWISE_SCREENSHOTS (from the repository root when relative), else a temporary folder."""
    chosen = os.environ.get(SCREENSHOTS_ENV, "").strip()
    folder = ROOT / chosen if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def screenshot(screenshot_dir: Path) -> Callable[..., Path]:
    """screenshot(page, "name.png", **page.screenshot options): saves it in `screenshot_dir`, returns its path."""

    def save(page, name: str, **options) -> Path:
        path = screenshot_dir / name
        page.screenshot(path=str(path), **options)
        return path

    return save
