"""The agent's tools through the graph: owner isolation, the exact empty result, typed retrieval failures."""

from __future__ import annotations

import shutil

from agent_support import ALICE, WORKER_ANSWER, WORKER_QUESTION, call, scripted
from langchain_core.messages import ToolMessage

from citewise.agent.tools import EMPTY_RESULT, NOT_FOUND
from citewise.types import REFUSAL_TEXT, ExitReason, Status

SECRET = "kestrel-vault-7"


def _alice_chunk(agent) -> tuple[str, str]:
    chunk = next(c for c in agent.kb.store.chunks() if c.owner == ALICE)
    return chunk.doc_id, chunk.chunk_id


def _tool_messages(model) -> list[str]:
    return [m.content for m in model.calls[-1] if isinstance(m, ToolMessage)]


def test_open_citation_of_another_owners_chunk_is_not_found(make_agent):
    probe = make_agent()
    doc_id, chunk_id = _alice_chunk(probe)
    for owner in (None, "bob"):
        model = scripted(call("open_citation", doc_id=doc_id, chunk_id=chunk_id), REFUSAL_TEXT)
        answer = make_agent(model).ask("How is the vault key rotated?", owner=owner)
        results = _tool_messages(model)
        assert any(r.startswith(NOT_FOUND) for r in results)
        assert not any(SECRET in str(m.content) for call_ in model.calls for m in call_)  # never its text
        assert all(c.chunk_id != chunk_id for c in answer.sources)
        assert answer.status == Status.REFUSED


def test_open_citation_of_own_chunk_works(make_agent):
    doc_id, chunk_id = _alice_chunk(make_agent())
    model = scripted(
        call("open_citation", doc_id=doc_id, chunk_id=chunk_id),
        "Rotate it with `orbitron keys rotate --vault kestrel-vault-7` [1].",
    )
    answer = make_agent(model).ask("How is the vault key rotated?", owner=ALICE)
    assert answer.status == Status.SUCCESS
    assert answer.citations[0].chunk_id == chunk_id
    assert SECRET in answer.answer


def test_open_citation_with_mismatched_doc_id_is_not_found(make_agent):
    _, chunk_id = _alice_chunk(make_agent())
    model = scripted(call("open_citation", doc_id=chunk_id, chunk_id=chunk_id), REFUSAL_TEXT)
    make_agent(model).ask("How is the vault key rotated?", owner=ALICE)
    assert any(r.startswith(NOT_FOUND) for r in _tool_messages(model))


def test_empty_search_returns_exactly_the_empty_marker(make_agent):
    model = scripted(call("search_docs", query="zqxv wuzzle frobnication"), REFUSAL_TEXT)
    answer = make_agent(model).ask("What is the airspeed velocity of an unladen swallow?")
    assert EMPTY_RESULT in _tool_messages(model)
    assert answer.empty_retrieval and answer.status == Status.REFUSED
    assert answer.refusal_reason == "empty_retrieval"
    failures = [e.data for e in answer.trace if e.type == "retrieval_failure"]
    assert failures and {f["kind"] for f in failures} == {"empty_results"}
    assert {f["action"] for f in failures} == {"default_response"}


def test_selected_text_search_without_a_selection_is_an_invalid_query(make_agent):
    model = scripted(call("search_docs", query="worker threads", selected_text_only=True), WORKER_ANSWER)
    answer = make_agent(model).ask(WORKER_QUESTION)
    failure = next(e.data for e in answer.trace if e.type == "retrieval_failure")
    assert failure["kind"] == "invalid_query" and failure["action"] == "return_error"
    assert any("invalid_query" in r for r in _tool_messages(model))
    assert answer.status == Status.SUCCESS  # the model carried on with what the mandatory search found


def test_unreachable_index_is_a_typed_failure_after_retries(make_agent, tmp_path, agent_home):
    home = tmp_path / "broken-home"
    shutil.copytree(agent_home, home)
    lance = home / "index" / "lancedb"
    shutil.rmtree(lance)
    lance.write_text("not a database")  # the index directory is gone: every query fails
    answer = make_agent(home=home, generation={"tool_retries": 2}).ask(WORKER_QUESTION)
    assert answer.status == Status.ERROR and answer.retryable
    assert answer.exit_reason == ExitReason.COMPLETED
    assert answer.refusal_reason == "retrieval_failed:connection_error"
    assert answer.retrieval_failure == "connection_error" and answer.retrieval_failure.is_outage  # no trace scan
    failure = next(e.data for e in answer.trace if e.type == "retrieval_failure")
    assert failure == {**failure, "kind": "connection_error", "action": "refuse", "attempts": 3}
    assert "try again" in answer.answer and answer.citations == []
