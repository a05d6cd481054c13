"""The one mapping from Citewise's error tree to HTTP statuses, used by the app's exception handler and by the
SSE stream's `error` event."""

from __future__ import annotations

from citewise.errors import (
    CitewiseError,
    ConfigError,
    HomeBusyError,
    IndexMismatchError,
    IngestError,
    MissingExtraError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    RetrievalError,
    ValidationError,
)

# One mapping from the error tree to HTTP, most specific class first: (class, status, type, public detail).
# A detail of None shows the error's own message (user-facing errors are written for users); provider and index
# failures get a generic text and their details go to the log.
_ERROR_MAP: list[tuple[type[CitewiseError], int, str, str | None]] = [
    (ValidationError, 422, "validation_error", None),
    (MissingExtraError, 503, "missing_extra", None),  # the server's setup is wrong, not the request
    (IndexMismatchError, 503, "index_mismatch", None),
    (ConfigError, 400, "config_error", None),
    (IngestError, 422, "ingest_error", None),
    (HomeBusyError, 503, "home_busy", None),
    (RetrievalError, 503, "service_unavailable", "The document index is temporarily unavailable. Try again shortly."),
    (RateLimited, 429, "rate_limited", "The language model provider is rate limiting requests. Retry shortly."),
    (ProviderTimeout, 504, "provider_timeout", "The language model provider did not answer in time."),
    (ProviderError, 502, "provider_error", "The language model provider failed."),
    (CitewiseError, 500, "internal_error", "Internal server error."),
]


def map_error(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, error type, public detail) for any exception; unknown ones are internal errors."""
    for cls, code, kind, detail in _ERROR_MAP:
        if isinstance(exc, cls):
            return code, kind, detail if detail is not None else str(exc)
    return 500, "internal_error", "Internal server error."
