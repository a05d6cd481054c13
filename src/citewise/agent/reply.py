"""The one adapter between what a model returned and what the agent does next.

A model with native tool calling replies with tool calls or text; a model on the JSON action protocol
(`citewise.llm.protocol`) replies with a JSON action or, when it goes astray, with prose. `read_reply` turns any of
them into one typed `Reply`:

    ToolCalls    run these lookups (the message goes into the run's transcript as it is)
    Draft        the answer to validate, with what the model said the docs don't cover
    Invalid      an invalid tool call: the run ends INVALID_TOOL_CALL
    Unparseable  protocol text that is no action: asked again once, then INVALID_TOOL_CALL
    Empty        nothing usable: asked again once, then LLM_GENERATION_FAILURE

so the llm node only decides what each means for the run. `ReplyStream` is the same knowledge for streamed tokens:
which tokens of a reply are answer text a client may show (prose), and which are not (a JSON action, whose answer
arrives with the final Answer), so the server needs to know nothing of the protocol. The helpers below shape the
transcript a model is shown (trimmed to the context budget, earlier answers without their [n], tool calls as
protocol JSON for a model without native tools). They run in a model's turn only, so LangChain's message classes
are imported inside them: quote mode never loads LangChain.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from citewise.agent.messages import Message, message_text
from citewise.llm.protocol import FinalAction, ToolAction, parse_action

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage


@dataclass(frozen=True)
class ToolCalls:
    calls: list[dict[str, Any]]  # {"name", "args", "id", "type": "tool_call"}
    message: AIMessage  # what the transcript keeps of the reply
    protocol: bool = False  # written as a JSON action (not native tool calling)


@dataclass(frozen=True)
class Draft:
    text: str
    insufficiencies: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Invalid:
    error: str | None
    tool: str | None = None
    output: str | None = None  # the protocol text that could not be read


@dataclass(frozen=True)
class Unparseable:
    output: str


@dataclass(frozen=True)
class Empty:
    pass


Reply = ToolCalls | Draft | Invalid | Unparseable | Empty


def read_reply(reply: AIMessage, *, native: bool, force_final: bool, turn: int) -> Reply:
    """What `reply` asks for. With `force_final` (the lookup budget is spent) a tool call is no longer honoured: a
    native model's text is its answer, a protocol model's prose is taken as is, and a tool call carries no answer."""
    from langchain_core.messages import AIMessage

    text = message_text(reply).strip()
    if native:
        calls, invalid = list(reply.tool_calls), list(getattr(reply, "invalid_tool_calls", None) or [])
        if invalid and not force_final:
            return Invalid(tool=invalid[0].get("name"), error=invalid[0].get("error"))
        if calls and not force_final:
            calls = [{**c, "id": c.get("id") or f"call_{turn}_{i}"} for i, c in enumerate(calls)]
            return ToolCalls(calls, AIMessage(content=reply.content, tool_calls=calls, id=reply.id))
        return Draft(text) if text else Empty()
    action = parse_action(text) if text else None
    if isinstance(action, ToolAction) and not force_final:
        call = {"name": action.tool, "args": action.input, "id": f"call_{turn}_0", "type": "tool_call"}
        return ToolCalls([call], AIMessage(content=text, tool_calls=[call]), protocol=True)
    if isinstance(action, FinalAction):
        answer = (action.answer or "").strip()
        insufficiencies = [str(i) for i in (action.insufficiencies or []) if str(i).strip()]
        return Draft(answer, insufficiencies) if answer else Empty()
    if text and not force_final:
        return Unparseable(text)
    # A forced final answer: prose is taken as is; a tool call after the budget is spent has no answer in it.
    text = "" if action is not None else text
    return Draft(text) if text else Empty()


class ReplyStream:
    """Which streamed tokens of the answering model's replies are answer text. A reply that starts with a JSON
    action (`{` or a ```json fence) is held back whole; prose is passed through as it arrives. One instance per
    run; replies are told apart by their run id."""

    def __init__(self) -> None:
        self._held: dict[str, list[str]] = {}  # run id → leading text not yet classified
        self._verdict: dict[str, bool] = {}  # run id → its tokens are answer text

    def feed(self, run_id: str, text: str) -> list[str]:
        """The tokens to show now for `text` arriving in reply `run_id` (possibly held text released with it)."""
        verdict = self._verdict.get(run_id)
        if verdict is None:
            held = self._held.setdefault(run_id, [])
            held.append(text)
            lead = "".join(held).lstrip()
            if len(lead) < 7 and not (lead and lead[0] not in "{`"):
                return []  # not enough yet to tell prose from a JSON action
            verdict = self._verdict[run_id] = not (lead.startswith("{") or lead.startswith("```json"))
            return self._held.pop(run_id) if verdict else []
        return [text] if verdict else []

    def flush(self, run_id: str) -> list[str]:
        """The reply ended: short held text that is not a JSON action is answer text after all."""
        held = self._held.pop(run_id, [])
        lead = "".join(held).lstrip()
        if not held or lead.startswith("{") or lead.startswith("```"):
            return []
        return held


# -- the transcript a model is shown ----------------------------------------------------------------------------

_MARKER_RE = re.compile(r"\[\d{1,4}\]")


def _chars(message: Message) -> int:
    size = len(message_text(message))
    for call in getattr(message, "tool_calls", None) or []:
        size += len(call["name"]) + len(json.dumps(call["args"], ensure_ascii=False))
    return size


def trim_newest_first(messages: list[Message], max_chars: int) -> tuple[list[Message], int]:
    """The newest messages that fit in `max_chars`, in order, and how many older ones were dropped."""
    kept: list[Message] = []
    total = 0
    for message in reversed(messages):
        size = _chars(message)
        if total + size > max_chars:
            break
        kept.append(message)
        total += size
    kept.reverse()
    return kept, len(messages) - len(kept)


def without_markers(message: Message) -> Message:
    """Earlier answers of a session cite sources of earlier runs: their [n] would mean other passages now."""
    from langchain_core.messages import AIMessage

    if isinstance(message, AIMessage) and isinstance(message.content, str) and _MARKER_RE.search(message.content):
        return AIMessage(content=_MARKER_RE.sub("", message.content), id=message.id)
    return message


def as_protocol(scratch: list[Message]) -> list[Message]:
    """The working transcript as a model without native tools sees it: its own JSON actions and plain-text tool
    results, never tool-call structures its chat template may not know."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Message] = []
    for message in scratch:
        if isinstance(message, AIMessage) and message.tool_calls:
            for call in message.tool_calls:
                action = {"type": "tool_call", "tool": call["name"], "input": call["args"]}
                out.append(AIMessage(content=json.dumps(action, ensure_ascii=False)))
        elif isinstance(message, ToolMessage):
            out.append(HumanMessage(content=f"TOOL RESULT ({message.name or 'tool'}):\n{message_text(message)}"))
        else:
            out.append(message)
    return out
