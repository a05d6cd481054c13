"""The storage contract every index engine implements, and the one place filter expressions are built.

Callers (the ingest pipeline, the retriever, eval) only see `VectorStore`; LanceDB is the embedded engine today
(`lancedb_store.py`) and a server engine can be added behind the same protocol without touching them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from citewise.errors import ValidationError
from citewise.text import identifier_tokens, split_sentences
from citewise.types import Chunk, Owner

# Metadata a caller may filter on. A fixed list, because field names are spliced into the filter expression.
FILTERABLE_FIELDS = frozenset({"doc_id", "filename", "module", "chapter", "title", "source_url", "page"})


@dataclass(slots=True)
class Hit:
    """A search candidate before its row is fetched: enough to fuse, gate and rank."""

    chunk_id: str
    score: float | None = None  # what orders the list: fused RRF score, cosine (dense) or BM25 (lexical)
    dense: float | None = None  # similarity to the query: see `dense_scores`
    lexical: float | None = None  # BM25 score
    vector: np.ndarray | None = None  # the chunk's vector, when asked for (BM25 hits need their dense score)
    sentences: bytes | None = None  # its sentences' vectors as stored (`pack_sentences`), asked for with `vector`


def search_text(chunk: Chunk) -> str:
    """What the full-text index sees of a chunk: its title, heading path and text, the section's own heading once
    more (most documentation questions name the section that answers them, so a heading word counts twice), and
    the compact form of every multi-part identifier in it (`CITEWISE_API_KEYS` also as `citewiseapikeys`), so a
    question naming an identifier exactly finds it ahead of passages that merely hold its parts. The embedder reads
    the same text."""
    return "\n".join(_search_parts(chunk))


def _search_parts(chunk: Chunk) -> list[str]:
    section = chunk.chapter.rsplit(" > ", 1)[-1].strip() if chunk.chapter else ""
    parts = [chunk.title, chunk.chapter, section, chunk.text, " ".join(identifier_tokens(chunk.text))]
    return [part for part in parts if part]


# A sentence of fewer words ("Example:", "Yes.") says too little to be scored on its own.
MIN_SENTENCE_WORDS = 3


@dataclass(frozen=True, slots=True)
class SentenceSpans:
    """Where, in `search_text(chunk)`, the headings end and each sentence of the chunk's text lies ([start, end)
    character offsets): what the embedder pools one vector per sentence over (see `dense_scores`)."""

    headings_end: int
    sentences: tuple[tuple[int, int], ...]


def sentence_spans(chunk: Chunk) -> SentenceSpans:
    parts = _search_parts(chunk)
    base = 0
    for part in parts:
        if part == chunk.text:
            break
        base += len(part) + 1
    spans = tuple(
        (base + start, base + end)
        for start, end in split_sentences(chunk.text)
        if len(chunk.text[start:end].split()) >= MIN_SENTENCE_WORDS
    )
    return SentenceSpans(headings_end=base, sentences=spans)


def dense_scores(cosines: Sequence[float], blobs: Sequence[bytes | None], query: np.ndarray) -> list[float]:
    """Each chunk's dense score, from its cosine and its stored sentence vectors (`pack_sentences`): the mean of
    its own cosine and its best sentence's. A chunk vector averages every sentence, so a chunk that answers in one
    sentence and then lists ten features scores like a feature list; its answering sentence, pooled from the same
    model run with the headings (late chunking), does not. On the fitted docs sets this put the answering chunk
    first 1-6 points more often; on the judged ones ranks barely moved (BENCHMARKS.md). A chunk without sentence
    vectors (an index built before them or with them turned off, a backend that can't pool them) keeps its cosine.
    One matrix product for all of them: a deep ranking (an evaluation's thousand candidates) pays for one, not for
    a thousand."""
    if len(cosines) != len(blobs):
        raise ValueError("one set of sentence vectors (or None) per cosine")
    scores = [float(cosine) for cosine in cosines]
    stored = [(i, blob) for i, blob in enumerate(blobs) if blob]  # None: none stored; b"": no sentence
    if not stored:
        return scores
    dim = len(query)
    flat = np.frombuffer(b"".join(blob for _, blob in stored), dtype="<f2").reshape(-1, dim).astype(np.float32)
    starts = np.cumsum([0, *(len(blob) // (2 * dim) for _, blob in stored[:-1])])
    for (i, _), best in zip(stored, np.maximum.reduceat(flat @ query, starts), strict=True):
        scores[i] = (scores[i] + float(best)) / 2
    return scores


def pack_sentences(vectors: np.ndarray | None) -> bytes | None:
    """Sentence vectors as stored: float16, row after row (half the bytes; a cosine moves by about 0.001)."""
    return None if vectors is None else np.ascontiguousarray(vectors, dtype="<f2").tobytes()


def unpack_sentences(blob: bytes | None, dim: int) -> np.ndarray | None:
    if blob is None:
        return None
    return np.frombuffer(blob, dtype="<f2").reshape(-1, dim).astype(np.float32)


class VectorStore(Protocol):
    def count(self) -> int: ...

    def version(self) -> int: ...

    def refresh(self) -> None:
        """See commits made by other processes."""

    def replace_documents(
        self,
        doc_ids: Sequence[str],
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        sentences: Sequence[np.ndarray | None] | None = None,
    ) -> None:
        """Atomically make `chunks` the only chunks of `doc_ids` (one commit: readers see old or new, never none)."""

    def write_chunks(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        *,
        finished: Mapping[str, int],
        sentences: Sequence[np.ndarray | None] | None = None,
    ) -> None:
        """One commit: upsert `chunks` by chunk_id, and drop the rows of each `finished` document (doc_id → chunk
        count) past its count. A big document is written by several calls; only its last one finishes it.
        `sentences` holds each chunk's sentence vectors (None: not computed; an empty matrix: no sentence)."""

    def delete_documents(self, doc_ids: Sequence[str]) -> None: ...

    def vectors_by_hash(
        self, doc_ids: Sequence[str], *, hashes: Sequence[str] | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        """content_hash → (vector, sentence vectors or None) stored for the chunks of these documents (reused when
        a file changes), only for `hashes` when given."""

    def dense(self, vector: np.ndarray, limit: int, where: str | None) -> list[Hit]:
        """The `limit` chunks nearest by cosine, prefiltered by `where`, ordered by their `dense_scores` (best
        first, ties by chunk id), which is also each hit's `dense`."""

    def lexical(self, text: str, limit: int, where: str | None, *, with_vectors: bool = False) -> list[Hit]:
        """Full-text (BM25) hits, best first, prefiltered; `with_vectors` also returns each hit's vector and
        sentence vectors."""

    def fetch(self, chunk_ids: Sequence[str], where: str | None = None) -> dict[str, Chunk]:
        """Full rows of these chunks (ids no longer present, or outside `where`, are simply missing)."""

    def chunks(self, where: str | None = None) -> list[Chunk]:
        """Every chunk matching `where` (inspection and tests, not search)."""

    def indexed_texts(self) -> Iterator[tuple[str, str]]:
        """(owner, `search_text`) of every chunk: what the full-text index holds, for the index vocabulary."""

    def sections(self, where: str | None = None) -> list[tuple[str, str]]:
        """(doc_id, heading path) of every section with a chunk matching `where`, once each, in document order (by
        doc_id, then the section's first chunk): the headings example questions are made of. No text is read."""

    def chunk_rows(self) -> list[tuple[str, str]]:
        """(chunk_id, doc_id) of every stored row, duplicates included (`citewise doctor`)."""

    def dedupe(self) -> int:
        """Keep one row per chunk_id; returns the number of rows removed (`citewise doctor --repair`)."""

    def optimize(self) -> None:
        """Fold new rows into the indexes (FTS, ANN past a size threshold) and compact; run after an ingest."""


def sql_literal(value: object) -> str:
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"Unsupported filter value {value!r}")
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def in_list(column: str, values: Sequence[object]) -> str:
    """`column IN (...)` with every value escaped; the column name must come from code, never from a caller."""
    return f"{column} IN ({', '.join(sql_literal(v) for v in values)})"


def chunk_counts(doc_ids: Sequence[str], chunks: Sequence[Chunk]) -> dict[str, int]:
    """doc_id → how many of `chunks` it has, for a `replace_documents` of `doc_ids` (a document with none is
    emptied); a chunk of a document not being replaced is a caller's bug."""
    stray = {c.doc_id for c in chunks} - set(doc_ids)
    if stray:
        raise ValueError(f"chunks of documents not being replaced: {sorted(stray)}")
    counts = dict.fromkeys(doc_ids, 0)
    for chunk in chunks:
        counts[chunk.doc_id] += 1
    return counts


def build_where(owner: Owner | str | None, filters: Mapping[str, object] | None = None) -> str:
    """The prefilter applied inside every query and lookup: the caller's owner scope plus exact-match metadata
    filters. Who sees what is `Owner.visible` (types.py); this is where it becomes part of a query."""
    clauses = [in_list("owner", Owner.of(owner).visible)]
    for field, value in sorted((filters or {}).items()):
        if field not in FILTERABLE_FIELDS:
            allowed = ", ".join(sorted(FILTERABLE_FIELDS))
            raise ValidationError(f"Cannot filter on {field!r}; filterable fields: {allowed}")
        values = value if isinstance(value, list | tuple | set | frozenset) else [value]
        if not values:
            raise ValidationError(f"Filter {field!r} has no values")
        # No stored text holds a NUL (ingest refuses it, PostgreSQL can't store it, and it would end PostgreSQL's
        # query text there): a value with one matches nothing, so it is left out, and a filter of only such values
        # admits no row.
        values = [v for v in values if not (isinstance(v, str) and "\x00" in v)]
        clauses.append(in_list(field, sorted(values, key=str)) if values else "chunk_id IS NULL")
    return " AND ".join(clauses)
