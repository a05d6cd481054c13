"""The request and the owner rule as types: validated once, in one place."""

from __future__ import annotations

import pytest

from citewise.errors import ValidationError
from citewise.types import (
    MAX_SELECTED_TEXT_CHARS,
    PUBLIC,
    AnswerMode,
    AnswerStyle,
    HistoryTurn,
    Limits,
    Owner,
    RunRequest,
    TraceEvent,
    TraceKind,
    trace_event,
)

LIMITS = Limits(
    max_turns=6, max_tool_calls=8, max_context_chars=24_000, max_reprompts=3, max_question_chars=50, tool_retries=3
)


def checked(question: object = "How do I pin the worker pool?", **options) -> RunRequest:
    return RunRequest.checked(
        question, limits=LIMITS, default_mode=AnswerMode.QUOTE, default_style=AnswerStyle.DEFAULT, **options
    )


def test_a_request_is_validated_once_and_frozen():
    request = checked(owner="alice", history=[{"role": "user", "content": "hi"}], session_id="s-1", mode="agent")
    assert request.owner == Owner(id="alice") and request.mode is AnswerMode.AGENT
    assert request.history == (HistoryTurn(role="user", content="hi"),)
    assert request.limits is LIMITS and request.style is AnswerStyle.DEFAULT
    with pytest.raises(Exception, match="frozen"):
        request.question = "something else"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("question", "options", "message"),
    [
        (42, {}, "must be a string"),
        ("x" * 51, {}, "limit is 50"),
        ("bad \ud800", {}, "lone surrogate"),
        ("ok", {"owner": "no spaces"}, "Invalid owner id"),
        ("ok", {"selected_text": "  "}, "selected_text cannot be empty"),
        ("ok", {"selected_text": "x" * (MAX_SELECTED_TEXT_CHARS + 1)}, "selected_text is"),
        ("ok", {"style": "poem"}, "Unknown style"),
        ("ok", {"mode": "telepathy"}, "Unknown mode"),
        ("ok", {"session_id": "no/slashes"}, "session_id"),
        ("ok", {"history": [{"role": "system", "content": "x"}]}, r"history\[0\]"),
        ("ok", {"history": [{"role": "user", "content": 3}]}, r"history\[0\].content"),
    ],
)
def test_a_bad_request_says_what_is_wrong(question, options, message):
    with pytest.raises(ValidationError, match=message):
        checked(question, **options)


def test_modes_and_their_older_name():
    assert checked(mode="extractive").mode is AnswerMode.QUOTE
    assert checked(mode=None).mode is AnswerMode.QUOTE  # the caller's default
    assert AnswerMode.parse("agent") is AnswerMode.AGENT and AnswerMode.parse(None) is None


def test_the_owner_rule():
    assert Owner.of(None) is PUBLIC and Owner.of("public") is PUBLIC and PUBLIC.is_public
    alice = Owner.of("alice")
    assert alice.visible == ("public", "alice") and PUBLIC.visible == ("public",)
    assert alice.sees("alice") and alice.sees("public") and not alice.sees("bob")
    assert not PUBLIC.sees("alice") and Owner.of(alice) is alice and str(alice) == "alice"
    for bad in ("", "a b", "a" * 129, "x/y", 7):
        with pytest.raises(ValidationError, match="Invalid owner id"):
            Owner.of(bad)  # type: ignore[arg-type]


def test_a_trace_step_has_a_kind_from_the_list():
    step = trace_event(TraceKind.RETRIEVAL_FAILURE, "tools", kind="connection_error", attempts=3)
    assert step == {"type": "retrieval_failure", "node": "tools", "data": {"kind": "connection_error", "attempts": 3}}
    with pytest.raises(ValueError):
        TraceEvent(type="something_new", node="llm")
