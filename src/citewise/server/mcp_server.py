"""Citewise as an MCP server (the official `mcp` SDK), for IDE agents and other MCP clients.

    tools      search_docs (ranked passages), open_citation (one passage in full), ask (the grounded Answer)
    resources  citewise://documents (the documents the caller can see), citewise://documents/{doc_id} (one, as text)

Two transports, one server definition: `citewise mcp` speaks stdio (the owner is the command's `--owner`), and
`citewise serve` mounts the same tools at `/mcp` as streamable HTTP. Over HTTP every request passes the request gate
first (gate.py: API key → owner, rate limits, body size, before a byte of the body is read), and each tool acts as
the owner of the key that request carried. The HTTP transport is stateless: a request holds everything it needs,
so there is no MCP session another key could reuse, and any server replica can answer it.

Everything here is a thin adapter: search is the retriever's owner-scoped search, `ask` is `Citewise.aask` (the
same agent, exit reasons and citations as every other surface).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field
from starlette.types import Receive, Scope, Send

from citewise import __version__
from citewise.agent.tools import MAX_QUERY_CHARS
from citewise.errors import CitewiseError, ValidationError
from citewise.server.answer_text import answer_with_sources, refusal_detail
from citewise.server.gate import caller_of
from citewise.server.schemas import MAX_MESSAGE_CHARS
from citewise.types import MAX_SELECTED_TEXT_CHARS, Chunk, Owner

if TYPE_CHECKING:
    from citewise.agent.runner import Citewise

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Citewise answers questions from one documentation set and cites every claim. Use `ask` for an answer with "
    "numbered citations ([n]) or an honest refusal when the docs don't cover the question; `search_docs` for the "
    "raw passages; `open_citation` to read a passage in full by its chunk_id."
)
DOCUMENTS_URI = "citewise://documents"


class Passage(BaseModel):
    chunk_id: str
    doc_id: str
    filename: str
    chapter: str = ""
    title: str = ""
    source_url: str | None = None
    score: float | None = None
    text: str


class SearchResults(BaseModel):
    query: str
    empty: bool = Field(description="True when no passage passed the minimum score: the docs may not cover it.")
    passages: list[Passage]


class CitationOut(BaseModel):
    n: int
    chunk_id: str
    filename: str
    chapter: str = ""
    source_url: str | None = None
    snippet: str = ""


class SectionOut(BaseModel):
    chunk_id: str
    filename: str
    chapter: str = ""
    source_url: str | None = None


class AskResult(BaseModel):
    answer: str = Field(description="Markdown with [n] markers; the refusal sentence when the docs don't say.")
    status: str = Field(description="success, refused or error.")
    exit_reason: str
    citations: list[CitationOut]
    refusal_detail: str | None = None
    closest_sections: list[SectionOut] = Field(default_factory=list, description="On a refusal: where to read.")


AgentProvider = Callable[[], Awaitable["Citewise"]]
OwnerOf = Callable[[], Owner]  # the owner the current request acts as


def build_mcp(agent: AgentProvider, owner_of: OwnerOf) -> MCPServer:
    """The MCP server: its tools and resources run as `owner_of()` on the agent `agent()` returns."""
    server = MCPServer(
        "citewise", title="Citewise", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    @server.tool(description="Search the documentation; returns the best passages, each with its chunk_id.")
    async def search_docs(
        query: Annotated[str, Field(description="What to look for.", max_length=MAX_QUERY_CHARS)],
        top_k: Annotated[int, Field(ge=1, le=10, description="How many passages (1-10).")] = 5,
    ) -> SearchResults:
        owner = owner_of()
        cw = await agent()
        try:
            result = await asyncio.to_thread(cw.retriever.search, query, top_k, owner=owner)
        except CitewiseError as exc:
            raise ToolError(str(exc)) from None
        passages = [_passage(c, score=c.score) for c in result.chunks]
        return SearchResults(query=query, empty=result.empty, passages=passages)

    @server.tool(description="Read one passage in full by the chunk_id a search result or a citation gave.")
    async def open_citation(
        chunk_id: Annotated[str, Field(description="The passage's chunk_id.", max_length=64)],
    ) -> Passage:
        chunk = await _visible_chunk(await agent(), chunk_id, owner_of())
        if chunk is None:
            raise ToolError(f"No passage with chunk_id {chunk_id!r}.")
        return _passage(chunk)

    # The bounds of the HTTP API's AgentRequest; the agent's own question limit (agent.max_question_chars) is
    # checked when the request is built, and its message comes back as the tool error.
    @server.tool(
        description=(
            "Ask the documentation. Returns a grounded answer whose every claim carries a [n] citation (file, "
            "chapter, URL), or the refusal sentence when the docs don't cover it, with status and exit_reason."
        )
    )
    async def ask(
        question: Annotated[str, Field(description="The question.", max_length=MAX_MESSAGE_CHARS)],
        mode: Annotated[
            Literal["quote", "agent"] | None,
            Field(description="quote: verbatim sentences, no model; agent: the configured model. Default: server's."),
        ] = None,
        selected_text: Annotated[
            str | None, Field(description="Answer from this text only.", max_length=MAX_SELECTED_TEXT_CHARS)
        ] = None,
    ) -> Annotated[CallToolResult, AskResult]:
        owner = owner_of()
        cw = await agent()
        try:
            answer = await cw.aask(question, owner=owner, mode=mode, selected_text=selected_text, trace=False)
        except ValidationError as exc:
            raise ToolError(str(exc)) from None
        result = AskResult(
            answer=answer.answer,
            status=str(answer.status),
            exit_reason=str(answer.exit_reason),
            citations=[CitationOut(**c.model_dump(include=set(CitationOut.model_fields))) for c in answer.citations],
            refusal_detail=refusal_detail(answer),
            closest_sections=[
                SectionOut(**s.model_dump(include=set(SectionOut.model_fields))) for s in answer.closest_sections
            ],
        )
        text = answer_with_sources(answer)
        if result.refusal_detail:
            text += f"\n\n({result.refusal_detail})"
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=result.model_dump(mode="json"),
            is_error=str(answer.status) == "error",
        )

    @server.resource(
        DOCUMENTS_URI,
        name="documents",
        description="The documents the caller can see: id, file, title, and the URI that reads each.",
        mime_type="application/json",
    )
    async def documents() -> list[dict[str, Any]]:
        owner = owner_of()
        cw = await agent()
        records = await asyncio.to_thread(cw.kb.registry.list)
        return [
            {
                "uri": f"{DOCUMENTS_URI}/{r.doc_id}",
                "doc_id": r.doc_id,
                "filename": r.filename,
                "title": r.title,
                "status": str(r.status),
                "chunks": r.chunk_count,
            }
            for r in records
            if owner.sees(r.owner)
        ]

    @server.resource(
        DOCUMENTS_URI + "/{doc_id}",
        name="document",
        description="One document's indexed text, section by section (markdown).",
        mime_type="text/markdown",
    )
    async def document(doc_id: str) -> str:
        owner = owner_of()
        cw = await agent()
        try:
            chunks = await asyncio.to_thread(cw.retriever.document, doc_id, owner)
        except CitewiseError as exc:
            raise ResourceError(str(exc)) from None
        if not chunks:
            raise ResourceError(f"No document with id {doc_id!r}.")
        return _document_text(chunks)

    return server


def _passage(chunk: Chunk, *, score: float | None = None) -> Passage:
    return Passage(**chunk.model_dump(include=set(Passage.model_fields) - {"score"}), score=score)


async def _visible_chunk(cw: Citewise, chunk_id: str, owner: Owner) -> Chunk | None:
    """The chunk, if `owner` may see it: the retriever's lookup applies the owner rule inside the query."""
    return await asyncio.to_thread(cw.retriever.open, chunk_id, owner=owner)


def _document_text(chunks: list[Chunk]) -> str:
    """Chunks joined back into the document, a heading line where the section changes. Chunks repeat a little of
    the one before (ingest.chunk_overlap); that overlap is cut where it is exact."""
    parts: list[str] = []
    chapter = None
    previous = ""
    for chunk in chunks:
        if chunk.chapter != chapter:
            chapter = chunk.chapter
            if chapter:
                parts.append(f"\n## {chapter.replace(' > ', ' › ')}\n")
            previous = ""
        text = chunk.text
        overlap = _overlap(previous, text)
        parts.append(text[overlap:])
        previous = text
    return "\n".join(p.strip("\n") for p in parts).strip() + "\n"


def _overlap(before: str, after: str, *, most: int = 2000) -> int:
    for size in range(min(len(before), len(after), most), 20, -1):
        if before.endswith(after[:size]):
            return size
    return 0


# -- over HTTP: mounted on `citewise serve` at /mcp --------------------------------------------------------------
class MCPEndpoint:
    """The ASGI endpoint at /mcp. The session manager belongs to one run of the app (it can be started only once),
    so the app's lifespan starts a fresh one each time (`running`), and requests go to the current one."""

    def __init__(self, agent: AgentProvider, max_body_bytes: int) -> None:
        self._agent = agent  # ServerState.agent
        self._max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        server = build_mcp(self._agent, _http_owner)
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=self._max_body_bytes,
            # The request gate authenticates every request by its API key: a page on another site can't send one
            # (and CORS, server.cors_origins, decides which sites may try), so the Host allow-list the SDK applies
            # on loopback would only break the server behind a proxy or on a real host name.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = server.session_manager
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:  # pragma: no cover - only between two runs of the app
            raise RuntimeError("the MCP endpoint is not running")
        caller = caller_of(scope)
        if caller is None:  # pragma: no cover - the gate admits every request to /mcp with a caller
            raise RuntimeError("the MCP endpoint needs the request gate of citewise.server.create_app")
        # The handlers run in tasks started from this one, so they see the owner this request's key maps to.
        token = _owner.set(caller.owner)
        try:
            await manager.handle_request(scope, receive, send)
        finally:
            _owner.reset(token)


_owner: contextvars.ContextVar[Owner] = contextvars.ContextVar("citewise_mcp_owner")


def _http_owner() -> Owner:
    owner = _owner.get(None)
    if owner is None:  # pragma: no cover - a handler reached without the endpoint above
        raise ToolError("This request was not authenticated.")
    return owner
