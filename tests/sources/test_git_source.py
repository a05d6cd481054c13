"""Git sources against real repositories made in the test with the `git` command: edits, renames and deletions
are synced exactly, a tag pins the content, and the commit each document was read at reaches its citations."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tests.sources.conftest import source_settings

from citewise.agent.runner import Citewise
from citewise.settings import SourceSpec
from citewise.sources.state import SourceState
from citewise.sources.sync import sync_source
from citewise.types import Status

if shutil.which("git") is None:
    # CI installs git (.ci/run): there a missing binary is a broken runner, not a reason to skip every Git test.
    if os.environ.get("CI") == "true":
        raise RuntimeError("the Git-source tests build repositories with git, and CI=true but git is not installed")
    pytestmark = pytest.mark.skip(reason="the tests build repositories with git (CI installs it: .ci/run)")

TEMPLATE = "https://git.example.com/acme/handbook/blob/{ref}/{path}"

INTRO = """---
title: Introduction
---

# Introduction

The handbook explains how the Acme relay forwards telemetry to the collector.

## Ports and protocols

The relay listens on port 7070 and speaks gRPC to the collector.
"""

SETUP = """# Setup

## Install the relay

Download the relay binary and run `relay init` to write the default configuration file.
"""

API = """# API reference

## Health endpoint

`GET /healthz` answers 200 when the relay has a live connection to the collector.
"""


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return result.stdout.strip()


def write(repo: Path, path: str, text: str) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "handbook"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "docs@example.com")
    git(repo, "config", "user.name", "Docs")
    write(repo, "docs/intro.md", INTRO)
    write(repo, "docs/guide/setup.md", SETUP)
    write(repo, "docs/api.md", API)
    write(repo, "docs/logo.png", "not a document")
    write(repo, "src/relay.py", "print('not docs either')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def _by_path(kb, name: str) -> dict[str, object]:
    prefix = f"sources/{name}/"
    return {r.source.removeprefix(prefix): r for r in kb.registry.list() if r.source.startswith(prefix)}


def test_edits_renames_and_deletions_are_synced_exactly(repo, tmp_path, make_kb):
    spec = SourceSpec(url=str(repo), include=("docs/**/*.md",), url_template=TEMPLATE)
    settings = source_settings(tmp_path / "home", handbook=spec)
    kb = make_kb(settings)
    first_commit = git(repo, "rev-parse", "HEAD")

    first = sync_source(kb, "handbook")

    assert first.ok, first.error
    assert first.revision == first_commit and first.added == 3
    docs = _by_path(kb, "handbook")
    assert set(docs) == {"docs/intro.md", "docs/guide/setup.md", "docs/api.md"}
    assert {r.revision for r in docs.values()} == {first_commit}
    answer = Citewise(settings, kb=kb).ask("Which port does the relay listen on?")
    assert answer.status == Status.SUCCESS, answer.answer
    cited = answer.citations[0]
    assert cited.source_url == TEMPLATE.format(ref="main", path="docs/intro.md") + "#ports-and-protocols"
    assert cited.revision == first_commit

    write(repo, "docs/intro.md", INTRO.replace("port 7070", "port 7171"))
    (repo / "docs/reference").mkdir()
    git(repo, "mv", "docs/api.md", "docs/reference/api.md")
    git(repo, "rm", "-q", "docs/guide/setup.md")
    git(repo, "commit", "-q", "-am", "edit, rename, delete")
    second_commit = git(repo, "rev-parse", "HEAD")

    second = sync_source(kb, "handbook")

    assert second.ok, second.error
    assert (second.added, second.updated, second.removed, second.renamed) == (1, 1, 2, 1)
    assert second.unchanged == 0
    docs = _by_path(kb, "handbook")
    assert set(docs) == {"docs/intro.md", "docs/reference/api.md"}
    assert docs["docs/intro.md"].revision == second_commit
    rows = SourceState(settings.index_dir).documents("handbook")
    assert rows["docs/reference/api.md"].blob == git(repo, "rev-parse", "HEAD:docs/reference/api.md")
    answer = Citewise(settings, kb=kb).ask("Which port does the relay listen on?")
    assert "7171" in answer.answer and answer.citations[0].revision == second_commit
    refused = Citewise(settings, kb=kb).ask("How do I write the default configuration file of the relay?")
    assert refused.status == Status.REFUSED

    third = sync_source(kb, "handbook")  # nothing changed: nothing is read
    assert (third.added, third.updated, third.removed, third.unchanged) == (0, 0, 0, 2)
    assert third.chunks_embedded == 0


def test_a_tag_pins_the_content(repo, tmp_path, make_kb):
    git(repo, "tag", "-a", "v1.0", "-m", "release 1.0")
    tagged = git(repo, "rev-parse", "HEAD")
    write(repo, "docs/intro.md", INTRO.replace("port 7070", "port 7171"))
    write(repo, "docs/new.md", "# New\n\nA page written after the release.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "after the release")
    spec = SourceSpec(url=str(repo), ref="v1.0", root="docs", url_template="https://docs.example.com/{page}")
    settings = source_settings(tmp_path / "home", handbook=spec)
    kb = make_kb(settings)

    report = sync_source(kb, "handbook")

    assert report.ok, report.error
    assert report.revision == tagged
    docs = _by_path(kb, "handbook")
    assert set(docs) == {"docs/intro.md", "docs/guide/setup.md", "docs/api.md"}
    answer = Citewise(settings, kb=kb).ask("Which port does the relay listen on?")
    assert "7070" in answer.answer
    assert answer.citations[0].source_url == "https://docs.example.com/intro#ports-and-protocols"
    again = sync_source(kb, "handbook")
    assert (again.added, again.updated, again.removed) == (0, 0, 0)


def test_a_change_of_ingest_settings_rereads_every_file(repo, tmp_path, make_kb, monkeypatch):
    """As for `citewise ingest`: files synced before sentence vectors (or under other chunking) are read again on
    the next sync, though their blobs are unchanged, and come back with sentence vectors."""
    settings = source_settings(tmp_path / "home", handbook=SourceSpec(url=str(repo), include=("docs/**/*.md",)))
    monkeypatch.setattr(type(settings), "ingest_fingerprint", lambda self: "before sentence vectors")
    kb = make_kb(settings)
    assert sync_source(kb, "handbook").added == 3
    doc_ids = [r.doc_id for r in _by_path(kb, "handbook").values()]
    chunks, stored = kb.store.chunks(None), kb.store.vectors_by_hash(doc_ids)
    # Their chunks as a Citewise before sentence vectors wrote them: the vectors alone.
    kb.store.write_chunks(chunks, np.vstack([stored[c.content_hash][0] for c in chunks]), finished={})
    assert all(sentences is None for _, sentences in kb.store.vectors_by_hash(doc_ids).values())
    monkeypatch.undo()

    report = sync_source(kb, "handbook")

    assert report.ok, report.error
    assert (report.added, report.updated, report.removed, report.unchanged) == (0, 3, 0, 0)
    assert all(sentences is not None for _, sentences in kb.store.vectors_by_hash(doc_ids).values())
    again = sync_source(kb, "handbook")
    assert (again.updated, again.unchanged, again.chunks_embedded) == (0, 3, 0)


def test_a_missing_ref_fails_and_changes_nothing(repo, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", handbook=SourceSpec(url=str(repo), ref="no-such-branch"))
    kb = make_kb(settings)

    report = sync_source(kb, "handbook")

    assert not report.ok and "no-such-branch" in report.error and "main" in report.error
    assert kb.registry.list() == []


@pytest.fixture
def served_repo(repo: Path):
    """The repository over Git's smart HTTP protocol on loopback (dulwich's own WSGI server)."""
    import threading
    from wsgiref.simple_server import make_server

    from dulwich.repo import Repo
    from dulwich.server import DictBackend
    from dulwich.web import WSGIRequestHandlerLogger, WSGIServerLogger, make_wsgi_chain

    backend_repo = Repo(str(repo))
    server = make_server(
        "127.0.0.1",
        0,
        make_wsgi_chain(DictBackend({"/": backend_repo})),
        handler_class=WSGIRequestHandlerLogger,
        server_class=WSGIServerLogger,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()
    backend_repo.close()


def test_a_clone_url_is_mirrored_under_the_home_and_fetched_on_each_sync(repo, served_repo, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", handbook=SourceSpec(url=served_repo, kind="git"))
    refused = sync_source(make_kb(settings), "handbook")
    assert not refused.ok and "--allow-private-network" in refused.error

    spec = SourceSpec(url=served_repo, kind="git", allow_private_network=True, url_template=TEMPLATE)
    settings = settings.model_copy(update={"sources": {"handbook": spec}})
    kb = make_kb(settings)
    first = sync_source(kb, "handbook")
    assert first.ok, first.error
    assert first.added == 3 and (settings.sources_dir / "git" / "handbook.git" / "HEAD").exists()

    write(repo, "docs/faq.md", "# FAQ\n\n## Can the relay buffer?\n\nYes: the relay buffers 10,000 events on disk.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "faq")

    second = sync_source(kb, "handbook")
    assert second.ok, second.error
    assert second.revision == git(repo, "rev-parse", "HEAD")
    assert (second.added, second.updated, second.removed) == (1, 0, 0)


@pytest.fixture
def redirected_repo(repo: Path):
    """The repository served on 127.0.0.2, and a server on 127.0.0.1 that redirects every request there (same path
    and query): a clone URL that looks harmless and leads somewhere it may not. Both log the paths they were asked."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from dulwich.repo import Repo
    from dulwich.server import DictBackend
    from dulwich.web import make_wsgi_chain

    backend_repo = Repo(str(repo))
    git_app = make_wsgi_chain(DictBackend({"/": backend_repo}))
    private_hits: list[str] = []

    def logged(environ, start_response):
        private_hits.append(environ.get("PATH_INFO", ""))
        return git_app(environ, start_response)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    private = make_server("127.0.0.2", 0, logged, handler_class=Quiet)
    target = f"http://127.0.0.2:{private.server_port}"

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    public = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    servers = (private, public)
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{public.server_address[1]}/", private_hits
    for server in servers:
        server.shutdown()
        server.server_close()
    backend_repo.close()


def test_a_redirect_to_a_private_address_is_refused(redirected_repo, tmp_path, make_kb, monkeypatch):
    # 127.0.0.1 stands in for a public Git host here (the only way to serve one in a test); 127.0.0.2 stays what it
    # is, a loopback address, which a source without --allow-private-network must never reach, redirect or not.
    from citewise.sources import fetch

    monkeypatch.setattr(fetch, "is_public", lambda address: address == "127.0.0.1")
    url, private_hits = redirected_repo
    settings = source_settings(tmp_path / "home", handbook=SourceSpec(url=url, kind="git"))
    kb = make_kb(settings)

    report = sync_source(kb, "handbook")

    assert not report.ok and "127.0.0.2" in report.error and "--allow-private-network" in report.error
    assert private_hits == []  # not one request reached the private address
    assert kb.registry.list() == []
    allowed = SourceSpec(url=url, kind="git", allow_private_network=True)  # the same redirect, now allowed
    followed = sync_source(make_kb(settings.model_copy(update={"sources": {"handbook": allowed}})), "handbook")
    assert followed.ok and followed.added == 3 and private_hits


@pytest.mark.parametrize("remote", ["git@localhost:acme/handbook.git", "git@10.0.0.7:acme/handbook.git"])
def test_an_scp_form_remote_on_a_private_host_is_refused(remote, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", handbook=SourceSpec(url=remote))
    kb = make_kb(settings)

    report = sync_source(kb, "handbook")

    assert report.kind == "git" and not report.ok
    assert "--allow-private-network" in report.error  # refused before ssh was started
    assert not (settings.sources_dir / "git" / "handbook.git").exists() and kb.registry.list() == []
