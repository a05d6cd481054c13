"""The one Settings helper of the agent and server tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from citewise.settings import Settings

# No retry waits, no reply cache, no question log, no rate limit, and a write wait long enough that an upload on a
# busy test machine is never answered 202 (test_write_queue.py tests that on purpose).
QUIET: dict[str, dict[str, Any]] = {
    "generation": {"llm_retry_wait_s": 0.0, "cache": False, "llm_retries": 2},
    "server": {"log_questions": False, "rate_limit_per_minute": 0, "write_wait_s": 300},
}


def make_settings(home: Path, **overrides: Any) -> Settings:
    """Settings on `home` with the QUIET defaults; a section given as a dict is merged into them, anything else
    replaces the default."""
    base: dict[str, Any] = {"home": home, **{section: dict(values) for section, values in QUIET.items()}}
    for key, value in overrides.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return Settings(**base)
