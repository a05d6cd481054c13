"""Resuming a session loads Citewise's own types (Answer, ExitReason, Status, ScoredChunk, ...) from the checkpoint
as registered types: LangGraph warned "Deserializing unregistered type … will be blocked in a future version" on
every resume (and `citewise chat` printed it), and will refuse them once it blocks unregistered types."""

from __future__ import annotations

import pytest
from agent_support import WORKER_QUESTION
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener

from citewise.types import ExitReason


@pytest.fixture
def serde_events():
    events: list[dict] = []
    unregister = register_serde_event_listener(events.append)
    yield events
    unregister()


@pytest.mark.parametrize("strict", [False, True], ids=["langgraph-default", "strict-allowlist"])
def test_a_resumed_session_loads_registered_types_only(make_agent, serde_events, strict, monkeypatch):
    if strict:  # what LangGraph will do by default: block every type not on the allow-list
        monkeypatch.setattr("langgraph.checkpoint.serde._msgpack.STRICT_MSGPACK_ENABLED", True)
    cw = make_agent(checkpointer=InMemorySaver())
    first = cw.ask(WORKER_QUESTION, mode="quote", session_id="s-1")
    second = cw.ask(WORKER_QUESTION, mode="quote", session_id="s-1")
    assert first.exit_reason == second.exit_reason == ExitReason.COMPLETED
    assert second.answer == first.answer and second.citations
    flagged = [e for e in serde_events if e["kind"] in ("msgpack_unregistered_allowed", "msgpack_blocked")]
    assert flagged == [], flagged
    # The conversation really was resumed: the saved state holds both turns.
    state = cw.graph.get_state({"configurable": {"thread_id": "s-1"}})
    assert [m.type for m in state.values["messages"]] == ["human", "ai", "human", "ai"]
    # The nodes wrote light records (agent/messages.py); the state's reducers made LangChain messages of them.
    transcript = state.values["messages"] + state.values["scratch"]
    assert len(state.values["scratch"]) >= 2 and all(isinstance(m, BaseMessage) for m in transcript)
    assert state.values["answer"].exit_reason == ExitReason.COMPLETED
