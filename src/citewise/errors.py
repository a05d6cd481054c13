"""Citewise's exception tree. Every error a user can meet is one of these; anything else is a bug.

    CitewiseError                 base; `str(err)` is a message fit to show a user
    ├── ConfigError               the user's configuration or input is wrong; the message says how to fix it
    │   ├── MissingExtraError     an optional integration is not installed; says what to `pip install`
    │   ├── ValidationError       a request value is out of range or malformed (empty query, top_k=0, bad id)
    │   ├── IndexMismatchError    the index was built with another embedding model than the one configured
    │   ├── IndexUpgradeNeeded    the index was written by an older Citewise; the message says what to run
    │   └── NothingIngestedError  a command that reads the docs (ask, search, chat) on a home, or a database, where no
    │                             document is indexed (a mistyped --home); the message says what to ingest
    ├── IngestError               a document could not be loaded or chunked (it fails alone; the batch goes on)
    ├── HomeBusyError             another writer holds the home's write lock and this one would not (or no longer)
    │                             wait; try again when it has finished
    ├── SourceError               a source could not be synced (unreachable, refused by the network policy, a Git
    │                             ref that does not exist); the index keeps what the last good sync left
    ├── RetrievalError            the index could not be opened or queried
    └── ProviderError(retryable)  an embedding/LLM vendor call failed
        ├── RateLimited           the vendor said 429 / quota
        ├── ProviderUnavailable   5xx, connection refused/reset: worth a retry or a fallback
        └── ProviderTimeout       the vendor did not answer in time

The CLI maps these to a one-line message and exit code 2 once (cli.py); the HTTP layer maps them once too.
Vendor SDKs raise their own trees: `classify_provider_error` maps any of them onto this one, for chat models and
embedding models alike.
"""

from __future__ import annotations

import email.utils
import time


class CitewiseError(Exception):
    """Base of every error Citewise raises on purpose."""


class ConfigError(CitewiseError):
    """Something the user set up or asked for is wrong. The message must say how to fix it."""


class MissingExtraError(ConfigError):
    def __init__(self, feature: str, extra: str, package: str | None = None) -> None:
        install = f"pip install 'citewise[{extra}]'" + (f"  (or: pip install {package})" if package else "")
        super().__init__(f"{feature} needs an optional dependency that is not installed. Run: {install}")
        self.extra = extra


class ValidationError(ConfigError):
    """A request value is out of range or malformed."""


class IndexMismatchError(ConfigError):
    """The index on disk was built with a different embedding model or dimension."""


class IndexUpgradeNeeded(ConfigError):
    """The index predates something answering needs (its chunks' answer units): one command upgrades it in place."""

    def __init__(self, home: object) -> None:
        super().__init__(
            "This index was written by an older Citewise, before answers were read unit by unit: run "
            f"`citewise doctor --repair --home {home}` once to upgrade it in place (nothing is re-embedded)."
        )


class NothingIngestedError(ConfigError):
    """The home (or the PostgreSQL database) holds no indexed document: every question would be refused as if the
    docs lacked its answer, so a command that reads the docs says so instead, and what to run."""


class IngestError(CitewiseError):
    """One document could not be loaded or chunked."""


class HomeBusyError(CitewiseError):
    """Another process is writing to the same home (ingest, remove, repair, server upload) and this writer gave up
    waiting for it, or was told not to wait."""


class SourceError(CitewiseError):
    """A source (website, Git repository, folder) could not be synced, or one of its documents could not be read."""


class RetrievalError(CitewiseError):
    """The index could not be opened or queried."""


class ProviderError(CitewiseError):
    def __init__(
        self, message: str, *, retryable: bool = False, retry_after_s: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s  # the vendor's Retry-After, when it sent one
        self.status = status  # the vendor's HTTP status for a refused request (4xx), when it answered one

    @property
    def rejected_input(self) -> bool:
        """The vendor refused what it was sent (400, 413, 422: too long, malformed, against its policy), not the
        caller (401, 403), the model's name (404) or its own state: the same request will always fail."""
        return self.status in (400, 413, 422)


class RateLimited(ProviderError):
    def __init__(
        self, message: str = "The provider is rate limiting requests.", retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, retryable=True, retry_after_s=retry_after_s)


class ProviderUnavailable(ProviderError):
    def __init__(self, message: str = "The provider is unavailable.", retry_after_s: float | None = None) -> None:
        super().__init__(message, retryable=True, retry_after_s=retry_after_s)


class ProviderTimeout(ProviderError):
    def __init__(self, message: str = "The provider did not answer in time.") -> None:
        super().__init__(message, retryable=True)


# -- vendor failures onto the tree --------------------------------------------------------------------------------

_RATE_WORDS = ("rate limit", "ratelimit", "rate_limit", "quota", "resource exhausted", "resourceexhausted",
               "too many requests", "429")  # fmt: skip
_TIMEOUT_WORDS = ("timeout", "timed out", "deadline exceeded", "deadlineexceeded")
_UNAVAILABLE_WORDS = ("unavailable", "overloaded", "internal server error", "bad gateway", "connection",
                      "connect error", "remote end closed", "500", "502", "503", "529")  # fmt: skip


def _status_code(exc: BaseException) -> int | None:
    for candidate in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status", "code", "http_status"):
            value = getattr(candidate, attr, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    return None


def retry_after(exc: BaseException) -> float | None:
    """Seconds the vendor asked us to wait (`retry-after-ms`, `retry-after` in seconds or as an HTTP date), from the
    HTTP response the SDK's exception carries; None when it sent none."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def classify_provider_error(exc: BaseException, *, context: str = "") -> ProviderError:
    """Map any vendor/transport exception to RateLimited, ProviderTimeout, ProviderUnavailable or a plain,
    non-retryable ProviderError. Works on status codes and exception names/messages, so no vendor package is needed.
    """
    if isinstance(exc, ProviderError):
        return exc
    name = type(exc).__name__
    detail = str(exc).strip() or name
    message = (f"{context}: " if context else "") + f"{name}: {detail}"[:500]
    haystack = f"{name} {detail}".lower()
    status = _status_code(exc)

    wait = retry_after(exc)
    if status == 429:
        return RateLimited(message, retry_after_s=wait)
    if status in (408, 504) or isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError since 3.11
        return ProviderTimeout(message)
    if status is not None and status >= 500:
        return ProviderUnavailable(message, retry_after_s=wait)
    if status is not None and 400 <= status < 500:
        return ProviderError(message, retryable=False, status=status)
    if any(word in haystack for word in _RATE_WORDS):
        return RateLimited(message)
    if any(word in haystack for word in _TIMEOUT_WORDS):
        return ProviderTimeout(message)
    if isinstance(exc, ConnectionError) or any(word in haystack for word in _UNAVAILABLE_WORDS):
        return ProviderUnavailable(message)
    return ProviderError(message, retryable=False)
