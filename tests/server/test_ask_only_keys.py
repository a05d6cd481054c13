"""Ask-only keys (`ask_only_keys`): a key that sits in public page source, such as the widget's, may ask (every way
there is to ask), search, rate and open citations as its owner, but every route that changes documents answers 403,
and so do the admin routes. The refusal comes from the request gate, before a body is read (test_hostile_requests
sends one a 200 MB upload)."""

from __future__ import annotations

import shutil

import pytest
from pydantic import ValidationError
from tests.agent.agent_support import WORKER_QUESTION
from tests.server.conftest import KEYS, VAULT_QUESTION, VAULT_SECRET, auth

from citewise.settings import Settings

WIDGET = auth("key-widget")
KEYED = {**KEYS, "key-widget": "alice"}  # the widget answers as alice: her documents plus public ones


@pytest.fixture
def home(served_home, tmp_path):
    """A copy of the served index: this test's uploads, ratings and question log stay its own."""
    target = tmp_path / "home"
    shutil.copytree(served_home, target, ignore=shutil.ignore_patterns("feedback.sqlite3*", "questions.jsonl"))
    return target


def test_an_ask_only_key_asks_as_its_owner_and_writes_nothing(agent_app, started, home):
    client = started(agent_app(home=home, api_keys=KEYED, ask_only_keys=["key-widget"]))

    run = client.post("/api/agent/run", json={"question": VAULT_QUESTION}, headers=WIDGET)
    assert run.status_code == 200 and VAULT_SECRET in run.json()["answer"]  # alice's own note: her owner's key
    assert client.post("/chat", json={"message": WORKER_QUESTION}, headers=WIDGET).status_code == 200
    with client.stream("POST", "/api/agent/stream", json={"question": WORKER_QUESTION}, headers=WIDGET) as events:
        assert events.status_code == 200 and any(line.startswith("event: complete") for line in events.iter_lines())
    chunk_id = run.json()["citations"][0]["chunk_id"]
    assert client.get(f"/api/chunks/{chunk_id}", headers=WIDGET).status_code == 200
    rating = {"answer_id": run.json()["answer_id"], "rating": "up"}
    assert client.post("/api/feedback", json=rating, headers=WIDGET).status_code == 200
    completion = {"model": "citewise-quote", "messages": [{"role": "user", "content": WORKER_QUESTION}]}
    assert client.post("/v1/chat/completions", json=completion, headers=WIDGET).status_code == 200
    documents = client.get("/api/documents", headers=WIDGET)
    assert documents.status_code == 200
    alices = next(d for d in documents.json() if d["owner"] == "alice")
    assert client.get("/api/sources", headers=WIDGET).status_code == 200

    note = [("files", ("note.md", b"# Note\n\nThe tern parameter defaults to 9.\n", "text/markdown"))]
    upload = client.post("/api/documents", files=note, headers=WIDGET)
    assert upload.status_code == 403 and "ask_only_keys" in upload.json()["detail"]
    for doc_id in (alices["doc_id"], "00000000-0000-4000-8000-000000000000"):  # its own, and one that isn't there
        assert client.delete(f"/api/documents/{doc_id}", headers=WIDGET).status_code == 403
    assert client.get("/api/analytics", headers=WIDGET).status_code == 403
    assert not (home / "uploads").exists()
    assert {d["doc_id"] for d in client.get("/api/documents", headers=WIDGET).json()} == {
        d["doc_id"] for d in documents.json()
    }
    # The same owner's ordinary key still writes: the refusal is the key's role, not its owner's.
    assert client.post("/api/documents", files=note, headers=auth("key-alice")).status_code == 200


def test_ask_only_keys_are_checked_at_start_up(tmp_path):
    with pytest.raises(ValidationError, match="ask_only_keys entry 2 is not one of api_keys") as unknown:
        Settings(home=tmp_path, api_keys=KEYED, ask_only_keys=["key-widget", "key-typo"])
    assert "key-typo" not in unknown.value.errors()[0]["msg"]  # the message (what serve prints) names no key
    with pytest.raises(ValidationError, match="ask_only_keys entry 1 is also in admin_keys"):
        Settings(home=tmp_path, api_keys=KEYED, admin_keys=["key-widget"], ask_only_keys=["key-widget"])
