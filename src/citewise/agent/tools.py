"""The agent's two tools, `search_docs` and `open_citation`, and the ledger that numbers every chunk they return.

The tools are LangChain tools with pydantic argument schemas, so a model with native tool calling gets their JSON
schema, a model on the JSON action protocol gets the same description, and invalid arguments are caught by one
schema check (→ INVALID_TOOL_CALL) before anything runs.

Retrieval failures are typed (`RetrievalFailure`: connection_error, service_unavailable, invalid_query,
empty_results); each is recorded in the trace with the action taken. Lookups go through the retriever, which applies
the owner rule inside the store's query: a chunk of another owner is "not found" — its text never reaches the
model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from citewise.agent.messages import Message, tool_result
from citewise.errors import ConfigError, ProviderError, RetrievalError, ValidationError
from citewise.index.retriever import Retriever
from citewise.types import (
    MAX_SELECTED_TEXT_CHARS,
    PUBLIC,
    Owner,
    RetrievalFailure,
    ScoredChunk,
    SearchResult,
    TraceKind,
    trace_event,
)

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

log = logging.getLogger(__name__)

SEARCH_DOCS = "search_docs"
OPEN_CITATION = "open_citation"
TOOL_NAMES = (SEARCH_DOCS, OPEN_CITATION)

EMPTY_RESULT = "DOCUMENTATION_SEARCH_RESULT: EMPTY"
NOT_FOUND = "OPEN_CITATION_RESULT: NOT FOUND"
SEARCH_SNIPPET_CHARS = 700  # a search shows the start of each passage; open_citation shows all of it
# The longest query one search of the agent may ask: a model's search_docs call, the run's own searches of the
# question and its parts (a longer message is condensed to it: agent/condense.py), and MCP's search_docs tool. A
# search needs no more than a question says, and the embedding model reads only the first few hundred tokens anyway.
# The retriever keeps a looser bound of its own (index/retriever.py, 10,000) because it also serves callers that
# are not the agent (`citewise search`, the library's Retriever.search) and only guards the index against unbounded
# input there.
MAX_QUERY_CHARS = 1_000


class SearchDocsArgs(BaseModel):
    """Search the documentation."""

    query: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in the docs' own words."
    )
    top_k: int = Field(5, ge=1, le=10, description="How many passages to return (1-10).")
    selected_text_only: bool = Field(
        False, description="Search only inside the text the user selected, not the whole documentation."
    )
    selected_text_content: str | None = Field(
        None,
        max_length=MAX_SELECTED_TEXT_CHARS,
        description="The selected text to search in (defaults to the user's selection).",
    )
    filename: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="Search only the document with this file name (e.g. one a passage links to: 'answers.md').",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("query cannot be blank")
        return v.strip()


class OpenCitationArgs(BaseModel):
    """Open one passage to read its full text."""

    doc_id: str = Field(description="The passage's doc_id (a full UUID, as shown in the search results).")
    chunk_id: str = Field(description="The passage's chunk_id (a full UUID, as shown in the search results).")

    @field_validator("doc_id", "chunk_id")
    @classmethod
    def _uuid(cls, v: str) -> str:
        try:
            return str(uuid.UUID(v.strip()))
        except (ValueError, AttributeError):
            raise ValueError(f"{v!r} is not a UUID; copy the full id from the search results") from None


ARG_SCHEMAS: dict[str, type[BaseModel]] = {SEARCH_DOCS: SearchDocsArgs, OPEN_CITATION: OpenCitationArgs}


def call_key(name: str, args: dict[str, Any]) -> str:
    """Identity of a tool call: the same tool with the same (validated) arguments is the same call."""
    return name + ":" + json.dumps(args, sort_keys=True, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------------------------
# The ledger: numbering and the run's retrieval facts
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Ledger:
    """A node's working copy of what the run has retrieved; `update()` is what goes back into the state."""

    sources: list[ScoredChunk] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    searches: int = 0
    queries: list[str] = field(default_factory=list)
    empty_retrieval: bool = True
    trace: list[dict[str, Any]] = field(default_factory=list)
    found: list[list[str]] = field(default_factory=list)  # each search's chunk ids, best first (as `queries`)
    corrections: dict[str, str] = field(default_factory=dict)  # misspelled word → the index word searched

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Ledger:
        return cls(
            sources=list(state.get("sources") or []),
            opened=list(state.get("opened") or []),
            searches=state.get("searches", 0),
            queries=list(state.get("queries") or []),
            empty_retrieval=state.get("empty_retrieval", True),
            trace=list(state.get("trace") or []),
            found=[list(ids) for ids in state.get("found") or []],
            corrections=dict(state.get("corrections") or {}),
        )

    def update(self) -> dict[str, Any]:
        return {
            "sources": self.sources,
            "opened": self.opened,
            "searches": self.searches,
            "queries": self.queries,
            "empty_retrieval": self.empty_retrieval,
            "trace": self.trace,
            "found": self.found,
            "corrections": self.corrections,
        }

    def number_of(self, chunk_id: str) -> int | None:
        for i, chunk in enumerate(self.sources):
            if chunk.chunk_id == chunk_id:
                return i + 1
        return None

    def add(self, chunk: ScoredChunk) -> int:
        """The chunk's citation number, assigned on first appearance and never changed afterwards."""
        n = self.number_of(chunk.chunk_id)
        if n is None:
            self.sources.append(chunk)
            n = len(self.sources)
        return n


# ---------------------------------------------------------------------------------------------------------------
# Formatting what the model sees
# ---------------------------------------------------------------------------------------------------------------


def _where(chunk: ScoredChunk) -> str:
    return chunk.filename + (f" › {chunk.chapter}" if chunk.chapter else "")


def _ids(chunk: ScoredChunk) -> str:
    return f"doc_id={chunk.doc_id} chunk_id={chunk.chunk_id}"


def format_search(query: str, numbered: list[tuple[int, ScoredChunk]], seen_before: set[int]) -> str:
    lines = [f'DOCUMENTATION_SEARCH_RESULT: {len(numbered)} passage(s) for "{query}"']
    for n, chunk in numbered:
        lines.append("")
        lines.append(f"[{n}] {_where(chunk)} ({_ids(chunk)})")
        if n in seen_before:
            lines.append("(already shown above)")
            continue
        text = chunk.text.strip()
        if len(text) > SEARCH_SNIPPET_CHARS:
            text = text[:SEARCH_SNIPPET_CHARS].rstrip() + " … (open_citation shows the rest)"
        lines.append(text)
    return "\n".join(lines)


def format_opened(n: int, chunk: ScoredChunk) -> str:
    url = f"\nsource_url: {chunk.source_url}" if chunk.source_url else ""
    return f"OPEN_CITATION_RESULT: [{n}] {_where(chunk)} ({_ids(chunk)}){url}\n{chunk.text.strip()}"


# ---------------------------------------------------------------------------------------------------------------
# The tools
# ---------------------------------------------------------------------------------------------------------------


class _Transient(Exception):
    """A retrieval failure worth retrying; carries its type."""

    def __init__(self, kind: RetrievalFailure, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.kind = kind
        self.cause = cause


def classify_retrieval_error(exc: BaseException) -> RetrievalFailure:
    if isinstance(exc, ValidationError):
        return RetrievalFailure.INVALID_QUERY
    if isinstance(exc, ProviderError):
        return RetrievalFailure.SERVICE_UNAVAILABLE
    return RetrievalFailure.CONNECTION_ERROR  # RetrievalError, the engine's own I/O errors


@dataclass
class ToolContext:
    """What the tools of one node invocation work with."""

    retriever: Retriever
    ledger: Ledger
    owner: Owner = PUBLIC
    selected_text: str | None = None
    tool_retries: int = 3
    retry_wait_s: float = 0.1
    # Set when a search failed hard (index unreachable): the node reports it instead of an answer.
    failure: RetrievalFailure | None = None


async def run_search(ctx: ToolContext, args: SearchDocsArgs, *, node: str) -> tuple[str, list[tuple[int, ScoredChunk]]]:
    """Search, number the results and return the text the model sees (plus the numbered chunks)."""
    selected = None
    if args.selected_text_only or args.selected_text_content:
        selected = args.selected_text_content or ctx.selected_text
        if not selected:
            ctx.ledger.trace.append(
                _failure_event(
                    node, RetrievalFailure.INVALID_QUERY, "return_error", args.query, 1, "no selected text to search"
                )
            )
            return "DOCUMENTATION_SEARCH_ERROR: invalid_query: there is no selected text to search in.", []

    def search() -> SearchResult:
        if selected is not None:
            from citewise.ingest.selection import search_selected  # chunks the text: only a selection needs it

            return search_selected(ctx.retriever, args.query, args.top_k, text=selected)
        filters = {"filename": args.filename} if args.filename else None
        return ctx.retriever.search(args.query, args.top_k, owner=ctx.owner, filters=filters)

    async def attempt() -> SearchResult:
        try:
            return await asyncio.to_thread(search)
        except (ValidationError, ConfigError):
            raise  # the caller's mistake (or a config one): retrying can't help
        except (RetrievalError, ProviderError, OSError, RuntimeError, ValueError) as exc:
            raise _Transient(classify_retrieval_error(exc), exc) from exc

    attempts = 0
    ctx.ledger.searches += 1
    ctx.ledger.queries.append(args.query)
    ctx.ledger.found.append([])  # filled when the search succeeds
    try:
        async for try_ in AsyncRetrying(
            stop=stop_after_attempt(ctx.tool_retries + 1),
            wait=wait_exponential_jitter(multiplier=ctx.retry_wait_s, max=2.0, jitter=ctx.retry_wait_s),
            retry=retry_if_exception(lambda e: isinstance(e, _Transient)),
            reraise=True,
        ):
            with try_:
                attempts += 1
                result = await attempt()
    except ValidationError as exc:
        ctx.ledger.trace.append(
            _failure_event(node, RetrievalFailure.INVALID_QUERY, "return_error", args.query, attempts, str(exc))
        )
        return f"DOCUMENTATION_SEARCH_ERROR: invalid_query: {exc}", []
    except _Transient as exc:
        log.warning("search failed after %d attempt(s): %s", attempts, exc.cause, exc_info=exc.cause)
        ctx.ledger.trace.append(_failure_event(node, exc.kind, "refuse", args.query, attempts, str(exc.cause)))
        ctx.failure = exc.kind
        return f"DOCUMENTATION_SEARCH_ERROR: {exc.kind}: the documentation index could not be searched.", []

    ctx.ledger.found[-1] = [c.chunk_id for c in result.chunks]
    ctx.ledger.corrections.update(result.corrections)
    if result.corrections:
        ctx.ledger.trace.append(trace_event(TraceKind.SPELLING, node, query=args.query, corrections=result.corrections))
    if result.empty:
        ctx.ledger.trace.append(
            _failure_event(node, RetrievalFailure.EMPTY_RESULTS, "default_response", args.query, attempts, "")
        )
        ctx.ledger.trace.append(
            trace_event(TraceKind.TOOL_RESULT, node, tool=SEARCH_DOCS, query=args.query, numbers=[])
        )
        return EMPTY_RESULT, []
    ctx.ledger.empty_retrieval = False
    seen = {n for n in (ctx.ledger.number_of(c.chunk_id) for c in result.chunks) if n is not None}
    numbered = [(ctx.ledger.add(c), c) for c in result.chunks]
    ctx.ledger.trace.append(
        trace_event(
            TraceKind.TOOL_RESULT,
            node,
            tool=SEARCH_DOCS,
            query=args.query,
            numbers=[n for n, _ in numbered],
            chunk_ids=[c.chunk_id for _, c in numbered],
            attempts=attempts,
        )
    )
    return format_search(args.query, numbered, seen), numbered


def _failure_event(
    node: str, kind: RetrievalFailure, action: str, query: str, attempts: int, error: str
) -> dict[str, Any]:
    return trace_event(
        TraceKind.RETRIEVAL_FAILURE, node, kind=kind, action=action, query=query, attempts=attempts, error=error
    )


async def run_open(ctx: ToolContext, args: OpenCitationArgs, *, node: str) -> str:
    n = ctx.ledger.number_of(args.chunk_id)
    chunk = ctx.ledger.sources[n - 1] if n is not None else None
    if chunk is not None and chunk.doc_id != args.doc_id:
        chunk = None
    if chunk is None:
        # Another owner's chunk and a missing one look the same from outside: no text, no hint that it exists.
        row = await asyncio.to_thread(ctx.retriever.open, args.chunk_id, owner=ctx.owner, doc_id=args.doc_id)
        if row is not None:
            chunk = ScoredChunk(**row.model_dump(), score=0.0)
    if chunk is None:
        ctx.ledger.trace.append(
            trace_event(TraceKind.TOOL_RESULT, node, tool=OPEN_CITATION, chunk_id=args.chunk_id, found=False)
        )
        return f"{NOT_FOUND}: no passage with doc_id={args.doc_id} chunk_id={args.chunk_id}."
    n = ctx.ledger.add(chunk)
    if chunk.chunk_id not in ctx.ledger.opened:
        ctx.ledger.opened.append(chunk.chunk_id)
    ctx.ledger.trace.append(
        trace_event(TraceKind.TOOL_RESULT, node, tool=OPEN_CITATION, chunk_id=chunk.chunk_id, found=True, number=n)
    )
    return format_opened(n, chunk)


def build_tools(ctx: ToolContext | None, *, node: str = "tools") -> list[BaseTool]:
    """The tools bound to one context (None: for their schemas only, e.g. to describe them to a model)."""
    # LangChain's tool classes load its runnable and tracing stack (a third of a second): only a model's turn and a
    # LangGraph run need them, never quote mode's in-process run (see `invoke`).
    from langchain_core.tools import StructuredTool

    def need_ctx() -> ToolContext:
        if ctx is None:
            raise RuntimeError("these tools were built for their schemas only")
        return ctx

    async def search_docs(
        query: str,
        top_k: int = 5,
        selected_text_only: bool = False,
        selected_text_content: str | None = None,
        filename: str | None = None,
    ) -> str:
        args = SearchDocsArgs(
            query=query, top_k=top_k, selected_text_only=selected_text_only,
            selected_text_content=selected_text_content, filename=filename,
        )  # fmt: skip
        text, _ = await run_search(need_ctx(), args, node=node)
        return text

    async def open_citation(doc_id: str, chunk_id: str) -> str:
        return await run_open(need_ctx(), OpenCitationArgs(doc_id=doc_id, chunk_id=chunk_id), node=node)

    return [
        StructuredTool.from_function(
            coroutine=search_docs,
            name=SEARCH_DOCS,
            description=(
                "Search the documentation. Returns numbered passages [n] with their doc_id and chunk_id, or "
                f"exactly '{EMPTY_RESULT}' when nothing relevant exists."
            ),
            args_schema=SearchDocsArgs,
        ),
        StructuredTool.from_function(
            coroutine=open_citation,
            name=OPEN_CITATION,
            description="Open one passage by its doc_id and chunk_id (full UUIDs) to read its complete text.",
            args_schema=OpenCitationArgs,
        ),
    ]


async def invoke(ctx: ToolContext, call: dict[str, Any], *, node: str, config: Any) -> Message:
    """Run one tool call whose arguments were validated. Inside a LangGraph run (its config carries the run's
    callbacks) it goes through the LangChain tool, so the run's events show it (`on_tool_start`/`on_tool_end`); in
    the in-process runner it is called directly: the same text, without LangChain's callback and tracing machinery
    (a third of a second to import, for events nobody streams)."""
    if config.get("callbacks") is not None:
        tool = next(t for t in build_tools(ctx, node=node) if t.name == call["name"])
        return await tool.ainvoke({**call, "type": "tool_call"}, config=config)
    if call["name"] == SEARCH_DOCS:
        text, _ = await run_search(ctx, SearchDocsArgs(**call["args"]), node=node)
    else:
        text = await run_open(ctx, OpenCitationArgs(**call["args"]), node=node)
    return tool_result(text, call)


def validate_call(name: str, args: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(validated args, None) or (None, the reason the call is invalid)."""
    schema = ARG_SCHEMAS.get(name)
    if schema is None:
        return None, f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}"
    if not isinstance(args, dict):
        return None, f"the arguments of {name} must be a JSON object"
    try:
        return schema.model_validate(args).model_dump(exclude_defaults=False), None
    except Exception as exc:  # pydantic's ValidationError: the message lists what is wrong
        first = exc.errors()[0] if hasattr(exc, "errors") else {"msg": str(exc), "loc": ()}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return None, f"invalid arguments for {name}: {where}: {first.get('msg')}"
