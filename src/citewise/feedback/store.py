"""What feedback is made of, and the interface a backend implements.

The server records each answer it gives (`record_answer`) and hands its `answer_id` to the client; a rating
(`rate`) names that id. Everything is per owner: a rating of an answer given to another owner is refused exactly
like one of an answer that never existed, and every read takes the owner it reads for.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from citewise.settings import Settings
    from citewise.types import Answer


class Rating(StrEnum):
    UP = "up"
    DOWN = "down"


class AnswerRecord(BaseModel):
    """One answer as it was given: what a rating refers to."""

    answer_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    owner: str
    created_at: str = Field(default_factory=lambda: now_iso())
    question: str
    answer: str
    status: str
    exit_reason: str
    refusal_reason: str | None = None
    mode: str = ""
    citations: list[dict[str, Any]] = Field(default_factory=list)  # n, chunk_id, filename, chapter, source_url
    docs_version: int | None = None  # the index version the answer was read from
    session_id: str | None = None
    surface: str = ""  # which endpoint gave it: stream, run, chat, openai

    @classmethod
    def of(
        cls, answer: Answer, *, owner: str, docs_version: int | None, session_id: str | None, surface: str
    ) -> AnswerRecord:
        citations = [
            c.model_dump(mode="json", include={"n", "chunk_id", "doc_id", "filename", "chapter", "source_url"})
            for c in answer.citations
        ]
        return cls(
            owner=owner,
            question=answer.question,
            answer=answer.answer,
            status=str(answer.status),
            exit_reason=str(answer.exit_reason),
            refusal_reason=answer.refusal_reason,
            mode=answer.mode,
            citations=citations,
            docs_version=docs_version,
            session_id=session_id,
            surface=surface,
        )


class RatedAnswer(AnswerRecord):
    """An answer with the rating its owner gave it."""

    rating: Rating
    comment: str | None = None
    rated_at: str


class FeedbackStore(Protocol):
    """Where answers and their ratings live. SQLite under the home today (sqlite.py); a database backend implements
    the same five methods."""

    def record_answer(self, record: AnswerRecord) -> None:
        """Keep an answer so it can be rated."""
        ...

    def rate(self, answer_id: str, owner: str, rating: Rating, comment: str | None) -> RatedAnswer | None:
        """Rate an answer given to `owner` (rating it again replaces the earlier rating); None when there is no
        such answer for this owner."""
        ...

    def rated(
        self, owner: str | None, *, rating: Rating | None = None, since: str | None = None, limit: int = 100
    ) -> list[RatedAnswer]:
        """`owner`'s rated answers, newest rating first. `None` reads every owner's: for the operator's own tools
        (`citewise gaps`), never for a request."""
        ...

    def rating_counts(self, owner: str | None, *, since: str | None = None) -> dict[str, int]:
        """{"up": n, "down": m} for `owner` (None: every owner)."""
        ...

    def forget_unrated(self, before: str) -> int:
        """Drop answers recorded before `before` (ISO time) that nobody rated; how many went."""
        ...


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def open_feedback_store(settings: Settings) -> FeedbackStore:
    """The store for `settings`: the embedded SQLite file under the home, or the database's tables when state lives
    in PostgreSQL (`store = "postgres"`: every replica records and rates in one place)."""
    if settings.uses_postgres:
        from citewise.feedback.postgres import PostgresFeedbackStore
        from citewise.state.database import database

        return PostgresFeedbackStore(database(settings))
    from citewise.feedback.sqlite import SqliteFeedbackStore

    return SqliteFeedbackStore(settings.feedback_path)
