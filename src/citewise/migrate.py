"""`citewise migrate --from HOME --to postgresql://…`: copy an embedded home into an empty PostgreSQL database.

What is copied: the manifest (embedding model and dimension), every registry row, every chunk with its stored
vector and sentence vectors (nothing is embedded again, so the copy ranks exactly like the home did), the
question log, the LLM reply cache, the sources' state (their specs, last runs and what each sync brought in, so
the next sync skips what is unchanged) and the feedback (answers kept for rating and readers' ratings of them, so
the analytics keep their history). What is not: conversation sessions (LangGraph checkpoints, short-lived by
nature) and uploaded files, which stay where they are — point `uploads_dir` at the home's uploads/ folder (or copy
it to the shared folder at the same path) so the registry's paths still name them.

The copy holds the database's write lock, refuses a database that already holds documents, and commits chunks in
batches; a failed run leaves a partial copy that `citewise migrate` refuses to extend: drop it and run again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field

from citewise.errors import ConfigError
from citewise.settings import Settings
from citewise.state.database import database
from citewise.state.locks import advisory_write_lock
from citewise.state.tables import PgRegistry, write_manifest

Progress = Callable[[str, int, int], None]


@dataclass
class MigrationReport:
    documents: int = 0
    chunks: int = 0
    questions: int = 0
    llm_cache: int = 0
    sources: int = 0
    feedback_answers: int = 0
    feedback_ratings: int = 0
    embeddings: str = ""
    dimension: int = 0
    not_copied: list[str] = field(default_factory=list)


def migrate_home(source: Settings, target: Settings, *, progress: Progress | None = None) -> MigrationReport:
    from citewise.eval.gaps import read_log
    from citewise.index.lancedb_store import LanceStore
    from citewise.index.postgres_store import PostgresStore
    from citewise.index.registry import Manifest, Registry

    report_progress = progress or (lambda stage, done, total: None)
    manifest = Manifest.read(source.index_dir / "manifest.json")
    registry = Registry(source.index_dir / "registry.sqlite3")
    if manifest is None or not registry.exists:
        raise ConfigError(f"No Citewise index at {source.home} (nothing was ever ingested there).")
    db = database(target)
    db.check_schema()
    report = MigrationReport(embeddings=manifest.embeddings, dimension=manifest.dimension)
    with advisory_write_lock(db, wait_s=0):
        with db.transaction() as conn:
            held = conn.execute("SELECT (SELECT count(*) FROM documents) + (SELECT count(*) FROM chunks)").fetchone()
        if held[0]:
            raise ConfigError(
                "The target database already holds documents or chunks; migrate into an empty database (a failed "
                "copy is dropped with DROP DATABASE and created again)."
            )
        # The format travels with the chunks: an index from before answer units stays one to upgrade (doctor --repair).
        write_manifest(db, manifest.embeddings, manifest.dimension, manifest.updated_at, manifest.format)
        records = registry.list()
        PgRegistry(db).upsert(records)
        report.documents = len(records)

        source_store = LanceStore(source.index_dir / "lancedb")
        total = source_store.count()
        target_store = PostgresStore(db, target.postgres)
        for chunks, vectors, sentences in source_store.export():
            target_store.write_chunks(chunks, vectors, finished={}, sentences=sentences)
            report.chunks += len(chunks)
            report_progress("copy", report.chunks, total)
        target_store.optimize()

        questions, _ = read_log(source.questions_log_path)
        if questions:
            from citewise.state.tables import log_question

            for record in questions:
                log_question(db, record)
        report.questions = len(questions)
        report.llm_cache = _copy_llm_cache(source, db)
        report.sources = _copy_sources(source, db)
        report.feedback_answers, report.feedback_ratings = _copy_feedback(source, db)
    report.not_copied = [
        "conversation sessions (sessions.sqlite3)",
        f"uploaded files: they stay in {source.uploads_path}; set uploads_dir to that folder (or to a shared copy "
        "at the same path) on every replica",
    ]
    return report


def _copy_llm_cache(source: Settings, db) -> int:
    path = source.llm_cache_path
    if not path.is_file():
        return 0
    with closing(sqlite3.connect(path)) as lite:
        try:
            rows = lite.execute("SELECT key, namespace, value FROM llm_cache").fetchall()
        except sqlite3.DatabaseError:
            return 0
    with db.transaction() as conn, conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO llm_cache (key, namespace, value) VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING", rows
        )
    return len(rows)


def _copy_sources(source: Settings, db) -> int:
    """The home's sources.sqlite3, row for row (sources/state.py; the columns are the same on both sides), the
    removals included, so a replica whose settings still declare a removed source does not bring it back."""
    path = source.index_dir / "sources.sqlite3"
    if not path.is_file():
        return 0
    with closing(sqlite3.connect(path)) as lite:
        lite.row_factory = sqlite3.Row
        try:
            sources = [dict(r) for r in lite.execute("SELECT * FROM sources")]
            documents = [dict(r) for r in lite.execute("SELECT * FROM source_documents")]
        except sqlite3.DatabaseError:
            return 0
        try:
            removed = [dict(r) for r in lite.execute("SELECT * FROM removed_sources")]
        except sqlite3.DatabaseError:  # a home written before removals were recorded
            removed = []
    for row in sources:
        row["last_ok"] = None if row["last_ok"] is None else bool(row["last_ok"])
    with db.transaction() as conn, conn.cursor() as cursor:
        for table, rows in (("sources", sources), ("source_documents", documents), ("removed_sources", removed)):
            if rows:
                columns = list(rows[0])
                cursor.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('%s' for _ in columns)})",
                    [[row[c] for c in columns] for row in rows],
                )
    return len(sources)


# The embedded feedback file's tables and the database's (feedback/sqlite.py, migration 3): the same columns, the
# database's names prefixed; citations are JSON text in SQLite and jsonb here. Copied as rows, not through the
# feedback stores: `feedback` sits above `migrate`'s layers, and a row copy keeps ids and times as they were.
_FEEDBACK_TABLES = (("answers", "feedback_answers"), ("ratings", "feedback_ratings"))


def _copy_feedback(source: Settings, db) -> tuple[int, int]:
    """The home's feedback.sqlite3: every answer kept for rating, then every rating (they reference the answers)."""
    path = source.feedback_path
    if not path.is_file():
        return 0, 0
    with closing(sqlite3.connect(path)) as lite:
        lite.row_factory = sqlite3.Row
        try:
            tables = [[dict(r) for r in lite.execute(f"SELECT * FROM {table}")] for table, _ in _FEEDBACK_TABLES]
        except sqlite3.DatabaseError:
            return 0, 0
    with db.transaction() as conn, conn.cursor() as cursor:
        for rows, (_, target) in zip(tables, _FEEDBACK_TABLES, strict=True):
            if rows:
                columns = list(rows[0])
                marks = ", ".join("%s::jsonb" if c == "citations" else "%s" for c in columns)
                cursor.executemany(
                    f"INSERT INTO {target} ({', '.join(columns)}) VALUES ({marks}) ON CONFLICT (answer_id) DO NOTHING",
                    [[row[c] for c in columns] for row in rows],
                )
    return len(tables[0]), len(tables[1])
