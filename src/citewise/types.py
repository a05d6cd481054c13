"""The data Citewise passes between its layers.

Loaders turn a file into a `ParsedDocument` made of `Block`s (text, code or table, each with the heading path it
sits under and, for PDFs, its page). The chunker packs blocks into `Chunk`s. The index stores chunks and hands
them back as `ScoredChunk`s inside a `SearchResult`. `DocumentRecord` is one row of the document registry.

Every id is deterministic: `doc_id` is a uuid5 of the document's source, `chunk_id` a uuid5 of doc_id + index, so
re-ingesting the same tree yields the same ids and a citation key never silently changes meaning.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A fixed namespace keeps ids stable across machines and releases; never change it.
CITEWISE_NAMESPACE = uuid.UUID("6f1c2b1e-5d0a-4c1e-9a57-0c17e5e0a7d1")

PUBLIC_OWNER = "public"


def make_doc_id(source: str) -> str:
    return str(uuid.uuid5(CITEWISE_NAMESPACE, source))


def make_chunk_id(doc_id: str, chunk_index: int) -> str:
    return str(uuid.uuid5(CITEWISE_NAMESPACE, f"{doc_id}:{chunk_index}"))


class BlockKind(StrEnum):
    TEXT = "text"
    CODE = "code"  # a fenced/literal code block: never cut inside
    TABLE = "table"  # a table: never cut inside


class Block(BaseModel):
    """One structural unit of a document, in reading order."""

    model_config = ConfigDict(frozen=True)

    kind: BlockKind = BlockKind.TEXT
    text: str
    headings: tuple[str, ...] = ()  # heading path above this block, outermost first
    page: int | None = None  # 1-based page number for paged sources (PDF)


class ParsedDocument(BaseModel):
    """What a loader returns: the document's blocks plus the metadata it could read from the file itself."""

    source: str  # stable identity of the document (relative path, BEIR id, ...): doc_id is derived from it
    filename: str
    title: str = ""
    blocks: list[Block] = Field(default_factory=list)
    source_url: str | None = None  # from front matter, if the file names one
    date: str | None = None  # ISO date from front matter, else the file's mtime
    metadata: dict[str, Any] = Field(default_factory=dict)  # remaining front matter, loader specifics


class DocStatus(StrEnum):
    PENDING = "PENDING"
    INDEXED = "INDEXED"
    FAILED = "FAILED"


class Chunk(BaseModel):
    """A retrievable passage with everything a citation needs."""

    chunk_id: str
    doc_id: str
    chunk_index: int
    text: str
    filename: str
    source_url: str | None = None
    module: str = ""  # top folder of the source inside the ingested root
    chapter: str = ""  # heading path, " > "-joined
    title: str = ""
    page: int | None = None
    modified: str | None = None  # ISO date (front matter date, else file mtime)
    owner: str = PUBLIC_OWNER
    content_hash: str = ""  # sha256 of text: lets a changed file reuse embeddings of unchanged chunks


class ScoredChunk(Chunk):
    """A chunk as retrieval returns it. `score` is the fused score that ordered the results; `dense_score` is the
    cosine similarity to the query (None in lexical mode), the figure the minimum-score gate uses."""

    score: float
    dense_score: float | None = None
    lexical_score: float | None = None


class RetrievalMode(StrEnum):
    HYBRID = "hybrid"
    DENSE = "dense"
    LEXICAL = "lexical"


class SearchResult(BaseModel):
    query: str
    mode: RetrievalMode
    chunks: list[ScoredChunk]
    empty: bool  # True when nothing passed the minimum score: the agent must not answer from nothing
    cached: bool = False


class DocumentRecord(BaseModel):
    """One row of the document registry (`citewise docs list`)."""

    doc_id: str
    source: str
    path: str  # absolute path of the file it was read from ("" for in-memory documents)
    filename: str
    title: str = ""
    owner: str = PUBLIC_OWNER
    status: DocStatus
    error: str | None = None
    chunk_count: int = 0
    file_hash: str = ""  # sha256 of the file bytes + ingest fingerprint: unchanged → nothing to do
    updated_at: str = ""
