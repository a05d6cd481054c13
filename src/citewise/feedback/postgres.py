"""The feedback store in PostgreSQL (`store = "postgres"`): the same two tables as the embedded SQLite file, created
by the versioned migrations (`citewise db upgrade`), so every replica records and rates in one place."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from citewise.feedback.store import AnswerRecord, RatedAnswer, Rating, now_iso

if TYPE_CHECKING:
    from citewise.state.database import Database

_ANSWER_COLUMNS = tuple(AnswerRecord.model_fields)


class PostgresFeedbackStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record_answer(self, record: AnswerRecord) -> None:
        row = record.model_dump()
        row["citations"] = json.dumps(row["citations"], ensure_ascii=False)
        columns = ", ".join(_ANSWER_COLUMNS)
        marks = ", ".join(f"%({c})s" for c in _ANSWER_COLUMNS)
        with self.db.transaction() as conn:
            conn.execute(f"INSERT INTO feedback_answers ({columns}) VALUES ({marks})", row)

    def rate(self, answer_id: str, owner: str, rating: Rating, comment: str | None) -> RatedAnswer | None:
        with self.db.transaction() as conn:
            found = conn.execute(
                "SELECT 1 FROM feedback_answers WHERE answer_id = %s AND owner = %s", (answer_id, owner)
            ).fetchone()
            if found is None:
                return None
            conn.execute(
                "INSERT INTO feedback_ratings (answer_id, owner, rating, comment, rated_at) "
                "VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (answer_id) DO UPDATE SET rating = excluded.rating, comment = excluded.comment, "
                "rated_at = excluded.rated_at",
                (answer_id, owner, str(rating), comment or None, now_iso()),
            )
            return self._rated_rows(conn, "a.answer_id = %s", [answer_id], 1)[0]

    def rated(
        self, owner: str | None, *, rating: Rating | None = None, since: str | None = None, limit: int = 100
    ) -> list[RatedAnswer]:
        where, params = ["(%s::text IS NULL OR r.owner = %s)"], [owner, owner]
        if rating is not None:
            where.append("r.rating = %s")
            params.append(str(rating))
        if since is not None:
            where.append("r.rated_at >= %s")
            params.append(since)
        with self.db.transaction() as conn:
            return self._rated_rows(conn, " AND ".join(where), params, limit)

    def rating_counts(self, owner: str | None, *, since: str | None = None) -> dict[str, int]:
        sql = "SELECT rating, count(*) FROM feedback_ratings WHERE (%s::text IS NULL OR owner = %s)"
        params: list[Any] = [owner, owner]
        if since is not None:
            sql += " AND rated_at >= %s"
            params.append(since)
        with self.db.transaction() as conn:
            counts = dict(conn.execute(sql + " GROUP BY rating", params).fetchall())
        return {str(r): int(counts.get(str(r), 0)) for r in Rating}

    def forget_unrated(self, before: str) -> int:
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM feedback_answers a WHERE a.created_at < %s "
                "AND NOT EXISTS (SELECT 1 FROM feedback_ratings r WHERE r.answer_id = a.answer_id)",
                (before,),
            )
            return cursor.rowcount

    @staticmethod
    def _rated_rows(conn: Any, where: str, params: list[Any], limit: int) -> list[RatedAnswer]:
        columns = ", ".join(f"a.{c}" for c in _ANSWER_COLUMNS)
        cursor = conn.execute(
            f"SELECT {columns}, r.rating, r.comment, r.rated_at FROM feedback_ratings r "
            f"JOIN feedback_answers a USING (answer_id) WHERE {where} ORDER BY r.rated_at DESC, a.answer_id LIMIT %s",
            [*params, limit],
        )
        names = [d[0] for d in cursor.description]
        out = []
        for row in cursor.fetchall():
            values = dict(zip(names, row, strict=True))
            citations = values["citations"]
            values["citations"] = json.loads(citations) if isinstance(citations, str) else (citations or [])
            out.append(RatedAnswer(**values))
        return out
