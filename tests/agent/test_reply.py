"""The reply adapter: whatever a model returned becomes one typed value, and streamed tokens are told apart the
same way (prose is answer text, a JSON action is not)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from citewise.agent.reply import Draft, Empty, Invalid, ReplyStream, ToolCalls, Unparseable, read_reply

SEARCH = {"name": "search_docs", "args": {"query": "worker threads"}}
FINAL = json.dumps({"type": "final", "answer": "Set it to 12 [1].", "insufficiencies": ["no word on 13"]})
ACTION = json.dumps({"type": "tool_call", "tool": "search_docs", "input": {"query": "worker threads"}})


def test_native_tool_calls_get_ids_and_keep_the_message():
    reply = AIMessage(content="", tool_calls=[{**SEARCH, "id": None}, {**SEARCH, "id": "given"}])
    read = read_reply(reply, native=True, force_final=False, turn=3)
    assert isinstance(read, ToolCalls) and not read.protocol
    assert [c["id"] for c in read.calls] == ["call_3_0", "given"]
    assert read.message.tool_calls == read.calls


def test_native_invalid_tool_call():
    reply = AIMessage(content="", invalid_tool_calls=[{"name": "search_docs", "args": "{", "error": "bad JSON"}])
    assert read_reply(reply, native=True, force_final=False, turn=1) == Invalid(error="bad JSON", tool="search_docs")


@pytest.mark.parametrize(
    ("reply", "force_final", "expected"),
    [
        (AIMessage(content="Set it to 12 [1]."), False, Draft("Set it to 12 [1].")),
        (AIMessage(content="  "), False, Empty()),
        # The budget is spent: a tool call is no answer, the text beside it is.
        (AIMessage(content="Set it [1].", tool_calls=[{**SEARCH, "id": "x"}]), True, Draft("Set it [1].")),
        (AIMessage(content="", tool_calls=[{**SEARCH, "id": "x"}]), True, Empty()),
    ],
)
def test_native_text(reply, force_final, expected):
    assert read_reply(reply, native=True, force_final=force_final, turn=1) == expected


def test_protocol_tool_action():
    read = read_reply(AIMessage(content=ACTION), native=False, force_final=False, turn=2)
    assert isinstance(read, ToolCalls) and read.protocol
    assert read.calls == [
        {"name": "search_docs", "args": {"query": "worker threads"}, "id": "call_2_0", "type": "tool_call"}
    ]


@pytest.mark.parametrize(
    ("text", "force_final", "expected"),
    [
        (FINAL, False, Draft("Set it to 12 [1].", ["no word on 13"])),
        (json.dumps({"type": "final", "answer": " "}), False, Empty()),
        ("Here is some prose instead of JSON.", False, Unparseable("Here is some prose instead of JSON.")),
        ("Here is some prose instead of JSON.", True, Draft("Here is some prose instead of JSON.")),
        (ACTION, True, Empty()),  # a lookup after the budget is spent carries no answer
        ("", False, Empty()),
    ],
)
def test_protocol_replies(text, force_final, expected):
    assert read_reply(AIMessage(content=text), native=False, force_final=force_final, turn=1) == expected


def test_streamed_prose_is_answer_text_and_a_json_action_is_held_back():
    stream = ReplyStream()
    assert stream.feed("a", "Set ") == ["Set "] and stream.feed("a", "it to 12") == ["it to 12"]
    assert stream.feed("a", " [1].") == [" [1]."]
    assert stream.feed("b", '{"type": ') == [] and stream.feed("b", '"final"}') == []
    assert stream.flush("b") == []
    assert stream.feed("c", "```json\n{") == []
    assert stream.feed("d", "`ok`") == [] and stream.flush("d") == ["`ok`"]  # too short to tell: released at the end
