"""The messages a run's nodes write, without LangChain: `Record`, with the fields of LangChain's messages the nodes
read (`type`, `content`, `tool_calls`, `tool_call_id`, `name`), so a node reads either kind alike.

The in-process runner (quote mode's `ask`) keeps records as they are: nothing it holds reaches a model or a
checkpoint. On the LangGraph path the state's reducers turn them into LangChain's messages as they enter the state
(`as_langchain`; agent/state.py), which is what a model, a checkpoint and the streamed events get. Importing
`langchain_core.messages` takes longer than quote mode's whole answer (it loads `requests` and `pydantic.v1`), so
only a model's turn and the graph load it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage


class Message(Protocol):
    """A message of the conversation or of a run's transcript: a `Record` or a LangChain message."""

    @property
    def type(self) -> str: ...  # "human", "ai", "tool" (LangChain's message types)

    @property
    def content(self) -> str | list[Any]: ...


@dataclass(frozen=True, slots=True)
class Record:
    type: Literal["human", "ai", "tool"]
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()  # an AI message's calls: {"name", "args", "id", "type"}
    tool_call_id: str | None = None  # a tool message: the call it answers
    name: str | None = None  # a tool message: the tool


def human(text: str) -> Record:
    return Record("human", text)


def ai(text: str, tool_calls: Sequence[dict[str, Any]] = ()) -> Record:
    return Record("ai", text, tool_calls=tuple(tool_calls))


def tool_result(text: str, call: dict[str, Any]) -> Record:
    """The result of the tool call `call`."""
    return Record("tool", text, tool_call_id=call["id"], name=call["name"])


def as_langchain(message: Message) -> BaseMessage:
    """`message` as a LangChain message (a LangChain message as it is)."""
    if not isinstance(message, Record):
        return message  # type: ignore[return-value]
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    if message.type == "ai":
        return AIMessage(content=message.content, tool_calls=list(message.tool_calls))
    if message.type == "tool":
        return ToolMessage(content=message.content, tool_call_id=message.tool_call_id, name=message.name)
    return HumanMessage(content=message.content)


def message_text(message: Message) -> str:
    """The text of a message, whether its content is a string or a list of content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def tool_calls(message: Message) -> list[dict[str, Any]]:
    """The tool calls `message` makes (none unless it is an AI message that makes some)."""
    return list(getattr(message, "tool_calls", None) or [])
