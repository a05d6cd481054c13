"""The embeddable widget in real Chromium, on host pages served by a second loopback HTTP server: a different origin
from the Citewise server, as on a real docs site.

The host pages are built from the one-line recipes in docs/widget.md (plain HTML and Docusaurus), so the docs can't
drift from what works. The widget reports its progress through `citewise:*` events that cross its shadow boundary;
an init script records them, so the order (thinking → streaming → complete) is read from the page, not timed.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.settings import make_settings
from tests.web.conftest import (
    ANSWERABLE,
    CHROMIUM,
    CORPUS,
    UNANSWERABLE,
    HostSite,
    LiveServer,
)

from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor
from citewise.server import create_app
from citewise.types import REFUSAL_TEXT

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():  # CI installs it (apt-get install chromium); say why instead of failing obscurely
    pytest.skip("Debian Chromium is not installed at /usr/bin/chromium", allow_module_level=True)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "widget.md"
KEY = "k-widget-3b7e"
ENCRYPTION = "How do I turn on encryption at rest for the journal?"
KEYS = {KEY: "docs-site", "k-other": "someone-else"}
SELECTABLE = (
    "Orbitron keeps a journal of every job it runs; the daemon listens on port 7433 by default and accepts jobs "
    "from any client that can reach it."
)
RECORDER = """
window.__cw = [];
for (const name of ["ready", "open", "state", "token", "complete", "citation", "passage", "feedback"]) {
  document.addEventListener("citewise:" + name, (e) => window.__cw.push({ name, ...e.detail }));
}
"""
HOSTILE_CSS = """
* { all: unset !important; }
html { font-size: 48px !important; }
body { font: 40px/3 "Times New Roman", serif !important; color: #c00 !important; background: #ffd !important;
       display: block !important; padding: 24px !important; }
p, h1 { display: block !important; margin: 20px 0 !important; }
div { transform: scale(1.5) !important; }
button, textarea, section { display: none !important; }
script, style { display: none !important; }
"""


# -- the recipes in docs/widget.md -----------------------------------------------------------------------------------
def recipe_blocks() -> dict[str, str]:
    """The fenced blocks of docs/widget.md that load widget.js, by language (html, js)."""
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    found: dict[str, str] = {}
    for language, body in blocks:
        if "widget.js" in body and language not in found:
            found[language] = body
    assert {"html", "js"} <= set(found), "docs/widget.md must show the plain-HTML and the Docusaurus recipe"
    return found


def html_tag(citewise: str) -> str:
    """The plain-HTML (and MkDocs) recipe's <script> line, pointed at this server and key."""
    (line,) = [line.strip() for line in recipe_blocks()["html"].splitlines() if "widget.js" in line]
    return _point(line, citewise)


def docusaurus_tag(citewise: str) -> str:
    """The Docusaurus recipe's `scripts` entry, as the <script> tag Docusaurus renders from it."""
    body = recipe_blocks()["js"]
    entry = body[body.index("{", body.index("scripts")) : body.index("}", body.index("scripts")) + 1]
    pairs = re.findall(r"""["']?([\w-]+)["']?\s*:\s*("[^"]*"|'[^']*'|true|false)""", entry)
    attrs = []
    for name, value in pairs:
        if value == "true":
            attrs.append(name)
        elif value != "false":
            attrs.append(f'{name}="{value[1:-1]}"')
    return _point(f"<script {' '.join(attrs)}></script>", citewise)


def _point(tag: str, citewise: str) -> str:
    assert "https://citewise.example.com/" in tag and "YOUR_WIDGET_KEY" in tag, tag
    return tag.replace("https://citewise.example.com/", citewise + "/").replace("YOUR_WIDGET_KEY", KEY)


def host_page(tag: str, *, css: str = "", title: str = "Orbitron docs") -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body>
  <h1>Orbitron guide</h1>
  <p id="intro">{SELECTABLE}</p>
  <p>Read the configuration reference for the rest.</p>
  {tag}
</body></html>"""


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[HostSite, HostSite]]:
    """(the docs site the server allows, another site it doesn't)."""
    allowed, other = HostSite(), HostSite()
    yield allowed, other
    allowed.close()
    other.close()


@pytest.fixture(scope="module")
def citewise(indexed, sites) -> Iterator[LiveServer]:
    """Quote mode on the fixture corpus (no source URLs: citations open their passage), keys on, the docs site in
    the CORS allow-list."""
    from citewise.agent.runner import Citewise

    allowed, _ = sites
    settings = indexed.settings.model_copy(
        update={
            "api_keys": KEYS,
            "server": indexed.settings.server.model_copy(update={"cors_origins": (allowed.origin,)}),
        }
    )
    with LiveServer(create_app(settings, citewise=Citewise(settings, kb=indexed))) as live:
        allowed.default = host_page(html_tag(live.url))
        yield live


@pytest.fixture(scope="module")
def linked(tmp_path_factory, embedder, sites) -> Iterator[LiveServer]:
    """The same corpus ingested with the docs site as its base URL: every citation links to a page of that site."""
    from citewise.agent.runner import Citewise

    allowed, _ = sites
    settings = make_settings(
        tmp_path_factory.mktemp("linked") / "home",
        api_keys=KEYS,
        ingest={"base_url": f"{allowed.origin}/docs/"},
        server={"cors_origins": (allowed.origin,)},
    )
    kb = KnowledgeBase(settings, embedder=embedder)
    corpus = tmp_path_factory.mktemp("linked-corpus") / "corpus"
    shutil.copytree(CORPUS, corpus)
    Ingestor(kb).ingest_paths([corpus])
    with LiveServer(create_app(settings, citewise=Citewise(settings, kb=kb))) as live:
        yield live


def open_host(browser, url: str, *, width: int = 1280, height: int = 860, dark: bool = False):
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme="dark" if dark else "light")
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error" else None)
    page.add_init_script(RECORDER)
    # The fixture corpus cites pages of a made-up site: answered here, so nothing ever leaves the machine.
    context.route("https://docs.orbitron.example/**", lambda route: route.fulfill(body="the docs page"))
    page.goto(url)
    return page


def wait_ready(page) -> None:
    page.wait_for_selector("[data-citewise-widget][data-ready='1']", state="attached", timeout=30_000)


def ask(page, question: str) -> None:
    page.fill(".cw-input", question)
    page.press(".cw-input", "Enter")


def answers(page, states: str = "done, refused, error"):
    selector = ", ".join(f".cw-answer[data-state='{s.strip()}']" for s in states.split(","))
    page.wait_for_selector(selector, timeout=120_000)
    return page.locator(".cw-answer").last


def recorded(page) -> list[dict]:
    return page.evaluate("window.__cw")


def stream_requests(page) -> list[dict]:
    found: list[dict] = []
    page.on("request", lambda r: found.append(r.post_data_json) if r.url.endswith("/api/agent/stream") else None)
    return found


# -- the tests -------------------------------------------------------------------------------------------------------
def test_the_mkdocs_recipe_is_the_tag_the_browser_tests_load():
    """The MkDocs override carries the plain-HTML tag (only its title differs), so the browser tests cover it."""
    text = DOCS.read_text(encoding="utf-8")
    (jinja,) = [body for language, body in re.findall(r"```(\w+)\n(.*?)```", text, re.S) if language == "jinja"]
    (line,) = [line.strip() for line in jinja.splitlines() if "widget.js" in line]
    (tested,) = [line.strip() for line in recipe_blocks()["html"].splitlines() if "widget.js" in line]
    untitled = re.compile(r'data-title="[^"]*"')
    assert untitled.sub("", line) == untitled.sub("", tested)
    assert "{% block scripts %}" in jinja and "{{ super() }}" in jinja


def test_widget_on_another_origin_streams_an_answer_and_opens_its_passage(browser, citewise, sites, screenshot):
    allowed, _ = sites
    page = open_host(browser, allowed.origin + "/guide/")
    requests = stream_requests(page)
    wait_ready(page)
    assert page.evaluate("location.origin") != citewise.url  # really a foreign origin
    # Nothing leaks into the host page: no global, no element but the widget's host.
    assert page.evaluate("typeof window.DOMPurify") == "undefined"
    assert page.evaluate("document.body.lastElementChild.hasAttribute('data-citewise-widget')")

    page.click(".cw-launcher")
    assert page.get_attribute(".cw-launcher", "aria-expanded") == "true"
    assert page.locator(".cw-title").inner_text() == "Ask the Orbitron docs"  # data-title
    ask(page, ANSWERABLE)
    answer = answers(page, "done")

    events = recorded(page)
    states = [e["state"] for e in events if e["name"] == "state"]
    assert states[:2] == ["thinking", "streaming"] and states[-1] == "done"
    names = [e["name"] for e in events]
    tokens = [e for e in events[: names.index("complete")] if e["name"] == "token"]
    assert len(tokens) >= 2 and tokens[-1]["chars"] > tokens[0]["chars"]
    assert "7433" in answer.locator(".cw-body").inner_text()
    assert requests and requests[0]["question"] == ANSWERABLE and "session_id" not in requests[0]

    # A citation whose chunk has a source_url opens that page (a new tab: it is on another site). Nothing leaves the
    # machine: the browser's request is answered here.
    first = answer.locator(".cw-sources li").first
    with page.context.expect_page() as popup:
        first.locator(".cw-source").click()
    url = popup.value.url
    recorded_url = [e for e in recorded(page) if e["name"] == "citation"][-1]["source_url"]
    assert url == recorded_url and url.startswith("https://docs.orbitron.example/")
    popup.value.close()
    # Its quote is one click away too: the passage opens inside the panel, the quoted text highlighted.
    first.locator(".cw-source-quote").click()
    page.wait_for_selector(".cw-passage-body mark")
    assert "7433" in " ".join(page.locator(".cw-passage-body mark").all_inner_texts())
    assert "**" not in page.locator(".cw-passage-body").inner_text()
    screenshot(page, "widget-passage.png")
    page.keyboard.press("Escape")  # back to the conversation, focus on the source that opened it
    assert page.locator(".cw-passage").is_hidden()

    # The refusal is an honest answer, with why and where to read; never an internal code.
    ask(page, UNANSWERABLE)
    page.wait_for_function(
        "document.querySelector('[data-citewise-widget]').shadowRoot.querySelectorAll("
        "'.cw-answer[data-state=done], .cw-answer[data-state=refused]').length === 2",
        timeout=120_000,
    )
    refusal = page.locator(".cw-answer").last
    assert refusal.get_attribute("data-state") == "refused"
    assert REFUSAL_TEXT in refusal.locator(".cw-body").inner_text()
    notes = refusal.locator(".cw-notes").inner_text()
    assert notes.strip() and "weak_evidence" not in notes and "empty_retrieval" not in notes
    assert len(requests) == 2 and requests[1]["session_id"]  # the same conversation

    # Thumbs down with a comment reaches the server as the widget key's owner.
    refusal.locator(".feedback-down").click()
    page.fill(".cw-answer:last-child .feedback-text", "I expected the bread recipe")
    page.press(".cw-answer:last-child .feedback-text", "Enter")
    page.wait_for_function("window.__cw.filter((e) => e.name === 'feedback' && e.comment).length === 1")
    assert refusal.locator(".feedback-down").get_attribute("aria-pressed") == "true"
    screenshot(page, "widget-foreign-origin.png")
    assert page.errors == []
    page.context.close()


def test_an_agent_refusal_says_why_in_the_servers_words(browser, indexed, sites, tmp_path):
    """The agent records only a refusal code; the widget has no table of its own and shows the server's words."""
    from citewise.agent.runner import Citewise
    from citewise.feedback.analytics import REFUSAL_WORDS
    from citewise.llm.testing import ScriptedChatModel

    allowed, _ = sites
    settings = make_settings(tmp_path / "home", api_keys=KEYS, server={"cors_origins": (allowed.origin,)})
    model = ScriptedChatModel(["", REFUSAL_TEXT] * 2)
    with LiveServer(create_app(settings, citewise=Citewise(settings, kb=indexed, chat_model=model))) as live:
        allowed.pages["/agent/"] = host_page(html_tag(live.url))
        page = open_host(browser, allowed.origin + "/agent/")
        wait_ready(page)
        page.click(".cw-launcher")
        ask(page, ANSWERABLE)
        refusal = answers(page, "refused")
        assert refusal.locator(".cw-why").inner_text().strip() == REFUSAL_WORDS["not_in_documentation"]
        assert page.errors == []
        page.context.close()


def test_citations_link_to_the_docs_site_and_the_conversation_follows(browser, linked, sites, request):
    allowed, _ = sites
    # Every page of the site, /docs/… included, carries the Docusaurus recipe's tag for this server.
    previous, allowed.default = allowed.default, host_page(docusaurus_tag(linked.url), title="Start")
    request.addfinalizer(lambda: setattr(allowed, "default", previous))
    page = open_host(browser, allowed.origin + "/start/")
    wait_ready(page)
    page.click(".cw-launcher")
    ask(page, ENCRYPTION)
    answer = answers(page, "done")
    own = answer.locator(f"a.cw-source[href^='{allowed.origin}/docs/']").first
    assert own.get_attribute("target") is None  # this site's page opens in place
    own.click()
    # The source_url is a page of this site: the reader goes there, and the widget brings the conversation along.
    page.wait_for_url(re.compile(re.escape(allowed.origin) + r"/docs/.+"))
    wait_ready(page)
    assert [e for e in recorded(page) if e["name"] == "ready"] == [{"name": "ready", "restored": 1}]
    page.click(".cw-launcher")
    assert "encrypt_payloads" in page.locator(".cw-answer .cw-body").first.inner_text()
    assert page.errors == []
    page.context.close()


def test_selected_text_on_the_host_page_is_asked_about(browser, citewise, sites, screenshot):
    allowed, _ = sites
    page = open_host(browser, allowed.origin + "/selection/")
    requests = stream_requests(page)
    wait_ready(page)
    box = page.locator("#intro").bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + 6)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 4, box["y"] + box["height"] - 6, steps=10)
    page.mouse.up()
    popover = page.locator(".cw-ask-selection")
    popover.wait_for(state="visible")
    selected = page.evaluate("document.getSelection().toString().trim()")
    assert "7433" in selected
    screenshot(page, "widget-selection.png")
    popover.click()
    assert page.locator(".cw-panel").is_visible() and page.locator(".cw-chip").is_visible()
    assert page.evaluate("document.querySelector('[data-citewise-widget]').shadowRoot.activeElement.className") == (
        "cw-input"
    )
    page.press(".cw-input", "Enter")  # no question typed: the default one about the selection
    answer = answers(page)
    assert requests[-1]["selected_text"] == selected
    assert requests[-1]["question"] == "What does this passage mean?"
    assert page.locator(".cw-user .cw-quote").last.is_visible()
    assert answer.get_attribute("data-state") in ("done", "refused")
    assert page.errors == []
    page.context.close()


def test_hostile_host_css_leaves_a_usable_widget(browser, citewise, sites, screenshot):
    allowed, _ = sites
    allowed.pages["/hostile/"] = host_page(html_tag(citewise.url), css=HOSTILE_CSS, title="Hostile")
    page = open_host(browser, allowed.origin + "/hostile/")
    wait_ready(page)
    launcher = page.locator(".cw-launcher")
    launcher.wait_for(state="visible")
    box = launcher.bounding_box()
    assert 40 <= box["height"] <= 56 and box["width"] < 200  # its own size, not the page's 48px rem or 40px font
    assert box["x"] + box["width"] <= 1280 and box["y"] + box["height"] <= 860  # still in its corner
    launcher.click()
    style = page.evaluate(
        """() => {
            const root = document.querySelector('[data-citewise-widget]').shadowRoot;
            const input = getComputedStyle(root.querySelector('.cw-input'));
            const panel = root.querySelector('.cw-panel').getBoundingClientRect();
            return { font: input.fontSize, family: input.fontFamily, color: input.color,
                     display: getComputedStyle(root.querySelector('.cw-send')).display,
                     width: panel.width, height: panel.height };
        }"""
    )
    assert style["font"] == "14px" and "Times" not in style["family"] and style["color"] != "rgb(204, 0, 0)"
    assert style["display"] == "flex" and 380 <= style["width"] <= 420 and style["height"] > 300
    ask(page, ANSWERABLE)
    answer = answers(page, "done")
    assert "7433" in answer.locator(".cw-body").inner_text()
    screenshot(page, "widget-hostile-css.png")
    assert page.errors == []
    page.context.close()


def test_keyboard_phone_width_and_dark_mode(browser, citewise, sites, screenshot):
    allowed, _ = sites
    page = open_host(browser, allowed.origin + "/phone/", width=375, height=720, dark=True)
    wait_ready(page)
    # Keyboard only: Tab reaches the launcher, Enter opens the panel with the cursor in the question box.
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement?.shadowRoot?.activeElement?.className") == "cw-launcher":
            break
    else:
        pytest.fail("Tab never reached the launcher")
    page.keyboard.press("Enter")
    active = "document.querySelector('[data-citewise-widget]').shadowRoot.activeElement.className"
    assert page.evaluate(active) == "cw-input"
    page.keyboard.type(ANSWERABLE)
    page.keyboard.press("Enter")
    answers(page, "done")
    geometry = page.evaluate(
        """() => {
            const root = document.querySelector('[data-citewise-widget]').shadowRoot;
            const panel = root.querySelector('.cw-panel');
            const r = panel.getBoundingClientRect();
            return { left: r.left, top: r.top, width: r.width, height: r.height,
                     scroll: document.documentElement.scrollWidth, bg: getComputedStyle(panel).backgroundColor };
        }"""
    )
    assert geometry["left"] == 0 and geometry["top"] == 0 and geometry["width"] == 375 and geometry["height"] == 720
    assert geometry["scroll"] <= 375
    red, green, blue = (int(v) for v in re.findall(r"\d+", geometry["bg"])[:3])
    assert max(red, green, blue) < 60  # the reader's dark scheme
    screenshot(page, "widget-phone-dark.png")
    page.keyboard.press("Escape")  # closes, and gives focus back to the launcher
    assert page.locator(".cw-panel").is_hidden()
    assert page.evaluate(active) == "cw-launcher"
    assert page.errors == []
    page.context.close()


def test_a_site_not_in_the_allow_list_is_refused(browser, citewise, sites):
    allowed, other = sites
    other.default = host_page(html_tag(citewise.url), title="Not allowed")
    page = open_host(browser, other.origin + "/")
    launcher = page.locator(".cw-launcher")
    launcher.wait_for(state="visible")
    page.wait_for_selector(".cw-launcher[data-unavailable]", state="attached", timeout=30_000)
    launcher.click()
    assert "not allowed" in page.locator(".cw-unavailable").inner_text()
    # The page's own script can't read the API either: the browser refuses the response.
    refused = page.evaluate(
        """async (url) => {
            try {
                await fetch(url + '/api/agent/run', { method: 'POST', headers: { 'Content-Type': 'application/json',
                    'X-API-Key': 'k-widget-3b7e' }, body: JSON.stringify({ question: 'x' }) });
                return 'read';
            } catch (err) { return err.name; }
        }""",
        citewise.url,
    )
    assert refused == "TypeError"
    assert any("not allowed" in e for e in page.errors)  # the loader says why in the console
    page.context.close()

    # The same, at the HTTP level: a preflight from an unlisted origin gets no CORS headers; the listed one does.
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-api-key"}
    denied = httpx.options(citewise.url + "/api/agent/stream", headers={"Origin": other.origin, **preflight})
    assert denied.status_code == 400 and "access-control-allow-origin" not in denied.headers
    granted = httpx.options(citewise.url + "/api/agent/stream", headers={"Origin": allowed.origin, **preflight})
    assert granted.status_code == 200 and granted.headers["access-control-allow-origin"] == allowed.origin
    simple = httpx.get(citewise.url + "/widget-app.js", headers={"Origin": other.origin})
    assert "access-control-allow-origin" not in simple.headers
