"""The agent over HTTP: `POST /api/agent/run` (the full Answer as JSON) and `POST /api/agent/stream` (SSE).

Stream events, in order: `trace` (each step: plan, tool_call, validation, reprompt, ...), `token` (answer text as
the model writes it), `citation` (each citation of the final answer), then exactly one terminal event: `complete`
(the full Answer, with exit_reason) or `error` (the run raised: exit_reason, type, message, retryable). A client
that disconnects cancels the run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.sse import EventSourceResponse, ServerSentEvent

from citewise.errors import RateLimited, ValidationError
from citewise.server.deps import CallerDep, StateDep, agent_session_id, answer_json
from citewise.server.http_errors import map_error
from citewise.server.schemas import AgentRequest
from citewise.settings import Settings
from citewise.types import Answer, ExitReason, TraceEvent

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/agent", tags=["agent"])

# The graph node whose model calls write the answer; tokens from other nodes (the planner) are not answer text.
ANSWER_NODE = "llm"


def _run_kwargs(body: AgentRequest, owner: str, thread_id: str) -> dict[str, Any]:
    return {
        "owner": owner,
        "selected_text": body.selected_text,
        "history": [m.model_dump() for m in body.history] if body.history else None,
        "style": body.style,
        "mode": body.mode,
        "session_id": thread_id,
        "trace": body.return_trace,
    }


def check_question(settings: Settings, question: str) -> None:
    """Refuse what the agent would refuse before any work starts, so the caller gets a 422, not a stream that
    ends in an error event."""
    limit = settings.agent.max_question_chars
    if len(question) > limit:
        raise ValidationError(
            f"The question is {len(question)} characters; the limit is {limit} (agent.max_question_chars)."
        )


@router.post("/run", summary="Ask a question; returns the full Answer")
async def run(body: AgentRequest, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    check_question(state.settings, body.question)
    session_id, thread_id = agent_session_id(caller, body.session_id)
    agent = await state.agent()
    answer = await agent.aask(body.question, **_run_kwargs(body, caller.owner, thread_id))
    state.metrics.observe_answer(answer)
    _log_failure(answer)
    return answer_json(answer, session_id=session_id, include_trace=body.return_trace)


@router.post(
    "/stream",
    response_class=EventSourceResponse,
    summary="Ask a question; streams trace, token and citation events, then one complete or error event",
)
async def stream(body: AgentRequest, caller: CallerDep, state: StateDep) -> AsyncIterator[ServerSentEvent]:
    check_question(state.settings, body.question)
    session_id, thread_id = agent_session_id(caller, body.session_id)
    agent = await state.agent()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def produce() -> None:
        try:
            async for event in agent.astream_events(body.question, **_run_kwargs(body, caller.owner, thread_id)):
                await events.put(("event", event))
        except Exception as exc:
            await events.put(("error", exc))
        finally:
            await events.put(("end", None))

    started = time.perf_counter()
    task = asyncio.create_task(produce(), name=f"citewise-stream-{session_id}")
    answer: Answer | None = None
    failure: BaseException | None = None
    ended = False
    try:
        while True:
            kind, item = await events.get()
            if kind == "end":
                ended = True
                break
            if kind == "error":
                failure = item
                continue
            sse = _translate(item)
            if sse is not None:
                yield sse
            final = _final_answer(item)
            if final is not None:
                answer = final
        if answer is not None:
            state.metrics.observe_answer(answer)
            _log_failure(answer)
            for citation in answer.citations:
                yield ServerSentEvent(event="citation", data=citation.model_dump(mode="json"))
            yield ServerSentEvent(
                event="complete", data=answer_json(answer, session_id=session_id, include_trace=body.return_trace)
            )
        else:
            yield _error_event(failure, session_id, time.perf_counter() - started)
    finally:
        if not ended:  # the client went away (or the server is stopping): stop the run
            state.metrics.disconnects.inc()
            log.info("Client disconnected; cancelling stream %s", session_id)
            task.cancel()
            # No await here: this generator is being cancelled, and the run's cleanup needs no one to wait for it.
            task.add_done_callback(_reap)


def _reap(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("Cancelled stream ended with %r", task.exception())


def _translate(event: dict[str, Any]) -> ServerSentEvent | None:
    kind = event.get("event")
    if kind == "on_chat_model_stream" and event.get("metadata", {}).get("langgraph_node") == ANSWER_NODE:
        text = _text(event.get("data", {}).get("chunk"))
        return ServerSentEvent(event="token", data={"text": text}) if text else None
    if kind == "on_custom_event":
        data = event.get("data")
        if event.get("name") == "trace":
            trace = data if isinstance(data, TraceEvent) else TraceEvent.model_validate(data)
            return ServerSentEvent(event="trace", data=trace.model_dump(mode="json"))
        if event.get("name") == "token":  # answer text an answerer writes without a chat model (quote mode)
            text = data.get("text") if isinstance(data, dict) else data
            return ServerSentEvent(event="token", data={"text": text}) if text else None
    return None


def _text(chunk: Any) -> str:
    content = getattr(chunk, "content", "")
    if isinstance(content, str):
        return content
    # Content blocks (some vendors): keep the text parts.
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def _final_answer(event: dict[str, Any]) -> Answer | None:
    """The Answer in the run's terminal on_chain_end (the root run: no parent)."""
    if event.get("event") != "on_chain_end" or event.get("parent_ids"):
        return None
    output = event.get("data", {}).get("output")
    answer = output.get("answer") if isinstance(output, dict) else None
    if isinstance(answer, dict):
        answer = Answer.model_validate(answer)
    return answer if isinstance(answer, Answer) else None


def _error_event(failure: BaseException | None, session_id: str, elapsed_s: float) -> ServerSentEvent:
    if failure is None:
        log.error("Stream %s ended without an answer after %.1fs", session_id, elapsed_s)
        code, kind, detail = 500, "internal_error", "The run ended without an answer."
    else:
        code, kind, detail = map_error(failure)
        log.error("Stream %s failed: %s: %s", session_id, type(failure).__name__, failure, exc_info=failure)
    reason = ExitReason.RATE_LIMITED if isinstance(failure, RateLimited) else ExitReason.LLM_ERROR
    return ServerSentEvent(
        event="error",
        data={
            "exit_reason": str(reason),
            "type": kind,
            "status": code,
            "message": detail,
            "retryable": code in (429, 502, 503, 504),
            "session_id": session_id,
        },
    )


def _log_failure(answer: Answer) -> None:
    if answer.exit_reason in (ExitReason.RATE_LIMITED, ExitReason.LLM_ERROR):
        log.warning(
            "Run ended %s: %s", answer.exit_reason, [e.model_dump() for e in answer.trace if e.type in _FAILURE_TRACE]
        )


_FAILURE_TRACE = {"fallback", "retrieval_failure", "exit", "llm_error", "error"}
