"""OpenAI-compatible chat: `POST /v1/chat/completions` (JSON or SSE chunks) and `GET /v1/models`, so Open WebUI,
LibreChat, LangChain's `ChatOpenAI` or the `openai` client can use Citewise as a "model".

A thin adapter over the agent's streaming endpoint (routers/agent.py): the request becomes an `AgentRequest`, the
run is the same `stream` every other client reads, and its `complete` event becomes OpenAI's reply. So the owner and
key rules, rate limits, metrics, sessions and exit reasons are exactly those of /api/agent/stream.

- The model picks the answerer: `citewise` (the server's default), `citewise-quote` (no model), `citewise-agent`
  (the configured LLM).
- The messages are the conversation: the last one is the question, the earlier user and assistant turns are its
  history. Citewise keeps nothing between two calls, as OpenAI doesn't: no session, no checkpoint. System messages
  are not instructions to Citewise: what it may say is decided by the docs alone.
- The answer keeps its citations: `[n]` markers and a "Sources:" list in the content, and the whole structured
  Answer (citations, exit_reason, status, answer_id, ...) in an extra `citewise` field that OpenAI clients ignore.
  A refusal is an ordinary assistant message. A run that failed is not: a provider's rate limit is OpenAI's 429
  with Retry-After, any other provider failure a 502 and an index outage a 503, each as a run that raised the same
  failure would get it (an error frame once a stream has started). So a client backs off or retries, as it does
  with OpenAI, instead of keeping "too many requests" in its conversation as if the docs had said it.
- Streaming sends the checked answer: agent-mode tokens are drafts the validator may still send back (the SSE
  contract's `discard`), and OpenAI's format can't take text back, so the content chunks carry the final answer
  once it stands. A role chunk opens the stream at once and `: ping` comments keep it open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from citewise.agent.limits import EXIT_REASONS
from citewise.errors import CitewiseError, ProviderError, RateLimited, RetrievalError, ValidationError
from citewise.server.answer_text import answer_with_sources
from citewise.server.deps import CallerDep, StateDep
from citewise.server.http_errors import error_body, map_error, openai_error
from citewise.server.routers import agent as agent_router
from citewise.server.schemas import (
    GATE_ERRORS,
    MAX_HISTORY_TURNS,
    MAX_MESSAGE_CHARS,
    MAX_SELECTED_TEXT_CHARS,
    AgentRequest,
    error_responses,
)
from citewise.types import AnswerStyle, ExitReason, RetrievalFailure, too_long

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["openai-compatible"], responses=error_responses(*GATE_ERRORS))

# model id → the `mode` of an AgentRequest (None: the server's default answerer)
MODELS: dict[str, str | None] = {"citewise": None, "citewise-quote": "quote", "citewise-agent": "agent"}
PING_S = 15.0
_WORD = re.compile(r"\s*\S+\s*|\s+")
_SOURCES = re.compile(r"\n\nSources:\n\[\d+\] .*\Z", re.S)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_calls, ... are accepted and not used

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """OpenAI's request body. Sampling parameters (temperature, max_tokens, ...) are accepted and not used: the
    docs decide the answer. Citewise's own options ride along as extra fields (the openai client's `extra_body`)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="citewise, citewise-quote or citewise-agent (GET /v1/models).")
    messages: list[ChatMessage] = Field(min_length=1, max_length=4 * MAX_HISTORY_TURNS)
    stream: bool = False
    selected_text: str | None = Field(None, max_length=MAX_SELECTED_TEXT_CHARS, description="Answer from this text.")
    style: AnswerStyle | None = None


@router.get("/models", summary="The answerers, as OpenAI models")
async def models(caller: CallerDep) -> dict[str, Any]:
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "citewise"} for name in MODELS]
    return {"object": "list", "data": data}


@router.post(
    "/chat/completions",
    summary="OpenAI-compatible chat completion (stream: Server-Sent Events in OpenAI's chunk format)",
    responses=error_responses(400, 404, 502, 503, 504),
)
async def chat_completions(body: ChatCompletionRequest, caller: CallerDep, state: StateDep):
    path = "/v1/chat/completions"
    try:
        request = _agent_request(body, question_limit=state.settings.agent.max_question_chars)
        run = await agent_router.prepare_run(request, caller, state, keep_session=False, surface="openai")
    except _Refused as exc:
        return JSONResponse(error_body(path, exc.status, exc.message, code=exc.code), status_code=exc.status)
    except CitewiseError as exc:
        code, kind, detail = map_error(exc)
        # A 422 has one shape on every route, the schema's list of {loc, msg, type} (app.py's handler makes it too).
        shown = [{"loc": ["body", "messages"], "msg": detail, "type": kind}] if code == 422 else detail
        return JSONResponse(error_body(path, code, shown, kind), status_code=code)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    events = agent_router.stream(run, state)
    if body.stream:
        chunks = _chunks(events, completion_id, created, body.model)
        return StreamingResponse(
            chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
    answer, failure = await _outcome(events)
    if failure is not None:
        status = int(failure.get("status") or 500)
        wait = failure.get("retry_after_s")
        headers = {"Retry-After": str(wait or 1)} if status == 429 or wait else None
        return JSONResponse(
            error_body(path, status, failure.get("message") or "The run failed.", failure.get("type")),
            status_code=status,
            headers=headers,
        )
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": body.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": _content(answer)},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "citewise": answer,
    }


class _Refused(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        self.status, self.message, self.code = status, message, code


def _agent_request(body: ChatCompletionRequest, *, question_limit: int) -> AgentRequest:
    """The request as the agent's; a question over `question_limit` (agent.max_question_chars) is a 422 that says
    both numbers, as on every other route, never pydantic's error about the AgentRequest built here."""
    if body.model not in MODELS:
        names = ", ".join(MODELS)
        raise _Refused(404, f"The model {body.model!r} does not exist; use one of: {names}.", "model_not_found")
    turns = [(m.role, _text(m)) for m in body.messages if m.role in ("user", "assistant")]
    if not turns or turns[-1][0] != "user" or body.messages[-1].role != "user":
        raise _Refused(400, "The last message must be the user's question.", "invalid_messages")
    question = turns[-1][1]
    if len(question) > question_limit:
        raise ValidationError(too_long("The question", len(question), question_limit))
    # Our own "Sources:" lists are for people; the conversation the agent keeps is the answers themselves.
    history = [
        {"role": role, "content": _SOURCES.sub("", text)[:MAX_MESSAGE_CHARS]} for role, text in turns[:-1] if text
    ][-MAX_HISTORY_TURNS:]
    try:
        return AgentRequest(
            question=question,
            mode=MODELS[body.model],
            selected_text=body.selected_text,
            style=body.style,
            history=history or None,
        )
    except PydanticValidationError as exc:
        raise _Refused(400, "; ".join(e["msg"] for e in exc.errors())) from None


def _text(message: ChatMessage) -> str:
    """A message's text: a string, or the text parts of a content list (images and files are not read)."""
    if isinstance(message.content, str):
        return message.content
    parts = message.content or []
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _content(answer: dict[str, Any]) -> str:
    from citewise.types import Answer

    return answer_with_sources(Answer.model_validate(answer))


async def _outcome(events: AsyncIterator[Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the `complete` event's Answer, the failure: the `error` event's data or a failed run's): exactly one is set
    when the stream ends."""
    try:
        async for event in events:
            if event.event == "complete":
                failure = _failed(event.data)
                return (None, failure) if failure else (event.data, None)
            if event.event == "error":
                return None, event.data
    finally:
        await events.aclose()
    return None, {"status": 500, "message": "The run ended without an answer.", "type": "internal_error"}


# A run that ended on one of these failures is answered as a run that raised it would be (http_errors' mapping).
_FAILED_RUNS: dict[ExitReason, type[CitewiseError]] = {
    ExitReason.RATE_LIMITED: RateLimited,
    ExitReason.LLM_ERROR: ProviderError,
}


def _failed(answer: dict[str, Any]) -> dict[str, Any] | None:
    """A run that ended on a provider failure or an index outage as the error an OpenAI client backs off from or
    retries, in the shape of the stream's `error` event: the status and type a run that raised the same failure
    gets (429 rate limited, 502 provider error, 503 index unavailable), the answer's message, and how long to wait
    as the answer says it (on a 429 always: the provider's own Retry-After, else the exit-reason table's). None for
    any other answer: an answer, a refusal, or a message of the run's own (EMPTY_INPUT, MAX_CONTEXT_REACHED, ...)."""
    reason = ExitReason(answer.get("exit_reason"))
    failure = answer.get("retrieval_failure")
    if failure and RetrievalFailure(failure).is_outage:
        raised: type[CitewiseError] = RetrievalError
    elif reason in _FAILED_RUNS:
        raised = _FAILED_RUNS[reason]
    else:
        return None
    status, kind, _ = map_error(raised(""))
    wait = answer.get("retry_after_s")
    if status == 429:
        wait = wait or EXIT_REASONS[ExitReason.RATE_LIMITED].retry_after_s or 1
    data = {
        "exit_reason": str(reason),
        "type": kind,
        "status": status,
        "message": answer.get("answer") or EXIT_REASONS[reason].message,
        "retryable": bool(answer.get("retryable")),
        "session_id": answer.get("session_id"),
        "answer_id": answer.get("answer_id"),
    }
    if wait:
        data["retry_after_s"] = max(1, round(wait))  # whole seconds, as Retry-After and the `error` event say it
    return data


async def _chunks(events: AsyncIterator[Any], completion_id: str, created: int, model: str) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    queue: asyncio.Queue[Any] = asyncio.Queue()  # a run's events are few (trace steps, tokens): never full
    done = object()

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        finally:
            await queue.put(done)

    # The run is pumped by a task of its own so the wait for its next event can time out into a ping; a client
    # that leaves cancels the task, which closes the agent stream (and with it the run).
    task = asyncio.create_task(pump())
    try:
        yield chunk({"role": "assistant", "content": ""})
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), PING_S)
            except TimeoutError:
                yield ": ping\n\n"
                continue
            if event is done:
                break
            if event.event not in ("complete", "error"):
                continue  # trace steps and draft tokens: the content is the checked answer, sent below
            failure = event.data if event.event == "error" else _failed(event.data)
            if failure is None:
                for word in _WORD.findall(_content(event.data)):
                    yield chunk({"content": word})
                yield chunk({}, "stop", citewise=event.data)
                break
            error = openai_error(int(failure.get("status") or 500), failure.get("message") or "The run failed.")
            yield f"data: {json.dumps({'error': {**error, 'citewise': failure}}, ensure_ascii=False)}\n\n"
            return
        yield "data: [DONE]\n\n"
    finally:
        task.cancel()  # no await: this generator may itself be being cancelled (the run cleans up on its own)
