"""All of Citewise's configuration, in one tree.

Sources, strongest first: arguments passed to `Settings(...)` (the CLI's `--home` etc.), environment variables
(`CITEWISE_` prefix, nested fields with `__`, e.g. `CITEWISE_RETRIEVAL__MIN_SCORE=0.3`), a `citewise.toml` in the
working directory (or the file named by `CITEWISE_CONFIG`), then the defaults below. Settings are passed in to the
code that needs them, never read from a global.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from citewise.types import MAX_QUESTION_CHARS, OWNER_RE, PUBLIC_OWNER, AnswerStyle, RetrievalMode

DEFAULT_EMBEDDINGS = "local:all-MiniLM-L6-v2"
# settings.llm's name for quote mode: answers of verbatim sentences, no language model.
QUOTE_ANSWERER = "extractive"
DEFAULT_LLM = QUOTE_ANSWERER
DEFAULT_GREETINGS = ("hi", "hello", "hey", "salam", "assalam o alaikum", "assalamu alaikum", "good morning")

DEFAULT_GLOBS = ("**/*.md", "**/*.mdx", "**/*.markdown", "**/*.html", "**/*.htm", "**/*.pdf", "**/*.rst", "**/*.txt")


class IngestSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chunk_size: int = Field(1000, ge=200, le=8000, description="Target chunk size in characters.")
    chunk_overlap: int = Field(
        150, ge=0, le=2000, description="Characters of the previous chunk repeated at the start of the next one."
    )
    max_block_chars: int = Field(
        6000,
        ge=500,
        description="A code block or table longer than this is split on line boundaries; shorter ones are never cut.",
    )
    base_url: str | None = Field(
        None, description="Base URL of the published docs; a chunk's source_url is base_url + its relative path."
    )
    slugs: Literal["github", "mkdocs"] = Field(
        "github",
        description=(
            "With base_url: the heading anchors of the published pages (github or mkdocs), so that a citation links "
            "to its section (`page#section`)."
        ),
    )
    sentence_vectors: bool = Field(
        True,
        description=(
            "Store a vector per sentence beside each chunk's, pooled from the same model run, and score a chunk with "
            "its best sentence too (two to three times the vector storage; off: chunk vectors alone)."
        ),
    )
    globs: tuple[str, ...] = Field(DEFAULT_GLOBS, description="File patterns ingested when a directory is given.")
    max_file_mb: float = Field(50.0, gt=0, description="Files larger than this fail with a clear error.")
    embed_batch_size: int = Field(
        8, ge=1, le=1024, description="Chunks per forward pass of a local model (small batches stay in CPU cache)."
    )
    commit_every: int = Field(
        512,
        ge=1,
        description=(
            "Chunks embedded between two commits to the index (progress survives a crash); a bigger document is "
            "committed in several batches of this size."
        ),
    )
    write_lock_wait_s: float = Field(
        3600.0,
        ge=0,
        description=(
            "How long a writer (ingest, docs remove, doctor --repair, server upload/delete) waits for another writer "
            "on the same home before it gives up; 0 fails at once, like `--no-wait`."
        ),
    )

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_below_size(cls, v: int, info: Any) -> int:
        size = info.data.get("chunk_size", 1000)
        if v >= size // 2:
            raise ValueError(f"chunk_overlap ({v}) must be less than half of chunk_size ({size})")
        return v


class RetrievalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: RetrievalMode = Field(RetrievalMode.HYBRID, description="Default retrieval mode.")
    top_k: int = Field(5, ge=1, le=10, description="Default number of chunks returned.")
    max_top_k: int = Field(10, ge=1, le=10, description="Largest top_k a caller may ask for.")
    min_score: float = Field(
        0.25,
        ge=-1.0,
        le=1.0,
        description=(
            "Minimum similarity (dense score: the mean of the chunk's cosine and its best sentence's) between "
            "query and chunk. When no retrieved chunk reaches it the result is "
            "flagged empty. In lexical mode (no vectors) a result is empty only when nothing matched."
        ),
    )
    min_score_matched: float = Field(
        0.1,
        ge=-1.0,
        le=1.0,
        description=(
            "Minimum similarity (dense score) for a chunk the full-text (BM25) search matched as well: short "
            "questions sit far from every passage in vector space while their words still find the right one."
        ),
    )
    candidates: int = Field(50, ge=10, le=1000, description="Candidates fetched per side before fusion.")
    rrf_k: int = Field(
        5,
        ge=1,
        description="Reciprocal rank fusion constant: smaller trusts the top of each ranked list more.",
    )
    lexical_weight: float = Field(
        0.5,
        ge=0.0,
        le=2.0,
        description="Weight of the BM25 list in fusion (the vector list weighs 1): BM25 adds recall and breaks ties.",
    )
    lexical_best_within: int = Field(
        5,
        ge=0,
        le=10,
        description=(
            "A hybrid search keeps the BM25 list's best chunk within its first this many results (0 or 1: off): a "
            "passage that holds the question's exact words but embeds poorly (a table, a list of values) isn't fused "
            "away."
        ),
    )
    cache_size: int = Field(1024, ge=0, description="Retrieval results kept in the in-memory cache (0 disables).")
    ann_index_threshold: int = Field(
        50_000, ge=1000, description="Build an approximate vector index once the index holds this many chunks."
    )


class AgentSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: Literal["default", "docuchat"] = Field(
        "default", description='Limits profile: "docuchat" allows 5 tool calls instead of 3.'
    )
    max_turns: int = Field(6, ge=1, le=50, description="LLM turns per question before MAX_TURNS_REACHED.")
    max_tool_calls: int | None = Field(
        None, ge=1, le=50, description="Unique tool calls per question (default: 3, or 5 in the docuchat profile)."
    )
    max_context_chars: int = Field(
        24_000,
        ge=1000,
        description=(
            "Conversation history kept for the model, newest first; more → MAX_CONTEXT_REACHED. The default holds "
            "the longest question (max_question_chars) with the run's lookups."
        ),
    )
    max_reprompts: int = Field(3, ge=0, le=10, description="Times the validator may send an answer back for repair.")
    max_question_chars: int = Field(
        MAX_QUESTION_CHARS,
        ge=1,
        le=MAX_QUESTION_CHARS,
        description=(
            "Longest question accepted (an error log pasted with it fits): the web page's, /chat's, /v1's and the "
            "OpenAPI schema's limit; a longer one is a 422 that says both numbers. A long one is searched condensed."
        ),
    )
    greetings: tuple[str, ...] = Field(
        DEFAULT_GREETINGS, description="Messages answered with a welcome, no retrieval (case/punctuation ignored)."
    )
    search_top_k: int = Field(5, ge=1, le=10, description="Chunks the mandatory first search retrieves.")
    style: AnswerStyle = Field(AnswerStyle.DEFAULT, description="Default answer style.")

    @property
    def tool_call_limit(self) -> int:
        if self.max_tool_calls is not None:
            return self.max_tool_calls
        return 5 if self.profile == "docuchat" else 3


class GenerationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (0: deterministic).")
    seed: int = Field(42, description="Seed passed to vendors that accept one.")
    max_tokens: int = Field(1024, ge=16, le=32_000, description="Most tokens in one model reply.")
    plan_timeout_s: float = Field(30.0, gt=0, description="Timeout of the planner call.")
    chat_timeout_s: float = Field(60.0, gt=0, description="Timeout of one chat call.")
    embed_timeout_s: float = Field(30.0, gt=0, description="Timeout of one vendor embedding call.")
    llm_retries: int = Field(2, ge=0, le=10, description="Retries of a failed LLM call (exponential backoff + jitter).")
    llm_retry_wait_s: float = Field(
        1.0,
        ge=0.0,
        le=60.0,
        description="First backoff before an LLM retry; doubles each retry, plus up to as much jitter.",
    )
    max_retry_after_s: float = Field(
        30.0,
        ge=0.0,
        le=600.0,
        description=(
            "Longest Retry-After a provider may ask for before a retry; a longer one ends the attempt (the next "
            "fallback answers) instead of holding the question."
        ),
    )
    tool_retries: int = Field(3, ge=0, le=10, description="Retries of a failed tool call.")
    cache: bool = Field(True, description="Cache non-streaming LLM replies (SQLite under CITEWISE_HOME).")
    cache_path: Path | None = Field(
        None, description="Where the LLM cache lives (default: CITEWISE_HOME/llm_cache.sqlite3)."
    )
    local_model_path: Path | None = Field(
        None,
        description="A GGUF file or Hugging Face model folder for the `local` answerer (default: bundled SmolLM2).",
    )


# Quote mode's decision model, fitted by bench/fit_quote_decision.py (which writes this file with the data manifest
# and the per-distribution figures it was judged on). Settings read it as their default; a user may override it.
_QUOTE_MODEL = Path(__file__).parent / "quote" / "decision.json"


def _fitted(key: str, default: Any = None) -> Any:
    fitted = json.loads(_QUOTE_MODEL.read_text(encoding="utf-8"))
    return fitted[key] if default is None else fitted.get(key, default)


QUOTE_RULES = ("lead_in", "announced", "antecedent", "qualifier", "anchors")


class QuoteSettings(BaseModel):
    """Quote mode (no model): how much it quotes and the fitted model that decides between answering and refusing."""

    model_config = ConfigDict(extra="forbid")

    max_sentences: int = Field(4, ge=1, le=20, description="Most sentences in one answer (steps of a procedure count).")
    passages: int = Field(
        5,
        ge=1,
        le=10,
        description=(
            "Passages read per search (per part of a multi-part question) to quote from: the first that hold anything "
            "to quote (a passage of page furniture alone gives way to the next)."
        ),
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: dict(_fitted("weights")),
        description=(
            "Weights of the answer-or-refuse model over the reader's evidence (fitted by bench/fit_quote_decision.py; "
            "see docs/answers.md#how-quote-mode-decides)."
        ),
    )
    intercept: float = Field(default_factory=lambda: float(_fitted("intercept")), description="The model's intercept.")
    threshold: float = Field(
        default_factory=lambda: float(_fitted("threshold")),
        ge=0.0,
        le=1.0,
        description="Answer when the model's probability that the evidence answers the question reaches this.",
    )
    ranker_weights: dict[str, float] = Field(
        default_factory=lambda: dict(_fitted("ranker", {}).get("weights", {})),
        description=(
            "Weights of the unit ranker, which combines the reader's score with where the unit's passage ranked and "
            "how much of the question it holds (fitted by bench/fit_quote_ranker.py); empty: the reader's score alone."
        ),
    )
    ranker_intercept: float = Field(
        default_factory=lambda: float(_fitted("ranker", {}).get("intercept", 0.0)),
        description="The unit ranker's intercept.",
    )
    relative_cut: float = Field(
        default_factory=lambda: float(_fitted("relative_cut")),
        ge=0.0,
        description=(
            "Quote, besides the best unit, the units the reader scores within this many log-odds of it (up to "
            "max_sentences)."
        ),
    )
    min_unit_score: float = Field(
        default_factory=lambda: float(_fitted("min_unit_score")),
        description="A unit besides the best one is quoted only when the reader's log-odds that it answers reach this.",
    )
    rules: tuple[str, ...] = Field(
        QUOTE_RULES,
        description=(
            "The composition rules and the guard quote mode applies beside the reader (docs/answers.md): a unit's "
            "lead-in, what a sentence announces, the sentence a pointing-back one needs, a qualifying next "
            "sentence, and the anchor guard. Each is measured in BENCHMARKS.md; leaving one out is for measuring."
        ),
    )

    @field_validator("weights")
    @classmethod
    def _known_features(cls, value: dict[str, float]) -> dict[str, float]:
        known = set(_fitted("features"))
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown decision features {unknown}; the model reads {sorted(known)}")
        return value

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - set(QUOTE_RULES))
        if unknown:
            raise ValueError(f"unknown quote rules {unknown}; choose from {list(QUOTE_RULES)}")
        return value


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="Interface `citewise serve` binds to.")
    port: int = Field(8000, ge=1, le=65535, description="Port `citewise serve` listens on.")
    rate_limit_per_minute: int = Field(
        60, ge=0, description="Requests per minute per API key and client address (0: unlimited)."
    )
    max_upload_mb: float = Field(50.0, gt=0, description="Largest accepted upload.")
    write_queue_size: int = Field(
        16, ge=1, le=1000, description="Uploads and deletes waiting to be written; past it the server answers 503."
    )
    write_wait_s: float = Field(
        20.0,
        gt=0,
        description=(
            "How long an upload or delete request waits for its write; after that it gets 202 and the write goes on "
            "(GET /api/documents shows it PENDING until it lands)."
        ),
    )
    shutdown_grace_s: float = Field(
        10.0,
        gt=0,
        description=(
            "On shutdown, how long the write in progress gets to stop at its next commit; queued writes are "
            "abandoned and the next start re-ingests uploads that never landed."
        ),
    )
    log_questions: bool = Field(
        True, description="Log questions and outcomes under CITEWISE_HOME (for `citewise gaps`)."
    )
    keep_sessions_days: float = Field(
        30.0,
        ge=0,
        description=(
            "Conversation sessions not continued for this many days are deleted (when the server starts, then "
            "daily); 0 keeps them forever."
        ),
    )
    cors_origins: tuple[str, ...] = Field((), description="Origins allowed to call the API from a browser.")
    max_body_mb: float = Field(
        1.0, gt=0, description="Largest request body of the JSON endpoints (larger: 413, before it is read)."
    )
    auth_failures_per_minute: int = Field(
        10,
        ge=0,
        description=(
            "Failed API key checks allowed per minute from one client address; past that every request from the "
            "address is answered `429` with `Retry-After`, whatever key it carries (a right one included), until the "
            "allowance refills. `0` turns the limit off."
        ),
    )
    trusted_proxies: tuple[str, ...] = Field(
        (),
        description=(
            "Addresses or networks (CIDR) of reverse proxies whose X-Forwarded-For names the client; from anyone "
            "else the header is ignored."
        ),
    )
    header_timeout_s: float = Field(
        10.0, gt=0, description="Seconds a client has to send a request's headers before the connection is closed."
    )
    body_timeout_s: float = Field(
        60.0, gt=0, description="Seconds a client has to send a whole request body (408 after that)."
    )
    keep_alive_s: int = Field(5, ge=1, description="Seconds an idle keep-alive connection stays open.")
    scheduled_syncs: bool = Field(
        True,
        description=(
            "Sync the sources that have `every` in the background; turn off on all but one server sharing a home."
        ),
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for entry in v:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24)") from None
        return tuple(entry.strip() for entry in v)

    max_connections: int = Field(
        200, ge=1, description="Open connections and requests in progress before new requests get 503."
    )
    mcp: bool = Field(True, description="Serve the MCP endpoint at /mcp (streamable HTTP, the API's keys and owners).")
    pages_dir: Path | None = Field(
        None,
        description=(
            "A docs folder served read-only at /pages/ (Markdown as HTML, with the heading anchors citations use), "
            "behind the API keys like every route: ingest it with --base-url http://HOST:PORT/pages and the answers' "
            "links open offline. Nothing outside the folder is served."
        ),
    )


class FeedbackSettings(BaseModel):
    """Thumbs up/down on answers, and what is kept so they can be traced back to the answer they rate."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        True,
        description=(
            "Keep every answer the server gives (question, answer, citations, exit reason, owner, docs version) in "
            "CITEWISE_HOME/feedback.sqlite3 so readers can rate it; off: no answer ids, POST /api/feedback is 404."
        ),
    )
    max_comment_chars: int = Field(2000, ge=0, le=20_000, description="Longest comment a rating may carry.")
    keep_answers_days: float = Field(
        30.0,
        gt=0,
        description="Answers nobody rated are forgotten after this many days; rated ones are kept with their rating.",
    )


# -- sources: documentation synced from where it lives (citewise.sources) ------------------------------------------
SOURCE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_DURATION_PART = re.compile(r"(\d+)([smhd])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_every(text: str) -> int:
    """'6h', '30m', '1h30m', '2d', '45s' → seconds. Raises ValueError with the accepted forms."""
    compact = text.strip().lower().replace(" ", "")
    parts = _DURATION_PART.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"{text!r} is not a duration: use a number and a unit s, m, h or d, e.g. 6h, 30m or 1h30m")
    seconds = sum(int(n) * _DURATION_UNITS[u] for n, u in parts)
    if seconds < 1:
        raise ValueError("a sync interval must be at least 1s")
    return seconds


class SourceKind(StrEnum):
    WEB = "web"  # a published site, crawled over HTTP(S)
    GIT = "git"  # a Git repository (a local path or a clone URL), read at a branch or tag
    FOLDER = "folder"  # a local folder: `citewise ingest`, declared


class SourceSpec(BaseModel):
    """One source as `citewise sources add` declares it, and as `[sources.NAME]` in citewise.toml holds it."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="A site's start URL, a Git clone URL or repository path, or a local folder.")
    kind: SourceKind | None = Field(None, description="web, git or folder; inferred from `url` when omitted.")
    owner: str = Field(PUBLIC_OWNER, description="Owner of the documents this source brings in.")
    include: tuple[str, ...] = Field(
        (),
        description=(
            "Globs (web: on the URL path; git and folder: on the file path) or URL prefixes (web) a document must "
            "match; default: every page under the start URL, or the docs file types."
        ),
    )
    exclude: tuple[str, ...] = Field((), description="Globs or URL prefixes of documents to leave out.")
    every: str | None = Field(None, description="Sync interval for `citewise serve` (6h, 30m, 1d); none: by hand.")
    ref: str | None = Field(None, description="Git: the branch or tag to read (default: the repository's HEAD).")
    root: str = Field("", description="Git: the folder inside the repository to read (globs and {page} are relative).")
    url_template: str | None = Field(
        None,
        description=(
            "Git and folder: each document's citation URL, with {ref}, {commit}, {path} and {page} "
            "(e.g. https://github.com/ORG/REPO/blob/{ref}/{path})."
        ),
    )
    slugs: Literal["github", "mkdocs"] = Field(
        "github", description="How the published pages turn headings into #anchors (Git and folder sources)."
    )
    allow_private_network: bool = Field(
        False, description="Allow loopback, private and link-local addresses (an intranet or a test server)."
    )
    max_pages: int | None = Field(None, ge=1, description="Web: most pages per sync (default: sync.max_pages).")
    max_depth: int | None = Field(
        None, ge=0, description="Web: most links followed from a seed (default: sync.max_depth)."
    )

    @field_validator("owner")
    @classmethod
    def _owner(cls, v: str) -> str:
        if not OWNER_RE.match(v) or not v.strip("."):
            raise ValueError(f"invalid owner id {v!r}: use 1-128 letters, digits or the characters _ . @ -")
        return v

    @field_validator("every")
    @classmethod
    def _every(cls, v: str | None) -> str | None:
        if v is not None:
            parse_every(v)
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a source needs a URL or a path")
        return v.strip()

    @field_validator("url_template")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        if v is None:
            return v
        unknown = set(re.findall(r"\{([^{}]*)\}", v)) - {"ref", "commit", "path", "page"}
        if unknown:
            raise ValueError(
                f"unknown placeholder(s) {sorted(unknown)} in url_template: use {{ref}}, {{commit}}, {{path}}, {{page}}"
            )
        return v

    @property
    def every_s(self) -> int | None:
        return parse_every(self.every) if self.every else None


class SyncSettings(BaseModel):
    """Limits and manners of every source sync (per-source `max_pages` / `max_depth` override two of them)."""

    model_config = ConfigDict(extra="forbid")

    user_agent: str = Field(
        "Citewise-sync/1.0", description="User-Agent sent to crawled sites, and the name robots.txt rules match."
    )
    max_pages: int = Field(2000, ge=1, description="Most pages one web sync fetches.")
    max_depth: int = Field(
        5, ge=0, description="Most links followed from a seed page (the start URL, sitemap and llms.txt entries)."
    )
    max_page_mb: float = Field(5.0, gt=0, description="Largest page (or Git file) read; a bigger one fails alone.")
    max_sitemap_mb: float = Field(50.0, gt=0, description="Largest sitemap, robots.txt or llms.txt read.")
    max_redirects: int = Field(5, ge=0, le=20, description="Redirects followed per request.")
    request_timeout_s: float = Field(20.0, gt=0, description="Timeout of one HTTP request (connect, read, each).")
    max_sync_s: float = Field(
        1800.0, gt=0, description="Longest one sync may run; a web sync stops fetching then and removes nothing."
    )
    concurrency: int = Field(4, ge=1, le=32, description="Requests in flight at once to one site.")


class PostgresSettings(BaseModel):
    """The PostgreSQL backend (`store = "postgres"` + `database_url`): pool, vector index and schema upgrades."""

    model_config = ConfigDict(extra="forbid")

    pool_size: int = Field(10, ge=1, le=200, description="Connections each process keeps open to PostgreSQL.")
    connect_timeout_s: float = Field(10.0, gt=0, description="How long opening a connection may take.")
    hnsw_m: int = Field(16, ge=4, le=100, description="HNSW graph degree of the chunks' vector index (pgvector `m`).")
    hnsw_ef_construction: int = Field(
        64, ge=16, le=1000, description="HNSW build-time candidate list (pgvector `ef_construction`)."
    )
    hnsw_ef_search: int = Field(
        100,
        ge=10,
        le=1000,
        description=(
            "HNSW query-time candidate list (pgvector `hnsw.ef_search`); raised to twice the candidates asked for "
            "when that is more. Iterative scans keep a filtered query from returning too few rows."
        ),
    )
    auto_upgrade: bool = Field(
        True,
        description=(
            "Apply pending schema migrations when a process first connects (under an advisory lock); off: only "
            "`citewise db upgrade` does, and an outdated schema is an error."
        ),
    )


def default_models_dir() -> Path:
    """The machine's models cache when `models_dir` is not set: $XDG_CACHE_HOME/citewise/models, or
    ~/.cache/citewise/models (the temp folder's, for a user without a home directory)."""
    cache = os.environ.get("XDG_CACHE_HOME")
    if not cache:
        try:
            cache = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no passwd entry
            cache = tempfile.gettempdir()
    return Path(cache) / "citewise" / "models"


class Settings(BaseSettings):
    """Citewise settings. Every field can be set as `CITEWISE_<NAME>` (nested: `CITEWISE_INGEST__CHUNK_SIZE`)."""

    model_config = SettingsConfigDict(
        env_prefix="CITEWISE_",
        env_nested_delimiter="__",
        extra="forbid",
        toml_file="citewise.toml",
    )

    home: Path = Field(
        Path(".citewise"), description="Data directory: the index and registry live here and nowhere else."
    )
    embeddings: str = Field(
        DEFAULT_EMBEDDINGS,
        description=(
            '"provider:model" — local (bundled all-MiniLM-L6-v2 or a sentence-transformers path), openai, google, '
            "cohere, ollama."
        ),
    )
    embeddings_base_url: str | None = Field(None, description="Base URL for OpenAI-compatible or Ollama embeddings.")
    embeddings_backend: Literal["onnx", "onnx-int8", "torch"] = Field(
        "onnx-int8",
        description=(
            "How local models run: ONNX int8 (the bundled model's variant shipped in the package: no torch, no "
            "export), ONNX fp32 (the original model's vectors; exported once per machine into models_dir), or "
            "sentence-transformers on torch. Any variant but the shipped one needs the [export] extra."
        ),
    )
    models_dir: Path | None = Field(
        None,
        description=(
            "The machine's models cache, shared by every home: local models exported to ONNX, ONNX Runtime's "
            "optimised graphs, the local LLM (default: $XDG_CACHE_HOME/citewise/models, or ~/.cache/citewise/models)."
        ),
    )
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    llm: str = Field(
        DEFAULT_LLM,
        description=(
            '"extractive" (quote mode, no LLM), "local" (bundled SmolLM2 on CPU) or "provider:model" '
            "(google_genai, openai, groq, anthropic, ollama)."
        ),
    )
    llm_fallbacks: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Ordered answerers tried when the primary is rate limited or fails (5xx)."
    )
    llm_base_url: str | None = Field(None, description="Base URL for an OpenAI-compatible server or Ollama.")
    llm_api_key: SecretStr | None = Field(
        None, description="API key for the primary vendor (else the vendor's own variable, e.g. OPENAI_API_KEY)."
    )
    agent: AgentSettings = Field(default_factory=AgentSettings)
    quote: QuoteSettings = Field(default_factory=QuoteSettings)
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    api_keys: dict[str, str] = Field(
        default_factory=dict, repr=False, description="API key → owner id. When set, every HTTP request needs a key."
    )
    admin_keys: tuple[str, ...] = Field(
        (),
        repr=False,
        description=(
            "Keys of `api_keys` with the admin role: they may also read their owner's answer analytics "
            "(GET /api/analytics). A key listed here that is not in api_keys stops the start."
        ),
    )
    ask_only_keys: tuple[str, ...] = Field(
        (),
        repr=False,
        description=(
            "Keys of `api_keys` that may only ask: questions (also streamed, /chat, /v1, /mcp), searches, ratings "
            "and opening citations, but every upload and delete is 403. For a key that sits in public page source, "
            "such as the chat widget's. A key listed here that is not in api_keys, or is also in admin_keys, stops "
            "the start."
        ),
    )
    feedback: FeedbackSettings = Field(default_factory=FeedbackSettings)
    database_url: SecretStr | None = Field(
        None,
        description=(
            "PostgreSQL URL. Alone: conversation sessions live there (default: SQLite under CITEWISE_HOME). With "
            'store = "postgres": all state does (index, registry, question log, LLM cache, rate limits, sessions).'
        ),
    )
    sources: dict[str, SourceSpec] = Field(
        default_factory=dict,
        description="Declared sources by name ([sources.NAME] tables): `citewise sources add` writes them here.",
    )
    sync: SyncSettings = Field(default_factory=SyncSettings)

    @field_validator("sources")
    @classmethod
    def _source_names(cls, v: dict[str, SourceSpec]) -> dict[str, SourceSpec]:
        for name in v:
            if not SOURCE_NAME_RE.match(name):
                raise ValueError(f"invalid source name {name!r}: use 1-64 lowercase letters, digits, _ or -")
        return v

    store: Literal["lancedb", "postgres"] = Field(
        "lancedb",
        description=(
            'Where the knowledge base lives: "lancedb" (embedded, files under CITEWISE_HOME) or "postgres" '
            "(PostgreSQL with pgvector at database_url, shared by every process pointed at it)."
        ),
    )
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    uploads_dir: Path | None = Field(
        None,
        description=(
            "Where uploaded files are kept (default: CITEWISE_HOME/uploads). Replicas sharing one PostgreSQL must "
            "all see the same folder at the same path (a shared mount)."
        ),
    )

    @model_validator(mode="after")
    def _postgres_needs_a_url(self) -> Settings:
        if self.store == "postgres" and self.database_url is None:
            raise ValueError(
                'store = "postgres" needs database_url (CITEWISE_DATABASE_URL=postgresql://user:password@host/db)'
            )
        return self

    @field_validator("api_keys")
    @classmethod
    def _key_owners(cls, v: dict[str, str]) -> dict[str, str]:
        # Checked here, at start-up: an owner id the API would refuse made every request with that key a 422.
        for key, owner in v.items():
            if not key.strip():
                raise ValueError("an API key cannot be empty")
            if not isinstance(owner, str) or not OWNER_RE.match(owner) or not owner.strip("."):
                raise ValueError(
                    f"invalid owner id {owner!r} for a key: use 1-128 letters, digits or the characters _ . @ -"
                )
        return v

    @model_validator(mode="after")
    def _admin_keys_are_keys(self) -> Settings:
        unknown = [k for k in self.admin_keys if k not in self.api_keys]
        if unknown:
            # Never echo the key itself: say which entry, and how to fix it.
            positions = ", ".join(str(self.admin_keys.index(k) + 1) for k in unknown)
            raise ValueError(
                f"admin_keys entry {positions} is not one of api_keys: an admin key must also be an API key "
                "(CITEWISE_API_KEYS maps it to its owner)"
            )
        return self

    @model_validator(mode="after")
    def _ask_only_keys_are_keys(self) -> Settings:
        # Never echo the key itself: say which entry, and how to fix it.
        unknown = [i + 1 for i, k in enumerate(self.ask_only_keys) if k not in self.api_keys]
        if unknown:
            raise ValueError(
                f"ask_only_keys entry {', '.join(map(str, unknown))} is not one of api_keys: an ask-only key must "
                "also be an API key (CITEWISE_API_KEYS maps it to its owner)"
            )
        both = [i + 1 for i, k in enumerate(self.ask_only_keys) if k in self.admin_keys]
        if both:
            raise ValueError(
                f"ask_only_keys entry {', '.join(map(str, both))} is also in admin_keys: a key that may only ask "
                "cannot have the admin role (give the admin a key of its own)"
            )
        return self

    @field_validator("home")
    @classmethod
    def _home_is_a_directory(cls, v: Path) -> Path:
        # A home that is a file (or lies inside one) can never work: say so here, once, instead of as an OSError
        # from whichever command touches it first. Writability is checked when a writer first creates it.
        for path in (v, *v.parents):
            if path.exists():
                if not path.is_dir():
                    where = "is a file" if path == v else f"is inside {path}, which is a file"
                    raise ValueError(f"home {v} {where}, not a directory: point --home (CITEWISE_HOME) at a folder")
                break
        return v

    @field_validator("embeddings")
    @classmethod
    def _provider_model(cls, v: str) -> str:
        if ":" not in v or not all(part.strip() for part in v.split(":", 1)):
            raise ValueError(
                f'expected "provider:model", e.g. "{DEFAULT_EMBEDDINGS}" or "openai:text-embedding-3-small"'
            )
        return v.strip()

    @field_validator("llm")
    @classmethod
    def _answerer(cls, v: str) -> str:
        v = v.strip()
        if v not in (QUOTE_ANSWERER, "local") and (":" not in v or not all(p.strip() for p in v.split(":", 1))):
            raise ValueError('expected "extractive", "local" or "provider:model", e.g. "openai:gpt-4o-mini"')
        return v

    @field_validator("llm_fallbacks", mode="before")
    @classmethod
    def _comma_list(cls, v: Any) -> Any:
        # CITEWISE_LLM_FALLBACKS="google_genai:gemini-2.0-flash,groq:llama-3.1-8b-instant" reads naturally.
        if isinstance(v, str):
            if v.lstrip().startswith("["):
                return json.loads(v)
            return [part.strip() for part in v.split(",") if part.strip()]
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = Path(os.environ.get("CITEWISE_CONFIG", "citewise.toml"))
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=toml_path))

    @property
    def index_dir(self) -> Path:
        return self.home / "index"

    @property
    def local_backend(self) -> str:
        """How a `local:` model runs: `embeddings_backend` as set, and when it is left at its default (the bundled
        model's shipped int8 file), fp32 for a model of the user's own: int8 was measured for the bundled one only
        (embedder/ship.py), so another model is quantized only when asked for."""
        bundled = self.embeddings == DEFAULT_EMBEDDINGS
        if self.embeddings_backend == "onnx-int8" and not bundled and "embeddings_backend" not in self.model_fields_set:
            return "onnx"
        return self.embeddings_backend

    @property
    def model_cache_dir(self) -> Path:
        """One per machine, never under a home: homes share their models."""
        return self.models_dir if self.models_dir is not None else default_models_dir()

    @property
    def llm_cache_path(self) -> Path:
        return self.generation.cache_path or self.home / "llm_cache.sqlite3"

    @property
    def uploads_path(self) -> Path:
        return self.uploads_dir or self.home / "uploads"

    @property
    def uses_postgres(self) -> bool:
        """Whether all state lives in PostgreSQL (the scale-out backend), not only sessions."""
        return self.store == "postgres"

    @property
    def sessions_path(self) -> Path:
        return self.home / "sessions.sqlite3"

    @property
    def questions_log_path(self) -> Path:
        return self.home / "questions.jsonl"

    @property
    def feedback_path(self) -> Path:
        return self.home / "feedback.sqlite3"

    @property
    def sources_dir(self) -> Path:
        return self.home / "sources"

    def ingest_fingerprint(self) -> str:
        """What, besides a file's bytes, decides its chunks and vectors: a change here re-ingests everything."""
        relevant = {
            "embeddings": self.embeddings,
            "backend": self.local_backend if self.embeddings.startswith("local:") else None,
            "chunk_size": self.ingest.chunk_size,
            "chunk_overlap": self.ingest.chunk_overlap,
            "max_block_chars": self.ingest.max_block_chars,
            "base_url": self.ingest.base_url,
            **({"slugs": self.ingest.slugs} if self.ingest.base_url else {}),  # anchors exist only with a base URL
            # bump when chunking, what the loaders keep of a file (3: no image addresses; 4: nor those of a picture
            # whose alt text holds a code span; 5: admonitions as labelled notes, no site-generator markup; 6: Sphinx
            # doctest blocks as code; 7: RST's default role read as a cross-reference, `Title <target>` as Title; 8:
            # a cross-reference's words wrapped onto the next line too) or what the full-text index sees
            # (store.search_text) changes
            "chunker": 8,
            # Sentence vectors beside each chunk's (store.dense_scores): an index built before them, or with them
            # turned off, is re-processed by its next ingest (see `KnowledgeBase.pools_sentences`).
            "vectors": 2 if self.ingest.sentence_vectors else 1,
        }
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]
