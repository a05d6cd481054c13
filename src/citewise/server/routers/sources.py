"""Sources over HTTP: GET /api/sources lists the sources the caller may see (public ones and the caller's own),
with their last sync, documents, failures and next scheduled run."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from pydantic import BaseModel

from citewise.server.auth import Caller
from citewise.server.deps import CallerDep, StateDep
from citewise.server.schemas import GATE_ERRORS, error_responses

router = APIRouter(prefix="/api", tags=["sources"], responses=error_responses(*GATE_ERRORS))


class SourceOut(BaseModel):
    name: str
    kind: str
    url: str  # credentials in the URL are never shown
    owner: str
    every: str | None = None
    running: bool = False
    last_started: str | None = None
    last_finished: str | None = None
    last_ok: bool | None = None
    last_error: str | None = None
    last_success: str | None = None
    documents: int = 0
    failures: int = 0
    next_run: str | None = None


class SourcesOut(BaseModel):
    sources: list[SourceOut]


@router.get("/sources", summary="Sources the caller may see, with their sync state")
async def list_sources(state: StateDep, caller: CallerDep) -> SourcesOut:
    return SourcesOut(sources=await asyncio.to_thread(_visible, state, caller))


def _visible(state, caller: Caller) -> list[SourceOut]:
    from citewise.sources.config import kind_of, redact_url
    from citewise.sources.sync import next_run, runs

    running = state.scheduler.running if state.scheduler is not None else None
    out = []
    for run in runs(state.settings):
        if not caller.owner.sees(run.spec.owner):
            continue
        upcoming = next_run(run)
        try:
            kind = str(kind_of(run.spec))
        except Exception:  # a declared folder that is gone: still listed, its kind unknown
            kind = ""
        out.append(
            SourceOut(
                name=run.name,
                kind=kind,
                url=redact_url(run.spec.url),
                owner=run.spec.owner,
                every=run.spec.every,
                running=run.name == running,
                last_started=run.last_started,
                last_finished=run.last_finished,
                last_ok=run.last_ok,
                last_error=run.last_error,
                last_success=run.last_success,
                documents=run.documents,
                failures=int(run.report.get("failed", 0)),
                next_run=upcoming.isoformat(timespec="seconds") if upcoming else None,
            )
        )
    return out
