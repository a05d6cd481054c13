"""Quote mode (no model): the same graph with a deterministic policy — search, open the best passages, quote them."""

from __future__ import annotations

import asyncio
import re

import pytest
from agent_support import ALICE, WORKER_QUESTION, cited_ids_are_sources, comparable

from citewise.agent.grounding import MARKER_RE
from citewise.errors import ValidationError
from citewise.types import REFUSAL_TEXT, Answer, ExitReason, Status

UNANSWERABLE = "What is the airspeed velocity of an unladen swallow?"


def _quoted_sentences(answer: Answer) -> list[tuple[int, str]]:
    """(citation number, sentence) for every sentence of a default-style quote answer."""
    pairs = []
    for match in re.finditer(r"(.+?)\s*\[(\d+)\]", answer.answer, re.S):
        pairs.append((int(match.group(2)), " ".join(match.group(1).split())))
    return pairs


def test_answerable_question_is_answered_with_verbatim_cited_sentences(make_agent):
    answer = make_agent().ask(WORKER_QUESTION)

    assert answer.status == Status.SUCCESS
    assert answer.exit_reason == ExitReason.COMPLETED
    assert answer.mode == "extractive"
    assert answer.citations and cited_ids_are_sources(answer)
    assert "twelve threads" in answer.answer
    # Every span a citation quotes is a unit of its chunk, shown in the answer, under that citation's marker.
    chunks = {c.chunk_id: c for c in answer.sources}
    flat = " ".join(answer.answer.split())
    for citation in answer.citations:
        text = chunks[citation.chunk_id].text
        assert citation.quote_spans
        for start, end in citation.quote_spans:
            quoted = " ".join(text[start:end].split())
            assert quoted in flat and f"[{citation.n}]" in flat[flat.index(quoted) :]
    # The passages quoted are among those its search found and quote mode read (recorded in the trace).
    compose = next(e for e in answer.trace if e.type == "compose")
    assert {c.chunk_id for c in answer.citations} <= set(compose.data["read"])
    assert "twelve threads" in compose.data["parts"][0]["best"]  # the unit ranked best
    assert answer.determinism is not None


def test_same_question_twice_gives_identical_answer_json(make_agent):
    first = make_agent().ask(WORKER_QUESTION)
    agent = make_agent()
    second = agent.ask(WORKER_QUESTION)
    third = agent.ask(WORKER_QUESTION)  # same instance: the retrieval cache must not change the answer
    assert comparable(first) == comparable(second) == comparable(third)
    assert first.determinism == second.determinism


def test_unanswerable_question_is_refused(make_agent):
    answer = make_agent().ask(UNANSWERABLE)
    assert answer.status == Status.REFUSED
    assert answer.answer == REFUSAL_TEXT
    assert answer.citations == []
    assert answer.exit_reason == ExitReason.COMPLETED
    assert answer.refusal_reason in ("empty_retrieval", "weak_evidence")


def test_refusal_uses_the_insufficiency_phrase_the_question_asks_for(make_agent):
    answer = make_agent().ask(UNANSWERABLE + " If the docs don't say, say 'Insufficient documentation'.")
    assert answer.status == Status.REFUSED
    assert answer.answer.startswith("Insufficient documentation")
    assert REFUSAL_TEXT in answer.answer


def test_greeting_gets_a_welcome_without_retrieval(make_agent):
    answer = make_agent().ask("  Hello!! ")
    assert answer.status == Status.SUCCESS
    assert answer.exit_reason == ExitReason.COMPLETED
    assert answer.sources == [] and answer.citations == []
    assert not any(e.type == "tool_call" for e in answer.trace)
    assert "Ask me" in answer.answer


@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_empty_input_ends_with_empty_input(make_agent, question):
    answer = make_agent().ask(question)
    assert answer.exit_reason == ExitReason.EMPTY_INPUT
    assert answer.status == Status.ERROR
    assert answer.sources == []
    assert not any(e.type == "tool_call" for e in answer.trace)


def test_request_validation_errors_raise(make_agent):
    agent = make_agent(agent={"max_question_chars": 50})
    with pytest.raises(ValidationError, match="limit is 50"):
        agent.ask("x" * 51)
    with pytest.raises(ValidationError, match="owner"):
        agent.ask("worker threads", owner="no spaces allowed")
    with pytest.raises(ValidationError, match="selected_text"):
        agent.ask("worker threads", selected_text="   ")
    with pytest.raises(ValidationError, match="style"):
        agent.ask("worker threads", style="poem")
    with pytest.raises(ValidationError, match="mode"):
        agent.ask("worker threads", mode="telepathy")


def test_structured_style(make_agent):
    answer = make_agent().ask(WORKER_QUESTION, style="structured")
    assert answer.status == Status.SUCCESS
    assert answer.answer.startswith("## ")
    assert "### Key Points" in answer.answer and "### Why It Matters" in answer.answer
    assert MARKER_RE.search(answer.answer)


def test_conflicting_dated_docs_are_reported_and_the_newest_rule_resolves_them(make_agent):
    plain = make_agent().ask("What does lease_renewal_interval default to?")
    conflict = next(c for c in plain.conflicting_info if c.subject == "lease_renewal_interval")
    assert {v.value.split()[0] for v in conflict.values} == {"10", "20"}
    assert conflict.resolved_value is None

    newest = make_agent().ask(
        "What does lease_renewal_interval default to? If sources disagree, use the newest dated document."
    )
    conflict = next(c for c in newest.conflicting_info if c.subject == "lease_renewal_interval")
    assert conflict.resolved_value is not None and conflict.resolved_value.startswith("20")


def test_owner_scoping(make_agent):
    question = "Which command rotates the journal encryption key in the vault?"
    public = make_agent().ask(question)
    assert "kestrel-vault-7" not in public.answer
    assert all(c.owner == "public" for c in public.sources)
    alice = make_agent().ask(question, owner=ALICE)
    assert "kestrel-vault-7" in alice.answer
    assert any(c.owner == ALICE for c in alice.sources)
    bob = make_agent().ask(question, owner="bob")
    assert all(c.owner == "public" for c in bob.sources)


def test_selected_text_only_searches_the_selection(make_agent):
    selection = (
        "Kestrel clusters elect a coordinator every 90 seconds. The coordinator assigns shards to nodes and "
        "publishes the assignment to every member of the cluster."
    )
    answer = make_agent().ask("How often do Kestrel clusters elect a coordinator?", selected_text=selection)
    assert answer.status == Status.SUCCESS
    assert all(c.filename == "selected text" for c in answer.sources)
    assert "90 seconds" in answer.answer


def test_astream_events_ends_with_the_final_state_and_matches_ask(make_agent):
    agent = make_agent()

    async def collect():
        return [event async for event in agent.astream_events(WORKER_QUESTION)]

    events = asyncio.run(collect())
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "on_chain_end"
    output = events[-1]["data"]["output"]
    streamed: Answer = output["answer"]
    assert output["exit_reason"] == ExitReason.COMPLETED == streamed.exit_reason
    assert comparable(streamed) == comparable(agent.ask(WORKER_QUESTION))
    tools = [e["name"] for e in events if e["event"] == "on_tool_start"]
    assert tools == ["search_docs"]  # quote mode reads what its search found: no other lookup
    traces = [e["data"] for e in events if e["event"] == "on_custom_event" and e["name"] == "trace"]
    assert [t["type"] for t in traces] == [t.type for t in streamed.trace]
    assert "on_chat_model_stream" not in kinds  # no model in quote mode


def test_sync_ask_works_inside_a_running_event_loop(make_agent):
    agent = make_agent()

    async def from_async_code():
        sync = agent.ask(WORKER_QUESTION)  # e.g. a notebook cell or a sync callback inside an async app
        return sync, await agent.aask(WORKER_QUESTION)

    sync, native = asyncio.run(from_async_code())
    assert sync.status == Status.SUCCESS
    assert comparable(sync) == comparable(native)


def test_a_question_about_something_the_docs_never_mention_is_refused_with_closest_sections(make_agent):
    answer = make_agent().ask("How do I configure Orbitron on Kubernetes?")
    assert answer.status == Status.REFUSED and answer.answer == REFUSAL_TEXT and answer.citations == []
    assert answer.refusal_reason == "weak_evidence"
    assert answer.refusal_detail  # the reason in plain words
    # Up to three sections worth reading instead: distinct, not citations, in the order the search ranked them.
    assert 1 <= len(answer.closest_sections) <= 3
    assert len({(s.doc_id, s.chapter) for s in answer.closest_sections}) == len(answer.closest_sections)
    assert answer.closest_sections[0].chunk_id == answer.sources[0].chunk_id


def test_an_answer_has_no_closest_sections(make_agent):
    answer = make_agent().ask(WORKER_QUESTION)
    assert answer.status == Status.SUCCESS and answer.closest_sections == [] and answer.refusal_detail is None


# -- answers that answer: the kind of question decides what is quoted -----------------------------------------------


def test_a_value_question_leads_with_the_sentence_that_holds_the_value(make_agent):
    answer = make_agent().ask("Which port does the Orbitron daemon listen on by default?")
    assert answer.status == Status.SUCCESS
    first = _quoted_sentences(answer)[0][1]
    assert "7433" in first


def test_a_table_row_answers_a_question_about_a_setting(make_agent):
    answer = make_agent().ask("What is the default visibility_timeout of a queue?")
    assert answer.status == Status.SUCCESS
    assert "| `visibility_timeout` | 30s |" in answer.answer  # the row, under its table's header
    assert "| Setting | Default | Meaning |" in answer.answer


def test_an_identifier_the_docs_do_not_hold_is_never_answered_with_a_neighbour(make_agent):
    # Version 3.1.4 is in the changelog; 3.1.7 is not: quoting the 3.1.4 entry would be cited yet wrong. The anchor
    # rule refuses whatever the fitted model would say, so the model is switched off (threshold 0) to see the rule.
    anything = make_agent(quote={"threshold": 0.0})
    answer = anything.ask("What changed in Orbitron 3.1.7?")
    assert answer.status == Status.REFUSED
    assert "3.1.7" in answer.refusal_detail
    held = anything.ask("What changed in Orbitron 3.1.4?")
    assert held.status == Status.SUCCESS and "3.1.4" in held.answer


def test_a_two_part_question_answers_the_part_the_docs_cover_and_names_the_other(make_agent):
    answer = make_agent().ask("Which port does the Orbitron daemon listen on and how do I configure Kubernetes?")
    assert answer.status == Status.SUCCESS and "7433" in answer.answer
    assert any("Kubernetes" in gap for gap in answer.insufficiencies)
    compose = next(e for e in answer.trace if e.type == "compose")
    assert [p["refused"] for p in compose.data["parts"]] == [False, True]
    searched = [e.data["query"] for e in answer.trace if e.type == "tool_result"]
    assert len(searched) == 3  # the whole question, then each part


def test_a_misspelt_question_is_answered_like_the_right_one(make_agent):
    right = make_agent().ask(WORKER_QUESTION)
    typo = make_agent().ask("How do I pin the wroker pool to a fixed nmber of threds?")
    assert typo.status == Status.SUCCESS and "twelve threads" in typo.answer
    spelling = next(e for e in typo.trace if e.type == "spelling")
    assert spelling.data["corrections"]["threds"] == "threads"
    assert right.status == Status.SUCCESS


@pytest.mark.parametrize(
    ("overrides", "deepest"),
    [({}, 10), ({"quote": {"passages": 8}}, 10), ({"retrieval": {"max_top_k": 6}}, 6)],
)
def test_quote_mode_searches_twice_as_deep_as_it_reads_within_the_retriever_s_limit(make_agent, overrides, deepest):
    answer = make_agent(**overrides).ask(WORKER_QUESTION)
    assert answer.status == Status.SUCCESS and "twelve threads" in answer.answer
    searches = [e.data["args"]["top_k"] for e in answer.trace if e.type == "tool_call"]
    assert searches and max(searches) == deepest


def test_a_numbered_record_is_answered_from_that_record_only(tmp_path, make_agent, embedder):
    """The 'enclosure 417' regression: passages about other enclosures are on topic, cited, and wrong."""
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.ingest.pipeline import Ingestor

    docs = tmp_path / "records"
    docs.mkdir()
    contents = {234: "the spare fuses and two relays", 186: "the cooling fan assembly", 417: "the backup batteries"}
    for number, content in contents.items():
        (docs / f"enclosure-{number}.md").write_text(
            f"# Enclosure {number}\n\nEnclosure {number} of the north cabinet holds {content}. It is inspected "
            "every quarter by the facilities team.\n"
        )
    home = tmp_path / "home"
    Ingestor(KnowledgeBase(make_agent(home=home).settings, embedder=embedder)).ingest_paths([docs])
    answer = make_agent(home=home).ask("What does enclosure 417 hold?")
    assert answer.status == Status.SUCCESS and "backup batteries" in answer.answer
    assert {c.filename for c in answer.citations} == {"enclosure-417.md"}
    missing = make_agent(home=home).ask("What does enclosure 999 hold?")
    assert missing.status == Status.REFUSED and "999" in missing.refusal_detail
