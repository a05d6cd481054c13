"""Request bodies of the question endpoints (responses are `Answer` and the models next to each router)."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from citewise.types import MAX_QUESTION_CHARS, MAX_SELECTED_TEXT_CHARS, AnswerStyle, SectionRef

# The longest question or message a body may hold: the ceiling of agent.max_question_chars (its default). The served
# OpenAPI schema shows the configured limit (app.py); a longer text is a 422 that says both numbers and never echoes it.
MAX_MESSAGE_CHARS = MAX_QUESTION_CHARS
MAX_HISTORY_TURNS = 100  # the agent keeps only what fits agent.max_context_chars anyway


class HistoryMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class AgentRequest(BaseModel):
    """`POST /api/agent/run` and `/api/agent/stream`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    question: str = Field(
        max_length=MAX_MESSAGE_CHARS,
        description=(
            "The question (an empty one ends EMPTY_INPUT), an error log pasted with it if need be: a long one is "
            "searched condensed (its question, errors and names), the answerer reads it whole."
        ),
    )
    mode: Literal["agent", "quote", "extractive"] | None = Field(
        None, description='"quote" (alias "extractive"): verbatim sentences, no LLM; "agent": the configured model.'
    )
    return_trace: bool = Field(False, alias="returnTrace", description="Include the run's trace in the Answer.")
    selected_text: str | None = Field(
        None, max_length=MAX_SELECTED_TEXT_CHARS, description="Answer from this text only (nothing is stored)."
    )
    style: AnswerStyle | None = Field(None, description='"default" or "structured".')
    session_id: uuid.UUID | None = Field(None, description="Continue this conversation (a new one when omitted).")
    history: list[HistoryMessage] | None = Field(
        None,
        max_length=MAX_HISTORY_TURNS,
        description="Earlier turns, for clients that keep the conversation themselves instead of a session.",
    )


class ChatRequest(BaseModel):
    """`POST /chat`, the chat-widget contract."""

    message: str = Field(
        max_length=MAX_MESSAGE_CHARS,
        description="The question, an error log pasted with it if need be (searched condensed, answered whole).",
    )
    selected_text: str | None = Field(None, max_length=MAX_SELECTED_TEXT_CHARS)
    session_id: uuid.UUID | None = None


class SourceChunk(BaseModel):
    id: str
    content: str
    similarity_score: float | None
    metadata: dict


class ChatResponse(BaseModel):
    response: str = Field(description="Clean markdown with [n] citation markers.")
    session_id: str
    source_chunks: list[SourceChunk] = Field(description="The cited chunks; the n-th is [n] in the response.")
    status: str = Field("success", description="success, refused or error (as the Answer's status).")
    refusal_detail: str | None = Field(None, description="Why the docs don't answer it, in plain words (refusals).")
    closest_sections: list[SectionRef] = Field(
        default_factory=list, description="On a refusal: up to three sections worth reading. Not citations."
    )
    answer_id: str | None = Field(None, description="Rate this answer with POST /api/feedback (feedback.enabled).")


class ErrorBody(BaseModel):
    """Every error but a 422: `detail` says what went wrong; errors from Citewise's own tree add their `type`."""

    detail: str
    type: str | None = None


_ERROR_DESCRIPTIONS = {
    400: "The request asks for something not configured (e.g. agent mode without a model), or a bad upload name",
    401: "No API key, or an unknown one (keys are configured)",
    403: "A public document, managed by the operator",
    404: "Nothing with this id for this caller",
    408: "The request body did not arrive within server.body_timeout_s",
    413: "The request body (or a file) is over its limit",
    415: "Unsupported file type",
    429: "Rate limited (per key, per address, failed authentications, or by the model provider); see Retry-After",
    502: "The model provider (language or embedding model) failed",
    503: "The index or the server's setup is not available",
    504: "The model provider (language or embedding model) did not answer in time",
}


def error_responses(*codes: int, streaming: bool = False) -> dict[int | str, dict]:
    """OpenAPI `responses=` for these error statuses, all with the `ErrorBody` shape. A streaming route's errors are
    still JSON (FastAPI would document them under the route's own media type): `streaming=True` says so."""
    if streaming:
        ref = {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
        return {
            code: {"description": _ERROR_DESCRIPTIONS[code], "content": {"application/json": ref}} for code in codes
        }
    return {code: {"model": ErrorBody, "description": _ERROR_DESCRIPTIONS[code]} for code in codes}


# Every route that acts as a caller: the request gate's answers (gate.py).
GATE_ERRORS = (401, 408, 413, 429)
