"""Two (and, for the crash, three) real `citewise serve` processes on loopback sharing one PostgreSQL, as replicas
behind a load balancer would: nothing a request needs lives in a replica. The model is a real OpenAI-compatible
server on loopback (tests/support/fake_openai.py); quote mode needs none.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace

import httpx
import psycopg
import pytest
from httpx_sse import connect_sse
from tests.support.cluster import Replica, replica_env, start_replicas
from tests.support.fake_openai import FakeOpenAI, agent_responder

from citewise.types import PUBLIC_OWNER

pytestmark = pytest.mark.slow

KEYS = {"key-alice": "alice", "key-bob": "bob", "key-ops": PUBLIC_OWNER, "key-carol": "carol", "key-dave": "dave"}
RATE = 30  # per minute and key; each test below stays under it except the one that tests it (key-carol)

LEDGER = (
    "# Ledger retention\n\n"
    "Ledger snapshots are kept for 35 days. Snapshots are taken nightly at 02:00 UTC.\n\n"
    "## Restoring\n\nRun `ledgerctl restore --snapshot ID` to roll the ledger back to a snapshot.\n"
)
WORKERS = (
    "# Worker pool\n\n"
    "The worker pool runs twelve threads by default. Set `pool.threads` to change the number of worker threads.\n"
)


def slow_stream(body):
    """Plans and answers like the default responder; streamed answers come a word every 0.2 s (a slow model)."""
    reply = agent_responder(body)
    return replace(reply, chunk_delay_s=0.2) if body.get("stream") and body.get("tools") else reply


@pytest.fixture(scope="module")
def fake_model():
    with FakeOpenAI(responder=slow_stream) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(postgres, fake_model, tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster")
    url = postgres.create_database()
    env = replica_env(
        url,
        api_keys=json.dumps(KEYS),
        server__rate_limit_per_minute=str(RATE),
        uploads_dir=str(base / "shared-uploads"),
        llm="openai:fake-model",
        llm_base_url=fake_model.url,
        llm_api_key="not-a-real-key",
        server__write_wait_s="60",
    )
    replicas = [Replica(name, base / name, env) for name in ("a", "b")]
    try:
        yield {"a": replicas[0], "b": replicas[1], "url": url, "env": env, "base": base}
        # started lazily below, so a failure to start shows in the first test's output
    finally:
        for replica in replicas:
            replica.stop()


@pytest.fixture(scope="module")
def replicas(cluster):
    start_replicas([cluster["a"], cluster["b"]])
    return cluster["a"], cluster["b"]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def upload(replica: Replica, key: str, name: str, text: str) -> httpx.Response:
    return httpx.post(
        replica.url + "/api/documents",
        files=[("files", (name, text.encode(), "text/markdown"))],
        headers=auth(key),
        timeout=120,
    )


def ask(replica: Replica, key: str, question: str, **body) -> dict:
    response = httpx.post(
        replica.url + "/api/agent/run",
        json={"question": question, "mode": "quote", **body},
        headers=auth(key),
        timeout=120,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_an_upload_through_one_replica_is_answerable_through_the_other(replicas):
    a, b = replicas
    uploaded = upload(a, "key-alice", "ledger.md", LEDGER)
    assert uploaded.status_code == 200 and uploaded.json()["indexed"] == 1, uploaded.text
    answer = ask(b, "key-alice", "How long are ledger snapshots kept?")
    assert answer["status"] == "success" and "35 days" in answer["answer"]
    assert {c["filename"] for c in answer["citations"]} == {"ledger.md"}
    listed = httpx.get(b.url + "/api/documents", headers=auth("key-alice"), timeout=30).json()
    assert [d["filename"] for d in listed] == ["ledger.md"] and listed[0]["status"] == "INDEXED"


def test_owner_isolation_holds_across_replicas(replicas):
    a, b = replicas
    upload(a, "key-dave", "payroll.md", "# Payroll\n\nPayroll runs on the 25th. Salary bands are reviewed in March.\n")
    mine = ask(a, "key-dave", "When does payroll run?")
    assert mine["status"] == "success" and mine["citations"][0]["filename"] == "payroll.md"
    chunk_id = mine["citations"][0]["chunk_id"]
    doc_id = httpx.get(a.url + "/api/documents", headers=auth("key-dave"), timeout=30).json()[0]["doc_id"]

    theirs = ask(b, "key-bob", "When does payroll run?")
    assert all(c["filename"] != "payroll.md" for c in theirs["citations"])
    assert "25th" not in theirs["answer"]
    assert httpx.get(b.url + "/api/documents", headers=auth("key-bob"), timeout=30).json() == []
    assert httpx.get(b.url + f"/api/chunks/{chunk_id}", headers=auth("key-bob"), timeout=30).status_code == 404
    assert httpx.delete(b.url + f"/api/documents/{doc_id}", headers=auth("key-bob"), timeout=30).status_code == 404
    # The owner deletes through the other replica; the first stops answering from it at once.
    assert httpx.delete(b.url + f"/api/documents/{doc_id}", headers=auth("key-dave"), timeout=60).status_code == 200
    gone = ask(a, "key-dave", "When does payroll run?")
    assert all(c["filename"] != "payroll.md" for c in gone["citations"])


def test_a_session_started_on_one_replica_continues_on_the_other(replicas, fake_model):
    a, b = replicas
    upload(a, "key-ops", "workers.md", WORKERS)
    first = ask(a, "key-ops", "How many threads does the worker pool run?", mode="agent")
    assert first["status"] == "success", first
    session = first["session_id"]
    seen_before = len(fake_model.requests)
    follow_up = "And how do I change that number?"
    second = ask(b, "key-ops", follow_up, mode="agent", session_id=session)
    assert second["session_id"] == session
    later = [r.body for r in fake_model.requests[seen_before:]]
    conversation = json.dumps(later[-1]["messages"])
    assert "How many threads does the worker pool run?" in conversation and follow_up in conversation
    # Another owner presenting the same session id starts an empty conversation.
    before = len(fake_model.requests)
    ask(b, "key-alice", follow_up, mode="agent", session_id=session)
    assert "How many threads" not in json.dumps([r.body for r in fake_model.requests[before:]])


def test_the_rate_limit_is_shared_by_the_replicas(replicas):
    """One key, requests alternating between the replicas: together they grant one bucket's worth (plus what it
    refills meanwhile), not one each; then both refuse."""
    a, b = replicas
    started = time.monotonic()
    answers = [
        (replica.name, httpx.get(replica.url + "/api/documents", headers=auth("key-carol"), timeout=30))
        for replica in [a, b] * RATE
    ]
    refill = (time.monotonic() - started) * RATE / 60
    granted = sum(r.status_code == 200 for _, r in answers)
    assert RATE <= granted <= RATE + refill + 1  # two separate buckets would have granted 2 * RATE
    refused = [(name, r) for name, r in answers if r.status_code == 429]
    assert {name for name, _ in refused} == {"a", "b"}
    assert all(int(r.headers["retry-after"]) >= 1 for _, r in refused)
    assert httpx.get(a.url + "/api/documents", headers=auth("key-bob"), timeout=30).status_code == 200


def test_concurrent_uploads_through_both_replicas_store_each_chunk_once(replicas, cluster):
    a, b = replicas
    files = {f"guide{i}.md": f"# Guide {i}\n\nGuide {i} explains the kestrel{i} option in detail.\n" for i in range(4)}
    results: list[httpx.Response] = []

    def send(replica: Replica) -> None:
        response = httpx.post(
            replica.url + "/api/documents",
            files=[("files", (name, text.encode(), "text/markdown")) for name, text in files.items()],
            headers=auth("key-ops"),
            timeout=120,
        )
        results.append(response)

    threads = [threading.Thread(target=send, args=(r,)) for r in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200, 200], [r.text for r in results]
    assert sorted(r.json()["indexed"] for r in results) in ([0, 4], [4, 4])
    with psycopg.connect(cluster["url"]) as conn:
        rows = conn.execute("SELECT chunk_id FROM chunks WHERE filename LIKE 'guide%%'").fetchall()
        docs = conn.execute("SELECT count(*) FROM documents WHERE filename LIKE 'guide%%'").fetchone()[0]
    assert docs == 4 and len(rows) == len(set(rows)) == 4


def test_a_replica_killed_mid_stream_leaves_the_others_answering(replicas, cluster):
    _, b = replicas
    c = Replica("c", cluster["base"] / "c", cluster["env"]).start().wait_ready()
    try:
        upload(b, "key-ops", "workers.md", WORKERS)
        # A question not asked before: a cached reply would arrive whole, with no model streaming to interrupt.
        body = {"question": "What does the worker pool run by default?", "mode": "agent"}
        headers = auth("key-ops")
        with (
            httpx.Client(timeout=120) as client,
            connect_sse(client, "POST", c.url + "/api/agent/stream", json=body, headers=headers) as events,
        ):
            kinds = []
            with pytest.raises(httpx.HTTPError):  # the connection dies with the process
                for event in events.iter_sse():
                    kinds.append(event.event)
                    if event.event == "token" and c.proc.poll() is None:
                        c.kill()  # mid-answer: the model is still streaming its words
        assert "token" in kinds and "complete" not in kinds
        assert c.proc.returncode == -9
        answer = ask(b, "key-ops", "How many threads does the worker pool run?")
        assert answer["status"] == "success" and "twelve threads" in answer["answer"]
        with (
            httpx.Client(timeout=120) as client,
            connect_sse(client, "POST", b.url + "/api/agent/stream", json=body, headers=headers) as events,
        ):
            kinds = [event.event for event in events.iter_sse()]
        assert kinds[-1] == "complete" and "token" in kinds
        # Writes go on too: the dead replica held no lock anyone waits for.
        assert upload(b, "key-ops", "after-crash.md", "# After\n\nWritten after the crash.\n").status_code == 200
    finally:
        c.stop()
