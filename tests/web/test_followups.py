"""A follow-up in the web page and in the widget, in real Chromium against a real uvicorn server answering in quote
mode from the fixture corpus: "How do I turn on encryption at rest?", then "Is it enabled by default?" is answered
about encryption (the session carries the first question), and the page's trace says how it was read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.web.conftest import CHROMIUM, LiveServer, serve
from tests.web.test_widget import KEY, answers, host_page, html_tag, open_host, stream_requests, wait_ready

from citewise.agent.followup import standalone

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
    pytest.skip("Debian Chromium is not installed at /usr/bin/chromium", allow_module_level=True)

FIRST = "How do I turn on encryption at rest?"
FOLLOWUP = "Is it enabled by default?"
ABOUT_ENCRYPTION = "off by default"


@pytest.fixture(scope="module")
def server(indexed, site) -> Iterator[LiveServer]:
    """Quote mode, sessions kept by the server's checkpointer; a widget key and the host site allowed."""
    with serve(indexed, key=KEY, site=site) as live:
        site.default = host_page(html_tag(live.url))
        yield live


def _finished(page, count: int) -> None:
    """Wait until the page holds `count` finished answers."""
    done = "article.msg-assistant[data-state='done'], article.msg-assistant[data-state='refused']"
    page.wait_for_function(f"document.querySelectorAll({done!r}).length === {count}", timeout=120_000)


def test_a_follow_up_in_the_page_is_read_with_the_question_before_it(browser, server, screenshot):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sent: list[dict] = []
    page.on("request", lambda r: sent.append(r.post_data_json) if r.url.endswith("/api/agent/stream") else None)
    page.add_init_script(f"localStorage.setItem('citewise.settings', JSON.stringify({{apiKey: '{KEY}'}}))")
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready='1']")

    page.fill("#question", FIRST)
    page.press("#question", "Enter")
    _finished(page, 1)
    page.fill("#question", FOLLOWUP)
    page.press("#question", "Enter")
    _finished(page, 2)

    answer = page.locator("article.msg-assistant").last
    assert answer.get_attribute("data-state") == "done", answer.inner_text()
    assert ABOUT_ENCRYPTION in answer.locator(".answer").inner_text()
    assert len(sent) == 2 and "session_id" not in sent[0] and sent[1]["session_id"]  # one conversation
    assert sent[1]["question"] == FOLLOWUP  # sent as typed: the server reads it with the conversation
    screenshot(page, "chat-follow-up.png")

    page.click("#trace-toggle")
    steps = answer.locator(".trace-step").all_inner_texts()
    read_as = standalone(FOLLOWUP, [FIRST]).question
    assert f"Read as: “{read_as}”" in steps, steps
    assert f"Searched the docs for “{read_as}”" in steps
    assert FIRST in answer.locator(".trace-list").inner_text()  # what it was read with
    assert not errors, errors
    page.close()


def test_a_follow_up_in_the_widget_is_read_with_the_question_before_it(browser, server, site, screenshot):
    page = open_host(browser, site.origin + "/guide/")
    requests = stream_requests(page)
    wait_ready(page)
    page.click(".cw-launcher")
    page.fill(".cw-input", FIRST)
    page.press(".cw-input", "Enter")
    answers(page, "done")
    page.fill(".cw-input", FOLLOWUP)
    page.press(".cw-input", "Enter")
    page.wait_for_function(
        "document.querySelector('[data-citewise-widget]').shadowRoot.querySelectorAll("
        "'.cw-answer[data-state=done], .cw-answer[data-state=refused]').length === 2",
        timeout=120_000,
    )
    answer = page.locator(".cw-answer").last
    assert answer.get_attribute("data-state") == "done"
    assert ABOUT_ENCRYPTION in answer.locator(".cw-body").inner_text()
    assert len(requests) == 2 and requests[1]["session_id"] and requests[1]["question"] == FOLLOWUP
    assert page.errors == []
    screenshot(page, "widget-follow-up.png")
    page.context.close()
