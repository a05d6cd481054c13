"""Long messages over HTTP: /chat, /api/agent/run and /v1/chat/completions answer a question with a log pasted
around it up to agent.max_question_chars (10,000); one character more is a 422 that says both numbers and never
echoes the message. The limit is one number: the setting, the OpenAPI schema's maxLength, the web page's and the
widget's textarea, and the 422."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.support.long_messages import QUESTION, pasted

from citewise.server.http_errors import validation_detail
from citewise.settings import Settings
from citewise.types import MAX_QUESTION_CHARS

WEB = Path(__file__).parents[2] / "src" / "citewise" / "web"
TOO_LONG = "The question is 10,001 characters long; the limit is 10,000."


def _chat(client, message: str):
    return client.post("/chat", json={"message": message})


def _run(client, message: str):
    return client.post("/api/agent/run", json={"question": message, "mode": "quote", "returnTrace": True})


def _v1(client, message: str):
    body = {"model": "citewise-quote", "messages": [{"role": "user", "content": message}]}
    return client.post("/v1/chat/completions", json=body)


def _text(route, body: dict) -> str:
    if route is _chat:
        return body["response"]
    if route is _run:
        return body["answer"]
    return body["choices"][0]["message"]["content"]


ROUTES = pytest.mark.parametrize("route", [_chat, _run, _v1], ids=["chat", "agent-run", "v1"])


@pytest.fixture(scope="module")
def app_client(served_home, embedder):
    """One started app on the served index for the module (building an agent per test costs seconds)."""
    from fastapi.testclient import TestClient
    from tests.support.settings import make_settings

    from citewise.agent.runner import Citewise
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.server import create_app

    settings = make_settings(served_home)
    kb = KnowledgeBase(settings, embedder=embedder)
    with TestClient(create_app(settings, citewise=Citewise(settings, kb=kb)), raise_server_exceptions=False) as c:
        yield c


@ROUTES
@pytest.mark.parametrize("chars", [4_915, MAX_QUESTION_CHARS])
def test_a_long_paste_is_answered(app_client, route, chars):
    response = route(app_client, pasted(chars))
    assert response.status_code == 200, response.text[:500]
    body = response.json()
    assert "orbitron queue create" in _text(route, body)
    if route is _run:
        assert body["status"] == "success" and body["question"] == pasted(chars)
        search = next(e for e in body["trace"] if e["type"] == "tool_call" and e["data"].get("mandatory"))
        assert search["data"]["condensed"] is True and search["data"]["message_chars"] == chars
        assert search["data"]["args"]["query"].startswith(QUESTION)


@ROUTES
def test_one_character_over_is_a_422_in_plain_words_without_the_message(app_client, route):
    response = route(app_client, pasted(MAX_QUESTION_CHARS + 1))
    assert response.status_code == 422, response.text[:500]
    body = response.json()
    assert [d["msg"] for d in body["detail"]] == [TOO_LONG]
    assert all(set(d) == {"loc", "msg", "type"} for d in body["detail"])
    assert "leased job" not in response.text and len(response.text) < 600  # nothing of the paste comes back
    if route is _v1:  # OpenAI's clients read the message from `error`
        assert body["error"]["message"] == TOO_LONG and body["error"]["type"] == "invalid_request_error"


def test_no_422_echoes_what_was_sent(app_client):
    secret = "s3cr3t-" + "y" * 40
    bodies = [
        ("/api/agent/run", {"question": "x", "mode": secret}),
        ("/api/agent/run", {"question": "x", "style": secret}),
        ("/api/agent/run", {"question": "x", "session_id": secret}),
        ("/api/agent/run", {"question": "x", "history": [{"role": "user", "content": secret * 300}]}),
        ("/api/agent/run", {"question": "x", "selected_text": secret * 300}),
        ("/chat", {"message": 12345, "session_id": secret}),
        ("/v1/chat/completions", {"model": "citewise", "messages": [{"role": secret, "content": "x"}]}),
    ]
    for path, body in bodies:
        response = app_client.post(path, json=body)
        assert response.status_code == 422, (path, response.text[:300])
        assert secret not in response.text and "y" * 40 not in response.text, response.text[:300]
        assert all(set(d) == {"loc", "msg", "type"} for d in response.json()["detail"])
    history = app_client.post("/api/agent/run", json=bodies[3][1]).json()["detail"][0]["msg"]
    assert history == "history[0].content is 14,100 characters long; the limit is 10,000."
    selected = app_client.post("/api/agent/run", json=bodies[4][1]).json()["detail"][0]["msg"]
    assert selected == "The selected text is 14,100 characters long; the limit is 10,000."


def test_the_limit_is_one_number_everywhere(app_client):
    limit = Settings().agent.max_question_chars
    assert limit == MAX_QUESTION_CHARS == 10_000
    schemas = app_client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["AgentRequest"]["properties"]["question"]["maxLength"] == limit
    assert schemas["ChatRequest"]["properties"]["message"]["maxLength"] == limit
    assert not {"input", "ctx"} & set(schemas["ValidationError"]["properties"])  # never sent
    page = (WEB / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<textarea id="question"[^>]*\bmaxlength="(\d+)"', page).group(1) == str(limit)
    widget = (WEB / "widget-app.js").read_text(encoding="utf-8")
    assert re.search(r"input\.maxLength = ([\d_]+);", widget).group(1).replace("_", "") == str(limit)


def test_a_lower_setting_is_the_schemas_and_the_422s_limit(agent_app, started):
    client = started(agent_app(agent={"max_question_chars": 2_000}))
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["AgentRequest"]["properties"]["question"]["maxLength"] == 2_000
    assert schemas["ChatRequest"]["properties"]["message"]["maxLength"] == 2_000
    expected = "The question is {:,} characters long; the limit is 2,000."
    for route in (_chat, _run, _v1):
        for chars in (4_915, MAX_QUESTION_CHARS + 1):  # the agent's check, then the schema's: the same words
            response = route(client, pasted(chars))
            assert response.status_code == 422, (route.__name__, chars, response.text[:300])
            assert [d["msg"] for d in response.json()["detail"]] == [expected.format(chars)]
            assert "leased job" not in response.text


def test_validation_detail_names_the_field_and_drops_the_input():
    errors = [
        {
            "type": "string_too_long",
            "loc": ("body", "message"),
            "msg": "x",
            "input": "z" * 12,
            "ctx": {"max_length": 10},
        },
        {"type": "missing", "loc": ("body", "question"), "msg": "Field required", "input": {"q": "secret"}},
    ]
    assert validation_detail(errors, question_limit=5) == [
        {
            "loc": ["body", "message"],
            "msg": "The question is 12 characters long; the limit is 5.",
            "type": "string_too_long",
        },
        {"loc": ["body", "question"], "msg": "Field required", "type": "missing"},
    ]
