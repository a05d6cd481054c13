"""The state one agent run carries from node to node.

`messages` is the conversation (questions and final answers); with a checkpointer it survives from one run of a
session to the next (thread_id = session_id). Everything else belongs to one run and is reset by the run's input:
the model's working transcript (`scratch`: tool calls and their results), counters, sources and the answer.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import maybe_add_typed_methods
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import add_messages

from citewise.types import Answer, ExitReason, ScoredChunk


class AgentState(TypedDict, total=False):
    # -- conversation (kept across runs of a session) ------------------------------------------------------------
    messages: Annotated[list[AnyMessage], add_messages]

    # -- the request -------------------------------------------------------------------------------------------
    question: str
    owner: str | None
    selected_text: str | None
    style: str  # AnswerStyle value
    mode: str  # "extractive" (quote mode) or the answerer spec ("local", "provider:model")
    session_id: str | None
    include_trace: bool  # copy the trace into the Answer

    # -- per run, reset by every run's input -------------------------------------------------------------------
    scratch: list[AnyMessage]  # this run's model transcript: AI tool calls, tool results, reprompts
    turns: int  # model calls made by the llm node
    tool_calls: int  # unique tool calls (an identical repeat does not count)
    tool_log: dict[str, str]  # canonical call key → the result it gave (repeats are answered from here)
    searches: int  # unique searches, the mandatory first one included
    queries: list[str]  # every query searched, in order
    opened: list[str]  # chunk ids opened with open_citation, in order
    sources: list[ScoredChunk]  # every chunk retrieved or opened: the chunk numbered n is sources[n - 1]
    empty_retrieval: bool  # True while every search so far came back empty
    constraints: dict[str, Any]  # Constraints.model_dump() of the question
    plan: list[str]
    reprompts: int  # validator reprompts used
    protocol_retries: int  # reprompts after unparseable JSON-protocol output
    force_final: bool  # the next model call must answer without tools (budget spent)
    regenerated: bool  # the one re-invocation after an empty reply was used
    draft: str | None  # the answer text waiting for validation
    synthesized: bool  # the draft is the forced synthesis after failed validations
    search_results: dict[str, list[str]]  # query → chunk ids its search found, best first
    search_profiles: dict[str, dict[str, Any]]  # query → the search's RankingProfile (quote mode weighs against it)
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
    serde = getattr(saver, "serde", None)
    if isinstance(serde, JsonPlusSerializer) and getattr(serde, "_allowed_msgpack_modules", None) is True:
        clone = copy.copy(saver)
        clone.serde = maybe_add_typed_methods(
            JsonPlusSerializer(pickle_fallback=serde.pickle_fallback, allowed_msgpack_modules=SESSION_TYPES)
        )
        return clone
    return saver.with_allowlist(SESSION_TYPES)
