"""Analytics read only what they report: one owner's questions of the period, filtered where the question log is
read (a WHERE in PostgreSQL, line by line in the JSON-lines log), on both backends. And the refusal codes they count
have one table of words, which is also what a reader of a refused answer is sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from tests.agent.agent_support import WORKER_QUESTION
from tests.server.conftest import PLAN

from citewise.eval.gaps import load_log
from citewise.feedback.analytics import REFUSAL_WORDS, analytics_report
from citewise.llm.testing import ScriptedChatModel
from citewise.settings import Settings
from citewise.types import PUBLIC_OWNER, REFUSAL_TEXT

NOW = datetime(2026, 1, 31, 12, tzinfo=UTC)
SINCE = "2026-01-01T12:00:00+00:00"  # NOW less 30 days
OLD, RECENT = "2025-06-01T09:00:00+00:00", "2026-01-20T09:00:00+00:00"


def record(question: str, timestamp: str, owner: str | None, status: str = "success") -> dict:
    """A line as agent/question_log.py writes it: the timestamp first, no owner for a public question."""
    line = {"timestamp": timestamp, "question": question, "status": status, "exit_reason": "COMPLETED",
            "insufficiencies": [], "refusal_reason": "weak_evidence" if status == "refused" else None,
            "queries": [question], "mode": "extractive"}  # fmt: skip
    return line | ({"owner": owner} if owner else {})


LOG = [
    record("How did the old release pin threads?", OLD, "alice", "refused"),
    record("How do I pin the worker pool?", RECENT, "alice"),
    record("Is there a sourdough recipe?", RECENT, "alice", "refused"),
    record("Which port does Bob use?", RECENT, "bob"),
    record("What is Orbitron?", RECENT, None),
]


@pytest.fixture(params=["jsonl", "postgres"])
def logged(request, tmp_path) -> Settings:
    """LOG written where the backend keeps its question log."""
    if request.param == "jsonl":
        settings = Settings(home=tmp_path / "home")
        lines = [json.dumps(r, ensure_ascii=False) for r in LOG]
        # Two lines a crash cut short: the old one is passed over by its timestamp unread, the recent one counted.
        lines.insert(1, '{"timestamp": "2025-06-02T00:00:00+00:00", "question": "cut sh')
        lines.append('{"timestamp": "2026-01-21T00:00:00+00:00", "question": "cut sh')
        settings.questions_log_path.parent.mkdir(parents=True)
        settings.questions_log_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return settings
    settings = request.getfixturevalue("pg_settings")
    from citewise.state.database import database
    from citewise.state.tables import log_question

    for line in LOG:
        log_question(database(settings), line)
    return settings


def test_the_log_is_read_for_one_owner_and_the_period_only(logged):
    unreadable = 1 if not logged.uses_postgres else 0
    alice, bad, _ = load_log(logged, owner="alice", since=SINCE)
    assert [r["question"] for r in alice] == ["How do I pin the worker pool?", "Is there a sourdough recipe?"]
    assert bad == unreadable
    public, _, _ = load_log(logged, owner=PUBLIC_OWNER, since=SINCE)
    assert [r["question"] for r in public] == ["What is Orbitron?"]
    everyone, _, _ = load_log(logged, owner=None, since=SINCE)
    assert len(everyone) == 4 and OLD not in {r["timestamp"] for r in everyone}
    assert len(load_log(logged, owner="alice", since="2000-01-01T00:00:00+00:00")[0]) == 3

    report = analytics_report(logged, None, owner="alice", days=30, now=NOW)
    assert (report["questions"], report["answered"], report["refused"]) == (2, 1, 1)
    assert report["unanswered"][0]["question"] == "Is there a sourdough recipe?" and len(report["unanswered"]) == 1
    assert report["unreadable_log_lines"] == unreadable and report["since"] == SINCE


def test_unanswered_questions_whose_refusal_a_reader_rated_wrong_are_marked(logged):
    """The analytics' unanswered groups carry the readers' verdict on the refusal, owner by owner, on both backends."""
    from citewise.feedback.store import AnswerRecord, Rating, open_feedback_store

    store = open_feedback_store(logged)
    for owner, comment in (("alice", "The FAQ has one"), ("bob", "bob's rating is not alice's")):
        refused = AnswerRecord(
            owner=owner, question="is there a  Sourdough recipe?", answer=REFUSAL_TEXT, status="refused",
            exit_reason="COMPLETED", refusal_reason="weak_evidence",
        )  # fmt: skip
        store.record_answer(refused)
        store.rate(refused.answer_id, owner, Rating.DOWN, comment)
    report = analytics_report(logged, store, owner="alice", days=30, now=NOW)
    (group,) = report["unanswered"]
    assert (group["rated_wrong"], group["rated_wrong_comments"]) == (1, ["The FAQ has one"])
    assert analytics_report(logged, None, owner="alice", days=30, now=NOW)["unanswered"][0]["rated_wrong"] == 0


def test_a_refusal_is_sent_in_the_words_of_the_one_table(agent_app, started):
    """The agent refuses (a code only: no refusal_detail of its own, unlike quote mode): the API sends the code's
    words from the table the analytics use, so the web chat and the widget show them without a table of their own."""
    client = started(agent_app(ScriptedChatModel([PLAN, REFUSAL_TEXT] * 2)))
    ask = {"question": WORKER_QUESTION, "mode": "agent"}
    run = client.post("/api/agent/run", json=ask).json()
    assert run["status"] == "refused" and run["refusal_reason"] == "not_in_documentation"
    assert run["refusal_detail"] == REFUSAL_WORDS["not_in_documentation"]
    with client.stream("POST", "/api/agent/stream", json=ask) as events:
        complete = json.loads([line for line in events.iter_lines() if line.startswith("data:")][-1][5:])
    assert complete["refusal_detail"] == REFUSAL_WORDS["not_in_documentation"]
