"""GET /api/examples: a few questions to start from, made from the headings of the documents the caller may see
(server/example_questions.py). The web page and the widget offer them before the first question."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from citewise.errors import RetrievalError
from citewise.server.deps import CallerDep, StateDep
from citewise.server.example_questions import EXAMPLES, example_questions
from citewise.server.schemas import GATE_ERRORS, error_responses

router = APIRouter(prefix="/api", tags=["documents"], responses=error_responses(*GATE_ERRORS))


class ExamplesOut(BaseModel):
    questions: list[str] = Field(
        description="Questions the caller's docs have headings for, tasks first; the same index gives the same ones. "
        "Empty when nothing is indexed for the caller."
    )


@router.get("/examples", summary="Example questions from the caller's indexed headings")
async def examples(
    state: StateDep, caller: CallerDep, count: Annotated[int, Query(ge=1, le=10)] = EXAMPLES
) -> ExamplesOut:
    try:
        sections = await asyncio.to_thread(state.retriever.sections, caller.owner)
    except RetrievalError:  # the index can't be read right now: no examples, the page still works
        sections = []
    return ExamplesOut(questions=example_questions(sections, count))
