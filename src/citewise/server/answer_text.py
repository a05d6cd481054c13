"""An Answer in words for its readers: as plain text for surfaces that carry one string (OpenAI-style chat messages,
MCP tool results): the answer with its `[n]` markers, then a "Sources" list that says what each number is; and why
a refusal refused, which every surface sends instead of a code."""

from __future__ import annotations

from citewise.feedback.analytics import REFUSAL_WORDS
from citewise.types import Answer, Citation, Status


def refusal_detail(answer: Answer) -> str | None:
    """Why `answer` refused, in plain words: quote mode's own reason, else its refusal code's words from the one
    table (feedback/analytics.py, which the analytics show too); None for an answer that is no refusal."""
    if answer.status != Status.REFUSED:
        return None
    return answer.refusal_detail or REFUSAL_WORDS.get(answer.refusal_reason or "")


def answer_with_sources(answer: Answer) -> str:
    text = answer.answer.rstrip()
    if not answer.citations:
        return text
    return text + "\n\nSources:\n" + "\n".join(source_line(c) for c in answer.citations)


def source_line(citation: Citation) -> str:
    where = citation.filename + (f" › {citation.chapter.replace(' > ', ' › ')}" if citation.chapter else "")
    return f"[{citation.n}] {where}" + (f" — {citation.source_url}" if citation.source_url else "")
