"""The knowledge base's bookkeeping and the server's shared state, as tables (see migrations.py for the schema):
the document registry, the manifest, the index version row, the vocabulary, the question log and the rate-limit
buckets. Each mirrors an embedded counterpart's interface, so callers don't branch on the backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from citewise.state.database import Database
from citewise.types import PUBLIC_OWNER, DocStatus, DocumentRecord

_COLUMNS = list(DocumentRecord.model_fields)


class PgRegistry:
    """The document registry (index/registry.py's `Registry`) in the `documents` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def exists(self) -> bool:
        return True  # the schema is there once connected; an empty registry lists no documents

    def _rows(self, sql: str, params: Sequence = ()) -> list[DocumentRecord]:
        with self._db.transaction() as conn:
            cursor = conn.execute(sql, params)
            names = [c.name for c in cursor.description]
            return [DocumentRecord(**dict(zip(names, row, strict=True))) for row in cursor]

    def get(self, doc_id: str) -> DocumentRecord | None:
        rows = self._rows("SELECT * FROM documents WHERE doc_id = %s", (doc_id,))
        return rows[0] if rows else None

    def list(self, *, owner: str | None = None, status: DocStatus | None = None) -> list[DocumentRecord]:
        sql, params = "SELECT * FROM documents WHERE true", []
        if owner is not None:
            sql += " AND owner = %s"
            params.append(owner)
        if status is not None:
            sql += " AND status = %s"
            params.append(str(status))
        return self._rows(sql + ' ORDER BY source COLLATE "C"', params)

    def counts(self) -> dict[DocStatus, int]:
        """How many documents are in each state (the embedded registry's `counts`)."""
        with self._db.transaction() as conn:
            rows = conn.execute("SELECT status, count(*) FROM documents GROUP BY status").fetchall()
        return {DocStatus(status): count for status, count in rows}

    def revisions(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """doc_id → the commit it was read at, for those of `doc_ids` that came from a Git source."""
        ids = list(doc_ids)
        if not ids:
            return {}
        with self._db.transaction() as conn:
            rows = conn.execute(
                "SELECT doc_id, revision FROM documents WHERE doc_id = ANY(%s) AND revision != ''", (ids,)
            ).fetchall()
        return {doc_id: revision for doc_id, revision in rows}

    def upsert(self, records: Iterable[DocumentRecord]) -> None:
        rows = [[getattr(r, c) if c != "status" else str(r.status) for c in _COLUMNS] for r in records]
        if not rows:
            return
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "doc_id")
        sql = (
            f"INSERT INTO documents ({', '.join(_COLUMNS)}) VALUES ({', '.join('%s' for _ in _COLUMNS)}) "
            f"ON CONFLICT (doc_id) DO UPDATE SET {updates}"
        )
        with self._db.transaction() as conn, conn.cursor() as cursor:
            cursor.executemany(sql, rows)

    def delete(self, doc_ids: Sequence[str]) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM documents WHERE doc_id = ANY(%s)", (list(doc_ids),))


# -- manifest ----------------------------------------------------------------------------------------------------
def read_manifest(db: Database) -> dict[str, Any] | None:
    with db.transaction() as conn:
        row = conn.execute("SELECT embeddings, dimension, updated_at, format FROM citewise_manifest").fetchone()
    return None if row is None else {"embeddings": row[0], "dimension": row[1], "updated_at": row[2], "format": row[3]}


def write_manifest(db: Database, embeddings: str, dimension: int, updated_at: str, format: int) -> None:
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO citewise_manifest (embeddings, dimension, updated_at, format) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (embeddings, dimension, updated_at, format),
        )


def set_manifest_format(db: Database, format: int) -> None:
    with db.transaction() as conn:
        conn.execute("UPDATE citewise_manifest SET format = %s", (format,))


# -- vocabulary --------------------------------------------------------------------------------------------------
def load_vocabulary(db: Database, version: int) -> dict[str, Any] | None:
    with db.transaction() as conn:
        row = conn.execute("SELECT body FROM citewise_vocabulary WHERE version = %s", (version,)).fetchone()
    return None if row is None else row[0]


def save_vocabulary(db: Database, version: int, body: dict[str, Any]) -> None:
    """Keep this version's vocabulary (and only the newest few): replicas that need it next read it instead of
    counting every chunk again."""
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO citewise_vocabulary (version, body) VALUES (%s, %s::jsonb) ON CONFLICT DO NOTHING",
            (version, json.dumps(body, separators=(",", ":"))),
        )
        conn.execute(
            "DELETE FROM citewise_vocabulary WHERE version < (SELECT min(version) FROM "
            "(SELECT version FROM citewise_vocabulary ORDER BY version DESC LIMIT 2) AS newest)"
        )


# -- question log ------------------------------------------------------------------------------------------------
def log_question(db: Database, record: dict[str, Any]) -> None:
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO questions (owner, record) VALUES (%s, %s::jsonb)",
            (record.get("owner"), json.dumps(record, ensure_ascii=False)),
        )


def read_questions(db: Database, *, owner: str | None = None, since: str | None = None) -> list[dict[str, Any]]:
    """The logged questions in the order asked: every owner's, or `owner`'s only (a public question is stored
    with no owner); every one, or those from `since` on (an ISO timestamp, compared with the record's own
    `timestamp` as the JSON-lines log's reader does: a copied log keeps its dates, not the time of the copy)."""
    sql, params = "SELECT record FROM questions WHERE true", []
    if owner is not None:
        sql += " AND coalesce(owner, %s) = %s"
        params += [PUBLIC_OWNER, owner]
    if since is not None:
        sql += " AND record->>'timestamp' >= %s"
        params.append(since)
    with db.transaction() as conn:
        return [row[0] for row in conn.execute(sql + " ORDER BY id", params)]


# -- rate limits -------------------------------------------------------------------------------------------------
# Refill the caller's bucket by the time passed (the database's clock, so replicas with skewed clocks agree) and
# lock its row; a second statement takes the token. Concurrent requests for one caller, on any replica, queue on
# that row lock, so the bucket is never overdrawn.
_REFILL = """
INSERT INTO rate_buckets AS b (bucket, tokens, refilled_at)
VALUES (%(bucket)s, %(capacity)s, extract(epoch FROM clock_timestamp()))
ON CONFLICT (bucket) DO UPDATE SET
    tokens = least(%(capacity)s, b.tokens + (excluded.refilled_at - b.refilled_at) * %(rate)s),
    refilled_at = excluded.refilled_at
RETURNING tokens
"""


def take_token(db: Database, bucket: str, capacity: float, rate: float) -> float:
    """0.0 when a token was taken, else the seconds until the next one (the Retry-After)."""
    with db.transaction() as conn:
        tokens = conn.execute(_REFILL, {"bucket": bucket, "capacity": capacity, "rate": rate}).fetchone()[0]
        if tokens >= 1.0:
            conn.execute("UPDATE rate_buckets SET tokens = tokens - 1 WHERE bucket = %s", (bucket,))
            return 0.0
    return (1.0 - tokens) / rate


def forget_idle_buckets(db: Database, idle_s: float) -> None:
    with db.transaction() as conn:
        conn.execute(
            "DELETE FROM rate_buckets WHERE refilled_at < extract(epoch FROM clock_timestamp()) - %s", (idle_s,)
        )
