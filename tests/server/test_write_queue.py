"""The server's write path: a bounded queue, run in order; each request answered in bounded time (202 while its
write is still going, 503 + Retry-After when the queue is full); shutdown in bounded time, resumed on restart."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.support.fake_openai import FakeOpenAI, Fault

from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.write_lock import write_lock
from citewise.settings import Settings

NOTE = b"# Note\n\nThe tern parameter defaults to 9.\n"


@contextmanager
def busy_home(home: Path) -> Iterator[None]:
    """Another writer (a long CLI ingest, say) holds the home's write lock until the block ends."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with write_lock(home, wait_s=0):
            held.set()
            release.wait(120)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    held.wait(10)
    try:
        yield
    finally:
        release.set()
        thread.join(30)


def _settings(tmp_path: Path, top: dict | None = None, **server) -> Settings:
    """A home for these tests: `server` settings over the defaults here, `top` the other (top-level) ones."""
    return Settings(
        home=tmp_path / "home",
        server={"rate_limit_per_minute": 0, "log_questions": False, "write_wait_s": 0.5, **server},
        **(top or {}),
    )


def _upload(client, name: str):
    return client.post("/api/documents", files=[("files", (name, NOTE, "text/markdown"))])


def _wait_indexed(client, count: int, timeout_s: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        docs = client.get("/api/documents").json()
        if len(docs) == count and all(d["status"] == "INDEXED" for d in docs):
            return docs
        assert time.monotonic() < deadline, docs
        time.sleep(0.2)


def test_a_write_stuck_behind_another_answers_202_and_lands_later(tmp_path, make_client):
    settings = _settings(tmp_path)
    client = make_client(settings)
    with busy_home(settings.home):
        started = time.monotonic()
        response = _upload(client, "small.md")
        assert time.monotonic() - started < 10  # bounded by server.write_wait_s, not by the other writer
        assert response.status_code == 202
        body = response.json()
        assert body["queued"] is True and body["documents"][0]["status"] == "PENDING"
    docs = _wait_indexed(client, 1)
    deleting = client.delete(f"/api/documents/{docs[0]['doc_id']}")
    assert deleting.status_code == 200 and deleting.json()["deleted"] is True


def test_a_full_queue_answers_503_with_retry_after(tmp_path, make_client):
    settings = _settings(tmp_path, write_queue_size=1)
    client = make_client(settings)
    assert _upload(client, "kept.md").status_code in (200, 202)
    _wait_indexed(client, 1)  # indexed before the queue fills
    folder = settings.uploads_path / "public"
    with busy_home(settings.home):
        assert _upload(client, "a.md").status_code == 202  # running: waiting for the lock
        assert _upload(client, "b.md").status_code == 202  # queued: the queue is now full
        full = _upload(client, "c.md")
        assert full.status_code == 503 and full.headers["Retry-After"]
        assert "waiting" in full.json()["detail"]
        # Refused means not kept: a file left behind would be ingested by the next start as if it were accepted,
        # and one of the same name as an indexed document would replace that document's source.
        changed = b"# Kept\n\nThe tern parameter defaults to 12.\n"
        same_name = client.post("/api/documents", files=[("files", ("kept.md", changed, "text/markdown"))])
        assert same_name.status_code == 503
        assert sorted(p.name for p in folder.iterdir()) == ["a.md", "b.md", "kept.md"]
        assert (folder / "kept.md").read_bytes() == NOTE
    docs = _wait_indexed(client, 3)
    assert sorted(d["filename"] for d in docs) == ["a.md", "b.md", "kept.md"]
    client.__exit__(None, None, None)
    restarted = make_client(settings)  # the next start resumes unfinished uploads: there are none
    time.sleep(1)
    assert sorted(d["filename"] for d in _wait_indexed(restarted, 3)) == ["a.md", "b.md", "kept.md"]
    assert (folder / "kept.md").read_bytes() == NOTE


def test_a_refused_write_gives_its_place_back(tmp_path):
    """A place taken and not used (the upload failed before queueing) is free again; one used is the job's until
    the worker takes it; a server shutting down takes no more."""
    from citewise.server.writer import QueueFull, WriteQueue

    writes = WriteQueue(1)
    writes.start()
    release = threading.Event()
    running = writes.submit(lambda stop: release.wait(30))
    time.sleep(0.2)  # the worker takes it: its place is free
    with writes.reserve(), pytest.raises(QueueFull):
        writes.reserve()
    with writes.reserve() as slot:  # given back when the block ended unused
        queued = slot.submit(lambda stop: "done")
    with pytest.raises(QueueFull):
        writes.reserve()  # the queued job holds the place
    release.set()
    assert running.result(10) is True and queued.result(10) == "done"
    assert writes.submit(lambda stop: 1).result(10) == 1
    slot = writes.reserve()
    writes.stop(5)
    with pytest.raises(QueueFull, match="shutting down"):
        slot.submit(lambda stop: 2)
    with pytest.raises(QueueFull, match="shutting down"):
        writes.reserve()


def test_shutdown_is_bounded_and_unfinished_uploads_resume_on_the_next_start(tmp_path, make_client):
    settings = _settings(tmp_path, shutdown_grace_s=5)
    client = make_client(settings)
    with busy_home(settings.home):
        assert _upload(client, "late.md").status_code == 202
        started = time.monotonic()
        client.__exit__(None, None, None)  # the app shuts down while its write waits for the lock
        assert time.monotonic() - started < 15
    restarted = make_client(settings)
    docs = _wait_indexed(restarted, 1)
    assert docs[0]["filename"] == "late.md"


def _vendor_settings(tmp_path: Path, fake, monkeypatch, wait_s: float) -> Settings:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-anything")
    vendor = {"embeddings": "openai:fake-embed", "embeddings_base_url": fake.url}
    return _settings(tmp_path, vendor, write_wait_s=wait_s)


def test_an_embedding_provider_down_fails_the_upload_clearly_and_loses_nothing(tmp_path, make_client, monkeypatch):
    with FakeOpenAI() as fake:
        settings = _vendor_settings(tmp_path, fake, monkeypatch, wait_s=60)
        client = make_client(settings, kb=KnowledgeBase(settings))
        assert _upload(client, "first.md").status_code == 200
        fake.script(*[Fault(status=503)] * 30)  # down from now on, retries included

        response = _upload(client, "second.md")
        assert response.status_code == 502
        assert response.json()["detail"] == "The model provider failed."
        statuses = {d["filename"]: d["status"] for d in client.get("/api/documents").json()}
        assert statuses == {"first.md": "INDEXED", "second.md": "PENDING"}


def test_a_rate_limited_embedding_provider_is_a_429_that_says_so_and_loses_nothing(tmp_path, make_client, monkeypatch):
    with FakeOpenAI() as fake:
        settings = _vendor_settings(tmp_path, fake, monkeypatch, wait_s=60)
        client = make_client(settings, kb=KnowledgeBase(settings))
        fake.script(*[Fault(status=429, headers={"retry-after": "0"})] * 30)

        response = _upload(client, "slow.md")
        assert response.status_code == 429
        assert response.json()["detail"] == "The model provider is rate limiting requests. Retry shortly."
        assert int(response.headers["retry-after"]) >= 1
        assert [d["status"] for d in client.get("/api/documents").json()] == ["PENDING"]

        documented = client.get("/openapi.json").json()["paths"]["/api/documents"]["post"]["responses"]
        assert {"429", "502", "504"} <= set(documented)  # what an embedding provider's failure answers


def test_a_queued_upload_whose_provider_fails_is_logged_not_dropped(tmp_path, make_client, monkeypatch, caplog):
    with FakeOpenAI() as fake:
        settings = _vendor_settings(tmp_path, fake, monkeypatch, wait_s=0.5)
        client = make_client(settings, kb=KnowledgeBase(settings))
        assert _upload(client, "first.md").status_code in (200, 202)
        _wait_indexed(client, 1)
        fake.script(*[Fault(status=503)] * 30)
        with caplog.at_level(logging.ERROR, logger="citewise.server.routers.documents"):
            with busy_home(settings.home):
                assert _upload(client, "late.md").status_code == 202  # answered before the write ran
            deadline = time.monotonic() + 60
            while not any("queued write failed" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the failed write was never reported"
                time.sleep(0.2)
        failure = next(r.getMessage() for r in caplog.records if "queued write failed" in r.getMessage())
        assert "Embedding provider" in failure
        statuses = {d["filename"]: d["status"] for d in client.get("/api/documents").json()}
        assert statuses == {"first.md": "INDEXED", "late.md": "PENDING"}
