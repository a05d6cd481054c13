"""The HTTP service: `create_app(settings)` builds the FastAPI app that `citewise serve` runs.

    /chat                    the chat-widget contract (friendly texts instead of errors)
    /api/agent/run|stream    the full Answer, as JSON or as Server-Sent Events
    /api/documents           upload (ingest), list, delete — scoped to the caller's owner
    /api/chunks/{id}         one chunk the caller may see (opening a citation)
    /api/sources             sources (websites, Git repositories, folders) the caller may see, with their syncs
    /api/feedback            a rating of an answer; /api/analytics what to fix (admin keys), owner-scoped
    /v1/chat/completions     OpenAI-compatible chat (and /v1/models): Citewise as a "model" for existing clients
    /mcp                     the MCP server (streamable HTTP): search_docs, open_citation, ask, documents
    /api/examples            three example questions made from the caller's indexed headings (the landing page's)
    /pages/…                 a docs folder served read-only (server.pages_dir), so answers' links open offline
    /widget.js               the embeddable chat widget (a static file of citewise/web/)
    /health /ready /metrics  liveness, readiness, Prometheus
    /docs /openapi.json      the API reference (Swagger UI, served from the package: api_docs.py) and its schema
    /                        the web chat (static files from citewise/web/), mounted after the API

Errors from the CitewiseError tree are mapped to HTTP in one place (`http_errors.map_error`); docs/server.md lists the
mapping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from citewise import __version__
from citewise.agent.limits import retry_after
from citewise.errors import CitewiseError, ConfigError
from citewise.feedback.store import FeedbackStore, open_feedback_store
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.server.api_docs import add_api_docs
from citewise.server.auth import rate_limiters
from citewise.server.deps import ServerState
from citewise.server.gate import RequestGate
from citewise.server.http_errors import error_body, map_error, validation_detail
from citewise.server.mcp_server import MCPEndpoint
from citewise.server.metrics import Metrics, MetricsMiddleware
from citewise.server.routers import agent, chat, documents, examples, feedback, health, openai_compat, pages, sources
from citewise.server.scheduler import SourceScheduler
from citewise.server.sessions import open_checkpointer, tidying
from citewise.server.writer import WriteQueue
from citewise.settings import Settings

if TYPE_CHECKING:
    from citewise.agent.runner import Citewise

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parents[1] / "web"


def create_app(
    settings: Settings,
    *,
    citewise: Citewise | None = None,
    kb: KnowledgeBase | None = None,
    web_dir: Path | None = None,
) -> FastAPI:
    """The app for `settings`. Pass `citewise` to serve an agent you built (tests inject a scripted chat model);
    if it has no checkpointer, it gets the app's session store when the app starts. `kb` shares a knowledge base
    (and its loaded embedding model) with the agent the app builds; by default it is the agent's, or a new one."""
    kb = kb or getattr(citewise, "kb", None) or KnowledgeBase(settings)
    limiter, auth_failures = rate_limiters(settings)
    state = ServerState(
        settings=settings,
        kb=kb,
        retriever=getattr(citewise, "retriever", None) or Retriever(kb),
        metrics=Metrics(),
        limiter=limiter,
        auth_failures=auth_failures,
        citewise=citewise,
    )

    pages_dir = settings.server.pages_dir
    if pages_dir is not None and not pages_dir.is_dir():  # say so at start, not as a 404 on every page
        raise ConfigError(f"server.pages_dir {pages_dir} is not a folder: point --pages at the docs folder to serve.")
    json_limit = int(settings.server.max_body_mb * 1024 * 1024)
    mcp = MCPEndpoint(state.agent, json_limit) if settings.server.mcp else None
    if settings.feedback.enabled:
        state.feedback = open_feedback_store(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.fresh_locks()  # asyncio locks belong to one event loop: a restarted app may run on a new one
        state.writer = WriteQueue(settings.server.write_queue_size)
        state.writer.start()
        documents.resume_uploads(state)  # uploads a previous run accepted but never finished
        if state.feedback is not None:
            await asyncio.to_thread(_forget_unrated, state.feedback, settings.feedback.keep_answers_days)
        try:
            async with (
                open_checkpointer(settings) as saver,
                tidying(saver, settings.server.keep_sessions_days),  # sessions past their retention, in the background
                mcp.running() if mcp else contextlib.nullcontext(),
            ):
                state.checkpointer = saver
                if state.citewise is not None and getattr(state.citewise, "checkpointer", None) is None:
                    state.citewise.checkpointer = saver
                if settings.server.scheduled_syncs:
                    state.scheduler = SourceScheduler(state)
                    state.scheduler.start()
                try:
                    yield
                finally:
                    if state.scheduler is not None:  # before the writer stops: a sync runs as one of its jobs
                        await state.scheduler.stop()
                        state.scheduler = None
                    # The saver closes with this block: no agent may keep using it (a restarted app gets a new one).
                    state.checkpointer = None
                    if state.citewise is not None and state.citewise.checkpointer is saver:
                        state.citewise.checkpointer = None
        finally:
            # Bounded: the write in progress stops at its next commit, queued ones are abandoned (see writer.py).
            await asyncio.to_thread(state.writer.stop, settings.server.shutdown_grace_s)

    app = FastAPI(
        title="Citewise",
        version=__version__,
        summary="Grounded documentation Q&A: answers only from your docs, with citations.",
        lifespan=lifespan,
        # FastAPI's own /docs and /redoc load their scripts from CDNs; /docs is served from the package instead.
        docs_url=None,
        redoc_url=None,
    )
    app.state.citewise = state
    add_api_docs(app)
    _serve_question_limit(app, settings.agent.max_question_chars)

    app.include_router(health.router)
    app.include_router(chat.router)
    app.include_router(agent.router)
    app.include_router(documents.router, max_body_size=documents.request_body_limit(settings))
    app.include_router(sources.router)
    app.include_router(feedback.router)
    app.include_router(openai_compat.router)
    app.include_router(examples.router)
    app.include_router(pages.router)
    if mcp is not None:
        app.router.routes.append(Route("/mcp", endpoint=mcp, methods=["GET", "POST", "DELETE"], name="mcp"))
    app.add_exception_handler(CitewiseError, _citewise_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(Exception, _unexpected_error)

    # Middleware added first runs innermost: the gate (auth, limits, before any body is read) sees the client
    # address the proxy middleware resolved and is skipped by CORS preflights.
    upload_limit = documents.request_body_limit(settings)
    json_routers = (
        health.router, chat.router, agent.router, sources.router, feedback.router, openai_compat.router,
        examples.router, pages.router,
    )  # fmt: skip
    routes: list[tuple[BaseRoute, int]] = [(r, json_limit) for router in json_routers for r in router.routes]
    routes += [(r, upload_limit) for r in documents.router.routes]
    gated = [(r, limit) for r, limit in routes if isinstance(r, APIRoute)]
    gated += [(r, json_limit) for r in app.router.routes if getattr(r, "name", None) == "mcp"]
    app.add_middleware(RequestGate, state=state, routes=gated)
    if settings.server.cors_origins:
        # The allow-list is exact: a page on any other origin gets no CORS headers, so its browser refuses to read
        # the response (and, for the API's JSON and key headers, to send the request at all).
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.server.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
            expose_headers=["Retry-After"],
            max_age=600,
        )
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    if settings.server.trusted_proxies:
        # X-Forwarded-For names the client only when the connection comes from a configured proxy; `citewise serve`
        # turns uvicorn's own handling off (it trusts 127.0.0.1 by default), so nobody else can pick an address.
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(settings.server.trusted_proxies))

    # Last, so every API route wins over a file of the same name; a missing folder (no web page built yet) is
    # not an error, the API works without it.
    web = web_dir or WEB_DIR
    if web.is_dir():
        app.mount("/", StaticFiles(directory=web, html=True), name="web")
    else:
        log.info("No web page at %s; serving the API only", web)
    return app


async def _citewise_error(request: Request, exc: Exception) -> JSONResponse:
    code, kind, detail = map_error(exc)
    if code >= 500:
        log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc, exc_info=exc)
    headers = {"Retry-After": retry_after(exc)} if code == 429 else None
    # A 422 has one shape, whoever found the problem: FastAPI's list of {loc, msg, type} (the OpenAPI schema's).
    body = [{"loc": ["body"], "msg": detail, "type": kind}] if code == 422 else detail
    return JSONResponse(_printable(error_body(request.url.path, code, body, kind)), status_code=code, headers=headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    body = error_body(request.url.path, exc.status_code, exc.detail)
    return JSONResponse(_printable(body), status_code=exc.status_code, headers=exc.headers)


def _forget_unrated(store: FeedbackStore, days: float) -> None:
    before = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")
    try:
        forgotten = store.forget_unrated(before)
    except Exception as exc:  # the server still answers; ratings wait for a store that works
        log.warning("Could not tidy the feedback store: %s", exc)
        return
    if forgotten:
        log.info("Forgot %d unrated answers older than %g days", forgotten, days)


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    limit = request.app.state.citewise.settings.agent.max_question_chars
    detail = jsonable_encoder(validation_detail(exc.errors(), question_limit=limit))
    return JSONResponse(_printable(error_body(request.url.path, 422, detail)), status_code=422)


def _serve_question_limit(app: FastAPI, limit: int) -> None:
    """The OpenAPI schema with this server's question limit (agent.max_question_chars) as the question's and the
    message's maxLength (the models' own bound is the ceiling every deployment shares), and a 422's items as they
    are sent: without the `input` and `ctx` that would echo the request (http_errors.validation_detail)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()  # FastAPI builds it once and keeps it: patching it again changes nothing
        models = schema.get("components", {}).get("schemas", {})
        for model, field in (("AgentRequest", "question"), ("ChatRequest", "message")):
            prop = models.get(model, {}).get("properties", {}).get(field)
            if prop is not None:
                prop["maxLength"] = limit
        for extra in ("input", "ctx"):
            models.get("ValidationError", {}).get("properties", {}).pop(extra, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _printable(value: object) -> object:
    """The value with every string encodable as UTF-8. An error may echo what the client sent, and a lone surrogate
    ("\\ud800" in JSON) can't be encoded: the error response itself failed with a 500."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(v) for v in value]
    return value


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("%s %s failed unexpectedly", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_body(request.url.path, 500, "Internal server error.", "internal_error"), status_code=500)
