"""The feedback store's queries, once for both engines: SQLite (sqlite.py, the embedded default) and PostgreSQL
(postgres.py, `store = "postgres"`). An engine gives its connection (one transaction per call), its parameter
placeholder and its table names; the SQL below is what both accept."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import Any

from citewise.feedback.store import AnswerRecord, RatedAnswer, Rating, now_iso

ANSWER_COLUMNS = tuple(AnswerRecord.model_fields)


class SqlFeedbackStore:
    PARAM = "?"  # the driver's positional placeholder
    ANSWERS = "answers"
    RATINGS = "ratings"

    def _connect(self) -> AbstractContextManager[Any]:
        """A connection inside one transaction: committed when the block ends, rolled back if it raises."""
        raise NotImplementedError

    def record_answer(self, record: AnswerRecord) -> None:
        row = record.model_dump()
        row["citations"] = json.dumps(row["citations"], ensure_ascii=False)
        marks = ", ".join([self.PARAM] * len(ANSWER_COLUMNS))
        with self._connect() as conn:
            conn.execute(
                f"INSERT INTO {self.ANSWERS} ({', '.join(ANSWER_COLUMNS)}) VALUES ({marks})",
                [row[c] for c in ANSWER_COLUMNS],
            )

    def rate(self, answer_id: str, owner: str, rating: Rating, comment: str | None) -> RatedAnswer | None:
        p = self.PARAM
        with self._connect() as conn:
            found = conn.execute(
                f"SELECT 1 FROM {self.ANSWERS} WHERE answer_id = {p} AND owner = {p}", (answer_id, owner)
            ).fetchone()
            if found is None:
                return None
            conn.execute(
                f"INSERT INTO {self.RATINGS} (answer_id, owner, rating, comment, rated_at) VALUES ({p}, {p}, {p}, {p}, "
                f"{p}) ON CONFLICT (answer_id) DO UPDATE SET rating = excluded.rating, comment = excluded.comment, "
                "rated_at = excluded.rated_at",
                (answer_id, owner, str(rating), comment or None, now_iso()),
            )
            return self._rated_rows(conn, f"a.answer_id = {p}", [answer_id], 1)[0]

    def rated(
        self, owner: str | None, *, rating: Rating | None = None, since: str | None = None, limit: int = 100
    ) -> list[RatedAnswer]:
        p = self.PARAM
        where, params = [f"(CAST({p} AS TEXT) IS NULL OR r.owner = {p})"], [owner, owner]
        if rating is not None:
            where.append(f"r.rating = {p}")
            params.append(str(rating))
        if since is not None:
            where.append(f"r.rated_at >= {p}")
            params.append(since)
        with self._connect() as conn:
            return self._rated_rows(conn, " AND ".join(where), params, limit)

    def rating_counts(self, owner: str | None, *, since: str | None = None) -> dict[str, int]:
        p = self.PARAM
        sql = f"SELECT rating, count(*) FROM {self.RATINGS} WHERE (CAST({p} AS TEXT) IS NULL OR owner = {p})"
        params: list[Any] = [owner, owner]
        if since is not None:
            sql += f" AND rated_at >= {p}"
            params.append(since)
        with self._connect() as conn:
            counts = dict(conn.execute(sql + " GROUP BY rating", params).fetchall())
        return {str(r): int(counts.get(str(r), 0)) for r in Rating}

    def forget_unrated(self, before: str) -> int:
        with self._connect() as conn:
            cursor = conn.execute(
                f"DELETE FROM {self.ANSWERS} WHERE created_at < {self.PARAM} "
                f"AND answer_id NOT IN (SELECT answer_id FROM {self.RATINGS})",
                (before,),
            )
            return cursor.rowcount

    def _rated_rows(self, conn: Any, where: str, params: list[Any], limit: int) -> list[RatedAnswer]:
        columns = ", ".join(f"a.{c}" for c in ANSWER_COLUMNS)
        cursor = conn.execute(
            f"SELECT {columns}, r.rating, r.comment, r.rated_at FROM {self.RATINGS} r JOIN {self.ANSWERS} a "
            f"USING (answer_id) WHERE {where} ORDER BY r.rated_at DESC, a.answer_id LIMIT {self.PARAM}",
            [*params, limit],
        )
        names = [d[0] for d in cursor.description]
        out = []
        for row in cursor.fetchall():
            values = dict(zip(names, row, strict=True))
            citations = values["citations"]  # JSON text in SQLite; jsonb arrives decoded from PostgreSQL
            values["citations"] = json.loads(citations) if isinstance(citations, str) else (citations or [])
            out.append(RatedAnswer(**values))
        return out
