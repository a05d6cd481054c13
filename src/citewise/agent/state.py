"""The state one agent run carries from node to node.

`messages` is the conversation (questions and final answers); with a checkpointer it survives from one run of a
session to the next (thread_id = session_id). Everything else belongs to one run and is reset by the run's input:
the model's working transcript (`scratch`: tool calls and their results), counters, sources and the answer.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
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
