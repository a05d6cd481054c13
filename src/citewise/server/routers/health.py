"""Liveness, readiness and metrics: what load balancers, orchestrators and Prometheus ask."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from citewise import __version__
from citewise.agent.answerer import check_answerer
from citewise.server.deps import ServerState, StateDep, get_caller
from citewise.server.metrics import CONTENT_TYPE
from citewise.server.schemas import GATE_ERRORS, error_responses

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/health", summary="The process is up")
async def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get(
    "/ready", summary="The index opens and an answerer is configured", responses={503: {"description": "Not ready"}}
)
async def ready(state: StateDep) -> JSONResponse:
    index, model = await asyncio.gather(asyncio.to_thread(_index_check, state), asyncio.to_thread(_model_check, state))
    ok = index["ok"] and model["ok"]
    return JSONResponse(
        {"status": "ready" if ok else "not ready", "index": index, "model": model}, status_code=200 if ok else 503
    )


def _index_check(state: ServerState) -> dict[str, Any]:
    kb = state.kb
    try:
        documents = len(kb.registry.list())
        _ = kb.version  # reloads the manifest: a model mismatch shows up here
        chunks = kb.store.count() if kb.manifest is not None else 0
    except Exception as exc:  # any failure to open is "not ready"; the reason goes to the log, not the probe
        log.warning("Readiness: the index does not open: %s: %s", type(exc).__name__, exc)
        return {"ok": False, "error": "The index could not be opened (see the server log)."}
    return {"ok": True, "documents": documents, "chunks": chunks}


def _model_check(state: ServerState) -> dict[str, Any]:
    spec = state.settings.llm
    cached = state.model_ready
    if cached is None:
        try:
            check_answerer(state.settings)  # builds the client (checks extras, keys); no request is sent
            cached = {"ok": True, "answerer": spec}
        except Exception as exc:
            log.warning("Readiness: answerer %s is not usable: %s: %s", spec, type(exc).__name__, exc)
            cached = {
                "ok": False,
                "answerer": spec,
                "error": "The configured answerer cannot be created (see the server log).",
            }
        state.model_ready = cached
    return cached


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    dependencies=[Depends(get_caller)],
    responses=error_responses(*GATE_ERRORS),
)
async def metrics(state: StateDep) -> Response:
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)
