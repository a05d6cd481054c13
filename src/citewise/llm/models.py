"""Chat models from "provider:model" specs, and the client the agent calls them through.

Owns: turning a spec into a LangChain chat model (`create_chat_model`: vendors via `init_chat_model`, "local" via
local.py) and `LLMClient`, which maps vendor exceptions onto Citewise's error tree (`classify_provider_error`, in
errors.py: embeddings use the same) and wraps every call in the library's retry (exponential backoff + jitter) and
fallback runnables:

    primary ──retry×N──▶ fallback 1 ──retry×N──▶ fallback 2 … (only on RateLimited / ProviderUnavailable /
                                                                  ProviderTimeout; other errors end the call)

Which model answered is recorded in `LLMClient.last_model` and in the reply's `response_metadata["model_spec"]`.

Vendor HTTP and event loops: an httpx connection pool belongs to the event loop that first used it (its locks and
kept-alive connections are bound to it), and langchain-openai shares one async client per base URL across the whole
process. A process that asks on more than one loop — the sync API's (agent/sync.py), a server's, a second server's,
`asyncio.run` each time — failed its first model call on any other loop ("… is bound to a different event loop",
"Event loop is closed"). So every chat model whose integration takes an `http_async_client` gets `LoopLocalClient`:
one client object for the SDK, which sends each request through the running loop's own pool (kept-alive connections
reused within that loop; a closed loop's pool is let go).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.retry import RunnableRetry
from tenacity import RetryCallState, wait_none

from citewise.errors import (
    CitewiseError,
    ConfigError,
    MissingExtraError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    classify_provider_error,
)
from citewise.settings import QUOTE_ANSWERER

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from citewise.settings import Settings

log = logging.getLogger(__name__)

# provider → (pip extra, integration package). Only these are promised; init_chat_model knows more.
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("openai", "langchain-openai"),
    "google_genai": ("google", "langchain-google-genai"),
    "groq": ("groq", "langchain-groq"),
    "anthropic": ("anthropic", "langchain-anthropic"),
    "ollama": ("ollama", "langchain-ollama"),
}
_ALIASES = {"google": "google_genai", "gemini": "google_genai"}
# Where each vendor's SDK looks for its key when none is given (fallbacks never get settings.llm_api_key).
KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "groq": "GROQ_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}

# provider → (integration module, chat model class, the SDK whose `DefaultAsyncHttpxClient` it takes), for the
# integrations that may take an `http_async_client` (used only where the class has that field: see LoopLocalClient).
ASYNC_HTTP_CLIENTS: dict[str, tuple[str, str, str]] = {
    "openai": ("langchain_openai", "ChatOpenAI", "openai"),
    "groq": ("langchain_groq", "ChatGroq", "groq"),
    "anthropic": ("langchain_anthropic", "ChatAnthropic", "anthropic"),
}

# The errors worth trying the next model for (the vendor is busy or down, not our request being wrong).
FALLBACK_ERRORS: tuple[type[ProviderError], ...] = (RateLimited, ProviderUnavailable, ProviderTimeout)

_MAX_BACKOFF_S = 30.0


def parse_spec(spec: str) -> tuple[str, str]:
    """ "openai:gpt-4o-mini" → ("openai", "gpt-4o-mini"); provider aliases ("google") are resolved."""
    provider, sep, model = spec.strip().partition(":")
    if not sep or not provider.strip() or not model.strip():
        raise ConfigError(
            f'Unknown answerer {spec!r}: expected "local" or "provider:model", e.g. "openai:gpt-4o-mini".'
        )
    provider = provider.strip().lower()
    return _ALIASES.get(provider, provider), model.strip()


def create_chat_model(settings: Settings, spec: str) -> BaseChatModel:
    """Build the chat model a spec names, with Citewise's generation settings and (if enabled) the reply cache.

    "local" is the bundled SmolLM2 (or generation.local_model_path); "provider:model" goes through LangChain's
    `init_chat_model`. A missing vendor integration raises `MissingExtraError` naming the extra to install.
    The settings' `llm_api_key` is given only to the primary (settings.llm); fallbacks read the vendor's variable.
    """
    spec = spec.strip()
    if spec == QUOTE_ANSWERER:
        raise ConfigError('"extractive" is quote mode, which uses no chat model; pick "local" or "provider:model".')
    cache = _cache_for(settings, spec)
    if spec == "local":
        from citewise.llm.local import LocalChatModel

        return LocalChatModel.from_settings(settings, cache=cache)

    provider, model = parse_spec(spec)
    kwargs = _vendor_kwargs(settings, provider, is_primary=spec == settings.llm)
    kwargs |= _http_kwargs(settings, provider, kwargs)
    from langchain.chat_models import init_chat_model

    try:
        chat_model = init_chat_model(model, model_provider=provider, **kwargs)
    except ImportError as exc:
        if provider in PROVIDERS:
            extra, package = PROVIDERS[provider]
            raise MissingExtraError(f"The {provider!r} answerer ({spec})", extra, package) from exc
        raise ConfigError(f"The {provider!r} answerer ({spec}) needs its LangChain integration: {exc}") from exc
    except ValueError as exc:  # unsupported provider name
        supported = ", ".join(PROVIDERS)
        raise ConfigError(f"Unknown LLM provider in {spec!r}. Supported: {supported}.") from exc
    except Exception as exc:
        # The SDK refused to build its client — in practice a missing key (openai raises a bare OpenAIError from
        # deep inside). Say which setting or variable to set, not the SDK's traceback.
        variable = KEY_VARIABLES.get(provider)
        where = "CITEWISE_LLM_API_KEY" if spec == settings.llm else None
        hint = " or ".join(v for v in (where, variable) if v) or "the provider's credentials"
        raise ConfigError(
            f"The {provider!r} answerer ({spec}) cannot be created: {type(exc).__name__}: {str(exc)[:300]} Set {hint}."
        ) from exc
    if cache is not None:
        chat_model.cache = cache
    return chat_model


def _cache_for(settings: Settings, spec: str) -> Any:
    if not settings.generation.cache:
        return None
    if settings.uses_postgres:
        from citewise.llm.cache import PostgresLLMCache
        from citewise.state.database import database

        return PostgresLLMCache(database(settings), namespace=spec)
    from citewise.llm.cache import SQLiteLLMCache

    return SQLiteLLMCache(settings.llm_cache_path, namespace=spec)


def _vendor_kwargs(settings: Settings, provider: str, *, is_primary: bool) -> dict[str, Any]:
    """Constructor arguments per vendor: each integration names temperature/seed/timeout/max tokens its own way."""
    gen = settings.generation
    # Retries are ours (counted, logged, then handed to the fallback chain), so the vendor client must not add its own.
    kwargs: dict[str, Any] = {"temperature": gen.temperature}
    api_key = settings.llm_api_key.get_secret_value() if (is_primary and settings.llm_api_key) else None
    if provider == "ollama":
        kwargs |= {"seed": gen.seed, "num_predict": gen.max_tokens, "client_kwargs": {"timeout": gen.chat_timeout_s}}
        if settings.llm_base_url:
            kwargs["base_url"] = settings.llm_base_url
        return kwargs
    kwargs |= {"timeout": gen.chat_timeout_s, "max_tokens": gen.max_tokens, "max_retries": 0}
    if api_key:
        kwargs["api_key"] = api_key
    if provider == "openai":
        kwargs["seed"] = gen.seed
        if settings.llm_base_url:
            kwargs["base_url"] = settings.llm_base_url
    elif provider == "google_genai":
        kwargs["seed"] = gen.seed
        # The Google SDK reads max_retries=0 as "use the default (5)"; 1 means the single request only.
        kwargs["max_retries"] = 1
    elif provider == "groq":
        # ChatGroq has no seed field, but Groq's API takes one; model_kwargs go into the request body.
        kwargs["model_kwargs"] = {"seed": gen.seed}
    return kwargs


def _http_kwargs(settings: Settings, provider: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The async HTTP client for integrations that take one: the loop-local client (see the module docstring)."""
    client = loop_local_client(provider, settings.generation.chat_timeout_s)
    if client is None:
        return {}
    extra: dict[str, Any] = {"http_async_client": client}
    if provider == "openai" and "base_url" not in kwargs and not _env_base_url():
        # langchain-openai asks OpenAI itself for token usage in streams only when it gets no client: keep asking.
        extra["stream_usage"] = True
    return extra


def _env_base_url() -> bool:
    return any(os.environ.get(name) for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"))


def loop_local_client(provider: str, timeout: float) -> Any | None:
    """The process's `LoopLocalClient` for `provider`'s SDK (one per SDK and timeout, as the vendors cache theirs), or
    None where the integration is not installed or takes no `http_async_client` (it then keeps its own client)."""
    names = ASYNC_HTTP_CLIENTS.get(provider)
    if names is None:
        return None
    module, class_name, sdk = names
    try:
        chat_class = getattr(importlib.import_module(module), class_name)
        base = importlib.import_module(sdk).DefaultAsyncHttpxClient
    except (ImportError, AttributeError):
        return None  # init_chat_model says what is missing
    fields = getattr(chat_class, "model_fields", None) or {}
    if "http_async_client" not in fields or not isinstance(base, type):
        return None
    return _shared_loop_local_client(base, timeout)


@functools.cache
def _shared_loop_local_client(base: type, timeout: float) -> Any:
    return _loop_local_class(base)(timeout=timeout)


@functools.cache
def _loop_local_class(base: type) -> type:
    """`LoopLocalClient` on the vendor SDK's own client class (openai>=3 is on httpx2, the others on httpx)."""
    return type(f"LoopLocal{base.__name__.lstrip('_')}", (LoopLocalClient, base), {"per_loop_class": base})


class LoopLocalClient:
    """An SDK's async HTTP client (mixed into its `DefaultAsyncHttpxClient`) that sends each request through a client
    of the running event loop's own (`per_loop_class`, built with the same arguments): the SDK builds its requests on
    this one object, while the connections, kept alive between calls, never cross loops.

    The clients of loops that have been closed are dropped when a new loop first sends (not closed: their loop can't
    run the clean-up any more; their sockets go with them). A loop is a plain key, not a weak one: a pool's
    connections hold on to their loop, so a weak key would never be released.
    """

    per_loop_class: type

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client_kwargs = kwargs
        self._by_loop: dict[asyncio.AbstractEventLoop, Any] = {}
        self._by_loop_lock = threading.Lock()

    @property
    def clients(self) -> dict[asyncio.AbstractEventLoop, Any]:
        """The client of each loop (a copy)."""
        with self._by_loop_lock:
            return dict(self._by_loop)

    def client_for(self, loop: asyncio.AbstractEventLoop) -> Any:
        """`loop`'s client, made on its first request."""
        with self._by_loop_lock:
            client = self._by_loop.get(loop)
            if client is None:
                for gone in [other for other in self._by_loop if other.is_closed()]:
                    del self._by_loop[gone]
                client = self._by_loop[loop] = self.per_loop_class(**self._client_kwargs)
            return client

    async def send(self, request: Any, **kwargs: Any) -> Any:
        if self.is_closed:  # type: ignore[attr-defined]
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): this object's own pool
            return await super().send(request, **kwargs)  # type: ignore[misc]
        return await self.client_for(loop).send(request, **kwargs)

    async def aclose(self) -> None:
        """Close the running loop's client and this one (the clients of other loops can only be closed on theirs)."""
        with self._by_loop_lock:
            client = self._by_loop.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
        await super().aclose()  # type: ignore[misc]


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


def supports_native_tools(model: BaseChatModel) -> bool:
    """Whether the model takes tools natively (else the agent drives it with the JSON action protocol).

    An explicit `supports_tools` attribute wins (LocalChatModel, ScriptedChatModel); then the model's LangChain
    profile when it says; vendor chat models otherwise do.
    """
    explicit = getattr(model, "supports_tools", None)
    if isinstance(explicit, bool):
        return explicit
    profile = getattr(model, "profile", None) or {}
    if isinstance(profile, dict) and isinstance(profile.get("tool_calling"), bool):
        return profile["tool_calling"]
    return type(model).bind_tools is not BaseChatModel.bind_tools


class LLMClient:
    """The one way the agent talks to a chat model: tools bound, errors typed, retried, then handed to fallbacks.

    Models built from settings (settings.llm, settings.llm_fallbacks) use the SQLite reply cache when
    generation.cache is on; injected models (`chat_model=`, `fallbacks=`) are used exactly as given.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        chat_model: BaseChatModel | None = None,
        fallbacks: list[BaseChatModel] | None = None,
    ) -> None:
        self.settings = settings
        if chat_model is not None:
            primary = (_spec_of(chat_model), chat_model)
        else:
            primary = (settings.llm, create_chat_model(settings, settings.llm))
        if fallbacks is not None:
            others = [(_spec_of(m), m) for m in fallbacks]
        else:
            others = [(spec, create_chat_model(settings, spec)) for spec in settings.llm_fallbacks]
        self.models: list[tuple[str, BaseChatModel]] = [primary, *others]
        self.last_model: str | None = None
        self.attempts = 0  # every model call made, retries included (observability and tests)

    @property
    def name(self) -> str:
        """The primary's spec."""
        return self.models[0][0]

    @property
    def native_tools(self) -> bool:
        """True when every model in the chain takes tools natively. One model without them puts the whole chain on
        the JSON action protocol, so a fallback mid-conversation sees the same kind of history."""
        return all(supports_native_tools(model) for _, model in self.models)

    def _attempt(self, spec: str, model: Runnable, timeout: float, outcome: _Outcome) -> Runnable:
        async def call(messages: list[BaseMessage], config: RunnableConfig) -> AIMessage:
            self.attempts += 1
            warm_up = getattr(model, "warm_up", None)
            if callable(warm_up):
                # Loading a local model can take longer than a reply; it must not count against the timeout.
                await asyncio.to_thread(warm_up)
            limit = max(timeout, getattr(model, "min_timeout_s", 0.0))
            try:
                reply = await asyncio.wait_for(model.ainvoke(messages, config=config), limit)
            except (CitewiseError, AssertionError):
                # Our own errors (a missing extra) and test-script exhaustion are not vendor trouble.
                raise
            except Exception as exc:
                if isinstance(exc, TimeoutError) and not str(exc):
                    error: ProviderError = ProviderTimeout(f"{spec} did not answer within {limit:g}s.")
                else:
                    error = classify_provider_error(exc)
                outcome.last_error = error
                log.warning("LLM call to %s failed (%s): %s", spec, type(error).__name__, error)
                raise error from exc
            outcome.model = spec
            reply.response_metadata = {**reply.response_metadata, "model_spec": spec}
            return reply

        gen = self.settings.generation
        wait = gen.llm_retry_wait_s
        return _ProviderRetry(
            bound=RunnableLambda(call, name=f"llm:{spec}"),
            retry_exception_types=_retryable,
            wait_exponential_jitter=wait > 0,
            exponential_jitter_params={"initial": wait, "max": _MAX_BACKOFF_S, "jitter": wait},
            max_attempt_number=gen.llm_retries + 1,
            max_retry_after_s=gen.max_retry_after_s,
        )

    def runnable(
        self, *, tools: Sequence[BaseTool] | None = None, timeout: float | None = None, outcome: _Outcome | None = None
    ) -> Runnable:
        """The retry + fallback chain as a LangChain runnable (input: a list of messages; output: an AIMessage)."""
        timeout = timeout or self.settings.generation.chat_timeout_s
        outcome = outcome or _Outcome()
        native = self.native_tools
        attempts = [
            self._attempt(spec, model.bind_tools(list(tools)) if tools and native else model, timeout, outcome)
            for spec, model in self.models
        ]
        if len(attempts) == 1:
            return attempts[0]
        return attempts[0].with_fallbacks(attempts[1:], exceptions_to_handle=FALLBACK_ERRORS)

    async def ainvoke(
        self,
        messages: list[BaseMessage],
        *,
        tools: list[BaseTool] | None = None,
        timeout: float | None = None,
        config: RunnableConfig | None = None,
    ) -> AIMessage:
        """One model reply. Pass the graph node's `config` so LangGraph streams the tokens (`on_chat_model_stream`).

        Tools are bound only when `native_tools`; otherwise the caller puts the JSON action protocol in the prompt.
        Raises RateLimited if the last model tried was rate limited, else ProviderError (retryable or not).
        """
        outcome = _Outcome()
        chain = self.runnable(tools=tools, timeout=timeout, outcome=outcome)
        try:
            reply = await chain.ainvoke(messages, config=config)
        except ProviderError as first:
            # with_fallbacks re-raises the *first* model's error; callers need to know how the chain ended.
            self.last_model = None
            last = outcome.last_error or first
            if last is first:
                raise
            raise last from first
        self.last_model = outcome.model
        if outcome.model != self.name:
            log.info("LLM fallback: %s answered instead of %s", outcome.model, self.name)
        return reply


class _ProviderRetry(RunnableRetry):
    """The library's retry (LangChain's RunnableRetry on tenacity), with the vendor's Retry-After honoured: the wait
    before a retry is the longer of the backoff and what the vendor asked for. A Retry-After beyond
    `max_retry_after_s` is not waited for: the error goes on to the fallbacks (or the caller) at once."""

    max_retry_after_s: float = 30.0

    @property
    def _kwargs_retrying(self) -> dict[str, Any]:
        kwargs = super()._kwargs_retrying
        backoff = kwargs.get("wait") or wait_none()
        bound = self.max_retry_after_s

        def wait(state: RetryCallState) -> float:
            asked = _asked_wait(state)
            return max(backoff(state), asked or 0.0)

        def retry(state: RetryCallState) -> bool:
            exc = state.outcome.exception() if state.outcome else None
            asked = getattr(exc, "retry_after_s", None)
            return isinstance(exc, BaseException) and _retryable(exc) and (asked is None or asked <= bound)

        return {**kwargs, "wait": wait, "retry": retry}


def _asked_wait(state: RetryCallState) -> float | None:
    exc = state.outcome.exception() if state.outcome else None
    return getattr(exc, "retry_after_s", None)


@dataclass
class _Outcome:
    """What one `ainvoke` learned: which model answered, or the last error seen (per call, so concurrent calls on a
    shared client don't mix them up)."""

    model: str | None = None
    last_error: ProviderError | None = None


def _spec_of(model: BaseChatModel) -> str:
    """A readable spec for an injected model: its `spec` attribute, else "<llm type>:<model name>"."""
    spec = getattr(model, "spec", None)
    if isinstance(spec, str) and spec:
        return spec
    name = getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__
    return f"{model._llm_type}:{name}"
