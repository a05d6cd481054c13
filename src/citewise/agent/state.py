"""The state one agent run carries from node to node.

`messages` is the conversation (questions and final answers); with a checkpointer it survives from one run of a
session to the next (thread_id = session_id). `request` (the whole `RunRequest`) and `answerer` are given by each
run's input. Everything else belongs to one run and starts from `fresh_run()`: the model's working transcript
(`scratch`: tool calls and their results), counters, sources and the answer.

Nodes write messages as light records (agent/messages.py): the in-process runner keeps them as they are, and on the
LangGraph path the reducers of `messages` and `scratch` make LangChain messages of them.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

from citewise.agent.messages import Message, as_langchain
from citewise.types import Answer, ExitReason, RunRequest, ScoredChunk

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver


def add_messages(left: list[Message], right: list[Message]) -> list[Message]:
    """LangGraph's message reducer (merge by id), loaded on first use: only the LangGraph path of a run calls it,
    and `langgraph.graph` is a second of imports quote mode never needs."""
    from langgraph.graph.message import add_messages as merge

    return merge(left, [as_langchain(m) for m in right])


def transcript(left: list[Message], right: list[Message]) -> list[Message]:
    """The scratch transcript's reducer (LangGraph's path only): a node writes the whole transcript, which replaces
    the old one as a plain key's value would, in LangChain messages."""
    return [as_langchain(m) for m in right]


class AgentState(TypedDict, total=False):
    # -- conversation (kept across runs of a session) ------------------------------------------------------------
    messages: Annotated[list[Message], add_messages]

    # -- given by each run's input -----------------------------------------------------------------------------
    request: RunRequest  # the question and everything that decides how it is answered, validated
    answerer: str  # "extractive" (quote mode) or the model spec that answers ("local", "provider:model")

    # -- per run, reset by every run's input (fresh_run) ---------------------------------------------------------
    scratch: Annotated[list[Message], transcript]  # this run's model transcript: AI tool calls, tool results, reprompts
    turns: int  # model calls made by the llm node
    tool_calls: int  # unique tool calls (an identical repeat does not count)
    tool_log: dict[str, str]  # canonical call key → the result it gave (repeats are answered from here)
    searches: int  # unique searches, the mandatory first one included
    queries: list[str]  # every query searched, in order
    opened: list[str]  # chunk ids opened with open_citation, in order
    sources: list[ScoredChunk]  # every chunk retrieved or opened: the chunk numbered n is sources[n - 1]
    empty_retrieval: bool  # True while every search so far came back empty
    standalone: str | None  # a follow-up made whole with the conversation (agent/followup.py); None: as asked
    constraints: dict[str, Any]  # Constraints.model_dump() of the question
    plan: list[str]
    reprompts: int  # validator reprompts used
    protocol_retries: int  # reprompts after unparseable JSON-protocol output
    force_final: bool  # the next model call must answer without tools (budget spent)
    regenerated: bool  # the one re-invocation after an empty reply was used
    draft: str | None  # the answer text waiting for validation
    synthesized: bool  # the draft is the forced synthesis after failed validations
    found: list[list[str]]  # each search's chunk ids, best first, in the order of `queries` (failed ones: none)
    quotes: list[list[int]]  # quote mode: what the answer quotes, [citation number, start, end] (grounding's spans)
    corrections: dict[str, str]  # misspelled question word → the index word searched instead
    quote_refusal: str | None  # quote mode: stable code of why it refused
    refusal_detail: str | None  # quote mode: why it refused, in plain words
    insufficiencies: list[str]
    model_calls: int  # model replies received (planner included)
    cached_calls: int  # of which served from the reply cache
    model_used: str | None  # the model spec that wrote the last reply (a fallback, when the primary failed)
    exit_reason: ExitReason | None
    trace: list[dict[str, Any]]  # TraceEvent.model_dump() of every step, in order
    answer: Answer | None


KEPT = frozenset({"messages"})  # survives from one run of a session to the next
GIVEN = frozenset({"request", "answerer"})  # set by each run's input
_STARTS_TRUE = frozenset({"empty_retrieval"})  # true until a search finds something


def _start_value(name: str, annotation: str) -> Any:
    annotation = annotation.removeprefix("Annotated[")  # a reducer's key starts as its type does
    if name in _STARTS_TRUE:
        return True
    if annotation.endswith("| None"):
        return None
    kind = annotation.split("[", 1)[0].strip()
    starts = {"list": list, "dict": dict, "int": int, "bool": bool, "str": str}
    if kind not in starts:  # pragma: no cover - a new field of a new type must say how it starts
        raise TypeError(f"AgentState.{name}: no starting value for {annotation!r}")
    return starts[kind]()


def fresh_run() -> dict[str, Any]:
    """Every per-run field of `AgentState` at its starting value: what each run's input resets, so a checkpointed
    session resumes its conversation and nothing else. Derived from the annotations: a new field can't be left
    out of the reset."""
    return {
        name: _start_value(name, getattr(annotation, "__forward_arg__", str(annotation)))
        for name, annotation in AgentState.__annotations__.items()
        if name not in KEPT | GIVEN
    }


def _session_types() -> tuple[tuple[str, str], ...]:
    """Every model and enum of citewise.types, as (module, name): what a checkpoint of this state may hold."""
    import inspect
    from enum import Enum

    from pydantic import BaseModel

    from citewise import types

    return tuple(
        sorted(
            (cls.__module__, cls.__name__)
            for _, cls in inspect.getmembers(types, inspect.isclass)
            if cls.__module__ == types.__name__ and issubclass(cls, BaseModel | Enum)
        )
    )


SESSION_TYPES = _session_types()


def with_session_types(saver: BaseCheckpointSaver) -> BaseCheckpointSaver:
    """The checkpointer with Citewise's types on LangGraph's msgpack allow-list, so resuming a session loads them
    as registered types: no "Deserializing unregistered type" warning today, and still loadable when LangGraph
    blocks unregistered types. A saver on LangGraph's permissive default (every type, with a warning) gets a
    serializer with an explicit allow-list instead (its graph adds the state schema's types when it compiles);
    one that already has an allow-list gets ours added; any other serializer is left as it is."""
    from langgraph.checkpoint.serde.base import maybe_add_typed_methods
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = getattr(saver, "serde", None)
    if isinstance(serde, JsonPlusSerializer) and getattr(serde, "_allowed_msgpack_modules", None) is True:
        clone = copy.copy(saver)
        clone.serde = maybe_add_typed_methods(
            JsonPlusSerializer(pickle_fallback=serde.pickle_fallback, allowed_msgpack_modules=SESSION_TYPES)
        )
        return clone
    return saver.with_allowlist(SESSION_TYPES)


STATE_KEYS = frozenset(AgentState.__annotations__)  # every key a node may write (LangGraph refuses others too)
