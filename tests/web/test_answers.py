"""What a quote-mode answer looks like in the web chat, in real Chromium against a real uvicorn server answering from
tests/fixtures/answer_first (the docs of Tidewell, a mock API server that does not exist):

- answer first: a how-to page says what goes wrong (the port is taken) before what answers (how to change it); the
  answer leads with the answering sentence, its code block right under it, one citation mark covering both;
- no documentation markup: an MkDocs page's `!!! tip "Gotcha"` admonition is quoted as the note it renders as
  ("Tip — Gotcha: …"), and its mkdocstrings `:::` directive as "API reference: …", never as `!!!`, `:::` or
  `:docstring:`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.settings import make_settings
from tests.web.conftest import CHROMIUM, LiveServer, serve
from tests.web.test_browser import ask, last_answer, open_page

from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
    pytest.skip("Debian Chromium is not installed at /usr/bin/chromium", allow_module_level=True)

ANSWER_FIRST = Path(__file__).resolve().parents[1] / "fixtures" / "answer_first"

PORT_QUESTION = "How do I change the port?"
LEAD_IN = "To change the port, pass --port:"  # as rendered: the inline code's backticks gone
COMMAND = "tidewell serve --port 9090"

COOKIE_QUESTION = "What should I do with the Set-Cookie headers of recordings before I commit them?"
NOTE = "Tip — Gotcha: Recorded mocks keep the Set-Cookie headers of the real API, session tokens included."
NOTE_ADVICE = "Delete those headers from the recordings before you commit them to the repository."
API_QUESTION = "What is tidewell.recorder.Recorder?"
MARKUP = ("!!!", ":::", ":docstring:", 'tip "Gotcha"', "handler: python", "show_source")


@pytest.fixture(scope="module")
def answer_first(tmp_path_factory, embedder) -> KnowledgeBase:
    """tests/fixtures/answer_first ingested once for the module (its README is about the corpus, not in it)."""
    kb = KnowledgeBase(make_settings(tmp_path_factory.mktemp("answers") / "home"), embedder=embedder)
    corpus = tmp_path_factory.mktemp("answers-corpus") / "tidewell"
    shutil.copytree(ANSWER_FIRST, corpus, ignore=shutil.ignore_patterns("README.md"))
    Ingestor(kb).ingest_paths([corpus])
    assert kb.store.count() > 0
    return kb


@pytest.fixture(scope="module")
def server(answer_first) -> Iterator[LiveServer]:
    with serve(answer_first) as live:
        yield live


def test_an_answer_leads_with_what_answers_and_its_lead_in_before_the_code(browser, server, screenshot):
    page = open_page(browser, server)
    ask(page, PORT_QUESTION)
    answer = last_answer(page, "done")
    body = answer.locator(".answer")
    blocks = body.locator(":scope > *")

    # The answering sentence first (not the page's "By default … 8080. When another program …" above it), and the
    # code block it introduces right under it.
    lead_in, code = blocks.nth(0), blocks.nth(1)
    assert lead_in.evaluate("(e) => e.tagName") == "P", body.inner_html()
    assert lead_in.inner_text().startswith(LEAD_IN), body.inner_text()
    assert "code-block" in (code.get_attribute("class") or ""), body.inner_html()
    assert code.locator("pre").inner_text().strip() == COMMAND

    # One mark for the lead-in and its block: on the sentence, none in the block's bar.
    marks = lead_in.locator("button.cite-ref")
    assert marks.count() == 1, lead_in.inner_html()
    n = marks.first.get_attribute("data-n")
    assert code.locator("button.cite-ref, .code-cites").count() == 0, code.inner_html()

    # Its source card is the troubleshooting page's section.
    card = answer.locator(f"button.cite[data-n='{n}']")
    assert card.count() == 1
    assert card.locator(".cite-file").inner_text() == "troubleshooting.md"
    assert "The server does not start" in card.get_attribute("title")

    text = body.inner_text()
    assert not any(markup in text for markup in MARKUP), text
    assert page.errors == []
    screenshot(page, "chat-answer-first.png")
    page.close()


def test_answers_quote_admonitions_and_api_directives_as_text_not_markup(browser, server, screenshot):
    page = open_page(browser, server)

    # The admonition's body answers: quoted as the note a reader of the site sees, with its label.
    ask(page, COOKIE_QUESTION)
    note = last_answer(page, "done")
    text = note.locator(".answer").inner_text()
    assert NOTE in text and NOTE_ADVICE in text, text
    assert not any(markup in text for markup in MARKUP), text
    card = note.locator("button.cite").first
    assert card.locator(".cite-file").inner_text() == "recording.md"

    # The mkdocstrings directive (a name the site fills from docstrings): what the page documents, in words.
    ask(page, API_QUESTION)
    page.wait_for_function(
        "document.querySelectorAll(\"article.msg-assistant[data-state='done']\").length === 2", timeout=120_000
    )
    api = page.locator("article.msg-assistant").last
    text = api.locator(".answer").inner_text()
    assert "API reference: tidewell.recorder.Recorder" in text, text
    assert not any(markup in text for markup in MARKUP), text
    assert page.errors == []
    screenshot(page, "chat-markup.png")
    page.close()
