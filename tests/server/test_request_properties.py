"""Property-based tests (Hypothesis) of the request models, the schema every question endpoint validates with: what
is within the documented limits is accepted and survives a JSON round trip unchanged; unknown fields, over-long
text, wrong types and lone surrogates are refused with a ValidationError (a 422), never passed on."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from citewise.server.schemas import (
    MAX_HISTORY_TURNS,
    MAX_MESSAGE_CHARS,
    MAX_SELECTED_TEXT_CHARS,
    AgentRequest,
    ChatRequest,
)

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)
PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

turn = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": TEXT})
agent_body = st.fixed_dictionaries(
    {"question": TEXT},
    optional={
        "mode": st.sampled_from(["agent", "quote", "extractive", None]),
        "returnTrace": st.booleans(),
        "selected_text": st.one_of(st.none(), TEXT),
        "style": st.sampled_from(["default", "structured", None]),
        "session_id": st.one_of(st.none(), st.uuids().map(str)),
        "history": st.one_of(st.none(), st.lists(turn, max_size=5)),
    },
)


@PROPERTY
@given(body=agent_body)
def test_valid_agent_requests_are_accepted_and_round_trip(body):
    request = AgentRequest.model_validate_json(json.dumps(body))
    again = AgentRequest.model_validate_json(request.model_dump_json(by_alias=True))
    assert again == request
    assert request.question == body["question"]
    if body.get("session_id"):
        assert request.session_id == uuid.UUID(body["session_id"])


@PROPERTY
@given(body=agent_body, key=st.text(min_size=1, max_size=20))
def test_unknown_fields_are_refused(body, key):
    assume(key not in AgentRequest.model_fields and key != "returnTrace")
    with pytest.raises(ValidationError):
        AgentRequest.model_validate({**body, key: 1})


@PROPERTY
@given(
    field=st.sampled_from(["question", "selected_text"]),
    extra=st.integers(1, 50),
    char=st.characters(blacklist_categories=("Cs",)),
)
def test_text_over_its_limit_is_refused(field, extra, char):
    limit = MAX_MESSAGE_CHARS if field == "question" else MAX_SELECTED_TEXT_CHARS
    body = {"question": "q", field: char * (limit + extra)}
    with pytest.raises(ValidationError):
        AgentRequest.model_validate(body)
    with pytest.raises(ValidationError):
        ChatRequest.model_validate(
            {"message": "m", "selected_text": body["selected_text"]}
            if field != "question"
            else {"message": body["question"]}
        )


@PROPERTY
@given(turns=st.integers(MAX_HISTORY_TURNS + 1, MAX_HISTORY_TURNS + 5))
def test_history_over_its_limit_is_refused(turns):
    with pytest.raises(ValidationError):
        AgentRequest.model_validate({"question": "q", "history": [{"role": "user", "content": "x"}] * turns})


@PROPERTY
@given(
    field=st.sampled_from(["question", "selected_text", "mode", "style", "session_id", "history", "returnTrace"]),
    value=st.one_of(st.integers(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2), st.just({"a": 1})),
)
def test_wrong_types_are_refused(field, value):
    assume(not (field == "returnTrace" and value in (0, 1)))  # pydantic reads 0/1 (and 0.0/1.0) as booleans
    assume(not (field == "history" and value == []))  # an empty history is a history
    with pytest.raises(ValidationError):
        AgentRequest.model_validate_json(json.dumps({"question": "q", field: value}))


@PROPERTY
@given(prefix=TEXT, surrogate=st.integers(0xD800, 0xDFFF), where=st.sampled_from(["question", "selected_text"]))
def test_lone_surrogates_in_json_are_refused(prefix, surrogate, where):
    text = json.dumps(prefix)[1:-1] + f"\\u{surrogate:04x}"  # as JSON: the escape of a lone surrogate
    body = {"question": '"q"', where: f'"{text}"'}
    with pytest.raises(ValidationError):
        AgentRequest.model_validate_json("{" + ", ".join(f'"{k}": {v}' for k, v in body.items()) + "}")
    with pytest.raises(ValidationError):
        ChatRequest.model_validate_json(f'{{"message": "{text}"}}')
