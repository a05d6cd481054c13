"""Citewise: grounded documentation Q&A. The public surface is deliberately small."""

from typing import TYPE_CHECKING, Any

from citewise.types import Answer, Chunk, DocStatus, ExitReason, RetrievalMode, ScoredChunk, SearchResult

if TYPE_CHECKING:
    from citewise.agent.runner import Citewise
    from citewise.settings import Settings

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


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `import citewise` and `citewise --help` stay fast: Settings brings
    # pydantic-settings (and dotenv), Citewise the agent.
    if name == "Settings":
        from citewise.settings import Settings

        return Settings
    if name == "Citewise":
        from citewise.agent.runner import Citewise

        return Citewise
    raise AttributeError(f"module 'citewise' has no attribute {name!r}")
