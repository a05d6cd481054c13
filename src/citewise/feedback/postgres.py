"""The feedback store in PostgreSQL (`store = "postgres"`): the same two tables as the embedded SQLite file, created
by the versioned migrations (`citewise db upgrade`), so every replica records and rates in one place. The queries
are sql.py's, shared with the SQLite store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from citewise.feedback.sql import SqlFeedbackStore

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import psycopg

    from citewise.state.database import Database


class PostgresFeedbackStore(SqlFeedbackStore):
    PARAM = "%s"
    ANSWERS = "feedback_answers"
    RATINGS = "feedback_ratings"

    def __init__(self, db: Database) -> None:
        self.db = db

    def _connect(self) -> AbstractContextManager[psycopg.Connection]:
        return self.db.transaction()
