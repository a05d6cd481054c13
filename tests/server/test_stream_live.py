"""POST /api/agent/stream through a real uvicorn server on loopback, parsed with httpx-sse: framing, event order,
exactly one terminal event, cache hits without tokens, error events, and a client disconnect cancelling the run."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse
from pydantic import PrivateAttr
from tests.agent.agent_support import WORKER_ANSWER, WORKER_QUESTION
from tests.server.conftest import PLAN

from citewise.llm.testing import ScriptedChatModel
from citewise.types import MAX_QUESTION_CHARS

TERMINAL = {"complete", "error"}


def stream(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[ServerSentEvent]:
    with (
        httpx.Client(base_url=url, timeout=120) as client,
        connect_sse(client, "POST", "/api/agent/stream", json=body, headers=dict(headers or {})) as source,
    ):
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        assert source.response.headers["cache-control"] == "no-cache"
        return list(source.iter_sse())


def check_framing(events: list[ServerSentEvent]) -> dict[str, Any]:
    """Every event named and JSON; exactly one terminal event, and it is the last; returns its data."""
    assert events
    for event in events:
        assert event.event in {"trace", "token", "discard", "citation", "complete", "error"}, event.event
        json.loads(event.data)
    terminal = [e for e in events if e.event in TERMINAL]
    assert len(terminal) == 1 and events[-1] is terminal[0]
    return terminal[0].json()


def test_quote_mode_stream(agent_app, live_server):
    server = live_server(agent_app())
    events = stream(server.url, {"question": WORKER_QUESTION, "mode": "quote"})
    answer = check_framing(events)
    assert events[-1].event == "complete"
    kinds = [e.event for e in events]
    # Steps first, then the answer text, then its citations, then the answer.
    assert kinds[0] == "trace"
    assert kinds.index("token") > max(i for i, k in enumerate(kinds) if k == "trace")
    assert min(i for i, k in enumerate(kinds) if k == "citation") > max(i for i, k in enumerate(kinds) if k == "token")
    traces = [e.json() for e in events if e.event == "trace"]
    assert {"plan", "tool_call", "validation"} <= {t["type"] for t in traces}
    assert all(set(t) == {"type", "node", "data"} for t in traces)
    tokens = "".join(e.json()["text"] for e in events if e.event == "token")
    assert tokens == answer["answer"] and "twelve threads" in tokens
    citations = [e.json() for e in events if e.event == "citation"]
    assert citations == answer["citations"] and citations
    assert answer["exit_reason"] == "COMPLETED" and answer["status"] == "success"


def test_agent_stream_sends_model_tokens_not_planner_tokens(agent_app, live_server):
    model = ScriptedChatModel([PLAN, WORKER_ANSWER])
    server = live_server(agent_app(model))
    events = stream(server.url, {"question": WORKER_QUESTION, "mode": "agent", "returnTrace": True})
    answer = check_framing(events)
    assert answer["exit_reason"] == "COMPLETED", answer
    tokens = [e.json()["text"] for e in events if e.event == "token"]
    assert len(tokens) > 5  # word by word, as the model wrote it
    assert "".join(tokens) == WORKER_ANSWER
    assert "Search the docs" not in "".join(tokens)  # the plan is a trace event, not answer text
    assert answer["trace"]  # asked for with returnTrace
    assert model.remaining == 0


def test_cache_hit_sends_complete_without_tokens(agent_app, live_server, tmp_path):
    from citewise.llm.cache import SQLiteLLMCache

    # One run's worth of replies: the second run must be served from the cache without calling the model.
    cache = SQLiteLLMCache(tmp_path / "llm-cache.sqlite3", namespace="scripted")
    model = ScriptedChatModel([PLAN, WORKER_ANSWER], cache=cache)
    server = live_server(agent_app(model))
    body = {"question": WORKER_QUESTION, "mode": "agent"}
    first = stream(server.url, body)
    second = stream(server.url, body)
    assert any(e.event == "token" for e in first)
    assert not any(e.event == "token" for e in second)
    assert check_framing(second)["answer"] == check_framing(first)["answer"]
    assert [e.event for e in second if e.event != "trace"][-1] == "complete"
    assert check_framing(second)["cached"] is True and check_framing(first)["cached"] is False
    with httpx.Client(base_url=server.url) as client:
        metrics = client.get("/metrics").text
    assert 'citewise_llm_cache_total{result="hit"} 1.0' in metrics
    assert "citewise_llm_cache_hit_ratio 0.5" in metrics


def test_llm_failure_ends_with_complete_carrying_the_exit_reason(agent_app, live_server):
    from citewise.errors import RateLimited

    server = live_server(agent_app(ScriptedChatModel([RateLimited("429 from vendor")] * 40)))
    events = stream(server.url, {"question": WORKER_QUESTION, "mode": "agent"})
    answer = check_framing(events)
    assert answer["exit_reason"] == "RATE_LIMITED" and answer["retryable"] is True and answer["status"] == "error"
    assert not any(e.event == "token" for e in events)  # the message to show comes with `complete`


def test_a_run_that_raises_ends_with_one_error_event(agent_app, live_server, tmp_path, embedder):
    from tests.conftest import CORPUS

    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.ingest.pipeline import Ingestor
    from citewise.settings import Settings

    home = tmp_path / "home"
    Ingestor(KnowledgeBase(Settings(home=home), embedder=embedder)).ingest_paths([CORPUS / "guide"])
    server = live_server(agent_app(home=home))
    # Someone rebuilds the index with another embedding model while the server runs: every search must fail loudly.
    manifest = home / "index" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "embeddings": "local:another-model", "version": data["version"] + 1}))
    events = stream(server.url, {"question": WORKER_QUESTION})
    error = check_framing(events)
    assert events[-1].event == "error"
    assert error["exit_reason"] == "LLM_ERROR" and error["type"] == "index_mismatch" and error["status"] == 503
    assert set(error) == {"exit_reason", "type", "status", "message", "retryable", "session_id"}


def test_bad_stream_request_is_a_plain_4xx_before_any_event(agent_app, live_server):
    server = live_server(agent_app())
    with httpx.Client(base_url=server.url) as client:
        too_long = client.post("/api/agent/stream", json={"question": "x" * (MAX_QUESTION_CHARS + 1)})
        assert too_long.status_code == 422 and too_long.headers["content-type"] == "application/json"
        assert client.post("/api/agent/stream", json={"question": "x", "mode": "nope"}).status_code == 422
        no_model = client.post("/api/agent/stream", json={"question": "x", "mode": "agent"})
        assert no_model.status_code == 400 and "CITEWISE_LLM" in no_model.json()["detail"]


class GatedChatModel(ScriptedChatModel):
    """The scripted model, except that its `gate_call`-th reply stops after the first token until cancelled —
    so a run is certainly still going when the client hangs up."""

    gate_call: int = 2
    _reached: threading.Event = PrivateAttr(default_factory=threading.Event)
    _cancelled: threading.Event = PrivateAttr(default_factory=threading.Event)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        first = True
        async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
            yield chunk
            if first and len(self.calls) == self.gate_call:
                first = False
                self._reached.set()
                try:
                    while True:
                        await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    self._cancelled.set()
                    raise


def _wait_for(condition, what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_client_disconnect_cancels_the_run(agent_app, live_server):
    model = GatedChatModel([PLAN, "Set the worker pool size with worker_threads, as the docs say [1].", "unused"])
    server = live_server(agent_app(model, generation={"chat_timeout_s": 600}))
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        connect_sse(client, "POST", "/api/agent/stream", json={"question": WORKER_QUESTION}) as source,
    ):
        for event in source.iter_sse():
            if event.event == "token":
                break  # the model is now stuck mid-answer; hang up
        else:
            raise AssertionError("no token arrived")
    assert model._reached.is_set()
    _wait_for(model._cancelled.is_set, "the run to be cancelled")
    with httpx.Client(base_url=server.url) as client:
        _wait_for(
            lambda: "citewise_stream_disconnects_total 1.0" in client.get("/metrics").text, "the disconnect metric"
        )
    assert model.remaining == 1  # nothing after the cancelled call ran


def test_tokens_after_the_last_reprompt_are_the_final_draft(agent_app, live_server):
    bad = "Run `orbitron pool --pin 99` to pin the pool [1]."  # a command no source contains: sent back
    model = ScriptedChatModel([PLAN, bad, WORKER_ANSWER])
    server = live_server(agent_app(model))
    events = stream(server.url, {"question": WORKER_QUESTION, "mode": "agent"})
    answer = check_framing(events)
    assert answer["exit_reason"] == "COMPLETED"
    resets = [i for i, e in enumerate(events) if e.event == "trace" and e.json()["type"] in ("reprompt", "tool_call")]
    reprompts = [i for i in resets if events[i].json()["type"] == "reprompt"]
    assert reprompts, "the validator should have sent the first draft back"
    before = "".join(e.json()["text"] for e in events[: reprompts[0]] if e.event == "token")
    after = "".join(e.json()["text"] for e in events[resets[-1] :] if e.event == "token")
    assert before == bad
    assert after == WORKER_ANSWER


def test_json_protocol_actions_are_not_streamed_as_answer_text(agent_app, live_server):
    final = json.dumps({"type": "final", "answer": WORKER_ANSWER, "used_citations": [1], "insufficiencies": []})
    model = ScriptedChatModel([PLAN, final], supports_tools=False)  # like the local SmolLM2
    server = live_server(agent_app(model))
    events = stream(server.url, {"question": WORKER_QUESTION, "mode": "agent"})
    answer = check_framing(events)
    assert answer["exit_reason"] == "COMPLETED", answer
    tokens = "".join(e.json()["text"] for e in events if e.event == "token")
    assert '"type"' not in tokens and "{" not in tokens
    assert "twelve threads" in answer["answer"]
    assert tokens == answer["answer"]  # held back while written, sent once it was read
