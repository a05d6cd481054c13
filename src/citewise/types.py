"""The data Citewise passes between its layers.

Loaders turn a file into a `ParsedDocument` made of `Block`s (text, code or table, each with the heading path it
sits under and, for PDFs, its page). The chunker packs blocks into `Chunk`s. The index stores chunks and hands
them back as `ScoredChunk`s inside a `SearchResult`. `DocumentRecord` is one row of the document registry.

Every id is deterministic: `doc_id` is a uuid5 of the document's source, `chunk_id` a uuid5 of doc_id + index, so
re-ingesting the same tree yields the same ids and a citation key never silently changes meaning.

Asking: a `RunRequest` (question, `Owner`, selection, history, session, `AnswerMode`, style, `Limits`) is built and
validated once where a question comes in, and passed whole; the run records its steps as `TraceEvent`s of a fixed
`TraceKind` and ends with an `Answer`.
"""

from __future__ import annotations

import json
import re
import uuid
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from citewise.errors import ValidationError

# A fixed namespace keeps ids stable across machines and releases; never change it.
CITEWISE_NAMESPACE = uuid.UUID("6f1c2b1e-5d0a-4c1e-9a57-0c17e5e0a7d1")

PUBLIC_OWNER = "public"
# Owner ids: what an API key maps to, an ingest's --owner, a folder name under uploads/ (hence no dots-only id).
OWNER_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,128}$")


class _Model(BaseModel):
    """The base of every model here: its validator is built on first use, not at import, so a command that uses
    few of them (`citewise search` validates a handful, `--help` none) does not build all ~20 at start-up."""

    model_config = ConfigDict(defer_build=True)


# What one request may hand over as "the text I selected": searched in memory, never stored.
MAX_SELECTED_TEXT_CHARS = 10_000
# The longest question any surface accepts (an error log pasted with it fits): the default and the ceiling of
# agent.max_question_chars, and the request schemas' maxLength. A long one is searched condensed
# (citewise.agent.condense); the answerer gets it whole.
MAX_QUESTION_CHARS = 10_000


def too_long(what: str, length: int, limit: int) -> str:
    """The one sentence for a text over its limit, wherever it is checked: it says both numbers, never the text."""
    return f"{what} is {length:,} characters long; the limit is {limit:,}."


class Owner(_Model):
    """Whose documents a caller may see. This is the one visibility rule: an owner sees its own documents and the
    public ones; no owner (`Owner()`, the public caller) sees public documents only. The store's filter builder
    applies it (`citewise.index.store.build_where`), so a search or a lookup never returns what the caller may not
    see; the server's document routes ask `sees()` of the registry's rows."""

    model_config = ConfigDict(frozen=True)

    id: str = PUBLIC_OWNER

    @classmethod
    def of(cls, value: Owner | str | None) -> Owner:
        """An owner from what a caller passed: an `Owner`, an owner id (validated), or None for the public."""
        if isinstance(value, Owner):
            return value
        if value is None:
            return PUBLIC
        if not isinstance(value, str) or not OWNER_RE.match(value):
            raise ValidationError(f"Invalid owner id {value!r}: use 1-128 letters, digits or the characters _ . @ -")
        return PUBLIC if value == PUBLIC_OWNER else cls(id=value)

    @property
    def is_public(self) -> bool:
        return self.id == PUBLIC_OWNER

    @property
    def visible(self) -> tuple[str, ...]:
        """The owners whose documents this caller sees, public first."""
        return (PUBLIC_OWNER,) if self.is_public else (PUBLIC_OWNER, self.id)

    def sees(self, owner: str) -> bool:
        return owner in self.visible

    def __str__(self) -> str:
        return self.id


# Constructed, not validated (its one field is the default): validating here would build Owner's validator, and
# pydantic's first one in a process (its plugin scan), at the import of every command, `--help` too.
PUBLIC = Owner.model_construct()


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


class Block(_Model):
    """One structural unit of a document, in reading order."""

    model_config = ConfigDict(frozen=True)

    kind: BlockKind = BlockKind.TEXT
    text: str
    headings: tuple[str, ...] = ()  # heading path above this block, outermost first
    page: int | None = None  # 1-based page number for paged sources (PDF)


class ParsedDocument(_Model):
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


class Chunk(_Model):
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
    # Its answer units, made at ingest (`citewise.text.answer_units`): (start, end, kind) spans of `text` that quote
    # mode may quote — sentences, list items, table rows, code blocks. None: an index written before they were kept
    # (`KnowledgeBase.upgrade`); stored as JSON text.
    units: tuple[tuple[int, int, str], ...] | None = None

    @field_validator("units", mode="before")
    @classmethod
    def _units_from_json(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    @field_serializer("units", when_used="json")
    def _units_as_lists(self, value: tuple[tuple[int, int, str], ...] | None) -> list | None:
        return None if value is None else [list(u) for u in value]

    def units_json(self) -> str | None:
        """How a store keeps the units: compact JSON, or NULL for none recorded."""
        return None if self.units is None else json.dumps([list(u) for u in self.units], separators=(",", ":"))

    @property
    def section(self) -> tuple[str, str]:
        """The section it belongs to (document and heading path): a long section is cut into several chunks."""
        return (self.doc_id, self.chapter)


class ScoredChunk(Chunk):
    """A chunk as retrieval returns it. `score` is the fused score that ordered the results; `dense_score` is its
    similarity to the query, the mean of the chunk's cosine and its best sentence's (`store.dense_scores`; None in
    lexical mode), the figure the minimum-score gate uses."""

    score: float
    dense_score: float | None = None
    lexical_score: float | None = None


class RetrievalMode(StrEnum):
    HYBRID = "hybrid"
    DENSE = "dense"
    LEXICAL = "lexical"


class RankingProfile(_Model):
    """How a search's ranked lists looked before fusion and the gate: the cosines of the best vector candidates
    (best first) and the chunk ids at the top of the vector and the full-text lists. Quote mode weighs the best
    passage against the rest of the corpus with it."""

    dense: list[float] = Field(default_factory=list)
    dense_top: list[str] = Field(default_factory=list)
    lexical_top: list[str] = Field(default_factory=list)


class SearchResult(_Model):
    query: str
    mode: RetrievalMode
    chunks: list[ScoredChunk]
    empty: bool  # True when nothing passed the minimum score: the agent must not answer from nothing
    cached: bool = False
    corrections: dict[str, str] = Field(default_factory=dict)  # misspelled word → the index word searched instead
    profile: RankingProfile = Field(default_factory=RankingProfile)


class DocumentRecord(_Model):
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


class AnswerMode(StrEnum):
    """Who answers: quote mode (verbatim sentences of the docs, no model) or the agent (a language model with the
    docs' tools). "extractive" is quote mode's older name and is still accepted."""

    QUOTE = "quote"
    AGENT = "agent"

    @classmethod
    def parse(cls, value: AnswerMode | str | None) -> AnswerMode | None:
        if value is None or isinstance(value, AnswerMode):
            return value
        if value == "extractive":
            return cls.QUOTE
        try:
            return cls(value)
        except ValueError:
            raise ValidationError(f"Unknown mode {value!r}; use quote or agent") from None


REFUSAL_TEXT = "I don't have enough information in the current documentation to answer that."


class Citation(_Model):
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


class SectionRef(_Model):
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


class TraceKind(StrEnum):
    """Every kind of step a run records (docs/answers.md says what each one carries)."""

    GUARD = "guard"  # empty input, a greeting, or a question
    CONSTRAINTS = "constraints"  # what the question demands (counts, steps, sections, searches)
    STANDALONE = "standalone"  # a follow-up read with the conversation: the standalone question searched
    PLAN = "plan"  # the 2-5 step plan (the model's, or the default)
    TOOL_CALL = "tool_call"  # a search or an open, before it runs
    TOOL_RESULT = "tool_result"  # what it returned (citation numbers, chunk ids)
    TOOL_REPEAT = "tool_repeat"  # the same call again: answered from the log, not run
    TOOL_BUDGET = "tool_budget"  # a call past the lookup budget, refused
    INVALID_TOOL_CALL = "invalid_tool_call"  # an unknown tool, bad arguments, or an unreadable JSON action
    RETRIEVAL_FAILURE = "retrieval_failure"  # a search that failed or found nothing: kind, action, attempts
    SPELLING = "spelling"  # misspelled words a search corrected
    CONTEXT = "context"  # the conversation outgrew agent.max_context_chars
    FALLBACK = "fallback"  # a fallback model answered instead of the primary
    LLM_ERROR = "llm_error"  # every model failed for good
    GENERATION_FAILURE = "generation_failure"  # an empty reply: asked again, or given up
    REPROMPT = "reprompt"  # the model was sent back (validation errors, an unparseable action)
    DRAFT = "draft"  # the model wrote an answer
    COMPOSE = "compose"  # quote mode composed (or refused) an answer of verbatim sentences
    VALIDATION = "validation"  # the gate's verdict on a draft
    FORCED_SYNTHESIS = "forced_synthesis"  # the answer was composed from what was gathered, not written by the model
    UNCITED_ANSWER = "uncited_answer"  # a draft that cites nothing, replaced by the refusal
    GROUNDED = "grounded"  # the citations the answer kept
    EXIT = "exit"  # the exit reason and status; always the last step


class TraceEvent(_Model):
    """One step of a run. Carries no timing, so the trace of a deterministic run is identical run to run."""

    type: TraceKind
    node: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


def trace_event(kind: TraceKind, node: str, /, **data: Any) -> dict[str, Any]:
    """The one way a step is recorded: as the run's state keeps it (plain JSON, what a checkpoint stores)."""
    return TraceEvent(type=kind, node=node, data=data).model_dump(mode="json")


class RetrievalFailure(StrEnum):
    """Why a search did not return passages (the `kind` of a retrieval_failure step)."""

    CONNECTION_ERROR = "connection_error"  # the index could not be opened or read
    SERVICE_UNAVAILABLE = "service_unavailable"  # the embedding provider failed
    INVALID_QUERY = "invalid_query"  # the search itself was malformed (the model is told why)
    EMPTY_RESULTS = "empty_results"  # nothing passed the minimum score

    @property
    def is_outage(self) -> bool:
        """The index or its embedding model is unreachable: no answer can be given, and a retry may help."""
        return self in (RetrievalFailure.CONNECTION_ERROR, RetrievalFailure.SERVICE_UNAVAILABLE)


class ConflictValue(_Model):
    value: str
    chunk_id: str
    doc_id: str
    filename: str
    date: str | None = None


class ConflictInfo(_Model):
    """Retrieved chunks that disagree about one thing (e.g. the same setting with different values)."""

    subject: str
    values: list[ConflictValue]
    resolved_value: str | None = None  # set when the "newest dated document" rule was asked for and applied
    rule: str | None = None


class Determinism(_Model):
    input_hash: str  # question + options + index version + model settings
    output_hash: str  # answer text + citations + exit reason


class Answer(_Model):
    """The result of one question. `exit_reason` is always set; `status` says how to present it."""

    question: str
    answer: str
    status: Status
    exit_reason: ExitReason
    retryable: bool = False
    # Seconds to wait before a retry (HTTP Retry-After), for a run a model provider's failure ended: the provider's
    # own Retry-After when it sent one, else the exit-reason table's; None when there is nothing to wait for.
    retry_after_s: float | None = None
    mode: str = ""  # the answerer that produced it: "extractive", "local", or "provider:model"
    citations: list[Citation] = Field(default_factory=list)
    sources: list[ScoredChunk] = Field(default_factory=list)  # every chunk retrieved or opened during the run
    insufficiencies: list[str] = Field(default_factory=list)
    refusal_reason: str | None = None  # stable code: weak_evidence, empty_retrieval, not_in_documentation, …
    refusal_detail: str | None = None  # why, in plain words (quote mode)
    closest_sections: list[SectionRef] = Field(default_factory=list)  # on a refusal: where to read instead (≤ 3)
    empty_retrieval: bool = False
    retrieval_failure: RetrievalFailure | None = None  # set when the index could not be searched (status error)
    conflicting_info: list[ConflictInfo] = Field(default_factory=list)
    determinism: Determinism | None = None
    trace: list[TraceEvent] = Field(default_factory=list)
    session_id: str | None = None
    cached: bool = False
    timing_ms: float = 0.0  # wall time; the only field that differs between two identical runs


# ---------------------------------------------------------------------------------------------------------------
# Asking: one request, validated once where it comes in
# ---------------------------------------------------------------------------------------------------------------


class Limits(_Model):
    """The bounds of one run (from `settings.agent` and `settings.generation`; `citewise.agent.limits.run_limits`)."""

    model_config = ConfigDict(frozen=True)

    max_turns: int
    max_tool_calls: int
    max_context_chars: int
    max_reprompts: int
    max_question_chars: int
    tool_retries: int


class HistoryTurn(_Model):
    """One earlier turn of a conversation a client keeps itself."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant"]
    content: str


SESSION_ID_RE = OWNER_RE  # what a session id may be: the same alphabet as an owner id


class RunRequest(_Model):
    """One question and everything that decides how it is answered. Built by `RunRequest.checked` where a question
    comes in (the library's `Citewise.request`, which the HTTP routes and the CLI call), then passed whole: the
    graph's state holds it, the tools read the owner and the selection from it."""

    model_config = ConfigDict(frozen=True)

    question: str
    owner: Owner = PUBLIC
    selected_text: str | None = None
    history: tuple[HistoryTurn, ...] = ()
    session_id: str | None = None
    mode: AnswerMode = AnswerMode.QUOTE
    style: AnswerStyle = AnswerStyle.DEFAULT
    trace: bool = True  # copy the trace into the Answer
    limits: Limits

    @classmethod
    def checked(
        cls,
        question: object,
        *,
        limits: Limits,
        default_mode: AnswerMode,
        default_style: AnswerStyle,
        mode: AnswerMode | str | None = None,
        style: AnswerStyle | str | None = None,
        owner: Owner | str | None = None,
        selected_text: object = None,
        history: object = None,
        session_id: object = None,
        trace: bool = True,
    ) -> RunRequest:
        """The request, or a ValidationError that says what is wrong (the one place a request is checked). A mode
        or style not given is the default one (which the caller decides: settings, an injected model)."""
        if not isinstance(question, str):
            raise ValidationError("The question must be a string.")
        if len(question) > limits.max_question_chars:
            raise ValidationError(too_long("The question", len(question), limits.max_question_chars))
        check_text("The question", question)
        owner = Owner.of(owner)
        if selected_text is not None:
            selected_text = check_selected_text(selected_text)
        try:
            style = AnswerStyle(style or default_style)
        except ValueError:
            raise ValidationError(f"Unknown style {style!r}; use default or structured") from None
        if session_id is not None and (not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id)):
            raise ValidationError("session_id must be 1-128 letters, digits or the characters _ . @ -")
        turns = _history(history)
        return cls(
            question=question,
            owner=owner,
            selected_text=selected_text,
            history=turns,
            session_id=session_id,
            mode=AnswerMode.parse(mode) or default_mode,
            style=style,
            trace=bool(trace),
            limits=limits,
        )


def _history(history: object) -> tuple[HistoryTurn, ...]:
    if not history:
        return ()
    if not isinstance(history, list | tuple):
        raise ValidationError("history must be a list of {'role': 'user'|'assistant', 'content': str}")
    turns = []
    for i, turn in enumerate(history):
        if isinstance(turn, HistoryTurn):
            turns.append(turn)
            continue
        if isinstance(turn, BaseModel):
            turn = turn.model_dump()
        if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
            raise ValidationError(f"history[{i}] must be {{'role': 'user'|'assistant', 'content': str}}")
        content = turn.get("content")
        if not isinstance(content, str):
            raise ValidationError(f"history[{i}].content must be a string")
        check_text(f"history[{i}].content", content)
        turns.append(HistoryTurn(role=turn["role"], content=content))
    return tuple(turns)
