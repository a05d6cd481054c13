"""What the home remembers about sources: each one's spec and last sync, and what each of its documents was.

`CITEWISE_HOME/index/sources.sqlite3` (or, with `store = "postgres"`, the same tables in the database, where
every replica and ingest worker shares them: `PgSourceState`, migrations 2 and 4):

    sources            name → spec (JSON), when it was added, its last run (start, end, ok, error, report JSON)
                       and its last good sync
    source_documents   (source, key) → the document it became (doc_id, "" when the page was fetched but not
                       indexed: noindex, a canonical alias), and what lets the next sync skip it: the URL, ETag,
                       Last-Modified, content hash and the page's links (web), the blob id and commit (Git); plus
                       the redirect chain that led to it and a note (why it was not indexed)
    removed_sources    name → when `citewise sources remove` removed it: settings read before that (a running
                       server's, another machine's citewise.toml) still declare it, and must not bring it back

Per-document facts live here, not in the vector store, so the store keeps one row per chunk and nothing else. The
commit a Git document was read at is also on its registry row (`DocumentRecord.revision`), where citations get it.
A source's rows are replaced in one transaction at the end of each sync.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from citewise.index.registry import now_iso
from citewise.settings import Settings, SourceSpec

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    added_at TEXT NOT NULL,
    last_started TEXT,
    last_finished TEXT,
    last_ok INTEGER,
    last_error TEXT,
    last_report TEXT,
    last_success TEXT
);
CREATE TABLE IF NOT EXISTS source_documents (
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    doc_id TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL DEFAULT '',
    etag TEXT NOT NULL DEFAULT '',
    last_modified TEXT NOT NULL DEFAULT '',
    content_hash TEXT NOT NULL DEFAULT '',
    blob TEXT NOT NULL DEFAULT '',
    revision TEXT NOT NULL DEFAULT '',
    links TEXT NOT NULL DEFAULT '[]',
    redirects TEXT NOT NULL DEFAULT '[]',
    note TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (source, key)
);
CREATE INDEX IF NOT EXISTS source_documents_doc ON source_documents(doc_id);
CREATE TABLE IF NOT EXISTS removed_sources (
    name TEXT PRIMARY KEY,
    removed_at TEXT NOT NULL
);
"""


@dataclass
class SourceDocument:
    """One row of `source_documents`: a page or file the source had at its last sync."""

    key: str  # web: the page URL (after redirects); git and folder: the file's path
    doc_id: str = ""  # "" when it was fetched but not indexed
    url: str = ""
    etag: str = ""
    last_modified: str = ""
    content_hash: str = ""
    blob: str = ""
    revision: str = ""
    links: list[str] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)
    note: str = ""
    updated_at: str = ""


class SourceRun(BaseModel):
    """A source as `sources list` and `/api/sources` show it."""

    name: str
    spec: SourceSpec
    added_at: str = ""
    last_started: str | None = None
    last_finished: str | None = None
    last_ok: bool | None = None
    last_error: str | None = None
    last_success: str | None = None
    report: dict = Field(default_factory=dict)
    documents: int = 0


class SourceState:
    def __init__(self, index_dir: Path) -> None:
        self._path = index_dir / "sources.sqlite3"

    @contextmanager
    def _db(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        if write:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        elif not self._path.exists():
            db = sqlite3.connect(":memory:")
            db.executescript(_SCHEMA)
            with closing(db):
                yield db
            return
        with closing(sqlite3.connect(self._path, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            with db:
                db.executescript(_SCHEMA)
                yield db

    # -- sources -----------------------------------------------------------------------------------------------
    def save_spec(self, name: str, spec: SourceSpec) -> None:
        with self._db(write=True) as db:
            db.execute(
                "INSERT INTO sources (name, spec, added_at) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET spec = excluded.spec",
                (name, spec.model_dump_json(exclude_defaults=True), now_iso()),
            )
            db.execute("DELETE FROM removed_sources WHERE name = ?", (name,))

    def specs(self) -> dict[str, SourceSpec]:
        with self._db() as db:
            rows = db.execute("SELECT name, spec FROM sources ORDER BY name").fetchall()
        return {row[0]: SourceSpec.model_validate_json(row[1]) for row in rows}

    def runs(self, specs: dict[str, SourceSpec]) -> list[SourceRun]:
        """The given sources with what the home knows of their runs, in name order."""
        with self._db() as db:
            rows = {row[0]: row for row in db.execute("SELECT * FROM sources")}
            indexed = "SELECT source, COUNT(*) FROM source_documents WHERE doc_id != '' AND note = '' GROUP BY source"
            counts = dict(db.execute(indexed))
        runs = []
        for name in sorted(specs):
            row = rows.get(name)
            run = SourceRun(name=name, spec=specs[name], documents=counts.get(name, 0))
            if row is not None:
                run.added_at = row[2]
                run.last_started, run.last_finished = row[3], row[4]
                run.last_ok = None if row[5] is None else bool(row[5])
                run.last_error, run.last_success = row[6], row[8]
                run.report = json.loads(row[7]) if row[7] else {}
            runs.append(run)
        return runs

    def started(self, name: str, spec: SourceSpec) -> None:
        with self._db(write=True) as db:
            db.execute(
                "INSERT INTO sources (name, spec, added_at, last_started) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET spec = excluded.spec, last_started = excluded.last_started",
                (name, spec.model_dump_json(exclude_defaults=True), now_iso(), now_iso()),
            )
            db.execute("DELETE FROM removed_sources WHERE name = ?", (name,))

    def finished(self, name: str, *, ok: bool, error: str | None, report: dict) -> None:
        now = now_iso()
        with self._db(write=True) as db:
            db.execute(
                "UPDATE sources SET last_finished = ?, last_ok = ?, last_error = ?, last_report = ?, "
                "last_success = CASE WHEN ? THEN ? ELSE last_success END WHERE name = ?",
                (now, int(ok), error, json.dumps(report), int(ok), now, name),
            )

    def forget(self, name: str) -> None:
        """The source's state goes; what stays is when it was removed (see `removed`)."""
        with self._db(write=True) as db:
            db.execute("DELETE FROM source_documents WHERE source = ?", (name,))
            db.execute("DELETE FROM sources WHERE name = ?", (name,))
            db.execute(
                "INSERT INTO removed_sources (name, removed_at) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET removed_at = excluded.removed_at",
                (name, removed_now()),
            )

    def removed(self) -> dict[str, datetime]:
        """Name → when `citewise sources remove` removed it, for the sources not added or synced again since."""
        with self._db() as db:
            rows = db.execute("SELECT name, removed_at FROM removed_sources").fetchall()
        return {name: datetime.fromisoformat(at) for name, at in rows}

    # -- documents ---------------------------------------------------------------------------------------------
    def documents(self, name: str) -> dict[str, SourceDocument]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM source_documents WHERE source = ?", (name,)).fetchall()
        docs = [_document(dict(row)) for row in rows]
        return {doc.key: doc for doc in docs}

    def replace_documents(self, name: str, documents: Iterable[SourceDocument]) -> None:
        rows = [_document_row(name, doc) for doc in documents]
        with self._db(write=True) as db:
            db.execute("DELETE FROM source_documents WHERE source = ?", (name,))
            if rows:
                columns = list(rows[0])
                db.executemany(
                    f"INSERT INTO source_documents ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                    [[row[c] for c in columns] for row in rows],
                )

    def claimed(self, doc_ids: Iterable[str], *, besides: str) -> dict[str, str]:
        """doc_id → the other source that brought it in, for those of `doc_ids` another source owns."""
        ids = list(doc_ids)
        found: dict[str, str] = {}
        with self._db() as db:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ", ".join("?" for _ in part)
                for doc_id, source in db.execute(
                    f"SELECT doc_id, source FROM source_documents WHERE doc_id IN ({marks}) AND source != ?",
                    [*part, besides],
                ):
                    found[doc_id] = source
        return found


def removed_now() -> str:
    """A removal's time, to the microsecond: it is compared with citewise.toml's modification time."""
    return datetime.now(UTC).isoformat()


def _document(values: dict) -> SourceDocument:
    values.pop("source", None)
    values["links"] = json.loads(values["links"] or "[]")
    values["redirects"] = json.loads(values["redirects"] or "[]")
    return SourceDocument(**values)


def _document_row(name: str, doc: SourceDocument) -> dict:
    values = asdict(doc)
    values["links"] = json.dumps(values["links"])
    values["redirects"] = json.dumps(values["redirects"])
    return {"source": name, **values}


class PgSourceState:
    """`SourceState` in PostgreSQL (`store = "postgres"`): the same methods on the `sources` and `source_documents`
    tables, so a source added or synced through one process is seen by all (the scheduler of every replica reads
    the last run from here, and a sync holds the database's advisory write lock like any writer)."""

    def __init__(self, db) -> None:
        self._db = db

    def save_spec(self, name: str, spec: SourceSpec) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO sources (name, spec, added_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET spec = excluded.spec",
                (name, spec.model_dump_json(exclude_defaults=True), now_iso()),
            )
            conn.execute("DELETE FROM removed_sources WHERE name = %s", (name,))

    def specs(self) -> dict[str, SourceSpec]:
        with self._db.transaction() as conn:
            rows = conn.execute('SELECT name, spec FROM sources ORDER BY name COLLATE "C"').fetchall()
        return {name: SourceSpec.model_validate_json(spec) for name, spec in rows}

    def runs(self, specs: dict[str, SourceSpec]) -> list[SourceRun]:
        with self._db.transaction() as conn:
            cursor = conn.execute("SELECT * FROM sources")
            names = [c.name for c in cursor.description]
            rows = {row[0]: dict(zip(names, row, strict=True)) for row in cursor}
            counts = dict(
                conn.execute(
                    "SELECT source, count(*) FROM source_documents WHERE doc_id != '' AND note = '' GROUP BY source"
                ).fetchall()
            )
        runs = []
        for name in sorted(specs):
            row = rows.get(name)
            run = SourceRun(name=name, spec=specs[name], documents=counts.get(name, 0))
            if row is not None:
                run.added_at = row["added_at"]
                run.last_started, run.last_finished = row["last_started"], row["last_finished"]
                run.last_ok, run.last_error, run.last_success = row["last_ok"], row["last_error"], row["last_success"]
                run.report = json.loads(row["last_report"]) if row["last_report"] else {}
            runs.append(run)
        return runs

    def started(self, name: str, spec: SourceSpec) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO sources (name, spec, added_at, last_started) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, last_started = excluded.last_started",
                (name, spec.model_dump_json(exclude_defaults=True), now_iso(), now_iso()),
            )
            conn.execute("DELETE FROM removed_sources WHERE name = %s", (name,))

    def finished(self, name: str, *, ok: bool, error: str | None, report: dict) -> None:
        now = now_iso()
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE sources SET last_finished = %s, last_ok = %s, last_error = %s, last_report = %s, "
                "last_success = CASE WHEN %s THEN %s ELSE last_success END WHERE name = %s",
                (now, ok, error, json.dumps(report), ok, now, name),
            )

    def forget(self, name: str) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM source_documents WHERE source = %s", (name,))
            conn.execute("DELETE FROM sources WHERE name = %s", (name,))
            conn.execute(
                "INSERT INTO removed_sources (name, removed_at) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET removed_at = excluded.removed_at",
                (name, removed_now()),
            )

    def removed(self) -> dict[str, datetime]:
        with self._db.transaction() as conn:
            rows = conn.execute("SELECT name, removed_at FROM removed_sources").fetchall()
        return {name: datetime.fromisoformat(at) for name, at in rows}

    def documents(self, name: str) -> dict[str, SourceDocument]:
        with self._db.transaction() as conn:
            cursor = conn.execute("SELECT * FROM source_documents WHERE source = %s", (name,))
            names = [c.name for c in cursor.description]
            docs = [_document(dict(zip(names, row, strict=True))) for row in cursor]
        return {doc.key: doc for doc in docs}

    def replace_documents(self, name: str, documents: Iterable[SourceDocument]) -> None:
        rows = [_document_row(name, doc) for doc in documents]
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM source_documents WHERE source = %s", (name,))
            if rows:
                columns = list(rows[0])
                with conn.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO source_documents ({', '.join(columns)}) "
                        f"VALUES ({', '.join('%s' for _ in columns)})",
                        [[row[c] for c in columns] for row in rows],
                    )

    def claimed(self, doc_ids: Iterable[str], *, besides: str) -> dict[str, str]:
        ids = list(doc_ids)
        if not ids:
            return {}
        with self._db.transaction() as conn:
            rows = conn.execute(
                "SELECT doc_id, source FROM source_documents WHERE doc_id = ANY(%s) AND source != %s", (ids, besides)
            ).fetchall()
        return dict(rows)


def open_source_state(settings: Settings) -> SourceState | PgSourceState:
    """The sources' state where the rest of the state lives: the home's SQLite file, or the PostgreSQL database."""
    if settings.uses_postgres:
        from citewise.state.database import database

        return PgSourceState(database(settings))
    return SourceState(settings.index_dir)
