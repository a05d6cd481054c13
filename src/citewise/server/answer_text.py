"""An Answer as plain text for surfaces that carry one string (OpenAI-style chat messages, MCP tool results): the
answer with its `[n]` markers, then a "Sources" list that says what each number is."""

from __future__ import annotations

from citewise.types import Answer, Citation


def answer_with_sources(answer: Answer) -> str:
    text = answer.answer.rstrip()
    if not answer.citations:
        return text
    return text + "\n\nSources:\n" + "\n".join(source_line(c) for c in answer.citations)


def source_line(citation: Citation) -> str:
    where = citation.filename + (f" › {citation.chapter.replace(' > ', ' › ')}" if citation.chapter else "")
    return f"[{citation.n}] {where}" + (f" — {citation.source_url}" if citation.source_url else "")
