"""The agent over HTTP: `POST /api/agent/run` (the full Answer as JSON) and `POST /api/agent/stream` (SSE).

Stream events, in order: `trace` (each step as it finishes: plan, tool_call, validation, reprompt, ...), `token`
(answer text as it is written), `discard` (forget every token so far: what follows replaces it), `citation` (each
citation of the final answer), then exactly one terminal event: `complete` (the full Answer, with exit_reason) or
`error` (the run raised: exit_reason, type, message, retryable, and retry_after_s on a 429). A client that
disconnects cancels the run.

The one rule a client needs: the tokens after the last `discard` are the answer `complete` carries. Every path that
replaces streamed text — a new model call after a draft (reprompt, a lookup after an aside, a regeneration, a retry
or fallback after a failure mid-stream), the forced synthesis, a grounded answer that differs from the draft, a run
that failed — sends `discard` from one place (`_TokenFilter`), so no path can forget to. docs/server.md shows the
frames. Which model tokens are answer text at all is the agent's knowledge (`ReplyStream`): the router only relays.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.sse import EventSourceResponse, ServerSentEvent

from citewise.agent.flow import ANSWER_NODE
from citewise.agent.limits import EXIT_REASONS, exit_reason_for, retry_after
from citewise.agent.reply import ReplyStream
from citewise.server.auth import Caller
from citewise.server.deps import CallerDep, StateDep, agent_session_id, answer_json
from citewise.server.http_errors import map_error
from citewise.server.schemas import GATE_ERRORS, AgentRequest, error_responses
from citewise.types import Answer, ExitReason, RunRequest, Status, TraceEvent, TraceKind

if TYPE_CHECKING:
    from citewise.agent.runner import Citewise

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/agent", tags=["agent"])
_ERRORS = (*GATE_ERRORS, 400, 502, 503, 504)

_WORD = re.compile(r"\s*\S+\s*|\s+")


@dataclass
class _PreparedRun:
    agent: Citewise
    request: RunRequest
    session_id: str | None  # the one the client sees (the request holds the owner-scoped thread id); None: kept none
    caller: Caller
    surface: str = "stream"  # what the answer is kept as for feedback (the OpenAI adapter says "openai")


async def _prepare(body: AgentRequest, caller: CallerDep, state: StateDep) -> _PreparedRun:
    """The body as the agent's `RunRequest`, validated once, before the first byte: a dependency runs before the
    response starts (a stream's generator doesn't), so a bad request gets its 4xx, not a 200 stream that ends in an
    error event."""
    return await prepare_run(body, caller, state)


async def prepare_run(
    body: AgentRequest, caller: Caller, state: StateDep, *, keep_session: bool = True, surface: str = "stream"
) -> _PreparedRun:
    """`_prepare` for the other surfaces that run through `stream`. keep_session=False: a caller that sends its
    whole conversation every time (/v1) gets a run that keeps nothing on the server — no session id, no checkpoint."""
    session_id, thread_id = agent_session_id(caller, body.session_id) if keep_session else (None, None)
    agent = await state.agent()
    request = agent.request(
        body.question,
        owner=caller.owner,
        selected_text=body.selected_text,
        history=body.history,
        style=body.style,
        mode=body.mode,
        session_id=thread_id,
        trace=body.return_trace,
    )
    return _PreparedRun(agent, request, session_id, caller, surface)


PreparedDep = Annotated[_PreparedRun, Depends(_prepare)]


@router.post("/run", summary="Ask a question; returns the full Answer", responses=error_responses(*_ERRORS))
async def run(run: PreparedDep, state: StateDep) -> dict[str, Any]:
    answer = await run.agent.arun(run.request)
    state.metrics.observe_answer(answer)
    log_failure(answer, run.session_id)
    answer_id = await state.record_answer(answer, run.caller, session_id=run.session_id, surface="run")
    return answer_json(answer, session_id=run.session_id, include_trace=run.request.trace, answer_id=answer_id)


@router.post(
    "/stream",
    response_class=EventSourceResponse,
    summary="Ask a question; streams trace, token and citation events, then one complete or error event",
    responses=error_responses(*_ERRORS, streaming=True),
)
async def stream(run: PreparedDep, state: StateDep) -> AsyncIterator[ServerSentEvent]:
    agent, session_id = run.agent, run.session_id
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def produce() -> None:
        try:
            async for event in agent.astream_events(run.request):
                await events.put(("event", event))
        except Exception as exc:
            await events.put(("error", exc))
        finally:
            await events.put(("end", None))

    # The run is a task of its own so that a disconnect can cancel it outright (see `finally`).
    task = asyncio.create_task(produce(), name=f"citewise-stream-{session_id}")
    tokens = _TokenFilter()
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
            answer = _final_answer(item) or answer
            for sse in _translate(item, tokens):
                yield sse
        if answer is None:
            yield _error_event(failure, session_id)
            return
        state.metrics.observe_answer(answer)
        log_failure(answer, session_id)
        answer_id = await state.record_answer(answer, run.caller, session_id=session_id, surface=run.surface)
        final_text = "" if answer.cached or answer.status == Status.ERROR else answer.answer
        if tokens.shown != final_text:
            # What was streamed is not the answer (a forced synthesis, grounding's changes, a failed run): replace it.
            if tokens.shown:
                yield tokens.discard("final")
            # Also when nothing streamed the answer (quote mode has no model, a JSON-protocol model's text was held
            # back, a greeting is canned): word-sized tokens, so every live answer arrives the same way. A cache hit
            # sends none (it is complete at once), nor does a failed run (its message comes with `complete`).
            for word in _WORD.findall(final_text):
                yield _token(tokens.show(word))
        for citation in answer.citations:
            yield ServerSentEvent(event="citation", data=citation.model_dump(mode="json"))
        yield ServerSentEvent(
            event="complete",
            data=answer_json(answer, session_id=session_id, include_trace=run.request.trace, answer_id=answer_id),
        )
    finally:
        if not ended:  # the client went away (or the server is stopping): stop the run
            state.metrics.disconnects.inc()
            log.info("Client disconnected; cancelling stream %s", session_id)
            task.cancel()
            # No await: this generator is itself being cancelled; the run cleans up without anyone waiting.
            task.add_done_callback(_reap)


class _TokenFilter:
    """What a client shows, and when shown text must be discarded. Which model tokens are answer text at all is
    the agent's `ReplyStream` (a JSON action is held back; the answer it carries is sent once the run has read it).
    """

    def __init__(self) -> None:
        self.shown = ""  # the token text a client shows now: everything since the last discard
        self.last_step = ""  # the type of the last trace event: why a new draft starts
        self.replies = ReplyStream()

    def show(self, text: str) -> str:
        self.shown += text
        return text

    def discard(self, reason: str) -> ServerSentEvent:
        self.shown = ""
        return ServerSentEvent(event="discard", data={"reason": reason})

    def model_started(self) -> list[ServerSentEvent]:
        """A model call of the answer node starts: text shown from an earlier call was a draft that did not stand
        (sent back, an aside before a lookup, an empty or failed reply asked again)."""
        return [self.discard(self.last_step or "new_draft")] if self.shown else []


def _translate(event: dict[str, Any], tokens: _TokenFilter) -> list[ServerSentEvent]:
    kind = event.get("event")
    in_answer_node = event.get("metadata", {}).get("langgraph_node") == ANSWER_NODE
    if kind == "on_chat_model_start" and in_answer_node:
        return tokens.model_started()
    if kind == "on_chat_model_stream" and in_answer_node:
        text = _text(event.get("data", {}).get("chunk"))
        return [_token(tokens.show(t)) for t in tokens.replies.feed(event.get("run_id", ""), text)] if text else []
    if kind == "on_chat_model_end" and in_answer_node:
        return [_token(tokens.show(t)) for t in tokens.replies.flush(event.get("run_id", ""))]
    if kind == "on_custom_event" and event.get("name") == "trace":
        data = event.get("data")
        trace = data if isinstance(data, TraceEvent) else TraceEvent.model_validate(data)
        tokens.last_step = trace.type
        return [ServerSentEvent(event="trace", data=trace.model_dump(mode="json"))]
    return []


def _token(text: str) -> ServerSentEvent:
    return ServerSentEvent(event="token", data={"text": text})


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


def _error_event(failure: BaseException | None, session_id: str | None) -> ServerSentEvent:
    if failure is None:
        log.error("Stream %s ended without an answer", session_id)
        code, kind, detail = 500, "internal_error", "The run ended without an answer."
    else:
        code, kind, detail = map_error(failure)
        level = logging.WARNING if code < 500 else logging.ERROR
        log.log(level, "Stream %s failed: %s: %s", session_id, type(failure).__name__, failure, exc_info=failure)
    # The exit reasons are the agent's: a run that raised instead of ending gets one too, and with it its row.
    reason = exit_reason_for(failure) if failure is not None else ExitReason.LLM_ERROR
    data = {
        "exit_reason": str(reason),
        "type": kind,
        "status": code,
        "message": detail,
        "retryable": EXIT_REASONS[reason].retryable,
        "session_id": session_id,
    }
    if code == 429 and failure is not None:
        # How long to wait, as the HTTP error would say it: the provider's own Retry-After, else the table's.
        data["retry_after_s"] = int(retry_after(failure))
    return ServerSentEvent(event="error", data=data)


def _reap(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("A cancelled stream ended with %r", task.exception())


_FAILURE_TRACE = {
    TraceKind.FALLBACK,
    TraceKind.RETRIEVAL_FAILURE,
    TraceKind.LLM_ERROR,
    TraceKind.EXIT,
    TraceKind.GENERATION_FAILURE,
    TraceKind.INVALID_TOOL_CALL,
}


def log_failure(answer: Answer, session_id: str | None) -> None:
    """Runs that failed are logged with the steps that explain why (the client only sees the exit reason)."""
    if answer.exit_reason in (ExitReason.RATE_LIMITED, ExitReason.LLM_ERROR) or answer.retrieval_failure:
        log.warning(
            "Run %s ended %s: %s",
            session_id,
            answer.exit_reason,
            [e.model_dump(mode="json") for e in answer.trace if e.type in _FAILURE_TRACE],
        )
