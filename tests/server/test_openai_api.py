"""The OpenAI-compatible API through the official `openai` Python client against a real uvicorn server on loopback:
models, non-stream and stream completions (the same content either way), citations kept in the content and in the
extra `citewise` field, refusals as ordinary messages, the conversation as history, auth and rate limits as the
errors the client knows."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import httpx
import openai
import pytest
from tests.agent.agent_support import WORKER_ANSWER, WORKER_QUESTION
from tests.server.conftest import KEYS, PLAN, VAULT_QUESTION, VAULT_SECRET

from citewise.agent.limits import EXIT_REASONS
from citewise.errors import ProviderError, RateLimited
from citewise.llm.testing import ScriptedChatModel
from citewise.types import REFUSAL_TEXT, ExitReason

UNANSWERABLE = "What is the recommended recipe for sourdough bread with rye flour?"
DOCS = Path(__file__).parents[2] / "docs" / "openai-api.md"


def checkpoints(home: Path) -> int:
    """The LangGraph checkpoint rows the server's session store holds (SQLite under the home)."""
    with closing(sqlite3.connect(home / "sessions.sqlite3")) as db:
        return db.execute("SELECT count(*) FROM checkpoints").fetchone()[0]


def client(server, key: str = "unused") -> openai.OpenAI:
    # max_retries=0: a 429 must reach the test as the client's own RateLimitError, not be retried away.
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=120)


def test_models_lists_the_answerers(agent_app, live_server):
    server = live_server(agent_app())
    ids = [m.id for m in client(server).models.list()]
    assert ids == ["citewise", "citewise-quote", "citewise-agent"]


def test_completion_keeps_its_citations_and_streams_the_same_content(agent_app, live_server):
    server = live_server(agent_app())
    api = client(server)
    messages = [{"role": "user", "content": WORKER_QUESTION}]
    completion = api.chat.completions.create(model="citewise-quote", messages=messages)
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    content = choice.message.content
    assert "twelve threads" in content and "[1]" in content
    # The markers mean something without the extra field: a Sources list names each number.
    body, _, sources = content.partition("\n\nSources:\n")
    assert sources.startswith("[1] ") and ".md" in sources
    extra = completion.citewise  # the structured Answer, in a field OpenAI clients ignore
    assert extra["exit_reason"] == "COMPLETED" and extra["status"] == "success"
    assert extra["answer"] == body
    assert extra["citations"] and {"n", "filename", "chapter", "source_url", "chunk_id"} <= set(extra["citations"][0])
    assert extra["answer_id"]

    chunks = list(api.chat.completions.create(model="citewise-quote", messages=messages, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed == content  # quote mode is deterministic: the same answer, streamed
    assert len([c for c in chunks if c.choices[0].delta.content]) > 5  # word-sized chunks
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.citewise["citations"] == extra["citations"] and last.citewise["exit_reason"] == "COMPLETED"


def test_a_refusal_is_an_ordinary_assistant_message(agent_app, live_server):
    server = live_server(agent_app())
    completion = client(server).chat.completions.create(
        model="citewise", messages=[{"role": "user", "content": UNANSWERABLE}]
    )
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert message.content.startswith(REFUSAL_TEXT) and "Sources:" not in message.content
    assert completion.citewise["status"] == "refused" and completion.citewise["citations"] == []
    assert completion.citewise["refusal_detail"]


def test_the_conversation_is_the_history_and_agent_drafts_never_leak(agent_app, live_server):
    """citewise-agent with the scripted model: the earlier turns reach the model as history (our own Sources list
    taken off), and the content is the checked answer only, streamed or not."""
    model = ScriptedChatModel([PLAN, WORKER_ANSWER, PLAN, WORKER_ANSWER])
    server = live_server(agent_app(model))
    api = client(server)
    messages = [
        {"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": "How many threads does the pool use?"},
        {"role": "assistant", "content": "It depends [1].\n\nSources:\n[1] config.md › Workers"},
        {"role": "user", "content": [{"type": "text", "text": WORKER_QUESTION}]},
    ]
    completion = api.chat.completions.create(model="citewise-agent", messages=messages)
    assert completion.citewise["exit_reason"] == "COMPLETED", completion.citewise
    assert completion.choices[0].message.content.startswith(WORKER_ANSWER.rstrip(".").split(" [")[0])
    seen = "\n".join(str(m.content) for m in model.calls[-1])
    assert "How many threads does the pool use?" in seen and "It depends" in seen
    assert "config.md › Workers" not in seen and "pirate" not in seen

    streamed = api.chat.completions.create(model="citewise-agent", messages=messages, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in streamed)
    assert text == completion.choices[0].message.content


def test_a_call_without_a_session_keeps_no_checkpoint(agent_app, live_server, served_home, tmp_path):
    """Citewise keeps nothing between two /v1 calls (the messages are the conversation), so a call writes no
    LangGraph thread that nothing would ever resume: quote or agent, streamed or not, with a history or without."""
    home = tmp_path / "home"
    shutil.copytree(served_home, home, ignore=shutil.ignore_patterns("sessions.sqlite3*"))
    server = live_server(agent_app(ScriptedChatModel([PLAN, WORKER_ANSWER] * 2), home=home))
    api = client(server)
    ask = [{"role": "user", "content": WORKER_QUESTION}]
    history = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."}, *ask]
    quote = api.chat.completions.create(model="citewise-quote", messages=ask)
    assert quote.citewise["session_id"] is None
    list(api.chat.completions.create(model="citewise-quote", messages=history, stream=True))
    agent = api.chat.completions.create(model="citewise-agent", messages=history)
    assert agent.citewise["exit_reason"] == "COMPLETED" and agent.citewise["session_id"] is None
    list(api.chat.completions.create(model="citewise-agent", messages=ask, stream=True))
    assert checkpoints(home) == 0

    # The same server keeps a conversation where the API offers one: the store is live, it was just not used.
    kept = httpx.post(server.url + "/api/agent/run", json={"question": WORKER_QUESTION, "mode": "quote"}, timeout=120)
    assert kept.json()["session_id"] and checkpoints(home) > 0


def test_keys_owners_and_errors_are_the_apis(agent_app, live_server):
    server = live_server(agent_app(api_keys=KEYS))
    with pytest.raises(openai.AuthenticationError) as denied:
        client(server, "wrong").chat.completions.create(model="citewise", messages=[{"role": "user", "content": "x"}])
    assert denied.value.body["type"] == "authentication_error"

    ask = [{"role": "user", "content": VAULT_QUESTION}]
    alice = client(server, "key-alice").chat.completions.create(model="citewise-quote", messages=ask)
    assert VAULT_SECRET in alice.choices[0].message.content  # her private notes
    bob = client(server, "key-bob").chat.completions.create(model="citewise-quote", messages=ask)
    assert VAULT_SECRET not in bob.choices[0].message.content and VAULT_SECRET not in str(bob.citewise)

    with pytest.raises(openai.NotFoundError) as unknown:
        client(server, "key-bob").chat.completions.create(model="gpt-4o", messages=ask)
    assert unknown.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        client(server, "key-bob").chat.completions.create(
            model="citewise", messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
        )


def test_a_rate_limited_key_gets_the_clients_rate_limit_error(agent_app, live_server):
    server = live_server(agent_app(api_keys=KEYS, server={"rate_limit_per_minute": 2}))
    api = client(server, "key-alice")
    ask = [{"role": "user", "content": WORKER_QUESTION}]
    api.chat.completions.create(model="citewise-quote", messages=ask)
    api.chat.completions.create(model="citewise-quote", messages=ask)
    with pytest.raises(openai.RateLimitError) as limited:
        api.chat.completions.create(model="citewise-quote", messages=ask)
    assert int(limited.value.response.headers["retry-after"]) >= 1
    assert limited.value.body["type"] == "rate_limit_error"
    # Per key: another key is not held up by Alice's.
    client(server, "key-bob").chat.completions.create(model="citewise-quote", messages=ask)


def test_a_rate_limited_run_is_a_429_with_the_exit_reason_tables_retry_after(agent_app, live_server):
    """The model provider rate limits every call: the run is OpenAI's 429 (the client's RateLimitError), not an
    assistant message a chat front end would keep as an answer, and Retry-After is the exit-reason table's. A stream
    that has started ends with an error frame saying the same."""
    server = live_server(agent_app(ScriptedChatModel([RateLimited("429 from vendor")] * 40)))
    api = client(server)
    ask = [{"role": "user", "content": WORKER_QUESTION}]
    row = EXIT_REASONS[ExitReason.RATE_LIMITED]
    with pytest.raises(openai.RateLimitError) as limited:
        api.chat.completions.create(model="citewise-agent", messages=ask)
    assert limited.value.response.headers["retry-after"] == str(row.retry_after_s)
    assert limited.value.body["type"] == "rate_limit_error" and limited.value.body["message"] == row.message

    with pytest.raises(openai.APIError) as failed:
        list(api.chat.completions.create(model="citewise-agent", messages=ask, stream=True))
    frame = failed.value.body
    assert frame["type"] == "rate_limit_error" and frame["message"] == row.message
    assert frame["citewise"]["exit_reason"] == "RATE_LIMITED"
    assert frame["citewise"]["retry_after_s"] == row.retry_after_s


def test_a_rate_limited_run_sends_the_providers_own_retry_after(agent_app, live_server):
    """A provider that says how long to wait is quoted: Retry-After is its 45 s, not the table's 30, on the 429
    and in the stream's error frame (45 s exceeds generation.max_retry_after_s, so each run ends at once)."""
    model = ScriptedChatModel([RateLimited("429 from vendor", retry_after_s=45.0)] * 2)
    server = live_server(agent_app(model))
    api = client(server)
    ask = [{"role": "user", "content": WORKER_QUESTION}]
    with pytest.raises(openai.RateLimitError) as limited:
        api.chat.completions.create(model="citewise-agent", messages=ask)
    assert limited.value.response.headers["retry-after"] == "45"
    with pytest.raises(openai.APIError) as failed:
        list(api.chat.completions.create(model="citewise-agent", messages=ask, stream=True))
    assert failed.value.body["citewise"]["retry_after_s"] == 45
    assert model.remaining == 0


def test_a_provider_failure_or_an_index_outage_is_a_5xx_not_a_message(agent_app, live_server, served_home, tmp_path):
    """A run that ended LLM_ERROR is OpenAI's 502 and one the index could not be searched for a 503 (the statuses a
    run that raised the same failure gets), so a client retries them as it retries OpenAI's 5xx instead of keeping
    "something went wrong" in its conversation; once a stream has started, an error frame says the same."""
    model = ScriptedChatModel([ProviderError("upstream exploded: trace id 7f3c")] * 2)
    api = client(live_server(agent_app(model)))
    ask = [{"role": "user", "content": WORKER_QUESTION}]
    with pytest.raises(openai.InternalServerError) as failed:
        api.chat.completions.create(model="citewise-agent", messages=ask)
    assert failed.value.status_code == 502 and failed.value.body["type"] == "server_error"
    assert failed.value.body["message"] == EXIT_REASONS[ExitReason.LLM_ERROR].message  # not the vendor's text
    with pytest.raises(openai.APIError) as frame:
        list(api.chat.completions.create(model="citewise-agent", messages=ask, stream=True))
    assert frame.value.body["type"] == "server_error" and frame.value.body["citewise"]["status"] == 502
    assert frame.value.body["citewise"]["exit_reason"] == "LLM_ERROR" and "7f3c" not in str(frame.value.body)

    home = tmp_path / "broken-home"
    shutil.copytree(served_home, home, ignore=shutil.ignore_patterns("sessions.sqlite3*"))
    lance = home / "index" / "lancedb"
    shutil.rmtree(lance)
    lance.write_text("not a database")  # every search fails: the run ends with the outage's message
    api = client(live_server(agent_app(home=home, generation={"tool_retries": 0})))
    with pytest.raises(openai.InternalServerError) as outage:
        api.chat.completions.create(model="citewise-quote", messages=ask)
    assert outage.value.status_code == 503 and "couldn't search the documentation" in outage.value.body["message"]
    with pytest.raises(openai.APIError) as frame:
        list(api.chat.completions.create(model="citewise-quote", messages=ask, stream=True))
    assert frame.value.body["citewise"]["status"] == 503 and frame.value.body["citewise"]["exit_reason"] == "COMPLETED"


def test_a_run_that_raised_carries_how_long_to_wait_in_its_error_event():
    """The stream's `error` event (what /v1 turns into its 429) says how long to wait as the HTTP error handler
    would: the provider's own Retry-After when it sent one, else the table's; no wait on other failures."""
    from citewise.server.routers.agent import _error_event

    assert _error_event(RateLimited("slow down", retry_after_s=7.4), "s").data["retry_after_s"] == 7
    table = EXIT_REASONS[ExitReason.RATE_LIMITED].retry_after_s
    assert _error_event(RateLimited(), "s").data == {
        "exit_reason": "RATE_LIMITED", "type": "rate_limited", "status": 429, "retryable": True, "session_id": "s",
        "message": "The model provider is rate limiting requests. Retry shortly.", "retry_after_s": table,
    }  # fmt: skip
    assert "retry_after_s" not in _error_event(ProviderError("boom"), "s").data


def test_plain_http_gets_openai_shaped_errors(agent_app, live_server):
    server = live_server(agent_app())
    response = httpx.post(server.url + "/v1/chat/completions", json={"model": "citewise", "messages": []})
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "invalid_request_error" and response.json()["detail"]


def test_the_docs_example_runs(agent_app, live_server):
    """docs/openai-api.md's Python example, as written, against a live server (only the address and question
    changed)."""
    [example] = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    server = live_server(agent_app(api_keys={"k-3f9a0c": "alice"}))
    code = example.replace("http://127.0.0.1:8000", server.url)
    for question in ("How do I remove deleted files from the index?", "Which file types can I ingest?"):
        assert question in code
        code = code.replace(question, WORKER_QUESTION)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(DOCS), "exec"), {})
    text = printed.getvalue()
    assert "twelve threads" in text and "COMPLETED" in text and "\n\nSources:\n[1] " in text
