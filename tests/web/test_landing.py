"""The landing page in a real browser (Debian's headless Chromium): example questions made from the docs' headings that
a click asks, and answers whose links open the pages the server itself serves (`make demo`: --base-url …/pages and
--pages), the docs' own relative links included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.settings import make_settings
from tests.web.conftest import CHROMIUM, LiveServer

from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor
from citewise.server import create_app

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
    pytest.skip("Debian Chromium is not installed at /usr/bin/chromium", allow_module_level=True)

WORKERS = """# Workers

## Sizing the worker pool

The worker pool runs twelve threads by default, each job for as long as
[the server page](server.md#job-timeouts) allows.

## Draining a worker

Send SIGTERM and the worker finishes its current job before it exits.
"""
SERVER = """# Server

## Job timeouts

A job may run for ninety seconds before the server stops it.

## Rotating the signing key

Add the new key, restart, then remove the old key.
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory, embedder) -> Iterator[LiveServer]:
    """The demo in small: a docs folder served at /pages and ingested with that base URL, answering in quote mode."""
    from citewise.agent.runner import Citewise

    root = tmp_path_factory.mktemp("landing")
    docs = root / "docs"
    docs.mkdir()
    (docs / "workers.md").write_text(WORKERS)
    (docs / "server.md").write_text(SERVER)
    settings = make_settings(root / "home", server={"pages_dir": docs})
    kb = KnowledgeBase(settings, embedder=embedder)
    live = LiveServer(create_app(settings, citewise=Citewise(settings, kb=kb)))
    linked = make_settings(root / "home", ingest={"base_url": f"{live.url}/pages"})  # the port is known now
    Ingestor(KnowledgeBase(linked, embedder=embedder)).ingest_paths([docs])
    with live:
        yield live


def open_page(browser, server: LiveServer):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready='1']")
    page.errors = errors
    return page


def test_the_landing_page_offers_three_questions_from_the_headings_and_a_click_asks_one(browser, demo, screenshot):
    expected = httpx.get(f"{demo.url}/api/examples").json()["questions"]
    assert len(expected) == 3 and "How do I size the worker pool?" in expected
    page = open_page(browser, demo)
    page.wait_for_selector("#examples:not([hidden]) button.example")
    buttons = page.locator("#example-list button.example")
    assert buttons.all_inner_texts() == expected  # the server's order: the same index, the same questions
    screenshot(page, "landing-examples.png")

    page.get_by_role("button", name="How do I size the worker pool?").click()
    page.wait_for_selector("article.msg-assistant[data-state='done']", timeout=120_000)
    assert page.locator("article.msg-user .msg-text").inner_text() == "How do I size the worker pool?"
    assert page.locator("#welcome").is_hidden()
    answer = page.locator("article.msg-assistant").last
    assert "twelve threads" in answer.locator(".answer").inner_text()

    # The docs' own link ("server.md#job-timeouts") is resolved against the page the citation quotes, on this
    # server's /pages: it opens the right section instead of a 404 next to the chat page.
    link = answer.locator(".answer a").first
    href = link.get_attribute("href")
    assert href == f"{demo.url}/pages/server.md#job-timeouts"
    opened = page.request.get(href)
    assert opened.status == 200 and 'id="job-timeouts"' in opened.text()
    # And the passage panel's "Open the source page" link is a page of the folder too.
    answer.locator("button.cite").first.click()
    source = page.locator("#passage-link")
    source.wait_for(state="visible")
    assert source.get_attribute("href").startswith(f"{demo.url}/pages/workers")
    assert page.request.get(source.get_attribute("href")).status == 200
    assert page.errors == []
    page.close()


def test_no_examples_are_offered_by_a_server_with_nothing_indexed(browser, tmp_path: Path):
    settings = make_settings(tmp_path / "home")
    with LiveServer(create_app(settings)) as empty:
        page = open_page(browser, empty)
        page.wait_for_function("document.querySelector('#examples') !== null")
        page.wait_for_timeout(300)  # the examples request has come back by now
        assert page.locator("#examples").is_hidden()
        assert page.errors == []
        page.close()
