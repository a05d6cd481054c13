"""Scheduled source syncs in the server: they run in the background while questions are answered (real uvicorn, real
HTTP, real embedding model), show in /api/sources (owner-scoped) and /metrics, and a failed sync keeps the index."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from tests.conftest import CORPUS
from tests.server.conftest import KEYS, auth
from tests.sources import site_fixture as sf
from tests.support.docs_site import DocsSite
from tests.support.settings import make_settings

from citewise.ingest.pipeline import Ingestor
from citewise.server import create_app
from citewise.settings import SourceSpec

GUIDE_QUESTION = "How often does the frobnicator rotate the quantum signing keys?"
CORPUS_QUESTION = "How many worker threads does the server start by default?"


@pytest.fixture
def site() -> Iterator[DocsSite]:
    with DocsSite() as served:
        sf.build(served)
        yield served


def _spec(site: DocsSite, **extra) -> SourceSpec:
    return SourceSpec(url=site.url("/docs/"), allow_private_network=True, **extra)


def _wait_for(predicate, timeout_s: float = 120.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _synced_ok(metrics: str, source: str) -> int:
    match = re.search(rf'citewise_source_syncs_total\{{result="ok",source="{source}"\}} (\d+)', metrics)
    return int(float(match.group(1))) if match else 0


def test_scheduled_syncs_run_while_queries_are_answered(site, tmp_path, make_kb, live_server):
    settings = make_settings(tmp_path / "home", sources={"acme": _spec(site, every="1s")}, sync={"max_page_mb": 0.1})
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([CORPUS])  # something to answer from before the first sync lands
    server = live_server(create_app(settings, kb=kb))
    answers: list[tuple[int, str, str]] = []
    stop = threading.Event()

    def ask_until_stopped() -> None:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            while not stop.is_set():
                for question in (CORPUS_QUESTION, GUIDE_QUESTION):
                    reply = client.post("/api/agent/run", json={"question": question})
                    body = reply.json() if reply.headers.get("content-type", "").startswith("application/json") else {}
                    answers.append((reply.status_code, body.get("status", ""), body.get("exit_reason", "")))

    askers = [threading.Thread(target=ask_until_stopped) for _ in range(2)]
    for asker in askers:
        asker.start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            _wait_for(lambda: _synced_ok(client.get("/metrics").text, "acme") >= 1, what="the first scheduled sync")
            listed = client.get("/api/sources").json()["sources"]
            assert listed[0]["name"] == "acme" and listed[0]["last_ok"] is True and listed[0]["documents"] == 5
            # A change on the site: the next scheduled syncs pick it up (re-embedding one chunk) while queries go on.
            site.page("/docs/install.html", sf.INSTALL_V2)
            site.page("/docs/webhook-retries.html", sf.WEBHOOK_RETRIES)
            site.page("/sitemap-docs.xml", sf.urlset(site.base, [*sf.SITEMAP_PATHS, "/docs/webhook-retries.html"]))
            _wait_for(
                lambda: client.get("/api/sources").json()["sources"][0]["documents"] == 6, what="the changed site"
            )
            _wait_for(lambda: _synced_ok(client.get("/metrics").text, "acme") >= 3, what="more scheduled syncs")
            metrics = client.get("/metrics").text
            assert 'citewise_source_documents{source="acme"} 6.0' in metrics
            assert "citewise_source_last_success_timestamp_seconds" in metrics
    finally:
        stop.set()
        for asker in askers:
            asker.join(timeout=120)
    assert len(answers) >= 4
    failed = [a for a in answers if a[0] != 200 or a[1] == "error" or a[2] != "COMPLETED"]
    assert failed == [], failed
    assert any(status == "success" for _, status, _ in answers)


def test_sources_are_listed_per_owner_and_a_failed_sync_is_reported(site, tmp_path, make_kb, make_client):
    site.page("/blog/", sf.BLOG)
    settings = make_settings(
        tmp_path / "home",
        api_keys=KEYS,
        sources={
            "public-docs": _spec(site, every="1s"),
            "alice-notes": SourceSpec(url=site.url("/blog/"), allow_private_network=True, owner="alice", every="1h"),
        },
        sync={"max_page_mb": 0.1},
    )
    kb = make_kb(settings)
    client = make_client(settings, kb=kb)

    assert client.get("/api/sources").status_code == 401
    _wait_for(
        lambda: all(s["last_ok"] for s in client.get("/api/sources", headers=auth("key-alice")).json()["sources"]),
        what="both scheduled syncs",
    )
    alice = {s["name"]: s for s in client.get("/api/sources", headers=auth("key-alice")).json()["sources"]}
    bob = {s["name"]: s for s in client.get("/api/sources", headers=auth("key-bob")).json()["sources"]}
    assert set(alice) == {"public-docs", "alice-notes"} and set(bob) == {"public-docs"}
    assert alice["alice-notes"]["owner"] == "alice" and alice["public-docs"]["next_run"]
    assert alice["public-docs"]["documents"] == 5 and alice["public-docs"]["failures"] == 1

    # The site goes down: syncs fail, the index keeps what the last good sync left, the API and metrics say why.
    site.page("/robots.txt", "maintenance", "text/plain", status=503)
    ops = auth("key-ops")

    def failed_syncs() -> int:
        found = re.search(
            r'citewise_source_syncs_total\{result="failed",source="public-docs"\} (\d+)',
            client.get("/metrics", headers=ops).text,
        )
        return int(float(found.group(1))) if found else 0

    _wait_for(lambda: failed_syncs() >= 1, what="a failed scheduled sync")
    before = {(r.doc_id, r.file_hash) for r in kb.registry.list()}
    failures = failed_syncs()
    site.remove("/docs/guide.html")  # a successful sync would remove it
    _wait_for(lambda: failed_syncs() > failures, what="another failed scheduled sync")

    assert {(r.doc_id, r.file_hash) for r in kb.registry.list()} == before
    listed = {s["name"]: s for s in client.get("/api/sources", headers=auth("key-bob")).json()["sources"]}
    public = listed["public-docs"]
    assert (
        public["last_ok"] is False and "503" in public["last_error"] and "nothing was changed" in public["last_error"]
    )
    assert public["last_success"] is not None and public["documents"] >= 4
