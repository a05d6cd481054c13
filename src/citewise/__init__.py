"""Citewise: grounded documentation Q&A. The public surface is deliberately small."""

from citewise.settings import Settings
from citewise.types import Chunk, DocStatus, RetrievalMode, ScoredChunk, SearchResult

__all__ = ["Chunk", "DocStatus", "RetrievalMode", "ScoredChunk", "SearchResult", "Settings"]
__version__ = "0.1.0"
