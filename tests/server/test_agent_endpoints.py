"""/api/agent/run and /chat through TestClient: the contracts, every error, owner isolation, LLM failure texts."""

from __future__ import annotations

import uuid

from tests.agent.agent_support import ALICE, WORKER_QUESTION
from tests.server.conftest import KEYS, PLAN, VAULT_QUESTION, VAULT_SECRET, auth

from citewise.feedback.analytics import REFUSAL_WORDS
from citewise.llm.testing import ScriptedChatModel
from citewise.types import REFUSAL_TEXT, Status


def test_run_returns_the_full_answer(agent_app, started):
    client = started(agent_app())
    response = client.post("/api/agent/run", json={"question": WORKER_QUESTION, "mode": "quote"})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "success" and answer["exit_reason"] == "COMPLETED"
    assert "twelve threads" in answer["answer"]
    assert answer["citations"] and answer["determinism"]["input_hash"]
    for field in ["insufficiencies", "refusal_reason", "empty_retrieval", "conflicting_info", "retryable", "mode"]:
        assert field in answer
    assert answer["trace"] == []  # only when asked
    uuid.UUID(answer["session_id"])
    traced = client.post("/api/agent/run", json={"question": WORKER_QUESTION, "returnTrace": True}).json()
    assert {e["type"] for e in traced["trace"]} >= {"tool_call"}


def test_run_request_errors_are_422(agent_app, started):
    client = started(agent_app())
    cases = [
        {},  # no question
        {"question": "x", "mode": "poetry"},
        {"question": "x", "session_id": "not-a-uuid"},
        {"question": "x", "style": "haiku"},
        {"question": "x", "unknown": 1},  # typos are errors, not silently ignored options
        {"question": "x" * 10_001},  # over agent.max_question_chars (10,000, the schema's bound too)
        {"question": "x", "selected_text": "   "},
    ]
    for body in cases:
        response = client.post("/api/agent/run", json=body)
        assert response.status_code == 422, (body, response.status_code, response.text)
        assert response.json()["detail"]
    # The OpenAPI schema's 422 shape (a list of {loc, msg, type}), whoever found the problem: the schema here ...
    assert client.post("/api/agent/run", json={"question": "x" * 10_001}).json() == {
        "detail": [
            {
                "loc": ["body", "question"],
                "msg": "The question is 10,001 characters long; the limit is 10,000.",
                "type": "string_too_long",
            }
        ]
    }
    # ... and the agent's own check, under a lower agent.max_question_chars.
    lowered = started(agent_app(agent={"max_question_chars": 1000}))
    assert lowered.post("/api/agent/run", json={"question": "x" * 1_001}).json() == {
        "detail": [
            {
                "loc": ["body"],
                "msg": "The question is 1,001 characters long; the limit is 1,000.",
                "type": "validation_error",
            }
        ],
        "type": "validation_error",
    }


def test_empty_question_on_run_is_an_answer_not_an_error(agent_app, started):
    answer = started(agent_app()).post("/api/agent/run", json={"question": "   "}).json()
    assert answer["exit_reason"] == "EMPTY_INPUT" and answer["status"] == "error"


def test_agent_mode_without_a_model_is_a_400_that_says_how_to_fix_it(agent_app, started):
    response = started(agent_app()).post("/api/agent/run", json={"question": WORKER_QUESTION, "mode": "agent"})
    assert response.status_code == 400
    assert "CITEWISE_LLM" in response.json()["detail"]


def test_chat_widget_contract(agent_app, started):
    client = started(agent_app())
    response = client.post("/chat", json={"message": WORKER_QUESTION})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {
        "response",
        "session_id",
        "source_chunks",
        "status",
        "refusal_detail",
        "closest_sections",
        "answer_id",
    }
    assert body["status"] == "success" and body["refusal_detail"] is None and body["closest_sections"] == []
    uuid.UUID(body["session_id"])
    assert "twelve threads" in body["response"]
    for rag_noise in ["Chunk ID:", "Similarity score:", "Source: chunk_", "doc_id:"]:
        assert rag_noise not in body["response"]
    assert body["source_chunks"]
    for n, chunk in enumerate(body["source_chunks"], 1):
        assert set(chunk) == {"id", "content", "similarity_score", "metadata"}
        assert chunk["metadata"]["n"] == n and f"[{n}]" in body["response"]
        assert 0 < chunk["similarity_score"] <= 1
        assert chunk["content"] and chunk["metadata"]["filename"]
    # The session continues when the client sends it back.
    again = client.post("/chat", json={"message": WORKER_QUESTION, "session_id": body["session_id"]}).json()
    assert again["session_id"] == body["session_id"]


def test_chat_says_why_an_agent_refusal_refused_in_the_one_tables_words(agent_app, started):
    """/chat sends refusal_detail as every other route does: an agent refusal carries only a code, so its words come
    from feedback/analytics.py's REFUSAL_WORDS (it sent null, where /api/agent/run sent the words)."""
    client = started(agent_app(ScriptedChatModel([PLAN, REFUSAL_TEXT])))
    body = client.post("/chat", json={"message": WORKER_QUESTION}).json()
    assert body["status"] == "refused" and body["source_chunks"] == []
    assert body["refusal_detail"] == REFUSAL_WORDS["not_in_documentation"]
    assert body["closest_sections"]


def test_chat_request_errors(agent_app, started):
    client = started(agent_app())
    for message in ["", "   \n\t"]:
        response = client.post("/chat", json={"message": message})
        assert response.status_code == 400
        assert response.json() == {"detail": "Message cannot be empty"}
    for body in [
        {},
        {"message": None},
        {"message": "x" * 10_001},
        {"message": "hi", "selected_text": "y" * 10_001},
        {"message": "hi", "session_id": "abc"},
    ]:
        assert client.post("/chat", json=body).status_code == 422, body
    assert client.post("/chat", content=b"not json", headers={"content-type": "application/json"}).status_code == 422


def test_chat_answers_from_selected_text_only(agent_app, started):
    text = "The backup window for the Nimbus cluster opens at 02:00 UTC and lasts ninety minutes."
    body = started(agent_app()).post(
        "/chat", json={"message": "When does the Nimbus backup window open?", "selected_text": text}
    )
    assert body.status_code == 200
    assert "02:00 UTC" in body.json()["response"]
    assert all(c["metadata"]["filename"] == "selected text" for c in body.json()["source_chunks"])


def test_owner_isolation_across_run_chat_and_stream(agent_app, started):
    client = started(agent_app(api_keys=KEYS))
    # Bob, and an operator acting as public, never get Alice's private notes, through any question endpoint.
    for key in ["key-bob", "key-ops"]:
        run = client.post("/api/agent/run", json={"question": VAULT_QUESTION}, headers=auth(key)).json()
        assert VAULT_SECRET not in str(run)
        assert all(c["owner"] != ALICE for c in run["sources"])
        chat = client.post("/chat", json={"message": VAULT_QUESTION}, headers=auth(key)).json()
        assert VAULT_SECRET not in str(chat)
        with client.stream("POST", "/api/agent/stream", json={"question": VAULT_QUESTION}, headers=auth(key)) as r:
            assert VAULT_SECRET not in r.read().decode()
    # Alice gets them.
    run = client.post("/api/agent/run", json={"question": VAULT_QUESTION}, headers=auth("key-alice")).json()
    assert VAULT_SECRET in run["answer"]
    assert any(c["owner"] == ALICE for c in run["sources"])
    chat = client.post("/chat", json={"message": VAULT_QUESTION}, headers=auth("key-alice")).json()
    assert VAULT_SECRET in chat["response"]
    # Bob can't continue Alice's session either: the same session id opens Bob's own (empty) conversation.
    assert chat["session_id"]


def test_open_citation_tool_cannot_open_another_owners_chunk(agent_app, started, served_home, make_kb):
    from langchain_core.messages import AIMessage
    from tests.server.conftest import PLAN
    from tests.support.settings import make_settings

    from citewise.llm.testing import ScriptedChatModel

    kb = make_kb(make_settings(served_home))
    alice_chunk = next(c for c in kb.store.chunks() if c.owner == ALICE)
    open_it = AIMessage(
        content="",
        tool_calls=[
            {
                "name": "open_citation",
                "args": {"doc_id": alice_chunk.doc_id, "chunk_id": alice_chunk.chunk_id},
                "id": "call_open",
            }
        ],
    )
    model = ScriptedChatModel([PLAN, open_it, "I could not find that in the documentation."] + ["Done."] * 6)
    client = started(agent_app(model, api_keys=KEYS))
    response = client.post(
        "/api/agent/run",
        json={"question": VAULT_QUESTION, "mode": "agent", "returnTrace": True},
        headers=auth("key-bob"),
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert VAULT_SECRET not in str(answer)
    assert alice_chunk.chunk_id not in {s["chunk_id"] for s in answer["sources"]}
    results = [e for e in answer["trace"] if e["type"] == "tool_result" and e["data"].get("tool") == "open_citation"]
    assert results and results[0]["data"]["found"] is False
    # What the model was shown for that call: "not found", never the text.
    shown = " ".join(str(m.content) for call in model.calls for m in call)
    assert VAULT_SECRET not in shown and "NOT FOUND" in shown


def test_llm_failure_is_a_friendly_200_on_chat_and_an_exit_reason_on_run(agent_app, started, caplog):
    from citewise.errors import RateLimited
    from citewise.llm.testing import ScriptedChatModel

    model = ScriptedChatModel([RateLimited("quota exceeded for project internal-proj-4471")] * 40)
    client = started(agent_app(model))
    chat = client.post("/chat", json={"message": WORKER_QUESTION})
    assert chat.status_code == 200
    assert "technical difficulties" in chat.json()["response"]
    assert chat.json()["source_chunks"] == []
    assert "internal-proj-4471" not in chat.text and "quota" not in chat.text
    assert any("internal-proj-4471" in r.getMessage() + str(r.exc_info) for r in caplog.records)  # logged in full

    run = client.post("/api/agent/run", json={"question": WORKER_QUESTION}).json()
    assert run["exit_reason"] == "RATE_LIMITED" and run["status"] == Status.ERROR and run["retryable"] is True
    metrics = client.get("/metrics").text
    assert 'citewise_answers_total{exit_reason="RATE_LIMITED"' in metrics


def test_unreachable_index_is_a_friendly_200_on_chat_and_503_json_on_run(agent_app, started, tmp_path, embedder):
    import shutil

    from tests.conftest import CORPUS

    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.ingest.pipeline import Ingestor
    from citewise.settings import Settings

    home = tmp_path / "home"
    Ingestor(KnowledgeBase(Settings(home=home), embedder=embedder)).ingest_paths([CORPUS / "guide"])
    client = started(agent_app(home=home))
    assert client.post("/chat", json={"message": WORKER_QUESTION}).status_code == 200
    lance = home / "index" / "lancedb"
    shutil.rmtree(lance)
    lance.write_text("gone")
    chat = client.post("/chat", json={"message": "How do I configure retries for failed jobs?"})
    assert chat.status_code == 200
    assert "temporary service interruption" in chat.json()["response"]
    assert str(lance) not in chat.text and "lancedb" not in chat.text


def test_metrics_count_exit_reasons(agent_app, started):
    client = started(agent_app())
    client.post("/api/agent/run", json={"question": WORKER_QUESTION})
    client.post("/api/agent/run", json={"question": ""})
    text = client.get("/metrics").text
    assert 'citewise_answers_total{exit_reason="COMPLETED",mode="extractive",status="success"} 1.0' in text
    assert 'citewise_answers_total{exit_reason="EMPTY_INPUT"' in text
    assert 'citewise_http_requests_total{method="POST",route="/api/agent/run",status="200"} 2.0' in text
    assert "citewise_answer_duration_seconds_count" in text
