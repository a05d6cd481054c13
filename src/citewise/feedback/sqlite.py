"""The feedback store in one SQLite file under the home (CITEWISE_HOME/feedback.sqlite3).

A connection per call (the server calls from worker threads; SQLite connections are not shared across threads),
WAL so readers never wait for a writer, and a busy timeout so two processes on one home take turns. The schema is
versioned with `PRAGMA user_version`; a file written by a newer Citewise is refused instead of misread.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from citewise.errors import ConfigError
from citewise.feedback.store import AnswerRecord, RatedAnswer, Rating, now_iso

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

_ANSWER_COLUMNS = tuple(AnswerRecord.model_fields)


class SqliteFeedbackStore:
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

    # -- FeedbackStore ------------------------------------------------------------------------------------------
    def record_answer(self, record: AnswerRecord) -> None:
        row = record.model_dump()
        row["citations"] = json.dumps(row["citations"], ensure_ascii=False)
        columns = ", ".join(_ANSWER_COLUMNS)
        marks = ", ".join(f":{c}" for c in _ANSWER_COLUMNS)
        with self._connect() as conn:
            conn.execute(f"INSERT INTO answers ({columns}) VALUES ({marks})", row)

    def rate(self, answer_id: str, owner: str, rating: Rating, comment: str | None) -> RatedAnswer | None:
        with self._connect() as conn:
            found = conn.execute(
                "SELECT 1 FROM answers WHERE answer_id = ? AND owner = ?", (answer_id, owner)
            ).fetchone()
            if found is None:
                return None
            conn.execute(
                "INSERT INTO ratings (answer_id, owner, rating, comment, rated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (answer_id) DO UPDATE SET rating = excluded.rating, comment = excluded.comment, "
                "rated_at = excluded.rated_at",
                (answer_id, owner, str(rating), comment or None, now_iso()),
            )
            rows = self._rated_rows(conn, "a.answer_id = ?", [answer_id], 1)
        return rows[0]

    def rated(
        self, owner: str | None, *, rating: Rating | None = None, since: str | None = None, limit: int = 100
    ) -> list[RatedAnswer]:
        where, params = ["(? IS NULL OR r.owner = ?)"], [owner, owner]
        if rating is not None:
            where.append("r.rating = ?")
            params.append(str(rating))
        if since is not None:
            where.append("r.rated_at >= ?")
            params.append(since)
        with self._connect() as conn:
            return self._rated_rows(conn, " AND ".join(where), params, limit)

    def rating_counts(self, owner: str | None, *, since: str | None = None) -> dict[str, int]:
        sql, params = "SELECT rating, count(*) FROM ratings WHERE (? IS NULL OR owner = ?)", [owner, owner]
        if since is not None:
            sql += " AND rated_at >= ?"
            params.append(since)
        with self._connect() as conn:
            counts = dict(conn.execute(sql + " GROUP BY rating", params).fetchall())
        return {str(r): int(counts.get(str(r), 0)) for r in Rating}

    def forget_unrated(self, before: str) -> int:
        with self._connect() as conn:
            cursor = conn.execute(
                "DELETE FROM answers WHERE created_at < ? AND answer_id NOT IN (SELECT answer_id FROM ratings)",
                (before,),
            )
            return cursor.rowcount

    @staticmethod
    def _rated_rows(conn: sqlite3.Connection, where: str, params: list[Any], limit: int) -> list[RatedAnswer]:
        columns = ", ".join(f"a.{c}" for c in _ANSWER_COLUMNS)
        cursor = conn.execute(
            f"SELECT {columns}, r.rating, r.comment, r.rated_at FROM ratings r JOIN answers a USING (answer_id) "
            f"WHERE {where} ORDER BY r.rated_at DESC, a.answer_id LIMIT ?",
            [*params, limit],
        )
        names = [d[0] for d in cursor.description]
        out = []
        for row in cursor:
            values = dict(zip(names, row, strict=True))
            values["citations"] = json.loads(values["citations"] or "[]")
            out.append(RatedAnswer(**values))
        return out
