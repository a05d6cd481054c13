"""The web chat in a real browser: Debian's headless Chromium, driven by Playwright, against a real uvicorn server
answering in quote mode from the ingested fixture corpus.

Nothing is faked: the page streams from /api/agent/stream exactly as a user's browser would. The page reports what
it did through `citewise:*` DOM events (state changes, each token with the answer's rendered length, complete), which
an init script records, so "tokens arrived before the answer completed" is checked from the page's own DOM, not timed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from tests.support.settings import make_settings
from tests.web.conftest import ANSWERABLE, CHROMIUM, UNANSWERABLE, LiveServer, serve

from citewise.server import create_app
from citewise.types import REFUSAL_TEXT

pytestmark = pytest.mark.slow

# Runs before the page's scripts: collects the page's own progress events in order.
RECORDER = """
window.__cw = [];
for (const name of ["state", "token", "complete", "passage", "retry", "feedback"]) {
  document.addEventListener("citewise:" + name, (e) => window.__cw.push({ name, ...e.detail }));
}
"""

if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
    pytest.skip("Debian Chromium is not installed at /usr/bin/chromium", allow_module_level=True)


@pytest.fixture(scope="module")
def server(indexed) -> Iterator[LiveServer]:
    """Quote mode: answers are verbatim sentences from the corpus, no model."""
    with serve(indexed) as live:
        yield live


def open_page(browser, server, *, width: int = 1280, height: int = 860, mode: str | None = None):
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.add_init_script(RECORDER)
    if mode:  # what the settings dialog would have stored
        page.add_init_script(f"localStorage.setItem('citewise.settings', JSON.stringify({{mode: '{mode}'}}))")
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready='1']")
    page.errors = errors
    return page


def ask(page, question: str) -> None:
    page.fill("#question", question)
    page.press("#question", "Enter")


def last_answer(page, states: str = "done, refused, error"):
    selector = ", ".join(f"article.msg-assistant[data-state='{s.strip()}']" for s in states.split(","))
    page.wait_for_selector(selector, timeout=120_000)
    return page.locator("article.msg-assistant").last


def recorded(page) -> list[dict]:
    return page.evaluate("window.__cw")


def test_answer_streams_with_citations_and_opens_the_quoted_passage(browser, server, screenshot):
    page = open_page(browser, server)
    requests: list[dict] = []
    page.on("request", lambda r: requests.append(r.post_data_json) if r.url.endswith("/api/agent/stream") else None)

    # Shift+Enter is a new line, not a send.
    page.fill("#question", "first line")
    page.press("#question", "Shift+Enter")
    assert page.input_value("#question") == "first line\n"
    assert page.locator("article.msg-assistant").count() == 0

    ask(page, ANSWERABLE)
    answer = last_answer(page, "done")
    events = recorded(page)

    # Thinking first, then tokens that grew the rendered answer, then exactly one completion.
    names = [e["name"] for e in events]
    assert names[0] == "state" and events[0]["state"] == "thinking"
    assert names.count("complete") == 1
    before_complete = [e for e in events[: names.index("complete")] if e["name"] == "token"]
    assert len(before_complete) >= 2, f"expected several token events before complete, got {events}"
    lengths = [e["chars"] for e in before_complete]
    # Not necessarily monotonic (closing a multi-word **bold** hides its asterisks), but it grows.
    assert lengths[-1] > lengths[0] > 0
    streaming = [e for e in events if e["name"] == "state" and e["state"] == "streaming"]
    assert streaming, "the answer never entered the streaming state"

    text = answer.locator(".answer").inner_text()
    assert "7433" in text
    assert answer.locator(".thinking").is_hidden()
    assert answer.locator(".badge").is_hidden()  # not a refusal
    citations = answer.locator("button.cite")
    assert citations.count() >= 1
    assert answer.locator(".answer button.cite-ref").count() >= 1  # inline [n] markers are buttons too
    assert requests and requests[0]["question"] == ANSWERABLE
    # A source card shows up to two lines of its heading path (never one line cut mid-word), the whole in its title.
    chapter = citations.first.locator(".cite-chapter")
    assert chapter.evaluate("(e) => getComputedStyle(e).webkitLineClamp") == "2"
    assert chapter.evaluate("(e) => getComputedStyle(e).textOverflow") != "ellipsis"
    assert chapter.inner_text().replace(" › ", " > ") in citations.first.get_attribute("title")

    # Open the first citation: the passage panel shows the chunk with the quoted span highlighted.
    first = citations.first
    first.click()
    passage = page.locator("#passage")
    passage.wait_for(state="visible")
    page.wait_for_selector("#passage-body mark")
    marks = page.locator("#passage-body mark")
    assert marks.count() >= 1
    assert "7433" in " ".join(marks.all_inner_texts())
    body = page.locator("#passage-body").inner_text()
    assert marks.first.inner_text() in body and len(body) > len(marks.first.inner_text())
    assert page.locator("#passage-title").inner_text().endswith((".md", ".mdx", ".html", ".rst", ".pdf", ".txt"))

    screenshot(page, "chat.png")

    # Escape closes the panel and gives focus back to the citation that opened it.
    page.keyboard.press("Escape")
    passage.wait_for(state="hidden")
    assert page.evaluate("document.activeElement.classList.contains('cite')")

    # The trace toggle reveals the run's steps.
    assert answer.locator("details.trace").is_hidden()
    page.click("#trace-toggle")
    assert page.get_attribute("#trace-toggle", "aria-pressed") == "true"
    assert answer.locator("details.trace").is_visible()
    assert answer.locator(".trace-item").count() >= 1

    # A second question continues the same session.
    session_id = answer.get_attribute("data-session-id")
    assert session_id
    ask(page, "Which flag keeps finished jobs for seven days?")
    page.wait_for_function(
        "document.querySelectorAll('article.msg-assistant[data-state=done], "
        "article.msg-assistant[data-state=refused]').length === 2",
        timeout=120_000,
    )
    assert len(requests) == 2
    assert "session_id" not in requests[0]
    assert requests[1]["session_id"] == session_id
    assert page.errors == []
    page.close()


def test_selected_text_is_sent_with_the_next_question(browser, server):
    page = open_page(browser, server)
    requests: list[dict] = []
    page.on("request", lambda r: requests.append(r.post_data_json) if r.url.endswith("/api/agent/stream") else None)
    ask(page, ANSWERABLE)
    answer = last_answer(page, "done")

    # Select the answer's first paragraph as a user would (drag), then use the button that appears.
    paragraph = answer.locator(".answer p").first
    box = paragraph.bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + 4)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] - 4, steps=8)
    page.mouse.up()
    button = page.locator("#ask-selection")
    button.wait_for(state="visible")
    selected = page.evaluate("window.getSelection().toString().trim()")
    assert selected
    button.click()
    assert page.locator("#selection-chip").is_visible()
    assert page.evaluate("document.activeElement.id") == "question"

    ask(page, "Explain this")
    page.wait_for_function(
        "document.querySelectorAll('article.msg-assistant[data-state=done], "
        "article.msg-assistant[data-state=refused]').length === 2",
        timeout=120_000,
    )
    assert requests[1]["selected_text"] == selected
    assert requests[1]["question"] == "Explain this"
    assert page.locator("#selection-chip").is_hidden()
    # The user's bubble shows what was asked about.
    assert page.locator("article.msg-user").last.locator(".msg-selection").is_visible()
    assert page.errors == []
    page.close()


def test_unanswerable_question_is_an_honest_answer_not_an_error(browser, server):
    page = open_page(browser, server)
    ask(page, UNANSWERABLE)
    answer = last_answer(page)
    assert answer.get_attribute("data-state") == "refused"
    assert REFUSAL_TEXT in answer.locator(".answer").inner_text()
    assert answer.locator(".badge").is_visible()
    # A refusal is not an error: no error notice, no retry button.
    assert answer.locator(".notice").is_hidden()
    assert answer.locator("button.cite").count() == 0
    # It says why in words (never an internal code) and where to read, clearly not as citations.
    notes = answer.locator(".answer-notes").inner_text()
    assert "weak_evidence" not in notes and "empty_retrieval" not in notes
    assert answer.locator(".note-why").inner_text().strip()
    if answer.locator(".closest-sections li").count():
        assert "not an answer" in notes
    assert page.errors == []
    page.close()


def test_phone_width_has_no_horizontal_overflow(browser, server, screenshot):
    page = open_page(browser, server, width=375, height=740)
    ask(page, ANSWERABLE)
    last_answer(page, "done").locator("button.cite").first.click()
    page.wait_for_selector("#passage-body mark")
    widths = page.evaluate(
        """() => ({
            doc: document.documentElement.scrollWidth,
            body: document.body.scrollWidth,
            passage: document.getElementById('passage').getBoundingClientRect().width,
            viewport: window.innerWidth,
        })"""
    )
    assert widths["viewport"] == 375
    assert widths["doc"] <= 375 and widths["body"] <= 375, widths
    assert widths["passage"] <= 375, widths
    # The composer stays usable: its send button is inside the viewport.
    page.keyboard.press("Escape")
    send = page.locator("#send").bounding_box()
    assert send["x"] + send["width"] <= 375
    screenshot(page, "chat-phone.png")
    assert page.errors == []
    page.close()


@pytest.fixture
def scripted_server(indexed, tmp_path) -> Iterator[LiveServer]:
    """Agent mode with the scripted chat model: the first model call is rate limited, the retry's plan call gets an
    empty reply (default plan), and the tiny context budget then ends the run MAX_CONTEXT_REACHED (the mandatory
    search alone returns more text than 1000 characters)."""
    from citewise.agent.runner import Citewise
    from citewise.errors import RateLimited
    from citewise.llm.testing import ScriptedChatModel
    from citewise.settings import AgentSettings, GenerationSettings

    settings = make_settings(
        tmp_path / "home",
        agent=AgentSettings(max_context_chars=1000),
        generation=GenerationSettings(llm_retries=0, llm_retry_wait_s=0, cache=False),
    )
    model = ScriptedChatModel([RateLimited("429 Too Many Requests"), ""])
    with LiveServer(create_app(settings, citewise=Citewise(settings, kb=indexed, chat_model=model))) as live:
        yield live


def test_rate_limit_is_retried_and_a_full_context_offers_start_over(browser, scripted_server):
    page = open_page(browser, scripted_server)
    requests: list[dict] = []
    page.on("request", lambda r: requests.append(r.post_data_json) if r.url.endswith("/api/agent/stream") else None)

    # Choose the agent answerer in the settings dialog (kept in localStorage).
    page.click("#settings-open")
    page.select_option("#mode", "agent")
    page.click("#settings-save")
    # The dialog's close event (which saves) is dispatched in a later task than the click.
    page.wait_for_function("JSON.parse(localStorage.getItem('citewise.settings') || '{}').mode === 'agent'")
    assert page.locator("#settings").is_hidden()

    ask(page, ANSWERABLE)
    answer = last_answer(page, "error")
    events = recorded(page)
    retries = [e for e in events if e["name"] == "retry"]
    assert retries == [{"name": "retry", "attempt": 1, "wait_s": 1}]
    assert len(requests) == 2 and all(r["mode"] == "agent" for r in requests)
    assert [e["exit_reason"] for e in events if e["name"] == "complete"] == ["MAX_CONTEXT_REACHED"]

    notice = answer.locator(".notice")
    assert notice.is_visible() and "start over" in notice.inner_text().lower()
    start_over = notice.get_by_role("button", name="Start over")
    start_over.click()
    assert page.locator("article.msg").count() == 0
    assert page.locator("#welcome").is_visible()
    assert page.evaluate("document.activeElement.id") == "question"
    assert page.errors == []
    page.close()


@pytest.fixture
def refusing_server(indexed, tmp_path) -> Iterator[LiveServer]:
    """Agent mode: the model says the docs don't cover the question (the agent records only a refusal code)."""
    from citewise.agent.runner import Citewise
    from citewise.llm.testing import ScriptedChatModel

    settings = make_settings(tmp_path / "home")
    model = ScriptedChatModel(["", REFUSAL_TEXT] * 2)
    with LiveServer(create_app(settings, citewise=Citewise(settings, kb=indexed, chat_model=model))) as live:
        yield live


def test_a_refusal_says_why_in_the_servers_words(browser, refusing_server):
    """The page has no table of refusal codes: it shows the words the server sent with the answer."""
    from citewise.feedback.analytics import REFUSAL_WORDS

    page = open_page(browser, refusing_server, mode="agent")
    ask(page, ANSWERABLE)
    answer = last_answer(page, "refused")
    assert answer.locator(".note-why").inner_text().strip() == REFUSAL_WORDS["not_in_documentation"]
    assert page.errors == []
    page.close()


def test_sse_reader_handles_frames_split_anywhere(browser, server):
    """The page's own SSE parser (api.js), fed byte chunks cut mid-line, between CR and LF, and inside a multi-byte
    character, with a comment line and a multi-line data field."""
    page = open_page(browser, server)
    events = page.evaluate(
        """async () => {
            const { readEvents } = await import('/api.js');
            const bytes = new TextEncoder().encode(
                'event: token\\r\\ndata: {"text":"café"}\\r\\n\\r\\n: keep-alive\\n\\ndata: one\\ndata: two\\n\\n' +
                'event: complete\\rdata: {}\\r\\r');
            const cuts = [3, 13, 14, 30, 31, 40, 58, bytes.length];
            const body = new ReadableStream({ start(c) {
                let at = 0;
                for (const cut of cuts) { c.enqueue(bytes.slice(at, cut)); at = cut; }
                c.close();
            } });
            const out = [];
            for await (const ev of readEvents(body)) out.push([ev.event, ev.data]);
            return out;
        }"""
    )
    assert events == [["token", '{"text":"café"}'], ["message", "one\ntwo"], ["complete", "{}"]]
    page.close()


def test_passage_highlight_uses_code_point_offsets_across_markdown(browser, server):
    """quote_spans are Python (code point) offsets: an emoji before the span must not shift it, and a quote that
    crosses **bold** is highlighted piece by piece; a span inside a link target falls back to plain text."""
    page = open_page(browser, server)
    text = "😀 Intro line.\n\n## Ports\n\nThe daemon listens on port **7433** by default. Other text.\n"
    quote = "The daemon listens on port **7433** by default."
    start = text.index(quote)
    heading = text.index("## Ports")
    result = page.evaluate(
        """async ([text, spans]) => {
            const { renderPassage } = await import('/render.js');
            const el = document.createElement('div');
            renderPassage(el, text, spans);
            return { marks: [...el.querySelectorAll('mark')].map((m) => m.textContent),
                     heading: el.querySelector('h2')?.textContent ?? null, plain: el.classList.contains('plain') };
        }""",
        [text, [[start, start + len(quote)], [heading, heading + len("## Ports")]]],
    )
    assert "".join(result["marks"]) == "PortsThe daemon listens on port 7433 by default."
    assert result["heading"] == "Ports"  # the span started at "## ": the heading still renders as one
    assert result["plain"] is False

    # A span inside a link target has no rendered text: nothing is highlighted, and the passage is still markdown.
    link_text = "See [the guide](https://example.com/guide) for more."
    inside_url = link_text.index("example")
    linked = page.evaluate(
        """async ([text, spans]) => {
            const { renderPassage } = await import('/render.js');
            const el = document.createElement('div');
            renderPassage(el, text, spans);
            return { marks: [...el.querySelectorAll("mark")].map((m) => m.textContent), text: el.textContent.trim(),
                     plain: el.classList.contains('plain') };
        }""",
        [link_text, [[inside_url, inside_url + len("example")]]],
    )
    assert linked == {"marks": [], "text": "See the guide for more.", "plain": False}

    # A quote that crosses **bold** and a fenced block is highlighted on the rendered text: no markdown syntax shows.
    runbook = (
        "Intro.\n\n**Symptom.** The daemon stops &amp; restarts.\n\n```bash\norbitron restart --now\n```\n\nAfter.\n"
    )
    begin = runbook.index("**Symptom")
    finish = runbook.index("--now") + len("--now")
    crossing = page.evaluate(
        """async ([text, spans]) => {
            const { renderPassage } = await import('/render.js');
            const el = document.createElement('div');
            renderPassage(el, text, spans);
            return { marks: [...el.querySelectorAll("mark")].map((m) => m.textContent), text: el.textContent.trim(),
                     pre: !!el.querySelector('pre mark'), strong: !!el.querySelector('strong mark') };
        }""",
        [runbook, [[begin, finish]]],
    )
    assert "**" not in crossing["text"] and "```" not in crossing["text"] and "&amp;" not in crossing["text"]
    assert "".join(crossing["marks"]) == "Symptom. The daemon stops & restarts.orbitron restart --now"
    assert crossing["pre"] and crossing["strong"]
    page.close()


@pytest.fixture
def drafting_server(indexed, tmp_path) -> Iterator[LiveServer]:
    """Agent mode: the model first writes a sentence and searches again (so that text was only a draft), then
    answers. Spare copies of the answer cover a validator re-prompt."""
    from langchain_core.messages import AIMessage

    from citewise.agent.runner import Citewise
    from citewise.llm.testing import ScriptedChatModel
    from citewise.settings import AgentSettings, GenerationSettings

    settings = make_settings(
        tmp_path / "home",
        agent=AgentSettings(max_context_chars=60_000),
        generation=GenerationSettings(llm_retries=0, llm_retry_wait_s=0, cache=False),
    )
    search = {"name": "search_docs", "args": {"query": "orbitron daemon default port"}, "id": "call_1"}
    final = "The daemon listens on port **7433** by default [1]."
    model = ScriptedChatModel(
        ["", AIMessage(content="Let me look at the installation guide first.", tool_calls=[search]), final, final]
    )
    with LiveServer(create_app(settings, citewise=Citewise(settings, kb=indexed, chat_model=model))) as live:
        yield live


def test_a_draft_is_discarded_when_the_model_searches_again(browser, drafting_server):
    page = open_page(browser, drafting_server, mode="agent")
    ask(page, ANSWERABLE)
    answer = last_answer(page, "done")
    events = recorded(page)
    states = [e["state"] for e in events if e["name"] == "state"]
    # thinking → streaming (the draft) → thinking (tool_call: draft dropped) → streaming (the answer) → done
    assert states[:4] == ["thinking", "streaming", "thinking", "streaming"], states
    assert states[-1] == "done"
    text = answer.locator(".answer").inner_text()
    assert "7433" in text
    assert "Let me look" not in text
    assert answer.locator("button.cite").count() >= 1
    assert page.errors == []
    page.close()


def test_code_blocks_get_a_copy_button_and_keep_their_citation(browser, server):
    page = open_page(browser, server)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    rendered = page.evaluate(
        """async (text) => {
            const { renderMarkdown } = await import('/render.js');
            const el = document.createElement('div');
            document.body.append(el);
            renderMarkdown(el, text);
            el.querySelector('.code-copy').click();
            await new Promise((r) => setTimeout(r, 100));
            return { bar: el.querySelector('.code-bar')?.textContent ?? null,
                     cite: !!el.querySelector('.code-bar button.cite-ref'),
                     lonely: [...el.querySelectorAll('p')].map((p) => p.textContent.trim()),
                     copied: await navigator.clipboard.readText() };
        }""",
        "Restart it:\n\n```bash\norbitron restart --now\n```\n\n[2]\n\nDone [1].",
    )
    assert rendered["cite"], rendered  # the marker sits in the block's bar, not alone on a line under it
    assert rendered["lonely"] == ["Restart it:", "Done\u00a01."]  # the marker glued to its word
    assert rendered["copied"] == "orbitron restart --now"
    page.close()


def test_trace_is_steps_and_an_answer_can_be_rated(browser, server):
    page = open_page(browser, server)
    ratings: list[dict] = []
    page.on("request", lambda r: ratings.append(r.post_data_json) if r.url.endswith("/api/feedback") else None)
    ask(page, ANSWERABLE)
    answer = last_answer(page, "done")
    page.click("#trace-toggle")
    steps = answer.locator(".trace-step").all_inner_texts()
    assert any(step.startswith("Searched the docs for “") for step in steps), steps
    assert any(step.startswith("Found ") for step in steps), steps
    assert "{" not in answer.locator(".trace-list").inner_text()  # steps in words, not JSON

    answer.locator(".feedback-down").click()
    answer.locator(".feedback-text").fill("The port is right but the journal path is missing")
    answer.locator(".feedback-text").press("Enter")
    page.wait_for_function("window.__cw.filter((e) => e.name === 'feedback').length === 2")
    assert [r["rating"] for r in ratings] == ["down", "down"]
    assert ratings[1]["comment"] == "The port is right but the journal path is missing"
    assert answer.locator(".feedback-status").inner_text() == "Thanks, sent."
    # The page's settings button is sliders, not a sun-like cog: it must not read as a theme toggle.
    assert page.locator("#settings-open svg circle").count() == 2
    assert page.errors == []
    page.close()


@pytest.fixture
def analytics_server(indexed, embedder, tmp_path) -> Iterator[LiveServer]:
    """Keys on: an admin key and a reader's key of the same owner; questions logged (to this test's home)."""
    from citewise.agent.runner import Citewise

    settings = indexed.settings.model_copy(
        update={
            "api_keys": {"k-reader": "docs", "k-admin": "docs"},
            "admin_keys": ("k-admin",),
            "server": indexed.settings.server.model_copy(update={"log_questions": True}),
            "home": tmp_path / "home",
        }
    )
    from citewise.index.knowledge_base import KnowledgeBase

    kb = KnowledgeBase(settings, embedder=embedder)
    shutil.copytree(indexed.settings.home / "index", settings.home / "index")
    with LiveServer(create_app(settings, citewise=Citewise(settings, kb=kb))) as live:
        yield live


def test_admins_get_an_analytics_page(browser, analytics_server, screenshot):
    import httpx

    reader = {"X-API-Key": "k-reader"}
    for question in (UNANSWERABLE, UNANSWERABLE, ANSWERABLE):
        answer = httpx.post(analytics_server.url + "/api/agent/run", json={"question": question}, headers=reader)
    httpx.post(
        analytics_server.url + "/api/feedback",
        json={"answer_id": answer.json()["answer_id"], "rating": "down", "comment": "Missing the TLS port"},
        headers=reader,
    ).raise_for_status()

    page = open_page(browser, analytics_server)
    page.evaluate("localStorage.setItem('citewise.settings', JSON.stringify({apiKey: 'k-reader'}))")
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#analytics-link").is_hidden()  # a reader's key: no link (and a 403 behind it)

    page.evaluate("localStorage.setItem('citewise.settings', JSON.stringify({apiKey: 'k-admin'}))")
    page.reload()
    page.locator("#analytics-link").wait_for(state="visible")
    page.click("#analytics-link")
    page.wait_for_selector("body.analytics-page[data-ready='1']")
    totals = page.locator("#totals").inner_text()
    assert "Questions" in totals and "33%" in totals  # 1 of 3 answered
    assert "sourdough" in page.locator("#gaps").inner_text()
    assert "Missing the TLS port" in page.locator("#bad").inner_text()
    bad_answer = page.locator("#bad .bad-text")
    assert "7433" in bad_answer.inner_text() and "**" not in bad_answer.inner_text()  # rendered, not raw markdown
    assert bad_answer.locator("strong").count() >= 1
    assert page.locator("#reasons tr").count() >= 1
    screenshot(page, "analytics.png", full_page=True)
    # Only the answers the page expects: 401 before a key is set, 403 for the reader's key.
    assert [e for e in page.errors if "(Unauthorized)" not in e and "(Forbidden)" not in e] == []
    page.close()


def test_a_quoted_table_row_keeps_its_citation_out_of_the_table(browser, server):
    """Quote mode quotes a table row under its header; the marker after it is no extra row of the table."""
    from citewise.quote.compose import Chosen, Passage, render
    from citewise.text import answer_units
    from citewise.types import AnswerStyle, ScoredChunk, make_chunk_id, make_doc_id

    doc_id = make_doc_id("networks.md")
    table = (
        "## Networks\n\nTwo networks.\n\n| Network | Network ID | RPC |\n| --- | --- | --- |\n"
        "| Mainnet | 7433 | <https://a.example> |\n| Testnet | 74330 | <https://b.example> |\n"
    )
    chunk = ScoredChunk(
        chunk_id=make_chunk_id(doc_id, 0), doc_id=doc_id, chunk_index=0, text=table, filename="networks.md",
        score=0.3, units=answer_units(table),
    )  # fmt: skip
    row = next(i for i, (a, b, kind) in enumerate(chunk.units) if kind == "row" and "Mainnet" in table[a:b])
    text, _, _ = render([Chosen(0, row, "answer")], [Passage(1, chunk)], style=AnswerStyle.DEFAULT, left_out={})
    page = open_page(browser, server)
    rendered = page.evaluate(
        """async (text) => {
            const { renderMarkdown } = await import('/render.js');
            const el = document.createElement('div');
            document.body.append(el);
            renderMarkdown(el, text);
            return { rows: [...el.querySelectorAll('tr')].map((tr) => tr.textContent.trim()),
                     outside: [...el.querySelectorAll('button.cite-ref')].filter((b) => !b.closest('table')).length };
        }""",
        text,
    )
    assert len(rendered["rows"]) == 2 and "7433" in rendered["rows"][1], rendered  # the header and the row, no more
    assert rendered["outside"] == 1, rendered  # the marker under the table, not in a row of its own
    page.close()


def test_a_table_in_an_answer_never_breaks_a_word_to_fit(browser, server):
    """A table with a long last cell (a file-types table: extension, loader, notes) keeps its short cells' words
    whole: the long cell wraps, and a table too wide for the answer scrolls, rather than ".md" wrapping as ".m/d"."""
    text = (
        "| Extension | Loader | Notes |\n| --- | --- | --- |\n"
        f"| `.md` | markdownloader.md | {'Front matter is read, headings become sections and code stays whole. ' * 6}|"
    )
    page = open_page(browser, server)
    lines = page.evaluate(
        """async (text) => {
            const { renderMarkdown } = await import('/render.js');
            const el = document.createElement('div');
            el.className = 'markdown';
            el.style.width = '560px';
            document.body.append(el);
            renderMarkdown(el, text);
            const linesOf = (cell) => {  // distinct line boxes the cell's text runs over (tops within 4px: one)
                const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                const tops = [];
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    const range = document.createRange();
                    range.selectNodeContents(node);
                    for (const rect of range.getClientRects()) {
                        if (!tops.some((top) => Math.abs(top - rect.top) < 4)) tops.push(rect.top);
                    }
                }
                return tops.length;
            };
            const cells = [...el.querySelectorAll('tbody td')];
            return { extension: linesOf(cells[0]), loader: linesOf(cells[1]), notes: linesOf(cells[2]) };
        }""",
        text,
    )
    assert lines["extension"] == 1 and lines["loader"] == 1, lines  # each a single word: never broken
    assert lines["notes"] > 1, lines  # the long cell is the one that wraps
    page.close()
