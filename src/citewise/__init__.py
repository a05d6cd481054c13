"""Citewise: grounded documentation Q&A. The public surface is deliberately small."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from citewise.agent.runner import Citewise
    from citewise.settings import Settings
    from citewise.types import Answer, Chunk, DocStatus, ExitReason, RetrievalMode, ScoredChunk, SearchResult

__all__ = [
    "Answer",
    "Chunk",
    "Citewise",
    "DocStatus",
    "ExitReason",
    "RetrievalMode",
    "ScoredChunk",
    "SearchResult",
    "Settings",
]
__version__ = "0.1.0"

_TYPES = frozenset({"Answer", "Chunk", "DocStatus", "ExitReason", "RetrievalMode", "ScoredChunk", "SearchResult"})


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `import citewise` — run by every `import citewise.<module>`, the CLI's
    # `--help` too — stays fast: the types bring pydantic, Settings pydantic-settings (and dotenv), Citewise the agent.
    if name in _TYPES:
        from citewise import types

        return getattr(types, name)
    if name == "Settings":
        from citewise.settings import Settings

        return Settings
    if name == "Citewise":
        from citewise.agent.runner import Citewise

        return Citewise
    raise AttributeError(f"module 'citewise' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
