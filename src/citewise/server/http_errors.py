"""The one mapping from Citewise's error tree to HTTP statuses, used by the app's exception handler and by the
SSE stream's `error` event."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from citewise.errors import (
    CitewiseError,
    ConfigError,
    HomeBusyError,
    IndexMismatchError,
    IndexUpgradeNeeded,
    IngestError,
    MissingExtraError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    RetrievalError,
    ValidationError,
)
from citewise.types import too_long

# One mapping from the error tree to HTTP, most specific class first: (class, status, type, public detail).
# A detail of None shows the error's own message (user-facing errors are written for users); provider and index
# failures get a generic text and their details go to the log.
_ERROR_MAP: list[tuple[type[CitewiseError], int, str, str | None]] = [
    (ValidationError, 422, "validation_error", None),
    (MissingExtraError, 503, "missing_extra", None),  # the server's setup is wrong, not the request
    (IndexMismatchError, 503, "index_mismatch", None),
    (IndexUpgradeNeeded, 503, "index_outdated", None),  # the operator runs one command; the message names it
    (ConfigError, 400, "config_error", None),
    (IngestError, 422, "ingest_error", None),
    (HomeBusyError, 503, "home_busy", None),
    (RetrievalError, 503, "service_unavailable", "The document index is temporarily unavailable. Try again shortly."),
    # An upload's (or a question's) embedding call fails through these too: "model provider" covers both kinds.
    (RateLimited, 429, "rate_limited", "The model provider is rate limiting requests. Retry shortly."),
    (ProviderTimeout, 504, "provider_timeout", "The model provider did not answer in time."),
    (ProviderError, 502, "provider_error", "The model provider failed."),
    (CitewiseError, 500, "internal_error", "Internal server error."),
]


def map_error(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, error type, public detail) for any exception; unknown ones are internal errors."""
    for cls, code, kind, detail in _ERROR_MAP:
        if isinstance(exc, cls):
            return code, kind, detail if detail is not None else str(exc)
    return 500, "internal_error", "Internal server error."


# The OpenAI-compatible routes answer errors in OpenAI's shape too (`{"error": {message, type, code}}`), so its
# clients raise the error class they know (RateLimitError on 429, AuthenticationError on 401, …) with our message.
# `detail` stays beside it: one body that Citewise's own clients read as well.
OPENAI_PREFIX = "/v1/"
_OPENAI_TYPES = {
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def openai_error(status: int, message: str, code: str | None = None) -> dict:
    kind, default_code = _OPENAI_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"message": message, "type": kind, "param": None, "code": code or default_code}


def error_body(path: str, status: int, detail: object, kind: str | None = None, *, code: str | None = None) -> dict:
    """An error response body for a request to `path`: `{"detail", "type"}`, plus OpenAI's `error` under /v1/."""
    body: dict = {"detail": detail}
    if kind is not None:
        body["type"] = kind
    if path.startswith(OPENAI_PREFIX):
        message = detail if isinstance(detail, str) else "; ".join(_messages(detail))
        body["error"] = openai_error(status, message, code)
    return body


def _messages(detail: object) -> list[str]:
    if isinstance(detail, list):
        return [str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail]
    return [str(detail)]


# The body fields that hold the question: their limit is the server's agent.max_question_chars, which the schema's
# own bound (the ceiling every deployment shares) may exceed.
QUESTION_FIELDS = (("body", "question"), ("body", "message"))


def validation_detail(errors: Iterable[Mapping[str, Any]], *, question_limit: int | None = None) -> list[dict]:
    """A request's validation errors as the 422's `detail`: FastAPI's list of {loc, msg, type}, without what the
    client sent (pydantic's `input` echoed the body, a 10,000-character paste came back whole; `ctx` may quote it
    too). A text over its limit says so in plain words with both numbers, as the agent's own check does ("The
    question is 10,001 characters long; the limit is 10,000.")."""
    detail = []
    for error in errors:
        loc = [part if isinstance(part, int) else str(part) for part in error.get("loc") or ()]
        kind = str(error.get("type") or "value_error")
        message = str(error.get("msg") or "Invalid value")
        sent, ctx = error.get("input"), error.get("ctx") or {}
        if kind == "string_too_long" and isinstance(sent, str) and isinstance(ctx.get("max_length"), int):
            limit = ctx["max_length"]
            name = _field_name(loc)
            if tuple(loc) in QUESTION_FIELDS:  # /chat's `message` too: one limit, one sentence (types.RunRequest's)
                name = "The question"
                limit = min(limit, question_limit or limit)
            message = too_long(name, len(sent), limit)
        detail.append({"loc": loc, "msg": message, "type": kind})
    return detail


def _field_name(loc: list[str | int]) -> str:
    """`["body", "question"]` → "The question"; `["body", "history", 3, "content"]` → "history[3].content"."""
    parts = loc[1:] if loc[:1] in (["body"], ["query"], ["path"]) else loc
    if len(parts) == 1 and isinstance(parts[0], str):
        return "The " + parts[0].replace("_", " ")
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else part)
    return name or "The text"
