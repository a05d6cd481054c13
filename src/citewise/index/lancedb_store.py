"""LanceDB, embedded on disk under CITEWISE_HOME/index: vectors (cosine) and native full-text search (BM25).

Every write is a single LanceDB commit (`merge_insert` replaces a batch of documents' chunks atomically), so a
process killed mid-ingest leaves the last committed version fully queryable. The FTS index is rebuilt
incrementally by `optimize()`; rows written since are still searched (flat), so results are never stale.

Writers are serialised by the home's write lock (write_lock.py); a commit that still meets a concurrent one (a
"retryable commit conflict" from Lance) is retried on the latest version with backoff, by tenacity, and one that
keeps meeting them ends as HomeBusyError, like any other writer that could not get its turn.

Reads go to the same table through `lance`, the engine LanceDB drives, with the parameters LanceDB's query builder
passes it (`_LanceReads`): only writers import `lancedb`, whose Python package (its REST namespace models above
all) cost a cold `citewise search` more than the engine and the model runtime together. A store in memory (the
scratch store of a selected-text search) is out of `lance`'s reach, LanceDB's memory object store being its own,
and is read through LanceDB's query builder (`_LanceDBReads`); tests/index/test_lance_reads.py holds both to the
same results.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

# Lance logs deprecation chatter from Rust at WARN; users should only see our own messages.
os.environ.setdefault("LANCE_LOG", "error")

import lance
import numpy as np
import pyarrow as pa
from lance.query import MatchQuery

from citewise.errors import CitewiseError, HomeBusyError, RetrievalError
from citewise.index.store import (
    Hit,
    chunk_counts,
    dense_scores,
    in_list,
    pack_sentences,
    search_text,
    unpack_sentences,
)
from citewise.types import Chunk

TABLE = "chunks"
CONFLICT_ATTEMPTS = 6

# What LanceDB's query builder (lancedb 0.40, rust/lancedb/src/table/query.rs `create_plan`) sets on Lance's
# scanner beyond what each query names: every query prefilters, and a vector query probes 20 IVF partitions
# (`VectorQueryRequest::default`: minimum_nprobes 20). The Lance inside LanceDB probes exactly those 20; the
# `lance` package (14) reads a minimum alone as the start of an adaptive search, so the same probe is nprobes=20.
# tests/index/test_lance_reads.py compares both readers through a 48-partition index, filtered and not.
_NPROBES = 20

_META_FIELDS = [
    ("chunk_id", pa.string()),
    ("doc_id", pa.string()),
    ("chunk_index", pa.int32()),
    ("text", pa.string()),
    ("search_text", pa.string()),  # title + heading path + text: what BM25 sees
    ("filename", pa.string()),
    ("source_url", pa.string()),
    ("module", pa.string()),
    ("chapter", pa.string()),
    ("title", pa.string()),
    ("page", pa.int32()),
    ("modified", pa.string()),
    ("owner", pa.string()),
    ("content_hash", pa.string()),
    ("units", pa.string()),  # the chunk's answer units as JSON (`Chunk.units`); null in a table from before them
]
_CHUNK_COLUMNS = [name for name, _ in _META_FIELDS if name != "search_text"]
UNITS = "units"
# Each sentence's vector (`store.dense_scores`), float16 row after row; null in a table written before them, until
# the next ingest re-embeds its chunks.
SENTENCES = "sentence_vectors"


def _schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            *(pa.field(n, t) for n, t in _META_FIELDS),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field(SENTENCES, pa.binary()),
        ]
    )


def _is_commit_conflict(exc: BaseException) -> bool:
    # Our own HomeBusyError (a nested write that gave up) is final: retrying it again would multiply the attempts.
    return not isinstance(exc, CitewiseError) and "commit conflict" in str(exc).lower()


def _retry_conflicts(method: Callable) -> Callable:
    """Retry a write that lost a commit race, on the table's latest version (Lance asks for exactly that); after the
    last attempt the conflict is a HomeBusyError, which the CLI and the server report like any busy home."""

    @functools.wraps(method)
    def retried(store: LanceStore, *args, **kwargs):
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        def checkout_latest(state) -> None:
            if store._table is not None:
                store._table.checkout_latest()

        retrying = Retrying(
            retry=retry_if_exception(_is_commit_conflict),
            stop=stop_after_attempt(CONFLICT_ATTEMPTS),
            wait=wait_exponential_jitter(multiplier=0.05, max=2.0),
            before_sleep=checkout_latest,
            reraise=True,
        )
        try:
            return retrying(method, store, *args, **kwargs)
        except Exception as exc:
            if not _is_commit_conflict(exc):
                raise
            raise HomeBusyError(
                f"Another writer kept committing to the index at {store.uri} while this one tried to "
                f"({CONFLICT_ATTEMPTS} attempts); this commit was not made. Try again when the other writer has "
                f"finished. (Lance: {str(exc).splitlines()[0][:300]})"
            ) from exc

    return retried


_RUST_LOCATION = re.compile(r",\s*/\S+\.rs:\d+:\d+")


def _said(exc: BaseException) -> str:
    """What Lance said, without the Rust source locations the `lance` package appends to its messages."""
    return _RUST_LOCATION.sub("", str(exc)).strip()


def _vector_matrix(rows: pa.Table) -> np.ndarray:
    """The fixed-size-list `vector` column as an (n, dim) float32 matrix, without a Python list per row."""
    column = rows.column("vector").combine_chunks()
    return column.flatten().to_numpy().reshape(len(column), -1).astype(np.float32, copy=False)


def _sentence_blobs(rows: pa.Table) -> list[bytes | None]:
    """Each row's sentence vectors as stored; all None when they were not read (a table from before them)."""
    if SENTENCES not in rows.column_names:
        return [None] * rows.num_rows
    return rows.column(SENTENCES).to_pylist()


def _sentence_matrices(rows: pa.Table, dim: int) -> list[np.ndarray | None]:
    """Each row's sentence vectors, unpacked."""
    return [unpack_sentences(blob, dim) for blob in _sentence_blobs(rows)]


class _Reads(Protocol):
    """One table's reads, at the version last checked out."""

    @property
    def version(self) -> int: ...

    def refresh(self) -> bool:
        """Check out the latest version; True when it changed."""

    def count(self) -> int: ...

    def indexed_columns(self) -> set[str]: ...

    def columns(self) -> set[str]: ...

    def scan(self, columns: list[str] | None, where: str | None = None, limit: int | None = None) -> pa.Table: ...

    def nearest(
        self,
        vector: np.ndarray,
        limit: int,
        where: str | None,
        refine_factor: int | None,
        columns: Sequence[str] = ("chunk_id",),
    ) -> pa.Table:
        """`columns` and the cosine `_distance` of the nearest rows, nearest first."""

    def match(self, text: str, limit: int, where: str | None, columns: list[str]) -> pa.Table:
        """`columns` and the BM25 `_score` of the rows whose search_text matches `text`, best first."""


class _LanceReads:
    """A table on disk read through `lance`. Each version is its own dataset object (they share Lance's caches):
    a refresh swaps in the new one, so a search running on another thread keeps the version it started on."""

    def __init__(self, dataset: lance.LanceDataset) -> None:
        self._dataset = dataset

    @classmethod
    def open(cls, uri: str) -> _LanceReads | None:
        """The table under `uri` (a LanceDB folder), or None while no writer has created it."""
        root = Path(uri)
        if root.exists() and not root.is_dir():
            raise NotADirectoryError(f"{root} is not a folder")
        location = root / f"{TABLE}.lance"
        return cls(lance.dataset(str(location))) if location.is_dir() else None

    @property
    def version(self) -> int:
        return self._dataset.version

    def refresh(self) -> bool:
        latest = self._dataset.latest_version
        if latest == self._dataset.version:
            return False
        self._dataset = self._dataset.checkout_version(latest)
        return True

    def count(self) -> int:
        return self._dataset.count_rows()

    def indexed_columns(self) -> set[str]:
        return {ix.field_names[0] for ix in self._dataset.describe_indices() if ix.field_names}

    def columns(self) -> set[str]:
        return set(self._dataset.schema.names)

    def scan(self, columns: list[str] | None, where: str | None = None, limit: int | None = None) -> pa.Table:
        return self._dataset.to_table(columns=columns, filter=where, limit=limit)

    def nearest(
        self,
        vector: np.ndarray,
        limit: int,
        where: str | None,
        refine_factor: int | None,
        columns: Sequence[str] = ("chunk_id",),
    ) -> pa.Table:
        nearest: dict[str, Any] = {
            "column": "vector",
            "q": vector,
            "k": limit,
            "metric": "cosine",
            "nprobes": _NPROBES,
        }
        if refine_factor is not None:
            nearest["refine_factor"] = refine_factor
        return self._dataset.to_table(
            columns=[*columns, "_distance"], nearest=nearest, filter=where, prefilter=True, limit=limit
        )

    def match(self, text: str, limit: int, where: str | None, columns: list[str]) -> pa.Table:
        # Always a match of the query's words, as LanceDB's binding builds it (python/src/query.rs
        # `nearest_to_text`). The binding reads a query in double quotes as a phrase, but the index keeps no word
        # positions, so a phrase query fails ("… phrase queries"): a user's quoted question is searched as its words.
        query = MatchQuery(text.replace('"', " "), "search_text")
        return self._dataset.to_table(columns=columns, full_text_query=query, filter=where, prefilter=True, limit=limit)


class _LanceDBReads:
    """A table read through LanceDB's query builder: the store in memory, which `lance` cannot open."""

    def __init__(self, table) -> None:
        self._table = table

    @property
    def version(self) -> int:
        return self._table.version

    def refresh(self) -> bool:
        before = self._table.version
        self._table.checkout_latest()
        return self._table.version != before

    def count(self) -> int:
        return self._table.count_rows()

    def indexed_columns(self) -> set[str]:
        return {ix.columns[0] for ix in self._table.list_indices()}

    def columns(self) -> set[str]:
        return set(self._table.schema.names)

    def scan(self, columns: list[str] | None, where: str | None = None, limit: int | None = None) -> pa.Table:
        query = self._table.search()
        if where:
            query = query.where(where)
        if columns is not None:
            query = query.select(columns)
        return query.limit(limit).to_arrow()

    def nearest(
        self,
        vector: np.ndarray,
        limit: int,
        where: str | None,
        refine_factor: int | None,
        columns: Sequence[str] = ("chunk_id",),
    ) -> pa.Table:
        query = self._table.search(vector, vector_column_name="vector").distance_type("cosine")
        if refine_factor is not None:
            query = query.refine_factor(refine_factor)
        if where:
            query = query.where(where, prefilter=True)
        return query.select([*columns, "_distance"]).limit(limit).to_arrow()

    def match(self, text: str, limit: int, where: str | None, columns: list[str]) -> pa.Table:
        query = self._table.search(text, query_type="fts", fts_columns="search_text")
        if where:
            query = query.where(where, prefilter=True)
        return query.select(columns).limit(limit).to_arrow()


class LanceStore:
    def __init__(self, path: Path | str, *, ann_index_threshold: int = 50_000) -> None:
        self.uri = str(path)
        self._ann_threshold = ann_index_threshold
        self._in_memory = self.uri.startswith("memory://")
        self._db = None  # LanceDB's connection and its handle on the table: opened by the first write
        self._table = None
        try:
            self._reads: _Reads | None = None if self._in_memory else _LanceReads.open(self.uri)
        except Exception as exc:
            raise RetrievalError(f"Could not open the index at {path}: {_said(exc)}") from exc
        self._has_ann = self._detect_ann()

    @classmethod
    def ephemeral(cls) -> LanceStore:
        """A store that lives in memory only (the selected-text search): nothing touches the disk."""
        return cls("memory://")

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def _writable(self, dim: int | None = None):
        """LanceDB's handle on the table, for a write; with `dim`, the table is created when there is none yet.
        None when there is no table and `dim` is not given (nothing to delete from)."""
        if self._table is None:
            import lancedb  # writers only: see the module docstring

            if self._db is None:
                if not self._in_memory:
                    Path(self.uri).mkdir(parents=True, exist_ok=True)
                self._db = lancedb.connect(self.uri)
            if TABLE in self._db.list_tables().tables:
                self._table = self._db.open_table(TABLE)
                if SENTENCES not in self._table.schema.names:
                    # A table written before sentence vectors: the column is added empty (its rows keep their
                    # cosine alone), and this ingest's chunks fill it.
                    self._table.add_columns(pa.field(SENTENCES, pa.binary()))
                if UNITS not in self._table.schema.names:
                    # A table written before answer units: the column is added empty; `fill_units` fills it.
                    self._table.add_columns(pa.field(UNITS, pa.string()))
            elif dim is not None:
                self._table = self._db.create_table(TABLE, schema=_schema(dim), exist_ok=True)
        return self._table

    def _written(self) -> None:
        """Point the reads at the commit just made."""
        if self._reads is None:
            self._reads = _LanceDBReads(self._table) if self._in_memory else _LanceReads.open(self.uri)
        else:
            self._reads.refresh()

    def count(self) -> int:
        return 0 if self._reads is None else self._reads.count()

    def version(self) -> int:
        return 0 if self._reads is None else self._reads.version

    def refresh(self) -> None:
        """See commits made by another process (an ingest running beside a server). Cheap when nothing changed."""
        try:
            self._refresh()
        except Exception as exc:
            raise RetrievalError(f"Could not read the index: {_said(exc)}") from exc

    def _refresh(self) -> None:
        if self._table is not None:
            self._table.checkout_latest()  # a writer's next commit starts from the latest version too
        if self._reads is None:
            if self._in_memory:
                return
            self._reads = _LanceReads.open(self.uri)
            if self._reads is None:
                return
        elif not self._reads.refresh():
            return
        self._has_ann = self._detect_ann()

    # -- writes ------------------------------------------------------------------------------------------------
    def _to_arrow(
        self, chunks: Sequence[Chunk], vectors: np.ndarray, sentences: Sequence[np.ndarray | None] | None
    ) -> pa.Table:
        rows = {name: [] for name, _ in _META_FIELDS}
        for chunk in chunks:
            data = chunk.model_dump(include=set(_CHUNK_COLUMNS) - {UNITS})
            data[UNITS] = chunk.units_json()
            for name in _CHUNK_COLUMNS:
                rows[name].append(data[name])
            rows["search_text"].append(search_text(chunk))
        dim = vectors.shape[1]
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
        columns = [pa.array(rows[n], type=t) for n, t in _META_FIELDS]
        columns.append(pa.FixedSizeListArray.from_arrays(flat, dim))
        columns.append(pa.array([pack_sentences(m) for m in sentences or [None] * len(chunks)], type=pa.binary()))
        return pa.Table.from_arrays(columns, schema=_schema(dim))

    def replace_documents(
        self,
        doc_ids: Sequence[str],
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        sentences: Sequence[np.ndarray | None] | None = None,
    ) -> None:
        if doc_ids:
            self.write_chunks(chunks, vectors, finished=chunk_counts(doc_ids, chunks), sentences=sentences)

    @_retry_conflicts
    def write_chunks(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        *,
        finished: Mapping[str, int],
        sentences: Sequence[np.ndarray | None] | None = None,
    ) -> None:
        """One commit: upsert `chunks` by chunk_id and, for each document in `finished` (doc_id → its chunk count),
        delete its rows past that count. A document bigger than one batch is written over several calls, and only
        the call with its last chunks names it in `finished`, so earlier batches are never deleted by later ones."""
        if len(chunks) != len(vectors) or (sentences is not None and len(sentences) != len(chunks)):
            raise ValueError("one vector (and one set of sentence vectors, when given) per chunk")
        if not chunks:
            self.delete_documents(list(finished))
            return
        stale = self._stale_rows(chunks, finished)
        table = self._writable(vectors.shape[1])
        merge = table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all()
        if stale:
            merge = merge.when_not_matched_by_source_delete(stale)
        merge.execute(self._to_arrow(chunks, vectors, sentences))
        self._written()

    @staticmethod
    def _stale_rows(chunks: Sequence[Chunk], finished: Mapping[str, int]) -> str | None:
        """The rows of finished documents that this commit's chunks do not replace. For a document whose every
        chunk is in this batch that is simply its other rows; for one whose first chunks were committed earlier,
        only its rows past its chunk count (the earlier batches hold the rest)."""
        in_batch: dict[str, int] = {}
        for chunk in chunks:
            in_batch[chunk.doc_id] = in_batch.get(chunk.doc_id, 0) + 1
        whole = sorted(d for d, n in finished.items() if in_batch.get(d) == n)
        clauses = [in_list("doc_id", whole)] if whole else []
        for doc_id, count in sorted(finished.items()):
            if doc_id not in whole:
                clauses.append(f"({in_list('doc_id', [doc_id])} AND chunk_index >= {int(count)})")
        return " OR ".join(clauses) or None

    @_retry_conflicts
    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if not doc_ids or self._reads is None:
            return
        self._writable().delete(in_list("doc_id", doc_ids))
        self._written()

    def vectors_by_hash(
        self, doc_ids: Sequence[str], *, hashes: Sequence[str] | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        if not doc_ids or self._reads is None or (hashes is not None and not hashes):
            return {}
        where = in_list("doc_id", doc_ids)
        if hashes is not None:  # one batch of a big document: read only the vectors it can use
            where += " AND " + in_list("content_hash", sorted(set(hashes)))
        rows = self._reads.scan(["content_hash", "vector", *self._sentence_column()], where)
        if not rows.num_rows:
            return {}
        vectors = _vector_matrix(rows)
        pairs = zip(vectors, _sentence_matrices(rows, vectors.shape[1]), strict=True)
        return dict(zip(rows.column("content_hash").to_pylist(), pairs, strict=True))

    def _sentence_column(self) -> list[str]:
        return [SENTENCES] if self._reads is not None and SENTENCES in self._reads.columns() else []

    # -- checks and repairs (citewise doctor) ------------------------------------------------------------------
    def chunk_rows(self) -> list[tuple[str, str]]:
        """(chunk_id, doc_id) of every stored row, duplicates included."""
        if self._reads is None:
            return []
        rows = self._reads.scan(["chunk_id", "doc_id"])
        return list(zip(rows.column("chunk_id").to_pylist(), rows.column("doc_id").to_pylist(), strict=True))

    @_retry_conflicts
    def dedupe(self) -> int:
        """Keep one row per chunk_id; returns how many rows were removed. Two commits (delete the copies, add one
        back): the affected chunks are missing from searches for that moment, never duplicated again."""
        counts: dict[str, int] = {}
        for chunk_id, _ in self.chunk_rows():
            counts[chunk_id] = counts.get(chunk_id, 0) + 1
        doubled = sorted(c for c, n in counts.items() if n > 1)
        if not doubled:
            return 0
        table = self._writable()
        removed = 0
        for start in range(0, len(doubled), 1000):
            part = doubled[start : start + 1000]
            rows = table.search().where(in_list("chunk_id", part)).limit(None).to_arrow()
            seen: set[str] = set()
            keep = []
            for index, chunk_id in enumerate(rows.column("chunk_id").to_pylist()):
                if chunk_id not in seen:
                    seen.add(chunk_id)
                    keep.append(index)
            table.delete(in_list("chunk_id", part))
            table.add(rows.take(keep).select(table.schema.names))
            removed += rows.num_rows - len(keep)
        self._written()
        return removed

    @_retry_conflicts
    def optimize(self) -> None:
        if self._reads is None:
            return
        from lancedb.index import FTS, Bitmap, BTree, IvfHnswSq

        table = self._writable()
        indexed = {ix.columns[0] for ix in table.list_indices()}
        if "search_text" not in indexed:
            table.create_index("search_text", config=FTS(with_position=False), replace=True)
        # Scalar indexes: the owner prefilter runs on every query, chunk_id on every fetch of the top hits.
        if "owner" not in indexed:
            table.create_index("owner", config=Bitmap())
        if "chunk_id" not in indexed:
            table.create_index("chunk_id", config=BTree())
        if "vector" not in indexed and table.count_rows() >= self._ann_threshold:
            # Past ~50k chunks exact search stops meeting the latency target here; HNSW over SQ keeps recall high.
            table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        # Folds new rows into existing indexes, compacts small fragments, drops versions older than a day.
        table.optimize(cleanup_older_than=timedelta(days=1))
        self._written()
        self._has_ann = self._detect_ann()

    def _detect_ann(self) -> bool:
        return self._reads is not None and "vector" in self._reads.indexed_columns()

    # -- reads -------------------------------------------------------------------------------------------------
    # Two phases: score candidates reading only ids (and, for BM25 hits, vectors), fuse and gate them in the
    # retriever, then fetch full rows for the few that are returned. Reading every column of every candidate
    # cost more than the searches themselves at 100k chunks.
    def dense(self, vector: np.ndarray, limit: int, where: str | None) -> list[Hit]:
        if self._reads is None:
            return []
        # With an ANN index, re-rank its candidates by exact distance: recall 0.92 → 1.0 at 100k.
        refine_factor = 5 if self._has_ann else None
        try:
            rows = self._reads.nearest(vector, limit, where, refine_factor, ["chunk_id", *self._sentence_column()])
        except Exception as exc:
            raise RetrievalError(f"Vector search failed: {_said(exc)}") from exc
        ids = rows.column("chunk_id").to_pylist()
        cosines = 1.0 - rows.column("_distance").to_numpy()
        scores = dense_scores(cosines, _sentence_blobs(rows), vector)
        hits = [Hit(chunk_id, dense=score) for chunk_id, score in zip(ids, scores, strict=True)]
        hits.sort(key=lambda h: (-h.dense, h.chunk_id))
        return hits

    def lexical(self, text: str, limit: int, where: str | None, *, with_vectors: bool = False) -> list[Hit]:
        if self._reads is None or not text.strip():
            return []
        try:
            columns = ["chunk_id", "_score", *(["vector", *self._sentence_column()] if with_vectors else [])]
            rows = self._reads.match(text, limit, where, columns)
        except Exception as exc:
            raise RetrievalError(f"Full-text search failed: {_said(exc)}") from exc
        ids = rows.column("chunk_id").to_pylist()
        scores = rows.column("_score").to_numpy()
        vectors = _vector_matrix(rows) if with_vectors and ids else [None] * len(ids)
        sentences = _sentence_blobs(rows)
        hits = [
            Hit(chunk_id, lexical=float(s), vector=v, sentences=m)
            for chunk_id, s, v, m in zip(ids, scores, vectors, sentences, strict=True)
        ]
        # Equal BM25 scores among rows written since the last optimize come back in a different order from run to
        # run; ranks feed fusion, so ties are broken by chunk id here, as PostgreSQL's query does.
        hits.sort(key=lambda h: (-h.lexical, h.chunk_id))
        return hits

    def fetch(self, chunk_ids: Sequence[str], where: str | None = None) -> dict[str, Chunk]:
        if not chunk_ids or self._reads is None:
            return {}
        condition = in_list("chunk_id", chunk_ids) + (f" AND ({where})" if where else "")
        rows = self._reads.scan(self._chunk_columns(), condition, len(chunk_ids)).to_pylist()
        return {row["chunk_id"]: Chunk(**row) for row in rows}

    def sections(self, where: str | None = None) -> list[tuple[str, str]]:
        if self._reads is None:
            return []
        rows = self._reads.scan(["doc_id", "chapter", "chunk_index"], where)
        order = sorted(
            zip(rows.column("doc_id").to_pylist(), rows.column("chunk_index").to_pylist(),
                rows.column("chapter").to_pylist(), strict=True)
        )  # fmt: skip
        return list(dict.fromkeys((doc_id, chapter or "") for doc_id, _, chapter in order))

    def indexed_texts(self) -> Iterator[tuple[str, str]]:
        if self._reads is None:
            return
        rows = self._reads.scan(["owner", "search_text"])
        for batch in rows.to_batches(max_chunksize=4096):
            yield from zip(batch.column("owner").to_pylist(), batch.column("search_text").to_pylist(), strict=True)

    def export(self, batch_size: int = 1000) -> Iterator[tuple[list[Chunk], np.ndarray, list[np.ndarray | None]]]:
        """Every stored chunk with its vector and sentence vectors, in batches (`citewise migrate`: vectors are
        copied, never re-made)."""
        if self._reads is None:
            return
        columns = self._chunk_columns()
        rows = self._reads.scan([*columns, "vector", *self._sentence_column()])
        for batch in rows.to_batches(max_chunksize=batch_size):
            part = pa.Table.from_batches([batch])
            chunks = [Chunk(**row) for row in part.select(columns).to_pylist()]
            vectors = _vector_matrix(part)
            yield chunks, vectors, _sentence_matrices(part, vectors.shape[1])

    def chunks(self, where: str | None = None) -> list[Chunk]:
        """Every chunk matching `where`, in document order (inspection and tests; not a search)."""
        if self._reads is None:
            return []
        rows = self._reads.scan(self._chunk_columns(), where).to_pylist()
        return sorted((Chunk(**row) for row in rows), key=lambda c: (c.doc_id, c.chunk_index))

    def _chunk_columns(self) -> list[str]:
        """The chunk columns this table has (one written before answer units has no `units`)."""
        present = self._reads.columns() if self._reads is not None else set()
        return [c for c in _CHUNK_COLUMNS if c != UNITS or c in present]

    def missing_units(self) -> int:
        """How many chunks have no answer units recorded (a table written before they were kept)."""
        if self._reads is None:
            return 0
        if UNITS not in self._reads.columns():
            return self._reads.count()
        return self._reads.scan(["chunk_id"], f"{UNITS} IS NULL").num_rows

    @_retry_conflicts
    def fill_units(self, units_of: Callable[[list[Chunk]], list[tuple | None]], batch_size: int = 2000) -> int:
        """Record answer units for every chunk that has none: `units_of` gets every chunk of a document that lacks
        them, in order (a chunk's units depend on the one before it), and returns each one's units. Rows are
        rewritten whole, vectors included, in batches; nothing is re-embedded. Returns how many were filled."""
        if self._reads is None or not self.missing_units():
            return 0
        table = self._writable()
        self._written()
        missing = self._reads.scan(["doc_id"], f"{UNITS} IS NULL").column("doc_id").to_pylist()
        doc_ids = sorted(set(missing))
        filled = 0
        for start in range(0, len(doc_ids), 200):
            where = in_list("doc_id", doc_ids[start : start + 200])
            rows = self._reads.scan(None, where)
            chunks = [Chunk(**row) for row in rows.select(_CHUNK_COLUMNS).to_pylist()]
            order = sorted(range(len(chunks)), key=lambda i: (chunks[i].doc_id, chunks[i].chunk_index))
            units = units_of([chunks[i] for i in order])
            values: list[str | None] = [None] * len(chunks)
            for i, value in zip(order, units, strict=True):
                values[i] = chunks[i].model_copy(update={"units": value}).units_json()
            column = rows.schema.get_field_index(UNITS)
            updated = rows.set_column(column, UNITS, pa.array(values, type=pa.string()))
            for offset in range(0, updated.num_rows, batch_size):
                part = updated.slice(offset, batch_size)
                table.merge_insert("chunk_id").when_matched_update_all().execute(part)
            filled += sum(1 for c in chunks if c.units is None)
            self._written()
        return filled
