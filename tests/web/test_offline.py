"""Nothing the server's pages load comes from outside: in real Chromium against a real uvicorn server on loopback, the
API reference (/docs, Swagger UI), the web chat (/) and a docs page embedding the widget are opened and used, and
every request they make (scripts, stylesheets, fonts, icons, fetches, workers) is recorded. Each must go to the
Citewise server, or, for the widget, to the loopback site that embeds it; a CDN, a font service or a schema
validator would show up as a request to another host. The plain-HTTP half is tests/server/test_api_docs.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
from tests.web.conftest import ANSWERABLE, CHROMIUM, LiveServer, serve

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
    pytest.skip("Debian Chromium is not installed at /usr/bin/chromium", allow_module_level=True)

KEY = "k-offline-51c2"


@pytest.fixture(scope="module")
def server(indexed, site) -> Iterator[LiveServer]:
    """Quote mode on the fixture corpus, keys on (as a site embedding the widget runs it), the site allowed by CORS."""
    with serve(indexed, key=KEY, owner="docs-site", site=site) as live:
        site.default = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Orbitron docs</title></head>'
            "<body><h1>Orbitron guide</h1><p>Read the configuration reference.</p>"
            f'<script src="{live.url}/widget.js" data-citewise-key="{KEY}" data-title="Ask the docs" defer></script>'
            "</body></html>"
        )
        yield live


class Recorded:
    """What one browser context did: every request it made (page, frames, workers), its script errors and failed
    loads (an HTTP error, or a request that got no answer)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []

    def paths(self, origin: str) -> set[str]:
        return {urlsplit(url).path for url in self.requests if urlsplit(url)[:2] == urlsplit(origin)[:2]}


def outside(requests: list[str], *origins: str) -> list[str]:
    """The requests that went anywhere but `origins` (data: and blob: URLs never leave the page)."""
    allowed = {urlsplit(origin)[:2] for origin in origins}
    return [
        url for url in requests if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url)[:2] not in allowed
    ]


def leaves_loopback(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and parts.hostname != "127.0.0.1"


@contextmanager
def browsing(browser, *origins: str) -> Iterator[tuple[object, Recorded]]:
    """A fresh page whose context records everything; on the way out (even when the test failed: a CDN request is
    then the likely reason), no request may have gone anywhere but `origins`."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    seen = Recorded()
    context.on("request", lambda r: seen.requests.append(r.url))
    context.on("requestfailed", lambda r: seen.errors.append(f"{r.url} failed: {r.failure}"))
    context.on("response", lambda r: seen.errors.append(f"{r.url} answered {r.status}") if r.status >= 400 else None)
    # A request for another host is refused at once (and still recorded): nothing leaves the machine, even when a
    # test fails, and a page waiting on a network that isn't there fails fast instead of timing out.
    context.route(leaves_loopback, lambda route: route.abort("blockedbyclient"))
    page = context.new_page()
    page.on("pageerror", lambda exc: seen.errors.append(str(exc)))
    try:
        yield page, seen
        page.wait_for_load_state("networkidle")
    finally:
        context.close()
        assert outside(seen.requests, *origins) == [], "the page loaded something from outside the machine"


def test_api_reference_renders_from_the_server_alone(browser, server):
    with browsing(browser, server.url) as (page, seen):
        page.goto(server.url + "/docs")
        page.wait_for_selector(".opblock", timeout=60_000)  # Swagger UI ran: it read /openapi.json, drew operations
        assert page.locator(".opblock").count() >= 10
        assert "/api/agent/stream" in page.locator(".swagger-ui").inner_text()
        page.locator(".opblock-summary").first.click()  # opening an operation renders its parameters and responses
        page.wait_for_selector(".opblock-body", timeout=30_000)
        # Swagger UI's stylesheet applied (a file of the server too): unstyled, an operation has square corners.
        assert page.evaluate("getComputedStyle(document.querySelector('.swagger-ui .opblock')).borderRadius") != "0px"

    assert {"/docs", "/openapi.json", "/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"} <= seen.paths(
        server.url
    )
    assert seen.errors == []


def test_web_chat_answers_from_the_server_alone(browser, server):
    with browsing(browser, server.url) as (page, seen):
        page.add_init_script(f"localStorage.setItem('citewise.settings', JSON.stringify({{apiKey: '{KEY}'}}))")
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-ready='1']")
        page.fill("#question", ANSWERABLE)
        page.press("#question", "Enter")
        page.wait_for_selector("article.msg-assistant[data-state='done']", timeout=120_000)

    paths = seen.paths(server.url)
    assert {"/", "/api/agent/stream"} <= paths and any(p.startswith("/vendor/") for p in paths)
    # The page asks /api/analytics whether to show its link: a key that is not an admin's is refused.
    assert seen.errors == [f"{server.url}/api/analytics?days=1&top=1 answered 403"]


def test_widget_on_a_docs_page_answers_from_the_server_alone(browser, server, site):
    with browsing(browser, server.url, site.origin) as (page, seen):
        page.goto(site.origin + "/guide/")
        page.wait_for_selector("[data-citewise-widget][data-ready='1']", state="attached", timeout=30_000)
        page.click(".cw-launcher")
        page.fill(".cw-input", ANSWERABLE)
        page.press(".cw-input", "Enter")
        page.wait_for_selector(".cw-answer[data-state='done']", timeout=120_000)

    paths = seen.paths(server.url)
    assert {"/widget.js", "/api/agent/stream"} <= paths and any(p.startswith("/vendor/") for p in paths)
    assert seen.paths(site.origin) == {"/guide/"}
    assert seen.errors == []
