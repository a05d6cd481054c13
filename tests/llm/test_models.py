"""LLMClient: retries, fallbacks, error typing, tool binding, the reply cache and streaming through LangGraph."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from citewise.errors import (
    MissingExtraError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    classify_provider_error,
)
from citewise.llm.cache import SQLiteLLMCache
from citewise.llm.models import LLMClient, _vendor_kwargs, create_chat_model
from citewise.llm.testing import ScriptedChatModel
from citewise.settings import Settings


def http_error(status: int) -> httpx.HTTPStatusError:
    """What an httpx-based vendor SDK raises for an HTTP error status."""
    request = httpx.Request("POST", "https://api.example.com/v1/chat/completions")
    return httpx.HTTPStatusError(f"HTTP {status}", request=request, response=httpx.Response(status, request=request))


@pytest.fixture
def fast(tmp_path) -> Settings:
    """Settings whose retries don't sleep."""
    return Settings(home=tmp_path / "home", generation={"llm_retry_wait_s": 0, "llm_retries": 2})


def ask(client: LLMClient, text: str = "How do I install it?", **kwargs) -> AIMessage:
    return asyncio.run(client.ainvoke([HumanMessage(text)], **kwargs))


def test_rate_limited_primary_falls_back_to_secondary(fast, caplog):
    primary = ScriptedChatModel([http_error(429)] * 3, model_name="primary")
    secondary = ScriptedChatModel(["from the fallback"], model_name="secondary")
    client = LLMClient(fast, chat_model=primary, fallbacks=[secondary])

    with caplog.at_level("INFO", logger="citewise.llm.models"):
        reply = ask(client)

    assert reply.content == "from the fallback"
    assert len(primary.calls) == 3  # first try + llm_retries, then the fallback
    assert len(secondary.calls) == 1
    assert client.last_model == "scripted:secondary" != client.name
    assert reply.response_metadata["model_spec"] == "scripted:secondary"
    assert "scripted:secondary answered instead of scripted:primary" in caplog.text


def test_retryable_errors_are_retried_then_succeed(fast):
    primary = ScriptedChatModel([http_error(503), http_error(503), "third time lucky"])
    client = LLMClient(fast, chat_model=primary, fallbacks=[])
    assert ask(client).content == "third time lucky"
    assert len(primary.calls) == 3
    assert client.attempts == 3
    assert client.last_model == client.name


def test_retry_count_follows_settings(tmp_path):
    settings = Settings(home=tmp_path, generation={"llm_retry_wait_s": 0, "llm_retries": 0})
    primary = ScriptedChatModel([http_error(503), "never reached"])
    with pytest.raises(ProviderUnavailable):
        ask(LLMClient(settings, chat_model=primary, fallbacks=[]))
    assert len(primary.calls) == 1


def test_non_retryable_error_is_neither_retried_nor_handed_to_fallbacks(fast):
    primary = ScriptedChatModel([http_error(400)])
    secondary = ScriptedChatModel(["unused"])
    client = LLMClient(fast, chat_model=primary, fallbacks=[secondary])
    with pytest.raises(ProviderError) as info:
        ask(client)
    assert info.value.retryable is False and type(info.value) is ProviderError
    assert len(primary.calls) == 1 and secondary.calls == []
    assert client.last_model is None


def test_exhausted_chain_reports_how_it_ended(fast):
    # Primary rate limited, fallback down: the error raised is the last one (unavailable), not the first.
    primary = ScriptedChatModel([http_error(429)] * 3)
    secondary = ScriptedChatModel([http_error(503)] * 3)
    with pytest.raises(ProviderUnavailable):
        ask(LLMClient(fast, chat_model=primary, fallbacks=[secondary]))

    primary = ScriptedChatModel([http_error(503)] * 3)
    secondary = ScriptedChatModel([RuntimeError("Resource has been exhausted (e.g. check quota).")] * 3)
    with pytest.raises(RateLimited):
        ask(LLMClient(fast, chat_model=primary, fallbacks=[secondary]))
    assert len(secondary.calls) == 3


class _Named(Exception):
    pass


class ResourceExhausted(Exception):  # the name google-api-core uses for quota errors
    pass


class APIConnectionError(Exception):  # the name openai/anthropic use
    pass


@pytest.mark.parametrize(
    ("exc", "expected", "retryable"),
    [
        (http_error(429), RateLimited, True),
        (http_error(500), ProviderUnavailable, True),
        (http_error(503), ProviderUnavailable, True),
        (http_error(529), ProviderUnavailable, True),
        (http_error(504), ProviderTimeout, True),
        (http_error(408), ProviderTimeout, True),
        (http_error(400), ProviderError, False),
        (http_error(401), ProviderError, False),
        (ResourceExhausted("429 Quota exceeded for metric"), RateLimited, True),
        (_Named("Rate limit reached for model"), RateLimited, True),
        (TimeoutError(), ProviderTimeout, True),
        (TimeoutError(), ProviderTimeout, True),
        (httpx.ReadTimeout("read timed out"), ProviderTimeout, True),
        (httpx.ConnectError("connection refused"), ProviderUnavailable, True),
        (ConnectionResetError("reset by peer"), ProviderUnavailable, True),
        (APIConnectionError("Connection error."), ProviderUnavailable, True),
        (ValueError("Invalid 'messages[0].content'"), ProviderError, False),
        (RateLimited("already ours"), RateLimited, True),
    ],
)
def test_classify_provider_error(exc, expected, retryable):
    error = classify_provider_error(exc)
    assert type(error) is expected
    assert error.retryable is retryable
    assert str(error)


def test_missing_vendor_extra_says_what_to_install(tmp_path):
    # langchain-anthropic is not installed in the dev environment (langchain-openai is: tests/support/fake_openai.py).
    settings = Settings(home=tmp_path, llm="anthropic:claude-test")
    with pytest.raises(MissingExtraError) as info:
        create_chat_model(settings, "anthropic:claude-test")
    message = str(info.value)
    assert "pip install 'citewise[anthropic]'" in message and "langchain-anthropic" in message
    assert info.value.extra == "anthropic"
    with pytest.raises(MissingExtraError, match=r"citewise\[google\]"):
        LLMClient(settings.model_copy(update={"llm": "google_genai:gemini-2.0-flash"}))


def test_vendor_kwargs_carry_generation_settings(tmp_path):
    settings = Settings(
        home=tmp_path,
        llm="openai:local-model",
        llm_base_url="http://127.0.0.1:8080/v1",
        llm_api_key="sk-test",
        generation={"temperature": 0.0, "seed": 7, "chat_timeout_s": 12, "max_tokens": 256},
    )
    openai = _vendor_kwargs(settings, "openai", is_primary=True)
    assert openai == {
        "temperature": 0.0,
        "timeout": 12,
        "max_tokens": 256,
        "max_retries": 0,
        "api_key": "sk-test",
        "seed": 7,
        "base_url": "http://127.0.0.1:8080/v1",
    }
    anthropic = _vendor_kwargs(settings, "anthropic", is_primary=False)
    assert "seed" not in anthropic and "api_key" not in anthropic and "base_url" not in anthropic
    assert _vendor_kwargs(settings, "groq", is_primary=False)["model_kwargs"] == {"seed": 7}
    google = _vendor_kwargs(settings, "google_genai", is_primary=False)
    assert google["seed"] == 7 and google["max_retries"] == 1
    ollama = _vendor_kwargs(settings, "ollama", is_primary=False)
    assert ollama["seed"] == 7 and ollama["num_predict"] == 256 and ollama["base_url"] == settings.llm_base_url


@tool
def search_docs(query: str) -> str:
    """Search the documentation."""
    return ""


@tool
def open_citation(doc_id: str, chunk_id: str) -> str:
    """Open one chunk."""
    return ""


def test_tools_are_bound_only_for_native_models(fast):
    native = ScriptedChatModel(["ok"])
    client = LLMClient(fast, chat_model=native, fallbacks=[])
    assert client.native_tools
    ask(client, tools=[search_docs])
    assert native.bound_tools == [search_docs]

    plain = ScriptedChatModel(["ok"], supports_tools=False)
    client = LLMClient(fast, chat_model=plain, fallbacks=[])
    assert not client.native_tools
    ask(client, tools=[search_docs])
    assert plain.bound_tools is None

    # One model without tools in the chain puts the whole chain on the JSON protocol.
    assert not LLMClient(fast, chat_model=ScriptedChatModel([]), fallbacks=[plain]).native_tools


def test_cache_hit_answers_without_calling_the_model(fast):
    cache = SQLiteLLMCache(fast.llm_cache_path, namespace="scripted")
    model = ScriptedChatModel(["cached answer", "with tools", "other tools", "hotter"], cache=cache)
    client = LLMClient(fast, chat_model=model, fallbacks=[])

    assert ask(client).content == "cached answer"
    assert ask(client).content == "cached answer"
    assert len(model.calls) == 1

    # Same messages, different payload: each is a miss.
    assert ask(client, tools=[search_docs]).content == "with tools"
    assert ask(client, tools=[search_docs, open_citation]).content == "other tools"
    assert ask(client, tools=[search_docs]).content == "with tools"  # and each is cached on its own
    assert ask(client, "Something else?").content == "hotter"
    assert len(model.calls) == 4

    # The cache lives on disk: a new process (a new cache object) still hits.
    again = ScriptedChatModel([], cache=SQLiteLLMCache(fast.llm_cache_path, namespace="scripted"))
    assert ask(LLMClient(fast, chat_model=again, fallbacks=[])).content == "cached answer"
    assert again.calls == []


def test_cache_key_includes_model_params_and_namespace(tmp_path):
    cache = SQLiteLLMCache(tmp_path / "c.sqlite3", namespace="a")
    first = ScriptedChatModel(["from a"], cache=cache)
    assert first.invoke("q").content == "from a"
    renamed = ScriptedChatModel(["from a renamed model"], model_name="other", cache=cache)
    assert renamed.invoke("q").content == "from a renamed model"
    other_namespace = ScriptedChatModel(["from b"], cache=SQLiteLLMCache(tmp_path / "c.sqlite3", namespace="b"))
    assert other_namespace.invoke("q").content == "from b"
    assert len(cache) == 3
    cache.clear()
    assert len(cache) == 1


class _State(TypedDict):
    messages: Annotated[list, add_messages]


def _graph(client: LLMClient):
    async def call_model(state: _State, config) -> dict:
        return {"messages": [await client.ainvoke(state["messages"], tools=[search_docs], config=config)]}

    graph = StateGraph(_State)
    graph.add_node("llm", call_model)
    graph.add_edge(START, "llm")
    graph.add_edge("llm", END)
    return graph.compile()


async def _events(app, question: str) -> tuple[list[str], AIMessage]:
    tokens, final = [], None
    async for event in app.astream_events({"messages": [HumanMessage(question)]}, version="v2"):
        if event["event"] == "on_chat_model_stream":
            tokens.append(event["data"]["chunk"].content)
        if event["event"] == "on_chain_end" and event["name"] == "LangGraph":
            final = event["data"]["output"]["messages"][-1]
    return tokens, final


def test_tokens_stream_through_the_client_and_cache_hits_stream_none(fast):
    cache = SQLiteLLMCache(fast.llm_cache_path, namespace="scripted")
    primary = ScriptedChatModel([http_error(429)] * 3, model_name="primary", cache=cache)
    secondary = ScriptedChatModel(["streamed from the fallback"], model_name="secondary", cache=cache)
    app = _graph(LLMClient(fast, chat_model=primary, fallbacks=[secondary]))

    tokens, final = asyncio.run(_events(app, "q"))
    assert "".join(tokens) == "streamed from the fallback" and len(tokens) >= 4
    assert final.content == "streamed from the fallback"
    assert final.response_metadata["model_spec"] == "scripted:secondary"

    # Same question again: the primary still fails (errors are never cached), the fallback's reply comes from the
    # cache — no model call, no token events, the same final message.
    primary.responses.extend([http_error(429)] * 3)
    tokens, final = asyncio.run(_events(app, "q"))
    assert tokens == []
    assert final.content == "streamed from the fallback"
    assert len(secondary.calls) == 1


def test_create_chat_model_builds_the_vendor_class_with_settings_and_cache(tmp_path, monkeypatch):
    # The vendor packages are optional extras, absent here: stand the scripted model in for ChatOpenAI so the real
    # init_chat_model path (import, constructor kwargs, our cache wiring) runs.
    import types

    from langchain.chat_models import base as chat_models_base
    from pydantic import ConfigDict

    class ChatOpenAI(ScriptedChatModel):
        model_config = ConfigDict(extra="allow")

    monkeypatch.setitem(sys.modules, "langchain_openai", types.SimpleNamespace(ChatOpenAI=ChatOpenAI))
    chat_models_base._get_chat_model_creator.cache_clear()
    try:
        settings = Settings(home=tmp_path, llm="openai:gpt-4o-mini", llm_base_url="http://127.0.0.1:9/v1")
        model = create_chat_model(settings, "openai:gpt-4o-mini")
    finally:
        chat_models_base._get_chat_model_creator.cache_clear()
    assert isinstance(model, ChatOpenAI)
    extra = model.model_extra
    assert extra["model"] == "gpt-4o-mini" and extra["base_url"] == "http://127.0.0.1:9/v1"
    assert extra["temperature"] == 0.0 and extra["seed"] == 42 and extra["max_retries"] == 0
    assert isinstance(model.cache, SQLiteLLMCache) and model.cache.namespace == "openai:gpt-4o-mini"
    assert model.cache.path == settings.llm_cache_path

    no_cache = settings.model_copy(update={"generation": settings.generation.model_copy(update={"cache": False})})
    monkeypatch.setitem(sys.modules, "langchain_openai", types.SimpleNamespace(ChatOpenAI=ChatOpenAI))
    try:
        assert create_chat_model(no_cache, "openai:gpt-4o-mini").cache is None
    finally:
        chat_models_base._get_chat_model_creator.cache_clear()
