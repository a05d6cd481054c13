"""The document registry (SQLite) and the index manifest (JSON), both under CITEWISE_HOME/index.

The registry knows every document: its status (PENDING → INDEXED | FAILED with the error), chunk count and the
hash that lets an unchanged file be skipped without parsing or embedding it. SQLite because it is transactional,
in the standard library, and readable by `docs list` without importing the vector engine.

The manifest records the embedding model and dimension the index was built with. (Its `version` field is kept
for homes written by older releases; the version readers check is the index's own commit number, see
`KnowledgeBase.version`.)
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from citewise.errors import IndexMismatchError
from citewise.types import DocStatus, DocumentRecord

if TYPE_CHECKING:
    from citewise.settings import Settings
    from citewise.state.tables import PgRegistry

_COLUMNS = list(DocumentRecord.model_fields)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    {", ".join(f"{c} TEXT" if c != "chunk_count" else f"{c} INTEGER" for c in _COLUMNS if c != "doc_id")}
);
CREATE INDEX IF NOT EXISTS documents_path ON documents(path);
"""


def _add_new_columns(db: sqlite3.Connection) -> None:
    """A registry written by an older release lacks the columns added since (`revision`): add them, empty. Reads
    never need this (a missing column reads as the field's default); writes name every column."""
    have = {row[1] for row in db.execute("PRAGMA table_info(documents)")}
    for column in _COLUMNS:
        if column not in have:
            kind = "INTEGER DEFAULT 0" if column == "chunk_count" else "TEXT DEFAULT ''"
            db.execute(f"ALTER TABLE documents ADD COLUMN {column} {kind}")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Registry:
    """Created on the first write: reading a home that does not exist (`docs list` with a mistyped --home) finds
    no documents and leaves nothing behind."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._ready = False

    @property
    def exists(self) -> bool:
        return self._path.exists()

    def _connect(self, *, write: bool = False) -> sqlite3.Connection:
        if write and not self._ready:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(self._path, timeout=30)) as db, db:
                db.executescript(_SCHEMA)
                _add_new_columns(db)
            self._ready = True
        db = sqlite3.connect(self._path, timeout=30)
        db.row_factory = sqlite3.Row
        return db

    def _rows(self, sql: str, params: Sequence = ()) -> list[DocumentRecord]:
        if not self._ready and not self._path.exists():
            return []
        with closing(self._connect()) as db:
            try:
                return [DocumentRecord(**dict(row)) for row in db.execute(sql, params)]
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # created by a writer that has not written yet
                    return []
                raise

    def get(self, doc_id: str) -> DocumentRecord | None:
        rows = self._rows("SELECT * FROM documents WHERE doc_id = ?", (doc_id,))
        return rows[0] if rows else None

    def list(self, *, owner: str | None = None, status: DocStatus | None = None) -> list[DocumentRecord]:
        sql, params = "SELECT * FROM documents WHERE 1=1", []
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        if status is not None:
            sql += " AND status = ?"
            params.append(str(status))
        return self._rows(sql + " ORDER BY source", params)

    def counts(self) -> dict[DocStatus, int]:
        """How many documents are in each state: one query, no rows read (whether anything is ingested at all)."""
        if not self._ready and not self._path.exists():
            return {}
        with closing(self._connect()) as db:
            try:
                rows = db.execute("SELECT status, count(*) FROM documents GROUP BY status").fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # created by a writer that has not written yet
                    return {}
                raise
        return {DocStatus(status): count for status, count in rows}

    def revisions(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """doc_id → the commit it was read at, for those of `doc_ids` that came from a Git source."""
        ids = list(doc_ids)
        if not ids or (not self._ready and not self._path.exists()):
            return {}
        marks = ", ".join("?" for _ in ids)
        with closing(self._connect()) as db:
            try:
                rows = db.execute(
                    f"SELECT doc_id, revision FROM documents WHERE doc_id IN ({marks}) AND revision != ''", ids
                ).fetchall()
            except sqlite3.OperationalError:  # a registry from before `revision` existed, not written to since
                return {}
        return {row[0]: row[1] for row in rows}

    def upsert(self, records: Iterable[DocumentRecord]) -> None:
        placeholders = ", ".join("?" for _ in _COLUMNS)
        rows = [[getattr(r, c) if c != "status" else str(r.status) for c in _COLUMNS] for r in records]
        with closing(self._connect(write=True)) as db, db:
            db.executemany(f"INSERT OR REPLACE INTO documents ({', '.join(_COLUMNS)}) VALUES ({placeholders})", rows)

    def delete(self, doc_ids: Sequence[str]) -> None:
        with closing(self._connect(write=True)) as db, db:
            db.executemany("DELETE FROM documents WHERE doc_id = ?", [(d,) for d in doc_ids])


# What the index holds: 1, chunks and vectors; 2, each chunk's answer units too (`Chunk.units`). A reader refuses an
# index of an older format with what to run (`KnowledgeBase.require_current`); writers upgrade it first.
INDEX_FORMAT = 2


class Manifest(BaseModel):
    format: int = 1
    embeddings: str
    dimension: int
    version: int = 0
    updated_at: str = ""

    @classmethod
    def read(cls, path: Path) -> Manifest | None:
        if not path.exists():
            return None
        return cls.model_validate_json(path.read_text())

    def write(self, path: Path) -> None:
        # Write-then-rename: a crash leaves either the old manifest or the new one, never half of one.
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.model_dump(), indent=2))
        os.replace(tmp, path)

    def check(self, embeddings: str, dimension: int | None = None) -> None:
        if embeddings != self.embeddings or (dimension is not None and dimension != self.dimension):
            got = embeddings if dimension is None else f"{embeddings} ({dimension} dims)"
            raise IndexMismatchError(
                f"This index was built with embeddings {self.embeddings!r} ({self.dimension} dims) but "
                f"{got!r} is configured. Vectors from different models cannot be compared: set "
                f"CITEWISE_EMBEDDINGS={self.embeddings} to use this index, or ingest into a new --home "
                "(or delete this one) to switch models."
            )


def open_registry(settings: Settings) -> Registry | PgRegistry:
    """The registry alone, without the vector engine (`citewise docs list`): a SQLite file, or a PostgreSQL table."""
    if settings.uses_postgres:
        from citewise.state.database import database
        from citewise.state.tables import PgRegistry

        return PgRegistry(database(settings))
    return Registry(settings.index_dir / "registry.sqlite3")
