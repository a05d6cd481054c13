"""The JSON action protocol: lenient about packaging, strict about content."""

from __future__ import annotations

import json

import pytest
from langchain_core.tools import tool

from citewise.llm.protocol import FinalAction, ToolAction, parse_action, protocol_instructions


@tool
def search_docs(query: str, top_k: int = 5) -> str:
    """Search the documentation for chunks relevant to a query."""
    return ""


@tool
def open_citation(doc_id: str, chunk_id: str) -> str:
    """Open one retrieved chunk by its ids."""
    return ""


SEARCH = ToolAction(tool="search_docs", input={"query": "install", "top_k": 3})
FINAL = FinalAction(answer="Run `pip install citewise` [1].", used_citations=[1], insufficiencies=[])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type": "tool_call", "tool": "search_docs", "input": {"query": "install", "top_k": 3}}', SEARCH),
        (
            '```json\n{"type": "tool_call", "tool": "search_docs", "input": {"query": "install", "top_k": 3}}\n```',
            SEARCH,
        ),
        (
            'Sure! I will search first.\n{"type": "tool_call", "tool": "search_docs", '
            '"input": {"query": "install", "top_k": 3}}\nThen I will answer.',
            SEARCH,
        ),
        ('{"tool": "search_docs", "args": {"query": "install", "top_k": 3}}', SEARCH),  # type inferred
        (
            '{"type": "tool_call", "name": "search_docs", "arguments": "{\\"query\\": \\"install\\", \\"top_k\\": 3}"}',
            SEARCH,
        ),
        (
            '{"type": "final", "answer": "Run `pip install citewise` [1].", "used_citations": [1], '
            '"insufficiencies": []}',
            FINAL,
        ),
        ('{"answer": "Run `pip install citewise` [1].", "used_citations": ["[1]"]}', FINAL),
        (
            '{"type": "final", "answer": "Use {braces} and \\"quotes\\" [2].", "used_citations": [2], '
            '"insufficiencies": "No word on Windows."} trailing',
            FinalAction(
                answer='Use {braces} and "quotes" [2].', used_citations=[2], insufficiencies=["No word on Windows."]
            ),
        ),
        # The first object is not an action (an example inside prose); the second is.
        (
            'Results look like {"score": 0.8}. {"type": "tool_call", "tool": "search_docs", '
            '"input": {"query": "install", "top_k": 3}}',
            SEARCH,
        ),
        ('{"type": "tool_call", "tool": "open_citation"}', ToolAction(tool="open_citation", input={})),
    ],
)
def test_parses_actions(text, expected):
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think you should run pip install citewise.",
        "{'type': 'final', 'answer': 'single quotes are not JSON'}",
        '{"type": "tool_call", "input": {"query": "no tool named"}}',
        '{"type": "tool_call", "tool": "search_docs", "input": ["not", "an", "object"]}',
        '{"type": "final", "answer": 42}',
        '{"type": "final", "answer": "ok", "used_citations": ["one"]}',
        '{"type": "final", "answer": "unterminated"',
        '{"query": "just arguments"}',
        "[1, 2, 3]",
    ],
)
def test_rejects_what_is_not_an_action(text):
    assert parse_action(text) is None


def test_actions_round_trip_through_json():
    for action in (SEARCH, FINAL):
        assert parse_action(action.to_json()) == action
    assert json.loads(SEARCH.to_json())["type"] == "tool_call"


def test_instructions_list_tools_and_both_forms():
    text = protocol_instructions([search_docs, open_citation])
    assert '"type": "tool_call"' in text and '"type": "final"' in text
    assert "- search_docs: Search the documentation" in text
    assert '"query": string (required)' in text and '"top_k": integer (optional)' in text
    assert '"doc_id": string (required), "chunk_id": string (required)' in text
    example = text.split("Example of a tool call: ", 1)[1].split("\n", 1)[0]
    assert parse_action(example) == ToolAction(tool="search_docs", input={"query": "..."})


def test_stray_braces_before_the_action_are_skipped():
    assert parse_action("{ " * 5000 + "} here it is: " + FINAL.to_json()) == FINAL
