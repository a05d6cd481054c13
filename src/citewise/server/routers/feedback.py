"""Ratings and what they say: `POST /api/feedback` (thumbs up/down, an optional comment, on an answer the caller
was given) and `GET /api/analytics` (what to fix in the docs; keys with the admin role, for their own owner).

Every answer the server gives carries an `answer_id` (feedback.enabled); a rating names it. An answer given to
another owner is answered exactly like one that does not exist (404), so ids can't be probed across owners, and
analytics never mix owners: an admin key reads its own owner's questions and ratings.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field

from citewise.feedback.analytics import analytics_report
from citewise.feedback.store import RatedAnswer, Rating
from citewise.server.deps import CallerDep, StateDep
from citewise.server.schemas import GATE_ERRORS, error_responses

router = APIRouter(prefix="/api", tags=["feedback"], responses=error_responses(*GATE_ERRORS))


class FeedbackIn(BaseModel):
    answer_id: uuid.UUID = Field(description="The `answer_id` the answer came with.")
    rating: Rating = Field(description='"up" or "down".')
    comment: str | None = Field(
        None, max_length=20_000, description="What was wrong (or right), in the reader's words."
    )


class FeedbackOut(BaseModel):
    answer_id: str
    rating: Rating
    comment: str | None = None
    rated_at: str

    @classmethod
    def of(cls, rated: RatedAnswer) -> FeedbackOut:
        return cls(answer_id=rated.answer_id, rating=rated.rating, comment=rated.comment, rated_at=rated.rated_at)


@router.post(
    "/feedback",
    summary="Rate an answer you were given: up or down, with an optional comment",
    responses=error_responses(400, 404),
)
async def give_feedback(body: FeedbackIn, caller: CallerDep, state: StateDep) -> FeedbackOut:
    store = state.feedback
    if store is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Feedback is turned off on this server.")
    limit = state.settings.feedback.max_comment_chars
    comment = (body.comment or "").strip() or None
    if comment is not None and len(comment) > limit:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail=[{"loc": ["body", "comment"], "msg": f"The comment is over {limit} characters.", "type": "long"}],
        )
    rated = await asyncio.to_thread(store.rate, str(body.answer_id), caller.owner.id, body.rating, comment)
    if rated is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"No answer with id {body.answer_id}.")
    state.metrics.feedback.labels(rating=str(body.rating)).inc()
    return FeedbackOut.of(rated)


@router.get(
    "/analytics",
    summary="What to fix: unanswered questions, answers marked bad, refusals by reason, answer rate (admin keys)",
    responses=error_responses(403),
)
async def analytics(
    caller: CallerDep,
    state: StateDep,
    days: Annotated[int, Query(ge=1, le=366, description="How many days back.")] = 30,
    top: Annotated[int, Query(ge=1, le=200, description="Most groups and bad answers listed.")] = 20,
) -> dict[str, Any]:
    if not caller.admin:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail="Analytics need a key with the admin role (settings: admin_keys)."
        )
    return await asyncio.to_thread(
        analytics_report, state.settings, state.feedback, owner=caller.owner.id, days=days, top=top
    )
