"""The docs folder served read-only at /pages (so answers' links open offline, as in `make demo`) and the example
questions of /api/examples (the landing page's), both behind the request gate, the examples owner by owner."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.server.conftest import KEYS, auth

from citewise.ingest.anchors import outline_anchors
from citewise.ingest.loaders import load_file
from citewise.ingest.pipeline import Ingestor
from citewise.server.example_questions import example_questions, heading_question

GUIDE = """---
title: The guide
---
# Guide

## Removing deleted files

Run `citewise ingest --prune` [as the server page says](sub/page.md#sessions).

## `POST /api/agent/stream` — Server-Sent Events

<script>alert("never run")</script>

## Removing deleted files

The same heading twice gets a numbered id.

## Custom place {#my-anchor}

Text.
"""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "site" / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "guide.md").write_text(GUIDE)
    (folder / "sub" / "index.md").write_text("# Sub\n\nThe folder's page.\n")
    (folder / "sub" / "page.md").write_text("# Page\n\n## Sessions\n\nSessions are kept.\n")
    (folder / "notes.txt").write_text("plain notes\n")
    (folder / "page.html").write_text("<h1>HTML</h1><script>alert(1)</script>")
    (folder / ".env").write_text("SECRET=1\n")
    (folder / "config.yaml").write_text("secret: 1\n")
    (tmp_path / "site" / "outside.md").write_text("# Outside\n\nNot to be served.\n")
    (tmp_path / "outside-too.md").write_text("# Far outside\n")
    (folder / "escape.md").symlink_to(tmp_path / "outside-too.md")
    return folder


def _settings(server_settings, docs: Path, **update):
    server = server_settings.server.model_copy(update={"pages_dir": docs})
    return server_settings.model_copy(update={"server": server, **update})


def test_markdown_pages_have_the_anchors_citations_and_the_docs_links_use(make_client, server_settings, docs):
    client = make_client(_settings(server_settings, docs))
    for path in ("/pages/guide", "/pages/guide.md"):  # `--base-url` links without the suffix; the docs link with it
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        headings = re.findall(r'<h\d id="([^"]+)"', page.text)
        assert headings == [
            "guide", "removing-deleted-files", "post-apiagentstream--server-sent-events", "removing-deleted-files-1",
            "my-anchor",
        ]  # fmt: skip
        ids = re.findall(r' id="([^"]+)"', page.text)
        assert ids == [*headings, "custom-place"]  # the heading's own slug too: what the indexed text gives it
        # What a source's citation links to (ingest/anchors.py over the loader's outline) is on the page.
        outline = load_file(docs / "guide.md", source="guide.md").outline
        assert set(outline_anchors(outline).values()) <= set(ids)
        assert "<title>The guide</title>" in page.text and "{#my-anchor}" not in page.text
        # Markdown's raw HTML is shown as text, and the page may run no script at all.
        assert "<script>" not in page.text and "&lt;script&gt;" in page.text
        assert "script-src" not in page.headers["content-security-policy"]
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert page.headers["x-content-type-options"] == "nosniff"
        assert 'href="sub/page.md#sessions"' in page.text  # resolves to /pages/sub/page.md, served below
    assert 'id="sessions"' in client.get("/pages/sub/page.md").text
    assert client.get("/pages/sub/page").status_code == 200


def test_a_folder_ingested_with_its_pages_url_links_each_chunk_to_its_section_there(
    make_client, make_kb, server_settings, docs
):
    """`citewise ingest docs --base-url http://HOST/pages` (as `make demo` does): a citation opens the page at its
    section, by the anchors /pages gives headings; `ingest.slugs` is part of the fingerprint only with a base URL."""
    ingest = server_settings.ingest.model_copy(update={"base_url": "http://testserver/pages"})
    settings = _settings(server_settings, docs, ingest=ingest)
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([docs])
    client = make_client(settings, kb=kb)
    urls = {c.chapter: c.source_url for c in kb.store.chunks()}
    assert urls["Page > Sessions"] == "http://testserver/pages/sub/page#sessions"
    assert urls["Guide > Custom place"] == "http://testserver/pages/guide#my-anchor"  # its own id wins
    for url in urls.values():
        path, _, fragment = url.removeprefix("http://testserver").partition("#")
        page = client.get(path)
        assert page.status_code == 200, url
        assert not fragment or f' id="{fragment}"' in page.text, url
    mkdocs = settings.model_copy(update={"ingest": ingest.model_copy(update={"slugs": "mkdocs"})})
    assert mkdocs.ingest_fingerprint() != settings.ingest_fingerprint()  # a new slug rule re-links every chunk
    plain = server_settings.model_copy(update={"ingest": server_settings.ingest.model_copy(update={"slugs": "mkdocs"})})
    assert plain.ingest_fingerprint() == server_settings.ingest_fingerprint()  # no base URL: no links to change


def test_folders_redirect_to_their_index_and_other_kinds_are_sent_sandboxed(make_client, server_settings, docs):
    client = make_client(_settings(server_settings, docs))
    moved = client.get("/pages/sub", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/pages/sub/"
    assert "The folder" in client.get("/pages/sub/").text
    assert client.get("/pages", follow_redirects=False).headers["location"] == "/pages/"
    assert client.get("/pages/").status_code == 404  # no index.md at the top, and no listing
    assert client.get("/pages/guide.md/").status_code == 404  # a file is no folder
    notes = client.get("/pages/notes.txt")
    assert (
        notes.status_code == 200
        and notes.text == "plain notes\n"
        and notes.headers["content-type"].startswith("text/plain")
    )
    html = client.get("/pages/page.html")  # served as it is, but its script can't run on the API's origin
    assert html.status_code == 200 and "sandbox" in html.headers["content-security-policy"]
    assert client.post("/pages/guide").status_code == 405


@pytest.mark.parametrize(
    "path",
    [
        "/pages/%2e%2e/outside.md",
        "/pages/%2E%2E/outside",
        "/pages/sub/%2e%2e/%2e%2e/outside.md",
        "/pages/..%2foutside.md",
        "/pages/sub/..%2f..%2foutside",
        "/pages/%2e%2e%2f%2e%2e%2foutside-too.md",
        "/pages/escape.md",  # a symbolic link out of the folder
        "/pages/escape",
        "/pages/.env",
        "/pages/sub/%2e%2e/.env",
        "/pages/config.yaml",  # a kind never served
        "/pages//etc/passwd",
        "/pages/%2fetc%2fpasswd",
        "/pages/..%5c..%5coutside.md",
        "/pages/guide%00.md",
        "/pages/missing",
    ],
)
def test_nothing_outside_the_folder_hidden_or_of_another_kind_is_served(make_client, server_settings, docs, path):
    client = make_client(_settings(server_settings, docs))
    response = client.get(path, follow_redirects=False)
    assert response.status_code == 404, (path, response.status_code, response.text[:200])
    assert "Outside" not in response.text and "SECRET" not in response.text


def test_pages_are_behind_the_api_keys_and_off_unless_configured(make_client, server_settings, docs):
    keyed = make_client(_settings(server_settings, docs, api_keys=KEYS))
    assert keyed.get("/pages/guide").status_code == 401
    assert keyed.get("/pages/guide", headers=auth("key-bob")).status_code == 200
    off = make_client(server_settings)
    missing = off.get("/pages/guide")
    assert missing.status_code == 404 and "--pages" in missing.json()["detail"]


def test_a_pages_dir_that_is_no_folder_stops_the_server_at_start(server_settings, tmp_path):
    from citewise.errors import ConfigError
    from citewise.server import create_app

    with pytest.raises(ConfigError, match="not a folder"):
        create_app(_settings(server_settings, tmp_path / "nowhere"))


# -- example questions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "question"),
    [
        ("Removing deleted files", "How do I remove deleted files?"),
        ("Running the tests", "How do I run the tests?"),
        ("Adding documents", "How do I add documents?"),
        ("Using a local model", "How do I use a local model?"),
        ("Changing chunk settings on an existing index", "How do I change chunk settings on an existing index?"),
        ("Backing up and restoring a home", "How do I back up and restore a home?"),
        ("Install the server", "How do I install the server?"),
        ("Configure Orbitron {#config}", "How do I configure Orbitron?"),
        ("How to rotate your keys", "How do I rotate my keys?"),
        ("Step 2: Set up TLS", "How do I set up TLS?"),
        ("Why was my question refused?", "Why was my question refused?"),
        ("What is logged to the question log", "What is logged to the question log?"),
        ("Exit reasons", "What are exit reasons?"),
        ("Owners and API keys", "What are owners and API keys?"),
        ("Citewise on PostgreSQL", "What is Citewise on PostgreSQL?"),
    ],
)
def test_a_heading_becomes_the_question_a_reader_would_ask(heading, question):
    assert heading_question(heading)[0] == question


@pytest.mark.parametrize(
    "heading",
    [
        "Overview", "Next steps", "See also", "Install", "Rate limits", "Search still returns deleted files",
        "How quote mode decides", "`POST /api/agent/stream` — Server-Sent Events", "v1.2 release notes",
        "Open WebUI, LibreChat, LangChain", "A heading far too long to be a question anybody would ever click on",
    ],
)  # fmt: skip
def test_headings_that_name_no_topic_make_no_question(heading):
    assert heading_question(heading) is None


def test_examples_are_deterministic_tasks_first_one_document_each():
    sections = [
        ("a", "Guide"), ("a", "Guide > Removing deleted files"), ("a", "Guide > Rotating the API key"),
        ("b", "Server > Exit reasons"), ("b", "Server > Setting up TLS"), ("c", "FAQ > Why is my upload refused?"),
        ("c", "FAQ > Overview"),
    ]  # fmt: skip
    chosen = example_questions(sections)
    assert chosen == example_questions(list(reversed(sections)))  # the order of the index doesn't matter
    assert len(chosen) == 3 and "How do I set up TLS?" in chosen and "Why is my upload refused?" in chosen
    assert sum(q in chosen for q in ("How do I remove deleted files?", "How do I rotate the API key?")) == 1
    assert example_questions(sections, 10)[-1] == "What are exit reasons?"  # a subject comes last
    assert example_questions([]) == [] and example_questions([("a", "Overview")]) == []


def test_examples_come_from_the_callers_own_headings(make_client, make_kb, keyed_settings, tmp_path):
    public, private = tmp_path / "public", tmp_path / "private"
    public.mkdir(), private.mkdir()
    (public / "guide.md").write_text(
        "# Guide\n\n## Removing deleted files\n\nRun the ingest with --prune.\n\n"
        "## Rotating the API key\n\nAdd the new key, then remove the old one.\n"
    )
    (private / "vault.md").write_text("# Vault\n\n## Unsealing the kestrel vault\n\nUse the two recovery shares.\n")
    kb = make_kb(keyed_settings)
    Ingestor(kb).ingest_paths([public])
    Ingestor(kb, owner="alice").ingest_paths([private])
    client = make_client(keyed_settings, kb=kb)

    assert client.get("/api/examples").status_code == 401
    alice = client.get("/api/examples?count=10", headers=auth("key-alice")).json()["questions"]
    bob = client.get("/api/examples?count=10", headers=auth("key-bob")).json()["questions"]
    assert "How do I unseal the kestrel vault?" in alice
    assert set(bob) == {"How do I remove deleted files?", "How do I rotate the API key?"}
    assert client.get("/api/examples", headers=auth("key-bob")).json()["questions"] == bob  # three asked, two there
    assert client.get("/api/examples?count=0", headers=auth("key-bob")).status_code == 422


def test_no_examples_on_an_empty_index(make_client, server_settings):
    client = make_client(server_settings)
    assert client.get("/api/examples").json() == {"questions": []}
