"""The data Citewise passes between its layers.

Loaders turn a file into a `ParsedDocument` made of `Block`s (text, code or table, each with the heading path it
sits under and, for PDFs, its page). The chunker packs blocks into `Chunk`s. The index stores chunks and hands
them back as `ScoredChunk`s inside a `SearchResult`. `DocumentRecord` is one row of the document registry.

Every id is deterministic: `doc_id` is a uuid5 of the document's source, `chunk_id` a uuid5 of doc_id + index, so
re-ingesting the same tree yields the same ids and a citation key never silently changes meaning.
"""

from __future__ import annotations

import re
import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from citewise.errors import ValidationError

# A fixed namespace keeps ids stable across machines and releases; never change it.
CITEWISE_NAMESPACE = uuid.UUID("6f1c2b1e-5d0a-4c1e-9a57-0c17e5e0a7d1")

PUBLIC_OWNER = "public"
# Owner ids: what an API key maps to, an ingest's --owner, a folder name under uploads/ (hence no dots-only id).
OWNER_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,128}$")


# What one request may hand over as "the text I selected": searched in memory, never stored.
MAX_SELECTED_TEXT_CHARS = 10_000


def check_text(name: str, text: object) -> None:
    """Text must be valid Unicode: a lone surrogate (JSON's "\\ud800") can't be encoded, embedded or logged."""
    if isinstance(text, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(f"{name} is not valid text: a lone surrogate at position {exc.start}.") from None


def check_selected_text(text: object) -> str:
    """The one check of a selected text, wherever it comes in (a question's selection, `citewise search`)."""
    check_text("selected_text", text)
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("selected_text cannot be empty.")
    if len(text) > MAX_SELECTED_TEXT_CHARS:
        raise ValidationError(f"selected_text is {len(text)} characters; the limit is {MAX_SELECTED_TEXT_CHARS}.")
    return text


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
    # Every heading in reading order as (level, text), including those with no text of their own under them.
    outline: list[tuple[int, str]] = Field(default_factory=list)
    # Heading path (" > "-joined, as a chunk's `chapter`) → the #fragment its published page gives that section, so a
    # chunk's source_url deep-links to it. Filled in by sources (a page's own heading ids, or the site's slug rule).
    anchors: dict[str, str] = Field(default_factory=dict)
    revision: str | None = None  # the Git commit the document was read at


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


class RankingProfile(BaseModel):
    """How a search's ranked lists looked before fusion and the gate: the cosines of the best vector candidates
    (best first) and the chunk ids at the top of the vector and the full-text lists. Quote mode weighs the best
    passage against the rest of the corpus with it."""

    dense: list[float] = Field(default_factory=list)
    dense_top: list[str] = Field(default_factory=list)
    lexical_top: list[str] = Field(default_factory=list)


class SearchResult(BaseModel):
    query: str
    mode: RetrievalMode
    chunks: list[ScoredChunk]
    empty: bool  # True when nothing passed the minimum score: the agent must not answer from nothing
    cached: bool = False
    corrections: dict[str, str] = Field(default_factory=dict)  # misspelled word → the index word searched instead
    profile: RankingProfile = Field(default_factory=RankingProfile)


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
    revision: str = ""  # the Git commit the document was read at ("" when it did not come from Git)


# ---------------------------------------------------------------------------------------------------------------
# Answering: what the agent returns. The contract users code against (docs/answers.md describes every field).
# ---------------------------------------------------------------------------------------------------------------


class ExitReason(StrEnum):
    """Why a run stopped. Every run ends with exactly one; the user message and retryable flag come from one table
    (`citewise.agent.limits.EXIT_REASONS`)."""

    COMPLETED = "COMPLETED"
    MAX_TURNS_REACHED = "MAX_TURNS_REACHED"
    MAX_TOOL_CALLS_REACHED = "MAX_TOOL_CALLS_REACHED"
    MAX_CONTEXT_REACHED = "MAX_CONTEXT_REACHED"
    EMPTY_INPUT = "EMPTY_INPUT"
    RATE_LIMITED = "RATE_LIMITED"
    LLM_ERROR = "LLM_ERROR"
    LLM_GENERATION_FAILURE = "LLM_GENERATION_FAILURE"
    INVALID_TOOL_CALL = "INVALID_TOOL_CALL"


class Status(StrEnum):
    SUCCESS = "success"  # an answer grounded in the docs
    REFUSED = "refused"  # the docs don't hold the answer (an honest, normal outcome)
    ERROR = "error"  # the run could not produce an answer (provider failure, invalid input ...)


class AnswerStyle(StrEnum):
    DEFAULT = "default"  # markdown with [n] markers
    STRUCTURED = "structured"  # "## Topic", "### Key Points", "### Why It Matters"


REFUSAL_TEXT = "I don't have enough information in the current documentation to answer that."


class Citation(BaseModel):
    """One numbered source of an answer: `[n]` in the answer text refers to the citation with this `n`."""

    n: int
    doc_id: str
    chunk_id: str
    chunk_index: int
    filename: str
    source_url: str | None = None
    module: str = ""
    chapter: str = ""
    snippet: str = ""  # the start of the chunk text (or the quoted sentence in quote mode)
    score: float | None = None
    # Character spans [start, end) inside the chunk's text of the text the answer quotes from it.
    quote_spans: list[tuple[int, int]] = Field(default_factory=list)
    revision: str | None = None  # the Git commit the cited document was read at (documents synced from Git)


class SectionRef(BaseModel):
    """A section of the docs worth reading — not a citation: a refusal lists the closest ones it found."""

    doc_id: str
    chunk_id: str
    filename: str
    chapter: str = ""
    title: str = ""
    source_url: str | None = None

    @classmethod
    def of(cls, chunk: Chunk) -> SectionRef:
        return cls(**chunk.model_dump(include=set(cls.model_fields)))


class TraceEvent(BaseModel):
    """One step of a run: plan, constraints, tool_call, tool_result, validation, reprompt, retrieval_failure,
    fallback, guard, exit. Carries no timing, so the trace of a deterministic run is identical run to run."""

    type: str
    node: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class ConflictValue(BaseModel):
    value: str
    chunk_id: str
    doc_id: str
    filename: str
    date: str | None = None


class ConflictInfo(BaseModel):
    """Retrieved chunks that disagree about one thing (e.g. the same setting with different values)."""

    subject: str
    values: list[ConflictValue]
    resolved_value: str | None = None  # set when the "newest dated document" rule was asked for and applied
    rule: str | None = None


class Determinism(BaseModel):
    input_hash: str  # question + options + index version + model settings
    output_hash: str  # answer text + citations + exit reason


class Answer(BaseModel):
    """The result of one question. `exit_reason` is always set; `status` says how to present it."""

    question: str
    answer: str
    status: Status
    exit_reason: ExitReason
    retryable: bool = False
    mode: str = ""  # the answerer that produced it: "extractive", "local", or "provider:model"
    citations: list[Citation] = Field(default_factory=list)
    sources: list[ScoredChunk] = Field(default_factory=list)  # every chunk retrieved or opened during the run
    insufficiencies: list[str] = Field(default_factory=list)
    refusal_reason: str | None = None  # stable code: weak_evidence, empty_retrieval, not_in_documentation, …
    refusal_detail: str | None = None  # why, in plain words (quote mode)
    closest_sections: list[SectionRef] = Field(default_factory=list)  # on a refusal: where to read instead (≤ 3)
    empty_retrieval: bool = False
    conflicting_info: list[ConflictInfo] = Field(default_factory=list)
    determinism: Determinism | None = None
    trace: list[TraceEvent] = Field(default_factory=list)
    session_id: str | None = None
    cached: bool = False
    timing_ms: float = 0.0  # wall time; the only field that differs between two identical runs
