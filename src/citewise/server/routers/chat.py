"""`POST /chat`: the chat-widget contract. It never shows an error page to an end user: when every configured model
fails, or the index can't be reached, the reply is a friendly sentence with status 200 and the details go to the
server log. Request mistakes are still 4xx (empty message → 400, malformed fields → 422)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException, status

from citewise.errors import ProviderError, RetrievalError, ValidationError
from citewise.server.answer_text import refusal_detail
from citewise.server.deps import CallerDep, StateDep, agent_session_id
from citewise.server.schemas import GATE_ERRORS, ChatRequest, ChatResponse, SourceChunk, error_responses
from citewise.types import Answer, ExitReason, TraceKind

log = logging.getLogger(__name__)
router = APIRouter(tags=["chat"], responses=error_responses(*GATE_ERRORS))

TECHNICAL_DIFFICULTIES = (
    "I'm experiencing technical difficulties right now and can't answer. Please try again in a few minutes."
)
SERVICE_INTERRUPTION = (
    "The documentation search is facing a temporary service interruption. Please try again in a few minutes."
)


@router.post(
    "/chat",
    summary="Chat-widget endpoint: a markdown reply, the session id and the cited chunks",
    responses=error_responses(400),
)
async def chat(body: ChatRequest, caller: CallerDep, state: StateDep) -> ChatResponse:
    if not body.message.strip():
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="Message cannot be empty")
    session_id, thread_id = agent_session_id(caller, body.session_id)
    try:
        agent = await state.agent()
        request = agent.request(
            body.message, owner=caller.owner, selected_text=body.selected_text, session_id=thread_id, trace=True
        )
        answer = await agent.arun(request)
    except ValidationError:
        raise  # the caller's mistake: 422 with the reason
    except RetrievalError:
        log.exception("/chat: the index is unreachable (session %s)", session_id)
        return ChatResponse(response=SERVICE_INTERRUPTION, session_id=session_id, source_chunks=[])
    except Exception as exc:
        level = logging.WARNING if isinstance(exc, ProviderError) else logging.ERROR
        log.log(level, "/chat: the run failed (session %s)", session_id, exc_info=exc)
        return ChatResponse(response=TECHNICAL_DIFFICULTIES, session_id=session_id, source_chunks=[])

    state.metrics.observe_answer(answer)
    if answer.exit_reason in (ExitReason.RATE_LIMITED, ExitReason.LLM_ERROR):
        log.warning("/chat: every model failed (session %s): %s", session_id, _failure_trace(answer))
        return ChatResponse(response=TECHNICAL_DIFFICULTIES, session_id=session_id, source_chunks=[])
    if answer.retrieval_failure is not None and answer.retrieval_failure.is_outage:
        log.warning("/chat: the index is unreachable (session %s): %s", session_id, _failure_trace(answer))
        return ChatResponse(response=SERVICE_INTERRUPTION, session_id=session_id, source_chunks=[])
    return ChatResponse(
        response=answer.answer,
        session_id=session_id,
        source_chunks=source_chunks(answer),
        status=str(answer.status),
        refusal_detail=refusal_detail(answer),
        closest_sections=answer.closest_sections,
        answer_id=await state.record_answer(answer, caller, session_id=session_id, surface="chat"),
    )


def source_chunks(answer: Answer) -> list[SourceChunk]:
    """The cited chunks in citation order, so source_chunks[n-1] is what `[n]` in the response points to."""
    by_id = {chunk.chunk_id: chunk for chunk in answer.sources}
    out = []
    for citation in sorted(answer.citations, key=lambda c: c.n):
        chunk = by_id.get(citation.chunk_id)
        score = citation.score
        if chunk is not None:
            score = chunk.dense_score if chunk.dense_score is not None else chunk.score
        out.append(
            SourceChunk(
                id=citation.chunk_id,
                content=chunk.text if chunk is not None else citation.snippet,
                similarity_score=score,
                metadata={
                    "n": citation.n,
                    "doc_id": citation.doc_id,
                    "chunk_index": citation.chunk_index,
                    "filename": citation.filename,
                    "source_url": citation.source_url,
                    "module": citation.module,
                    "chapter": citation.chapter,
                    "title": chunk.title if chunk is not None else "",
                    "page": chunk.page if chunk is not None else None,
                    "modified": chunk.modified if chunk is not None else None,
                    "quote_spans": [list(span) for span in citation.quote_spans],
                },
            )
        )
    return out


def _failure_trace(answer: Answer) -> list[dict]:
    skip = {TraceKind.PLAN, TraceKind.CONSTRAINTS, TraceKind.TOOL_RESULT}
    return [e.model_dump(mode="json") for e in answer.trace if e.type not in skip]
