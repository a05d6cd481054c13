"""PostgreSQL with pgvector: the scale-out engine behind the same `VectorStore` protocol as LanceDB.

- Vectors in a `vector(dim)` column with an HNSW index (cosine); the column is typed to the embedding model's
  dimension, and the index built, by the first write. Each chunk's sentence vectors (`store.dense_scores`) sit
  next to it in `sentence_vectors` (bytea, `store.pack_sentences`; NULL for rows written before them): the HNSW
  scan finds the nearest chunks by their own vector, and `dense` re-ranks those by their best sentence too.
- The lexical side is a generated `tsvector` (`citewise_lexemes(search_text)`: LanceDB's tokenizer rules, English
  stemming and stop words) with a GIN index, ranked by BM25 in SQL: term frequencies come from the tsvector's
  positions, document frequencies from `citewise_lexemes`, a table every write keeps current in its own
  transaction, corpus size and length from the version row. Postgres' own `ts_rank` ignores document frequency
  and ranked below LanceDB's BM25 on our eval sets (BENCHMARKS.md).
- The owner prefilter and metadata filters (`store.build_where`, the only builder) go inside both queries; the
  HNSW scan is iterative (pgvector 0.8), so a selective filter still fills the candidate list.
- Every write is one transaction: the batch's rows, the stale rows it replaces, the document frequencies and the
  version row change together, so a reader sees the old or the new version, never a gap.
- Two-phase reads like LanceDB's: searches return ids and scores (BM25 hits also vectors and sentence vectors);
  `fetch` reads full rows for the few returned. Fusion stays in the retriever, so both engines rank the same way.

Writers are serialised by the database's advisory write lock (state/locks.py), as LanceDB's are by the home's file
lock; the primary key on chunk_id makes a duplicate chunk impossible even for a writer that skipped the lock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from citewise.errors import IndexMismatchError, RetrievalError
from citewise.index.store import (
    Hit,
    chunk_counts,
    dense_scores,
    pack_sentences,
    search_text,
    sql_literal,
    unpack_sentences,
)
from citewise.settings import PostgresSettings
from citewise.state.database import Database
from citewise.types import Chunk

_CHUNK_COLUMNS = [
    "chunk_id",
    "doc_id",
    "chunk_index",
    "text",
    "filename",
    "source_url",
    "module",
    "chapter",
    "title",
    "page",
    "modified",
    "owner",
    "content_hash",
    "units",  # the chunk's answer units as JSON text (`Chunk.units`); NULL in rows from before migration 6
]
_INSERT = (
    f"INSERT INTO chunks ({', '.join(_CHUNK_COLUMNS)}, search_text, embedding, sentence_vectors) "
    f"VALUES ({', '.join('%s' for _ in _CHUNK_COLUMNS)}, %s, %b, %b)"
)
# BM25 as LanceDB (tantivy) computes it.
K1, B = 1.2, 0.75


def _literal(where: str) -> str:
    """A filter (store.build_where: SQL with its values quoted in) for a query that also takes parameters: a `%` in a
    value ("100% uptime.md", a URL-encoded source_url) is text there, not the start of a placeholder."""
    return where.replace("%", "%%")


class PostgresStore:
    def __init__(self, db: Database, settings: PostgresSettings | None = None) -> None:
        self._db = db
        self._settings = settings or PostgresSettings()
        self._dimension: int | None = None

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def count(self) -> int:
        with self._db.transaction() as conn:
            return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]

    def version(self) -> int:
        with self._db.transaction() as conn:
            return conn.execute("SELECT version FROM citewise_index").fetchone()[0]

    def refresh(self) -> None:
        """Nothing to do: every query reads the latest committed state."""

    def _ensure_dimension(self, conn: Any, dim: int) -> None:
        """Type the vector column to the model's dimension and build the HNSW index, on the first write."""
        if self._dimension == dim:
            return
        typmod = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
        ).fetchone()[0]
        if typmod > 0 and typmod != dim:
            raise IndexMismatchError(
                f"The database's chunks hold {typmod}-dimensional vectors; the configured embeddings make {dim}."
            )
        if typmod <= 0:
            conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({int(dim)})")
            conn.execute(
                "CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {int(self._settings.hnsw_m)}, ef_construction = {int(self._settings.hnsw_ef_construction)})"
            )
        self._dimension = dim

    # -- writes ------------------------------------------------------------------------------------------------
    def replace_documents(
        self,
        doc_ids: Sequence[str],
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        sentences: Sequence[np.ndarray | None] | None = None,
    ) -> None:
        if doc_ids:
            self.write_chunks(chunks, vectors, finished=chunk_counts(doc_ids, chunks), sentences=sentences)

    def write_chunks(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        *,
        finished: Mapping[str, int],
        sentences: Sequence[np.ndarray | None] | None = None,
    ) -> None:
        """One transaction: upsert `chunks` by chunk_id and, for each document in `finished` (doc_id → its chunk
        count), delete its rows past that count (all its other rows when every chunk of it is in this batch)."""
        if len(chunks) != len(vectors) or (sentences is not None and len(sentences) != len(chunks)):
            raise ValueError("one vector (and one set of sentence vectors, when given) per chunk")
        in_batch: dict[str, int] = {}
        for chunk in chunks:
            in_batch[chunk.doc_id] = in_batch.get(chunk.doc_id, 0) + 1
        whole = sorted(d for d, n in finished.items() if in_batch.get(d, 0) == n)
        tails = sorted((d, int(n)) for d, n in finished.items() if d not in whole)
        ids = [c.chunk_id for c in chunks]
        stale = (
            "(chunk_id = ANY(%(ids)s) OR doc_id = ANY(%(whole)s) OR (doc_id, chunk_index) IN "
            "(SELECT c.doc_id, c.chunk_index FROM chunks c JOIN unnest(%(tail_docs)s::text[], %(tail_counts)s::int[]) "
            "AS t(doc_id, n) ON c.doc_id = t.doc_id AND c.chunk_index >= t.n))"
        )
        params = {"ids": ids, "whole": whole, "tail_docs": [d for d, _ in tails], "tail_counts": [n for _, n in tails]}
        with self._db.transaction() as conn:
            if chunks:
                self._ensure_dimension(conn, int(vectors.shape[1]))
            conn.execute(
                "UPDATE citewise_lexemes l SET df = l.df - x.n FROM (SELECT lexeme, count(*) AS n FROM chunks, "
                f"unnest(tsvector_to_array(tsv)) AS lexeme WHERE {stale} GROUP BY lexeme) AS x "
                "WHERE l.lexeme = x.lexeme",
                params,
            )
            removed, removed_length = conn.execute(
                f"WITH gone AS (DELETE FROM chunks WHERE {stale} RETURNING doc_length) "
                "SELECT count(*), coalesce(sum(doc_length), 0) FROM gone",
                params,
            ).fetchone()
            added = added_length = 0
            if chunks:
                rows = [
                    [
                        *(getattr(c, name) if name != "units" else c.units_json() for name in _CHUNK_COLUMNS),
                        search_text(c),
                        np.asarray(v, dtype=np.float32),
                        pack_sentences(m),
                    ]
                    for c, v, m in zip(chunks, vectors, sentences or [None] * len(chunks), strict=True)
                ]
                with conn.cursor() as cursor:
                    cursor.executemany(_INSERT, rows)
                conn.execute(
                    "INSERT INTO citewise_lexemes (lexeme, df) SELECT lexeme, count(*) FROM chunks, "
                    "unnest(tsvector_to_array(tsv)) AS lexeme WHERE chunk_id = ANY(%s) GROUP BY lexeme "
                    "ON CONFLICT (lexeme) DO UPDATE SET df = citewise_lexemes.df + excluded.df",
                    (ids,),
                )
                added, added_length = conn.execute(
                    "SELECT count(*), coalesce(sum(doc_length), 0) FROM chunks WHERE chunk_id = ANY(%s)", (ids,)
                ).fetchone()
            if removed or added:
                conn.execute(
                    "UPDATE citewise_index SET version = version + 1, chunks = chunks + %s, "
                    "total_length = total_length + %s",
                    (added - removed, added_length - removed_length),
                )

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if doc_ids:
            self.write_chunks([], np.zeros((0, 1), dtype=np.float32), finished=dict.fromkeys(doc_ids, 0))

    def vectors_by_hash(
        self, doc_ids: Sequence[str], *, hashes: Sequence[str] | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        if not doc_ids or (hashes is not None and not hashes):
            return {}
        sql = "SELECT content_hash, embedding, sentence_vectors FROM chunks WHERE doc_id = ANY(%s)"
        params = [list(doc_ids)]
        if hashes is not None:  # one batch of a big document: read only the vectors it can use
            sql += " AND content_hash = ANY(%s)"
            params.append(sorted(set(hashes)))
        with self._db.transaction() as conn, conn.cursor(binary=True) as cursor:
            rows = cursor.execute(sql, params).fetchall()
        return {h: (vector, unpack_sentences(blob, len(vector))) for h, vector, blob in rows}

    # -- checks and repairs (citewise doctor) ------------------------------------------------------------------
    def chunk_rows(self) -> list[tuple[str, str]]:
        with self._db.transaction() as conn:
            return [(c, d) for c, d in conn.execute("SELECT chunk_id, doc_id FROM chunks")]

    def dedupe(self) -> int:
        """Nothing to do: chunk_id is the primary key, a chunk can't be stored twice."""
        return 0

    def optimize(self) -> None:
        """Fresh planner statistics after an ingest; the HNSW and GIN indexes are maintained on every write."""
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM citewise_lexemes WHERE df <= 0")
            conn.execute("ANALYZE chunks")

    # -- reads -------------------------------------------------------------------------------------------------
    def dense(self, vector: np.ndarray, limit: int, where: str | None) -> list[Hit]:
        query = np.asarray(vector, dtype=np.float32)
        ef_search = min(1000, max(self._settings.hnsw_ef_search, 2 * limit))
        sql = (
            "SELECT chunk_id, embedding <=> %(q)b, sentence_vectors FROM chunks"
            + (f" WHERE {_literal(where)}" if where else "")
            + " ORDER BY embedding <=> %(q)b LIMIT %(limit)s"
        )
        try:
            with self._db.transaction() as conn, conn.cursor(binary=True) as cursor:
                cursor.execute(
                    "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', "
                    "'relaxed_order', true)",
                    (str(ef_search),),
                )
                rows = cursor.execute(sql, {"q": query, "limit": limit}).fetchall()
        except RetrievalError:
            raise
        except Exception as exc:
            raise RetrievalError(f"Vector search failed: {exc}") from exc
        scores = dense_scores([1.0 - float(distance) for _, distance, _ in rows], [blob for *_, blob in rows], query)
        hits = [Hit(chunk_id, dense=score) for (chunk_id, _, _), score in zip(rows, scores, strict=True)]
        # The best sentence moves a chunk among its neighbours (and the iterative scan's relaxed order may return
        # them slightly out of order anyway): the final scores re-sort.
        hits.sort(key=lambda h: (-h.dense, h.chunk_id))
        return hits

    def lexical(self, text: str, limit: int, where: str | None, *, with_vectors: bool = False) -> list[Hit]:
        if not text.strip():
            return []
        try:
            with self._db.transaction() as conn:
                # A word the query repeats counts once per occurrence, as in LanceDB.
                terms = conn.execute(
                    "SELECT q.lexeme, l.df, coalesce(array_length(q.positions, 1), 1) "
                    "FROM unnest(citewise_lexemes(%s)) AS q JOIN citewise_lexemes l USING (lexeme) "
                    "WHERE l.df > 0 ORDER BY q.lexeme",
                    (text,),
                ).fetchall()
                if not terms:
                    return []
                chunks, total_length = conn.execute("SELECT chunks, total_length FROM citewise_index").fetchone()
                n = max(1, chunks)
                avg_length = max(1.0, total_length / n)
                lexemes = [lexeme for lexeme, _, _ in terms]
                idf = [times * math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for _, df, times in terms]
                tsquery = " | ".join("'" + lexeme.replace("'", "''") + "'" for lexeme, _, _ in terms)
                # Term frequencies from the query's own lexemes only: setweight marks them in C (a binary search
                # per lexeme) and ts_filter keeps them, instead of unnesting the passage's every lexeme in SQL —
                # a third of the time when a common word matches most rows.
                sql = f"""
                    WITH q(lexeme, idf) AS (SELECT * FROM unnest(%(lexemes)s::text[], %(idf)s::float8[])),
                    scored AS (
                        SELECT c.chunk_id, sum(q.idf * (t.tf * {K1 + 1}) /
                                   (t.tf + {K1} * ({1 - B} + {B} * c.doc_length / %(avg)s::float8))) AS score
                        FROM chunks c
                        CROSS JOIN LATERAL unnest(ts_filter(setweight(c.tsv, 'A', %(lexemes)s::text[]), '{{a}}'))
                            AS u(lexeme, positions, weights)
                        CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) AS t
                        JOIN q ON q.lexeme = u.lexeme
                        WHERE c.tsv @@ %(tsquery)s::tsquery{f" AND ({_literal(where)})" if where else ""}
                        GROUP BY c.chunk_id
                        ORDER BY score DESC, c.chunk_id
                        LIMIT %(limit)s
                    )
                    SELECT s.chunk_id, s.score{", c.embedding, c.sentence_vectors" if with_vectors else ""}
                    FROM scored s{" JOIN chunks c USING (chunk_id)" if with_vectors else ""}
                    ORDER BY s.score DESC, s.chunk_id
                """
                params = {"lexemes": lexemes, "idf": idf, "avg": avg_length, "tsquery": tsquery, "limit": limit}
                with conn.cursor(binary=True) as cursor:
                    rows = cursor.execute(sql, params).fetchall()
        except RetrievalError:
            raise
        except Exception as exc:
            raise RetrievalError(f"Full-text search failed: {exc}") from exc
        if with_vectors:
            return [Hit(row[0], lexical=float(row[1]), vector=row[2], sentences=row[3]) for row in rows]
        return [Hit(row[0], lexical=float(row[1])) for row in rows]

    def fetch(self, chunk_ids: Sequence[str], where: str | None = None) -> dict[str, Chunk]:
        """The chunks with these ids that `where` (the owner scope, store.build_where) admits: the owner rule is part
        of the query, so another owner's row is never read."""
        if not chunk_ids:
            return {}
        condition = "chunk_id = ANY(%s)" + (f" AND ({_literal(where)})" if where else "")
        with self._db.transaction() as conn:
            cursor = conn.execute(
                f"SELECT {', '.join(_CHUNK_COLUMNS)} FROM chunks WHERE {condition}", (list(chunk_ids),)
            )
            return {row[0]: Chunk(**dict(zip(_CHUNK_COLUMNS, row, strict=True))) for row in cursor}

    def chunks(self, where: str | None = None) -> list[Chunk]:
        """Every chunk matching `where`, in document order (inspection and tests; not a search)."""
        sql = f"SELECT {', '.join(_CHUNK_COLUMNS)} FROM chunks" + (f" WHERE {where}" if where else "")
        with self._db.transaction() as conn:
            rows = conn.execute(sql + " ORDER BY doc_id, chunk_index").fetchall()
        return [Chunk(**dict(zip(_CHUNK_COLUMNS, row, strict=True))) for row in rows]

    def missing_units(self) -> int:
        """How many chunks have no answer units recorded (rows written before migration 6)."""
        with self._db.transaction() as conn:
            return conn.execute("SELECT count(*) FROM chunks WHERE units IS NULL").fetchone()[0]

    def fill_units(self, units_of: Callable[[list[Chunk]], list[tuple | None]], batch_size: int = 200) -> int:
        """Record answer units for every chunk that has none (see LanceStore.fill_units), one transaction per batch of
        documents, each bumping the index version (a reader's caches are keyed by it)."""
        with self._db.transaction() as conn:
            doc_ids = [r[0] for r in conn.execute("SELECT DISTINCT doc_id FROM chunks WHERE units IS NULL ORDER BY 1")]
        filled = 0
        for start in range(0, len(doc_ids), batch_size):
            batch = doc_ids[start : start + batch_size]
            chunks = self.chunks(f"doc_id IN ({', '.join(sql_literal(d) for d in batch)})")
            units = units_of(chunks)
            rows = [
                (c.model_copy(update={"units": u}).units_json(), c.chunk_id)
                for c, u in zip(chunks, units, strict=True)
                if c.units is None
            ]
            with self._db.transaction() as conn:
                with conn.cursor() as cursor:
                    cursor.executemany("UPDATE chunks SET units = %s WHERE chunk_id = %s", rows)
                conn.execute("UPDATE citewise_index SET version = version + 1")
            filled += len(rows)
        return filled

    def sections(self, where: str | None = None) -> list[tuple[str, str]]:
        sql = "SELECT doc_id, chapter, min(chunk_index) AS first FROM chunks" + (f" WHERE {where}" if where else "")
        with self._db.transaction() as conn:
            rows = conn.execute(sql + ' GROUP BY doc_id, chapter ORDER BY doc_id COLLATE "C", first').fetchall()
        return [(doc_id, chapter or "") for doc_id, chapter, _ in rows]

    def indexed_texts(self) -> Iterator[tuple[str, str]]:
        with self._db.transaction() as conn, conn.cursor(name="citewise_indexed_texts") as cursor:
            cursor.itersize = 4096
            cursor.execute("SELECT owner, search_text FROM chunks")
            yield from cursor
