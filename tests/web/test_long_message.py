"""A 10,000-character paste in the web chat, in a real browser (Debian's headless Chromium through Playwright) against a
real uvicorn server answering in quote mode from the fixture corpus: an error log pasted with the question is sent
whole, answered with citations, and its trace says the search looked for the question, errors and names in it. The
box holds no more than the server's limit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.long_messages import QUESTION, pasted
from tests.web.conftest import CHROMIUM, LiveServer, serve

from citewise.types import MAX_QUESTION_CHARS

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
    pytest.skip("Debian Chromium is not installed at /usr/bin/chromium", allow_module_level=True)


@pytest.fixture(scope="module")
def server(indexed) -> Iterator[LiveServer]:
    with serve(indexed) as live:
        yield live


def paste(page, text: str) -> None:
    """Paste `text` into the question box as a clipboard paste does (an insertText, which the box's maxlength cuts)."""
    page.focus("#question")
    page.keyboard.insert_text(text)


def test_a_10000_character_paste_is_answered(browser, server, screenshot):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sent: list[dict] = []
    page.on("request", lambda r: sent.append(r.post_data_json) if r.url.endswith("/api/agent/stream") else None)
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready='1']")
    assert page.get_attribute("#question", "maxlength") == str(MAX_QUESTION_CHARS)

    message = pasted(MAX_QUESTION_CHARS, where="middle")
    paste(page, message)
    assert len(page.input_value("#question")) == MAX_QUESTION_CHARS
    page.press("#question", "Enter")

    finished = ", ".join(f"article.msg-assistant[data-state='{s}']" for s in ("done", "refused", "error"))
    page.wait_for_selector(finished, timeout=120_000)
    answer = page.locator("article.msg-assistant").last
    assert answer.get_attribute("data-state") == "done", answer.inner_text()
    assert "orbitron queue create" in answer.locator(".answer").inner_text()
    assert answer.locator("button.cite").count() >= 1
    assert sent and sent[0]["question"] == message  # the whole paste went to the server
    screenshot(page, "chat-long-paste.png")

    # The trace says what the first search looked for: the question, not the log.
    page.click("#trace-toggle")
    steps = answer.locator("details.trace").inner_text()
    assert f"Searched the docs for “{QUESTION}" in steps
    assert "for a long message (10,000 characters)" in steps
    assert not errors, errors

    # One character more does not fit the box: a paste is cut at the limit, never refused by the server later.
    page.fill("#question", "")
    paste(page, pasted(MAX_QUESTION_CHARS + 1))
    assert len(page.input_value("#question")) == MAX_QUESTION_CHARS
    page.close()
