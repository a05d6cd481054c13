"""The scripted chat model behaves like a real one where the agent looks: streaming, tool calls, LangGraph."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from citewise.errors import RateLimited
from citewise.llm.testing import ScriptedChatModel


@tool
def search_docs(query: str, top_k: int = 5) -> str:
    """Search the documentation."""
    return "DOCUMENTATION_SEARCH_RESULT: EMPTY"


TOOL_REPLY = AIMessage(
    content="Let me look.",
    tool_calls=[{"name": "search_docs", "args": {"query": "install", "top_k": 3}, "id": "call_1"}],
)


def test_replies_in_order_and_records_calls():
    model = ScriptedChatModel(["first answer", TOOL_REPLY, RateLimited("429")])
    assert model.invoke("q1").content == "first answer"
    reply = model.invoke([HumanMessage("q2")])
    assert reply.tool_calls == [
        {"name": "search_docs", "args": {"query": "install", "top_k": 3}, "id": "call_1", "type": "tool_call"}
    ]
    with pytest.raises(RateLimited):
        model.invoke("q3")
    assert [c[-1].content for c in model.calls] == ["q1", "q2", "q3"]
    with pytest.raises(AssertionError, match="ran out of responses"):
        model.invoke("q4")


def test_stream_is_word_sized_and_carries_tool_calls_in_last_chunk():
    model = ScriptedChatModel([TOOL_REPLY.model_copy(update={"content": "one two three"})])
    chunks = list(model.stream("q"))
    assert [c.content for c in chunks] == ["one ", "two ", "three"]
    assert not chunks[0].tool_call_chunks
    assert chunks[-1].tool_call_chunks[0]["name"] == "search_docs"
    merged = chunks[0] + chunks[1] + chunks[2]
    assert merged.tool_calls[0]["args"] == {"query": "install", "top_k": 3}


def test_bind_tools_consumes_the_same_script():
    model = ScriptedChatModel(["a", "b"])
    bound = model.bind_tools([search_docs])
    assert bound.invoke("x").content == "a"
    assert model.invoke("y").content == "b"
    assert model.bound_tools == [search_docs]
    assert bound.calls is model.calls and len(model.calls) == 2


class _State(TypedDict):
    messages: Annotated[list, add_messages]


def test_langgraph_astream_events_sees_tokens_and_tool_calls():
    model = ScriptedChatModel([TOOL_REPLY.model_copy(update={"content": "searching the docs now"})])
    bound = model.bind_tools([search_docs])

    async def call_model(state: _State, config) -> dict:
        return {"messages": [await bound.ainvoke(state["messages"], config=config)]}

    graph = StateGraph(_State)
    graph.add_node("llm", call_model)
    graph.add_edge(START, "llm")
    graph.add_edge("llm", END)
    app = graph.compile()

    async def run() -> tuple[list[str], dict]:
        tokens, final = [], None
        async for event in app.astream_events({"messages": [HumanMessage("how to install?")]}, version="v2"):
            if event["event"] == "on_chat_model_stream":
                tokens.append(event["data"]["chunk"].content)
            if event["event"] == "on_chain_end" and event["name"] == "LangGraph":
                final = event["data"]["output"]
        return tokens, final

    tokens, final = asyncio.run(run())
    assert "".join(tokens) == "searching the docs now"
    assert len([t for t in tokens if t]) == 4
    last = final["messages"][-1]
    assert last.content == "searching the docs now"
    assert last.tool_calls[0]["name"] == "search_docs" and last.tool_calls[0]["id"] == "call_1"
