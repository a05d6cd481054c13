"""All of Citewise's configuration, in one tree.

Sources, strongest first: arguments passed to `Settings(...)` (the CLI's `--home` etc.), environment variables
(`CITEWISE_` prefix, nested fields with `__`, e.g. `CITEWISE_RETRIEVAL__MIN_SCORE=0.3`), a `citewise.toml` in the
working directory (or the file named by `CITEWISE_CONFIG`), then the defaults below. Settings are passed in to the
code that needs them, never read from a global.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from citewise.types import RetrievalMode

DEFAULT_EMBEDDINGS = "local:all-MiniLM-L6-v2"

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
    globs: tuple[str, ...] = Field(DEFAULT_GLOBS, description="File patterns ingested when a directory is given.")
    max_file_mb: float = Field(50.0, gt=0, description="Files larger than this fail with a clear error.")
    embed_batch_size: int = Field(32, ge=1, le=1024, description="Chunks per embedding call.")
    commit_every: int = Field(
        512, ge=1, description="Chunks embedded between two commits to the index (progress survives a crash)."
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
            "Minimum cosine similarity between query and chunk. When no retrieved chunk reaches it the result is "
            "flagged empty. In lexical mode (no vectors) a result is empty only when nothing matched."
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
    cache_size: int = Field(1024, ge=0, description="Retrieval results kept in the in-memory cache (0 disables).")
    ann_index_threshold: int = Field(
        50_000, ge=1000, description="Build an approximate vector index once the index holds this many chunks."
    )


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
        "onnx",
        description=(
            "How local models run: ONNX Runtime (same vectors as torch, no torch import when querying; exported once "
            "into models_dir), ONNX int8 (faster ingest, slightly different vectors), or sentence-transformers on "
            "torch."
        ),
    )
    models_dir: Path | None = Field(
        None, description="Where exported local models are cached (default: CITEWISE_HOME/models)."
    )
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)

    @field_validator("embeddings")
    @classmethod
    def _provider_model(cls, v: str) -> str:
        if ":" not in v or not all(part.strip() for part in v.split(":", 1)):
            raise ValueError(
                f'expected "provider:model", e.g. "{DEFAULT_EMBEDDINGS}" or "openai:text-embedding-3-small"'
            )
        return v.strip()

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
    def model_cache_dir(self) -> Path:
        return self.models_dir or self.home / "models"

    def ingest_fingerprint(self) -> str:
        """What, besides a file's bytes, decides its chunks and vectors: a change here re-ingests everything."""
        relevant = {
            "embeddings": self.embeddings,
            "backend": self.embeddings_backend if self.embeddings.startswith("local:") else None,
            "chunk_size": self.ingest.chunk_size,
            "chunk_overlap": self.ingest.chunk_overlap,
            "max_block_chars": self.ingest.max_block_chars,
            "base_url": self.ingest.base_url,
            "chunker": 1,  # bump when chunking logic changes output
        }
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]
