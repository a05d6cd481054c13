"""What every request handler needs, handed out through FastAPI dependencies (never module globals).

`ServerState` is built once per app by `create_app` and lives on `app.state.citewise`; the agent (`Citewise`) is
built on first use with the checkpointer the lifespan opened, so `citewise serve` is up in a second and `/health`
answers before the agent's imports are paid for.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request

from citewise.feedback.store import AnswerRecord, FeedbackStore
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.server.answer_text import refusal_detail
from citewise.server.auth import Caller, RateLimiter, SharedRateLimiter
from citewise.server.gate import caller_of
from citewise.server.metrics import Metrics
from citewise.server.writer import WriteQueue
from citewise.settings import Settings

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from citewise.agent.runner import Citewise
    from citewise.server.scheduler import SourceScheduler

log = logging.getLogger(__name__)


@dataclass
class ServerState:
    settings: Settings
    kb: KnowledgeBase
    retriever: Retriever  # lookups the routes make themselves (opening a chunk), owner-scoped
    metrics: Metrics
    limiter: RateLimiter | SharedRateLimiter  # shared by every replica when state lives in PostgreSQL
    auth_failures: RateLimiter | SharedRateLimiter  # failed key checks, per client address
    citewise: Citewise | None = None
    checkpointer: BaseCheckpointSaver | None = None
    model_ready: dict[str, Any] | None = None  # /ready's answerer check, done once (configuration is fixed)
    # Uploads and deletes, in order, one at a time (they hold the home's write lock), bounded: see writer.py.
    writer: WriteQueue | None = None
    scheduler: SourceScheduler | None = None  # scheduled source syncs (server.scheduled_syncs)
    feedback: FeedbackStore | None = None  # answers kept for rating (feedback.enabled)
    _build_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def fresh_locks(self) -> None:
        self._build_lock = asyncio.Lock()

    async def agent(self) -> Citewise:
        """The app's Citewise, built once (in a worker thread: importing the agent stack takes a moment). A caller
        that keeps its conversation itself (/v1 sends the whole history, MCP has none) sends no session_id, and a run
        without one writes no checkpoint."""
        if self.citewise is None:
            async with self._build_lock:
                if self.citewise is None:
                    from citewise.agent.runner import Citewise

                    self.citewise = await asyncio.to_thread(
                        Citewise, self.settings, kb=self.kb, checkpointer=self.checkpointer
                    )
        return self.citewise

    async def record_answer(self, answer: Any, caller: Caller, *, session_id: str | None, surface: str) -> str | None:
        """Keep `answer` so its reader can rate it; its answer id, or None when feedback is off or the store failed
        (an answer is never lost to its rating's bookkeeping)."""
        store = self.feedback
        if store is None or not answer.question.strip():
            return None

        def keep() -> str:
            record = AnswerRecord.of(
                answer, owner=caller.owner.id, docs_version=self.kb.version, session_id=session_id, surface=surface
            )
            store.record_answer(record)
            return record.answer_id

        try:
            return await asyncio.to_thread(keep)
        except Exception as exc:
            log.warning("Could not keep an answer for feedback: %s", exc)
            return None


async def get_state(request: Request) -> ServerState:
    return request.app.state.citewise


StateDep = Annotated[ServerState, Depends(get_state)]


async def get_caller(request: Request) -> Caller:
    """The authenticated, rate-limited caller. The request gate (gate.py) decided it from the headers before the
    body was read; a route that depends on this is a route the gate protects."""
    caller = caller_of(request.scope)
    if caller is None:  # pragma: no cover - only an app built without create_app's gate gets here
        raise RuntimeError("get_caller needs the request gate of citewise.server.create_app")
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]


def answer_json(
    answer: Any, *, session_id: str | None, include_trace: bool, answer_id: str | None = None
) -> dict[str, Any]:
    """An Answer as the API returns it: the caller's own session id, the id to rate it by (POST /api/feedback), why
    a refusal refused in words (the web chat and the widget show it as sent), the trace only when asked for."""
    data = answer.model_dump(mode="json")
    data["session_id"] = session_id
    data["refusal_detail"] = refusal_detail(answer)
    data["answer_id"] = answer_id
    if not include_trace:
        data["trace"] = []
    return data


_SESSION_NAMESPACE = uuid.UUID("0b7a6f0e-3d55-4a8e-9f1c-5c2f3e6d8a41")


def agent_session_id(caller: Caller, session_id: uuid.UUID | None) -> tuple[str, str]:
    """(the id the client sees, the thread id the agent's checkpointer uses). The thread id is derived from the
    owner too, so a session id that leaks to another owner opens an empty conversation, never someone else's."""
    public = str(session_id or uuid.uuid4())
    return public, str(uuid.uuid5(_SESSION_NAMESPACE, f"{caller.owner}\n{public}"))
