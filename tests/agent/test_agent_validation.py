"""The validator is the gate: every failure sends the draft back with the errors, up to max_reprompts, and then a
forced synthesis from verbatim passages says what was missing. Nothing ungrounded leaves the agent."""

from __future__ import annotations

from agent_support import WORKER_ANSWER, WORKER_QUESTION, call, calls, cited_ids_are_sources, scripted

from citewise.types import REFUSAL_TEXT, ExitReason, Status


def _reprompts(answer) -> list[list[str]]:
    return [e.data["errors"] for e in answer.trace if e.type == "reprompt" and e.node == "validate"]


def _chunk_ids(make_agent, query: str) -> list[tuple[str, str]]:
    result = make_agent().retriever.search(query, 3)
    return [(c.doc_id, c.chunk_id) for c in result.chunks]


def test_hallucinated_citation_number_is_sent_back_then_never_shown(make_agent):
    model = scripted(WORKER_ANSWER.replace("[1]", "[1][7]"), WORKER_ANSWER)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.COMPLETED and answer.status == Status.SUCCESS
    (errors,) = _reprompts(answer)
    assert any("[7]" in e for e in errors)
    assert "[7]" not in answer.answer and "[7]" in model.calls[-1][-2].content  # the draft was shown back
    assert [c.n for c in answer.citations] == [1]


def test_answer_naming_a_command_in_no_source_is_rejected(make_agent):
    invented = "Run `orbitron pool pin --threads 12` to pin the worker pool [1]."
    model = scripted(invented, WORKER_ANSWER)
    answer = make_agent(model).ask(WORKER_QUESTION)
    (errors,) = _reprompts(answer)
    assert any("orbitron pool pin" in e for e in errors)
    assert "orbitron pool pin" not in answer.answer
    assert answer.status == Status.SUCCESS


def test_uncited_answer_is_sent_back(make_agent):
    model = scripted("Set worker_threads to pin the pool.", WORKER_ANSWER)
    answer = make_agent(model).ask(WORKER_QUESTION)
    (errors,) = _reprompts(answer)
    assert any("cites no passage" in e for e in errors)
    assert answer.citations


def test_constraint_open_at_least_two_is_enforced(make_agent):
    question = "How do I pin the worker pool size? Open at least two sources before answering."
    (d1, c1), (d2, c2), *_ = _chunk_ids(make_agent, "worker pool threads")
    model = scripted(
        WORKER_ANSWER,
        calls(("open_citation", {"doc_id": d1, "chunk_id": c1}), ("open_citation", {"doc_id": d2, "chunk_id": c2})),
        WORKER_ANSWER,
    )
    answer = make_agent(model).ask(question)
    (errors,) = _reprompts(answer)
    assert any("open" in e.lower() for e in errors)
    assert answer.exit_reason == ExitReason.COMPLETED and answer.status == Status.SUCCESS
    opened = [e for e in answer.trace if e.type == "tool_result" and e.data.get("tool") == "open_citation"]
    assert len(opened) == 2


def test_reprompts_exhausted_forced_synthesis_states_insufficiencies(make_agent):
    invented = "Run `orbitron pool pin --threads 12` to pin the worker pool [1][9]."
    model = scripted(invented, invented, invented)
    answer = make_agent(model, agent={"max_reprompts": 2}).ask(WORKER_QUESTION)
    assert len(_reprompts(answer)) == 2
    assert answer.exit_reason == ExitReason.COMPLETED
    assert "orbitron pool pin" not in answer.answer and "[9]" not in answer.answer
    assert answer.insufficiencies and any("orbitron pool pin" in i for i in answer.insufficiencies)
    assert any(e.type == "forced_synthesis" for e in answer.trace)
    # The synthesis is verbatim passages (or the refusal): grounded by construction.
    assert answer.answer == REFUSAL_TEXT or (answer.citations and cited_ids_are_sources(answer))


def test_model_refusal_is_a_refusal(make_agent):
    model = scripted(call("search_docs", query="swallow airspeed"), REFUSAL_TEXT)
    answer = make_agent(model).ask("What is the airspeed velocity of an unladen swallow?")
    assert answer.status == Status.REFUSED and answer.citations == []
    assert answer.refusal_reason in ("empty_retrieval", "not_in_documentation")
    assert answer.exit_reason == ExitReason.COMPLETED


def test_rag_metadata_is_stripped_from_the_answer(make_agent):
    model = scripted(WORKER_ANSWER + "\nSource: chunk_20808c7f\nSimilarity score: 0.83")
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert "Similarity score" not in answer.answer and "chunk_" not in answer.answer
    assert answer.status == Status.SUCCESS


def test_required_sections_are_enforced(make_agent):
    question = WORKER_QUESTION + " Include sections Summary and Steps."
    fixed = f"## Summary\n{WORKER_ANSWER}\n\n## Steps\n- Set `worker_threads = 12` in the config file [1]."
    model = scripted(WORKER_ANSWER, fixed)
    answer = make_agent(model).ask(question)
    (errors,) = _reprompts(answer)
    assert any("Summary" in e or "Steps" in e for e in errors)
    assert answer.status == Status.SUCCESS and "## Steps" in answer.answer


def test_exact_quote_must_be_verbatim_from_an_opened_passage(make_agent):
    question = "Quote the exact sentence about the default size of the worker pool."
    (doc_id, chunk_id), *_ = _chunk_ids(make_agent, "worker pool threads")
    paraphrase = 'The docs say "by default there is a thread for every core" [1].'
    verbatim = 'The docs say "The default is one thread per CPU core." [1]'
    model = scripted(paraphrase, call("open_citation", doc_id=doc_id, chunk_id=chunk_id), verbatim)
    answer = make_agent(model).ask(question)
    (errors,) = _reprompts(answer)
    assert any("by default there is a thread" in e for e in errors)
    assert answer.status == Status.SUCCESS and "one thread per CPU core" in answer.answer
    assert answer.citations[0].quote_spans  # the quoted text is located in the chunk
