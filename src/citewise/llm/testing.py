"""`ScriptedChatModel`: the one fake in Citewise's tests — a chat model that replies from a script.

It is a real `BaseChatModel`, so everything around it is exercised for real: LangGraph's `astream_events` sees its
tokens as `on_chat_model_stream` events, tool calls arrive on the `AIMessage` the agent reads, and a `cache=` given
to it is honoured (a hit consumes no script item and streams no tokens).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

ScriptItem = AIMessage | str | BaseException

# A word and the whitespace after it: small enough that a streamed reply arrives as several events.
_WORD = re.compile(r"\s*\S+\s*|\s+")


class ScriptedChatModel(BaseChatModel):
    """Replies with `responses` in order, one per call (invoke/ainvoke/stream/astream alike).

    A str becomes `AIMessage(content=str)`; an `AIMessage` is returned as given (it may carry `tool_calls`); an
    exception is raised. Every call's messages are recorded in `calls`; the tools of the last `bind_tools` in
    `bound_tools`. Running out of responses fails the test with an AssertionError that says so.
    """

    responses: list[Any] = Field(default_factory=list)
    supports_tools: bool = True
    model_name: str = "scripted"
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[Any] | None = None

    _cursor: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, responses: Sequence[ScriptItem] | None = None, **kwargs: Any) -> None:
        super().__init__(responses=list(responses or []), **kwargs)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        # Only the name: the script itself must not leak into the cache key (it is the "vendor", not a parameter).
        return {"model_name": self.model_name}

    @property
    def remaining(self) -> int:
        """Script items not yet consumed."""
        return len(self.responses) - self._cursor

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self.calls.append(list(messages))
            if self._cursor >= len(self.responses):
                raise AssertionError(
                    f"ScriptedChatModel ran out of responses: call #{len(self.calls)} but only "
                    f"{len(self.responses)} scripted. Last message: {messages[-1].content!r}"
                    if messages
                    else f"ScriptedChatModel ran out of responses after {len(self.responses)} calls."
                )
            item = self.responses[self._cursor]
            self._cursor += 1
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            return AIMessage(content=item)
        if isinstance(item, AIMessage):
            # A copy: LangChain stamps ids/metadata on the returned message, and the script must stay as written.
            return item.model_copy(deep=True)
        raise TypeError(f"ScriptedChatModel cannot reply with {type(item).__name__}")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop=stop, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from _chunks(self._next(messages))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in _chunks(self._next(messages)):
            yield chunk

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Record the tools and bind their schemas like a vendor model would.

        The binding wraps this same instance, so it consumes the same script, and `calls`/`bound_tools`/`remaining`
        read through it. The schemas travel as call kwargs, which puts them in the cache key.
        """
        self.bound_tools = list(tools)
        bound: dict[str, Any] = {"tools": [convert_to_openai_tool(t) for t in tools], **kwargs}
        if tool_choice is not None:
            bound["tool_choice"] = tool_choice
        return self.bind(**bound)


def _chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """The message as word-sized chunks; tool calls ride on the last chunk as tool_call_chunks."""
    content = message.content if isinstance(message.content, str) else ""
    pieces = _WORD.findall(content) or [""]
    if not isinstance(message.content, str):
        # Content blocks are not split; they stream as one chunk.
        pieces = [message.content]  # type: ignore[list-item]
    tool_call_chunks = [
        {"name": tc["name"], "args": json.dumps(tc["args"]), "id": tc.get("id"), "index": i, "type": "tool_call_chunk"}
        for i, tc in enumerate(message.tool_calls)
    ]
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=piece,
                id=message.id,
                tool_call_chunks=tool_call_chunks if last else [],
                response_metadata=message.response_metadata if last else {},
                usage_metadata=message.usage_metadata if last else None,
                chunk_position="last" if last else None,
            )
        )
