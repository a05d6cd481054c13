"""The feedback store in one SQLite file under the home (CITEWISE_HOME/feedback.sqlite3).

A connection per call (the server calls from worker threads; SQLite connections are not shared across threads),
WAL so readers never wait for a writer, and a busy timeout so two processes on one home take turns. The schema is
versioned with `PRAGMA user_version`; a file written by a newer Citewise is refused instead of misread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from citewise.errors import ConfigError
from citewise.feedback.sql import SqlFeedbackStore

# Each entry moves the schema from version i to i + 1; never edit one that has shipped, append a new one.
MIGRATIONS = (
    """
    CREATE TABLE answers (
        answer_id      TEXT PRIMARY KEY,
        owner          TEXT NOT NULL,
        created_at     TEXT NOT NULL,
        question       TEXT NOT NULL,
        answer         TEXT NOT NULL,
        status         TEXT NOT NULL,
        exit_reason    TEXT NOT NULL,
        refusal_reason TEXT,
        mode           TEXT NOT NULL DEFAULT '',
        citations      TEXT NOT NULL DEFAULT '[]',
        docs_version   INTEGER,
        session_id     TEXT,
        surface        TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX answers_created ON answers (created_at);
    CREATE TABLE ratings (
        answer_id  TEXT PRIMARY KEY REFERENCES answers (answer_id) ON DELETE CASCADE,
        owner      TEXT NOT NULL,
        rating     TEXT NOT NULL CHECK (rating IN ('up', 'down')),
        comment    TEXT,
        rated_at   TEXT NOT NULL
    );
    CREATE INDEX ratings_owner ON ratings (owner, rated_at);
    """,
)


class SqliteFeedbackStore(SqlFeedbackStore):
    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready = False

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if not self._ready:
            self._migrate()
        with closing(sqlite3.connect(self.path, timeout=30)) as conn:
            conn.execute("PRAGMA foreign_keys = ON")
            with conn:  # one transaction: committed on success, rolled back on error
                yield conn

    def _migrate(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=30)) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise ConfigError(
                    f"{self.path} was written by a newer Citewise (schema {version}, this one knows "
                    f"{len(MIGRATIONS)}): upgrade Citewise, or point CITEWISE_HOME elsewhere."
                )
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                with conn:
                    conn.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
        self._ready = True
