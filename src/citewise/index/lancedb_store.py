"""LanceDB, embedded on disk under CITEWISE_HOME/index: vectors (cosine) and native full-text search (BM25).

Every write is a single LanceDB commit (`merge_insert` replaces a batch of documents' chunks atomically), so a
process killed mid-ingest leaves the last committed version fully queryable. The FTS index is rebuilt
incrementally by `optimize()`; rows written since are still searched (flat), so results are never stale.

Writers are serialised by the home's write lock (write_lock.py); a commit that still meets a concurrent one (a
"retryable commit conflict" from Lance) is retried on the latest version with backoff, by tenacity.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

# Lance logs deprecation chatter from Rust at WARN; users should only see our own messages.
os.environ.setdefault("LANCE_LOG", "error")

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, Bitmap, BTree, IvfHnswSq
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from citewise.errors import RetrievalError
from citewise.index.store import Hit, chunk_counts, in_list, search_text
from citewise.types import Chunk

TABLE = "chunks"

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
]
_CHUNK_COLUMNS = [name for name, _ in _META_FIELDS if name != "search_text"]


def _schema(dim: int) -> pa.Schema:
    return pa.schema([*(pa.field(n, t) for n, t in _META_FIELDS), pa.field("vector", pa.list_(pa.float32(), dim))])


def _is_commit_conflict(exc: BaseException) -> bool:
    return "commit conflict" in str(exc).lower()


def _retry_conflicts(method: Callable) -> Callable:
    """Retry a write that lost a commit race, on the table's latest version (Lance asks for exactly that)."""

    def checkout_latest(state) -> None:
        store = state.args[0]
        if store._table is not None:
            store._table.checkout_latest()

    return retry(
        retry=retry_if_exception(_is_commit_conflict),
        stop=stop_after_attempt(6),
        wait=wait_exponential_jitter(multiplier=0.05, max=2.0),
        before_sleep=checkout_latest,
        reraise=True,
    )(method)


def _vector_matrix(rows: pa.Table) -> np.ndarray:
    """The fixed-size-list `vector` column as an (n, dim) float32 matrix, without a Python list per row."""
    column = rows.column("vector").combine_chunks()
    return column.flatten().to_numpy().reshape(len(column), -1).astype(np.float32, copy=False)


class LanceStore:
    def __init__(self, path: Path | str, *, ann_index_threshold: int = 50_000) -> None:
        self._ann_threshold = ann_index_threshold
        try:
            if isinstance(path, Path):
                path.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(path))
            self._table = self._db.open_table(TABLE) if TABLE in self._db.list_tables().tables else None
        except Exception as exc:
            raise RetrievalError(f"Could not open the index at {path}: {exc}") from exc
        self._has_ann = self._detect_ann()

    @classmethod
    def ephemeral(cls) -> LanceStore:
        """A store that lives in memory only (the selected-text search): nothing touches the disk."""
        return cls("memory://")

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def _require_table(self, dim: int):
        if self._table is None:
            self._table = self._db.create_table(TABLE, schema=_schema(dim), exist_ok=True)
        return self._table

    def count(self) -> int:
        return 0 if self._table is None else self._table.count_rows()

    def version(self) -> int:
        return 0 if self._table is None else self._table.version

    def refresh(self) -> None:
        """See commits made by another process (an ingest running beside a server). Cheap when nothing changed."""
        try:
            self._refresh()
        except Exception as exc:
            raise RetrievalError(f"Could not read the index: {exc}") from exc

    def _refresh(self) -> None:
        if self._table is None:
            if TABLE not in self._db.list_tables().tables:
                return
            self._table = self._db.open_table(TABLE)
        else:
            before = self._table.version
            self._table.checkout_latest()
            if self._table.version == before:
                return
        self._has_ann = self._detect_ann()

    # -- writes ------------------------------------------------------------------------------------------------
    def _to_arrow(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> pa.Table:
        rows = {name: [] for name, _ in _META_FIELDS}
        for chunk in chunks:
            data = chunk.model_dump(include=set(_CHUNK_COLUMNS))
            for name in _CHUNK_COLUMNS:
                rows[name].append(data[name])
            rows["search_text"].append(search_text(chunk))
        dim = vectors.shape[1]
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
        columns = [pa.array(rows[n], type=t) for n, t in _META_FIELDS]
        columns.append(pa.FixedSizeListArray.from_arrays(flat, dim))
        return pa.Table.from_arrays(columns, schema=_schema(dim))

    def replace_documents(self, doc_ids: Sequence[str], chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        if doc_ids:
            self.write_chunks(chunks, vectors, finished=chunk_counts(doc_ids, chunks))

    @_retry_conflicts
    def write_chunks(self, chunks: Sequence[Chunk], vectors: np.ndarray, *, finished: Mapping[str, int]) -> None:
        """One commit: upsert `chunks` by chunk_id and, for each document in `finished` (doc_id → its chunk count),
        delete its rows past that count. A document bigger than one batch is written over several calls, and only
        the call with its last chunks names it in `finished`, so earlier batches are never deleted by later ones."""
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk")
        if not chunks:
            self.delete_documents(list(finished))
            return
        stale = self._stale_rows(chunks, finished)
        table = self._require_table(vectors.shape[1])
        merge = table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all()
        if stale:
            merge = merge.when_not_matched_by_source_delete(stale)
        merge.execute(self._to_arrow(chunks, vectors))

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
        if doc_ids and self._table is not None:
            self._table.delete(in_list("doc_id", doc_ids))

    def vectors_by_hash(self, doc_ids: Sequence[str], *, hashes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        if not doc_ids or self._table is None or (hashes is not None and not hashes):
            return {}
        where = in_list("doc_id", doc_ids)
        if hashes is not None:  # one batch of a big document: read only the vectors it can use
            where += " AND " + in_list("content_hash", sorted(set(hashes)))
        rows = self._table.search().where(where).select(["content_hash", "vector"]).limit(None).to_arrow()
        if not rows.num_rows:
            return {}
        return dict(zip(rows.column("content_hash").to_pylist(), _vector_matrix(rows), strict=True))

    # -- checks and repairs (citewise doctor) ------------------------------------------------------------------
    def chunk_rows(self) -> list[tuple[str, str]]:
        """(chunk_id, doc_id) of every stored row, duplicates included."""
        if self._table is None:
            return []
        rows = self._table.search().select(["chunk_id", "doc_id"]).limit(None).to_arrow()
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
        removed = 0
        for start in range(0, len(doubled), 1000):
            part = doubled[start : start + 1000]
            rows = self._table.search().where(in_list("chunk_id", part)).limit(None).to_arrow()
            seen: set[str] = set()
            keep = []
            for index, chunk_id in enumerate(rows.column("chunk_id").to_pylist()):
                if chunk_id not in seen:
                    seen.add(chunk_id)
                    keep.append(index)
            self._table.delete(in_list("chunk_id", part))
            self._table.add(rows.take(keep).select(self._table.schema.names))
            removed += rows.num_rows - len(keep)
        return removed

    @_retry_conflicts
    def optimize(self) -> None:
        if self._table is None:
            return
        table = self._table
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
        self._has_ann = self._detect_ann()

    def _detect_ann(self) -> bool:
        return self._table is not None and any(ix.columns[0] == "vector" for ix in self._table.list_indices())

    # -- reads -------------------------------------------------------------------------------------------------
    # Two phases: score candidates reading only ids (and, for BM25 hits, vectors), fuse and gate them in the
    # retriever, then fetch full rows for the few that are returned. Reading every column of every candidate
    # cost more than the searches themselves at 100k chunks.
    def dense(self, vector: np.ndarray, limit: int, where: str | None) -> list[Hit]:
        if self._table is None:
            return []
        query = self._table.search(vector, vector_column_name="vector").distance_type("cosine")
        if self._has_ann:
            query = query.refine_factor(5)  # re-rank ANN candidates by exact distance: recall 0.92 → 1.0 at 100k
        if where:
            query = query.where(where, prefilter=True)
        try:
            rows = query.select(["chunk_id", "_distance"]).limit(limit).to_arrow()
        except Exception as exc:
            raise RetrievalError(f"Vector search failed: {exc}") from exc
        ids = rows.column("chunk_id").to_pylist()
        distances = rows.column("_distance").to_numpy()
        return [Hit(chunk_id, dense=1.0 - float(d)) for chunk_id, d in zip(ids, distances, strict=True)]

    def lexical(self, text: str, limit: int, where: str | None, *, with_vectors: bool = False) -> list[Hit]:
        if self._table is None or not text.strip():
            return []
        query = self._table.search(text, query_type="fts", fts_columns="search_text")
        if where:
            query = query.where(where, prefilter=True)
        try:
            columns = ["chunk_id", "_score", *(["vector"] if with_vectors else [])]
            rows = query.select(columns).limit(limit).to_arrow()
        except Exception as exc:
            raise RetrievalError(f"Full-text search failed: {exc}") from exc
        ids = rows.column("chunk_id").to_pylist()
        scores = rows.column("_score").to_numpy()
        if not with_vectors or not ids:
            return [Hit(chunk_id, lexical=float(s)) for chunk_id, s in zip(ids, scores, strict=True)]
        vectors = _vector_matrix(rows)
        return [Hit(chunk_id, lexical=float(s), vector=v) for chunk_id, s, v in zip(ids, scores, vectors, strict=True)]

    def fetch(self, chunk_ids: Sequence[str], where: str | None = None) -> dict[str, Chunk]:
        if not chunk_ids or self._table is None:
            return {}
        condition = in_list("chunk_id", chunk_ids) + (f" AND ({where})" if where else "")
        rows = self._table.search().where(condition).select(_CHUNK_COLUMNS).limit(len(chunk_ids)).to_list()
        return {row["chunk_id"]: Chunk(**row) for row in rows}

    def indexed_texts(self) -> Iterator[tuple[str, str]]:
        if self._table is None:
            return
        rows = self._table.search().select(["owner", "search_text"]).limit(None).to_arrow()
        for batch in rows.to_batches(max_chunksize=4096):
            yield from zip(batch.column("owner").to_pylist(), batch.column("search_text").to_pylist(), strict=True)

    def export(self, batch_size: int = 1000) -> Iterator[tuple[list[Chunk], np.ndarray]]:
        """Every stored chunk with its vector, in batches (`citewise migrate`: vectors are copied, never re-made)."""
        if self._table is None:
            return
        rows = self._table.search().select([*_CHUNK_COLUMNS, "vector"]).limit(None).to_arrow()
        for batch in rows.to_batches(max_chunksize=batch_size):
            part = pa.Table.from_batches([batch])
            chunks = [Chunk(**row) for row in part.select(_CHUNK_COLUMNS).to_pylist()]
            yield chunks, _vector_matrix(part)

    def chunks(self, where: str | None = None) -> list[Chunk]:
        """Every chunk matching `where`, in document order (inspection and tests; not a search)."""
        if self._table is None:
            return []
        query = self._table.search()
        if where:
            query = query.where(where)
        rows = query.select(_CHUNK_COLUMNS).limit(None).to_list()
        return sorted((Chunk(**row) for row in rows), key=lambda c: (c.doc_id, c.chunk_index))
