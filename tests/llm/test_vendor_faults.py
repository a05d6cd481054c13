"""Provider faults through the real langchain-openai client and a real OpenAI-compatible server on loopback
(tests/support/fake_openai.py): Retry-After is honoured (bounded), and each fault ends with the right error."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from langchain_core.messages import HumanMessage
from tests.support.fake_openai import Fault, Reply

from citewise.errors import ConfigError, ProviderError, ProviderTimeout, ProviderUnavailable, RateLimited
from citewise.llm.models import LLMClient
from citewise.settings import Settings


def client_for(fake, tmp_path, **generation) -> LLMClient:
    settings = Settings(
        home=tmp_path,
        llm="openai:gpt-fake",
        llm_base_url=fake.url,
        llm_api_key="sk-fake",
        generation={"cache": False, "llm_retry_wait_s": 0.0, "llm_retries": 2, **generation},
    )
    return LLMClient(settings)


def ask(client: LLMClient):
    return asyncio.run(client.ainvoke([HumanMessage(content="Hello?")]))


def gaps(fake) -> list[float]:
    times = [r.at for r in fake.requests]
    return [b - a for a, b in itertools.pairwise(times)]


def test_retry_after_is_honoured(fake_openai, tmp_path):
    fake_openai.script(Fault(status=429, headers={"Retry-After": "2"}), Reply(text="Hello."))
    reply = ask(client_for(fake_openai, tmp_path))
    assert reply.content == "Hello."
    assert len(fake_openai.requests) == 2
    assert gaps(fake_openai)[0] >= 1.9  # not the backoff's own (here: no) wait


def test_retry_after_in_milliseconds_is_honoured(fake_openai, tmp_path):
    fake_openai.script(Fault(status=503, headers={"retry-after-ms": "1200"}), Reply(text="Hello."))
    assert ask(client_for(fake_openai, tmp_path)).content == "Hello."
    assert gaps(fake_openai)[0] >= 1.1


def test_a_retry_after_beyond_the_bound_is_not_waited_for(fake_openai, tmp_path):
    """Waiting an hour inside a request helps no one: past generation.max_retry_after_s the call fails (and a
    fallback, if any, takes over) at once."""
    fake_openai.script(Fault(status=429, headers={"Retry-After": "3600"}))
    with pytest.raises(RateLimited):
        ask(client_for(fake_openai, tmp_path, max_retry_after_s=5))
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault(status=500), ProviderUnavailable),
        (Fault(status=429), RateLimited),
        (Fault(garbage=True), ProviderError),
        (Fault(truncate=True), ProviderUnavailable),
        (Fault(hang_s=3), ProviderTimeout),
    ],
    ids=["500", "429", "garbage-json", "truncated", "timeout"],
)
def test_faults_end_with_the_right_error(fake_openai, tmp_path, fault, error):
    fake_openai.script(fault, fault, fault)
    with pytest.raises(error):
        ask(client_for(fake_openai, tmp_path, chat_timeout_s=1.0, llm_retries=0))


def test_an_openai_fallback_without_a_key_is_a_config_error_at_start(fake_openai, tmp_path, monkeypatch):
    """The primary gets llm_api_key; a fallback reads OPENAI_API_KEY. Without it the SDK raised a raw OpenAIError
    deep inside the first question; now building the client says what to set."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = Settings(
        home=tmp_path,
        llm="openai:gpt-fake",
        llm_base_url=fake_openai.url,
        llm_api_key="sk-fake",
        llm_fallbacks=["openai:gpt-other"],
    )
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        LLMClient(settings)
