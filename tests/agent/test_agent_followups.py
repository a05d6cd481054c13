"""A follow-up in a conversation ("How do I turn on encryption at rest?", then "Is it enabled by default?") is searched,
and in quote mode answered, as the standalone question made from the questions before it; the trace says so. Agent
mode's first search looks for the standalone question and its model still reads the whole conversation."""

from __future__ import annotations

import pytest
from agent_support import scripted
from langgraph.checkpoint.memory import InMemorySaver

from citewise.agent.followup import standalone
from citewise.types import ExitReason, Status

FIRST = "How do I turn on encryption at rest?"
FOLLOWUP = "Is it enabled by default?"
ANSWER = "Payload encryption is off by default [1]."


def _step(answer, kind: str):
    return next((e for e in answer.trace if e.type == kind), None)


def _mandatory_query(answer) -> str:
    return next(e for e in answer.trace if e.type == "tool_call" and e.data.get("mandatory")).data["args"]["query"]


def _assert_read_as_a_follow_up(answer) -> None:
    expected = standalone(FOLLOWUP, [FIRST]).question
    assert "encryption" in expected
    step = _step(answer, "standalone")
    assert step is not None, [e.type for e in answer.trace]
    assert step.node == "retrieve"
    assert step.data == {"question": expected, "reason": "pronoun", "from_turns": [FIRST]}
    assert _mandatory_query(answer) == expected  # the first search looks for the question made whole
    types = [e.type for e in answer.trace]
    assert types.index("standalone") < types.index("tool_call")
    assert answer.question == FOLLOWUP  # the Answer keeps the message as asked


def test_a_follow_up_in_a_session_is_searched_and_answered_as_its_standalone_question(make_agent):
    agent = make_agent(checkpointer=InMemorySaver())
    first = agent.ask(FIRST, mode="quote", session_id="s-1")
    assert first.status == Status.SUCCESS and _step(first, "standalone") is None

    answer = agent.ask(FOLLOWUP, mode="quote", session_id="s-1")

    _assert_read_as_a_follow_up(answer)
    assert answer.status == Status.SUCCESS, answer.trace
    assert "off by default" in answer.answer  # about encryption, not whatever else defaults to something
    compose = _step(answer, "compose")
    assert [p["question"] for p in compose.data["parts"]] == [standalone(FOLLOWUP, [FIRST]).question]


def test_the_follow_up_alone_is_answered_about_something_else(make_agent):
    """What quote mode did before it read the conversation: the message alone finds another default."""
    answer = make_agent().ask(FOLLOWUP, mode="quote")
    assert _step(answer, "standalone") is None
    assert _mandatory_query(answer) == FOLLOWUP
    assert "off by default" not in answer.answer


def test_history_is_read_the_same_way_and_both_engines_agree(make_agent):
    """Clients that send the conversation themselves (`history`, /v1): the in-process runner reads it as the
    checkpointed session does."""
    agent = make_agent(checkpointer=InMemorySaver())
    first = agent.ask(FIRST, mode="quote")
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": first.answer}]
    inline = agent.ask(FOLLOWUP, mode="quote", history=history)
    _assert_read_as_a_follow_up(inline)
    agent.ask(FIRST, mode="quote", session_id="s-2")
    kept = agent.ask(FOLLOWUP, mode="quote", session_id="s-2")
    assert inline.answer == kept.answer
    assert [e.model_dump() for e in inline.trace] == [e.model_dump() for e in kept.trace]


def test_a_self_contained_question_in_a_session_is_searched_as_asked(make_agent):
    agent = make_agent(checkpointer=InMemorySaver())
    agent.ask(FIRST, mode="quote", session_id="s-1")
    question = "What port does the Orbitron daemon listen on by default?"
    answer = agent.ask(question, mode="quote", session_id="s-1")
    assert _step(answer, "standalone") is None
    assert _mandatory_query(answer) == question
    assert "7433" in answer.answer


def test_a_question_about_a_selected_text_is_not_read_with_the_conversation(make_agent):
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "Set encrypt_payloads."}]
    selection = "Payload encryption is off by default. Turning it on later leaves older segments unencrypted."
    answer = make_agent().ask("What does it mean?", mode="quote", history=history, selected_text=selection)
    assert _step(answer, "standalone") is None


@pytest.mark.parametrize("engine", ["history", "session"])
def test_agent_mode_searches_the_standalone_question_and_the_model_reads_the_conversation(make_agent, engine):
    model = scripted(ANSWER)
    if engine == "session":
        agent = make_agent(model, checkpointer=InMemorySaver())
        agent.ask(FIRST, mode="quote", session_id="s-1")  # the first turn, kept in the session (no model call)
        answer = agent.ask(FOLLOWUP, mode="agent", session_id="s-1")
    else:
        history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "Set encrypt_payloads."}]
        answer = make_agent(model).ask(FOLLOWUP, mode="agent", history=history)

    assert answer.exit_reason == ExitReason.COMPLETED, answer.trace
    _assert_read_as_a_follow_up(answer)
    prompt = [m.content for m in model.calls[-1]]
    assert FIRST in prompt and FOLLOWUP in prompt  # the conversation as it was, for the model to resolve too
