"""Feedback and analytics over HTTP: every answer carries an id to rate it by, a rating is accepted only from the
owner the answer was given to, and analytics need an admin key and never mix owners."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from pydantic import ValidationError as PydanticValidationError
from tests.agent.agent_support import WORKER_QUESTION
from tests.server.conftest import KEYS, auth

from citewise.errors import ConfigError
from citewise.feedback.sqlite import SqliteFeedbackStore
from citewise.feedback.store import AnswerRecord, Rating
from citewise.settings import Settings

UNANSWERABLE = "What is the recommended recipe for sourdough bread with rye flour?"
ADMIN_KEYS = {**KEYS, "key-alice-admin": "alice", "key-bob-admin": "bob"}


@pytest.fixture
def home(served_home, tmp_path):
    """A copy of the served index, so this test's question log and ratings start empty and stay its own."""
    target = tmp_path / "home"
    shutil.copytree(served_home, target, ignore=shutil.ignore_patterns("feedback.sqlite3*", "questions.jsonl"))
    return target


def test_every_answer_can_be_rated_by_its_owner_only(agent_app, started, home):
    client = started(agent_app(home=home, api_keys=KEYS))
    alice = auth("key-alice")
    run = client.post("/api/agent/run", json={"question": WORKER_QUESTION}, headers=alice).json()
    chat = client.post("/chat", json={"message": WORKER_QUESTION}, headers=alice).json()
    with client.stream("POST", "/api/agent/stream", json={"question": WORKER_QUESTION}, headers=alice) as events:
        complete = [line for line in events.iter_lines() if line.startswith("data:")][-1]
    ids = [run["answer_id"], chat["answer_id"], complete.split('"answer_id": "')[1].split('"')[0]]
    assert all(ids) and len(set(ids)) == 3

    rated = client.post(
        "/api/feedback", json={"answer_id": ids[0], "rating": "down", "comment": " wrong port "}, headers=alice
    )
    assert rated.status_code == 200, rated.text
    assert rated.json()["rating"] == "down" and rated.json()["comment"] == "wrong port"
    again = client.post("/api/feedback", json={"answer_id": ids[0], "rating": "up"}, headers=alice).json()
    assert again["rating"] == "up" and again["comment"] is None  # a new rating replaces the old one

    # Bob can't rate (or probe) Alice's answer: the same 404 as an id that never existed.
    other = client.post("/api/feedback", json={"answer_id": ids[1], "rating": "down"}, headers=auth("key-bob"))
    missing = client.post(
        "/api/feedback", json={"answer_id": "00000000-0000-4000-8000-000000000000", "rating": "down"}, headers=alice
    )
    assert other.status_code == missing.status_code == 404
    assert other.json()["detail"].startswith("No answer with id")

    for bad in ({"answer_id": ids[1], "rating": "meh"}, {"answer_id": "x", "rating": "up"}, {"rating": "up"}):
        assert client.post("/api/feedback", json=bad, headers=alice).status_code == 422
    too_long = client.post(
        "/api/feedback", json={"answer_id": ids[1], "rating": "down", "comment": "x" * 2001}, headers=alice
    )
    assert too_long.status_code == 422 and "2000" in str(too_long.json()["detail"])
    assert "citewise_feedback_total" in client.get("/metrics", headers=alice).text


def test_analytics_need_an_admin_key_and_stay_with_its_owner(agent_app, started, home):
    client = started(agent_app(home=home, api_keys=ADMIN_KEYS, admin_keys=("key-alice-admin", "key-bob-admin"),
                                server={"log_questions": True}))  # fmt: skip
    alice = auth("key-alice")
    for question in (UNANSWERABLE, UNANSWERABLE.replace("recipe", "way"), WORKER_QUESTION):
        client.post("/api/agent/run", json={"question": question}, headers=alice)
    bad = client.post("/api/agent/run", json={"question": WORKER_QUESTION}, headers=alice).json()
    client.post(
        "/api/feedback", json={"answer_id": bad["answer_id"], "rating": "down", "comment": "too vague"}, headers=alice
    )
    client.post("/api/agent/run", json={"question": "Which port?"}, headers=auth("key-bob"))

    assert client.get("/api/analytics", headers=alice).status_code == 403  # the widget's key is not an admin key
    report = client.get("/api/analytics", headers=auth("key-alice-admin")).json()
    assert report["owner"] == "alice" and report["questions"] == 4
    assert report["refused"] == 2 and report["answered"] == 2 and report["answer_rate"] == 0.5
    assert report["by_day"][-1]["questions"] == 4
    assert report["unanswered"][0]["count"] == 2 and "sourdough" in report["unanswered"][0]["question"]
    reasons = {r["reason"]: r for r in report["refusals_by_reason"]}
    assert sum(r["count"] for r in reasons.values()) == 2 and all(r["meaning"] for r in reasons.values())
    assert report["ratings"] == {"up": 0, "down": 1}
    (marked,) = report["marked_bad"]
    assert marked["comment"] == "too vague" and marked["question"] == WORKER_QUESTION
    assert marked["exit_reason"] == "COMPLETED" and marked["citations"] and marked["docs_version"] > 0

    bobs = client.get("/api/analytics", headers=auth("key-bob-admin")).json()
    assert bobs["questions"] == 1 and bobs["marked_bad"] == [] and "sourdough" not in str(bobs)


def test_feedback_off_keeps_no_answers(agent_app, started, home):
    client = started(agent_app(home=home, feedback={"enabled": False}))
    run = client.post("/api/agent/run", json={"question": WORKER_QUESTION}).json()
    assert run["answer_id"] is None
    gone = client.post("/api/feedback", json={"answer_id": "00000000-0000-4000-8000-000000000000", "rating": "up"})
    assert gone.status_code == 404
    assert not (home / "feedback.sqlite3").exists()


def test_an_admin_key_must_be_a_key(tmp_path):
    with pytest.raises(PydanticValidationError, match="admin_keys entry 2 is not one of api_keys") as exc:
        Settings(home=tmp_path, api_keys={"k1": "alice"}, admin_keys=("k1", "secret-typo"))
    assert "secret-typo" not in exc.value.errors()[0]["msg"]  # what `citewise serve` prints never echoes a key


def test_store_forgets_unrated_answers_and_refuses_a_newer_schema(tmp_path):
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite3")
    old = AnswerRecord(owner="alice", question="q1", answer="a", status="success", exit_reason="COMPLETED",
                       created_at="2020-01-01T00:00:00+00:00")  # fmt: skip
    kept = old.model_copy(update={"answer_id": "kept", "question": "q2"})
    new = old.model_copy(update={"answer_id": "new", "created_at": "2999-01-01T00:00:00+00:00"})
    for record in (old, kept, new):
        store.record_answer(record)
    assert store.rate("kept", "alice", Rating.DOWN, "bad") is not None
    assert store.forget_unrated("2021-01-01T00:00:00+00:00") == 1  # only the old unrated one
    assert store.rate(old.answer_id, "alice", Rating.UP, None) is None
    assert [a.answer_id for a in store.rated(None)] == ["kept"] and store.rating_counts("bob") == {"up": 0, "down": 0}

    with sqlite3.connect(tmp_path / "feedback.sqlite3") as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(ConfigError, match="newer Citewise"):
        SqliteFeedbackStore(tmp_path / "feedback.sqlite3").rated("alice")
