"""Helpers shared by the agent tests (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage

from citewise.llm.testing import ScriptedChatModel
from citewise.types import Answer

FIXTURES = Path(__file__).parents[1] / "fixtures"
PLAN = '["Search the docs for the question", "Open the best passage", "Answer with citations"]'
ALICE = "alice"
WORKER_QUESTION = "How do I pin the worker pool to a fixed number of threads?"
WORKER_ANSWER = "Set `worker_threads = 12` to pin the worker pool to twelve threads [1]."


def scripted(*replies, plan: str | None = PLAN, **kwargs) -> ScriptedChatModel:
    """A scripted model whose first reply is the plan (the analyze node asks for one in agent mode)."""
    return ScriptedChatModel([plan, *replies] if plan is not None else list(replies), **kwargs)


def call(name: str, **args) -> AIMessage:
    """A reply that makes one tool call."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{name}"}])


def calls(*pairs: tuple[str, dict]) -> AIMessage:
    """A reply that makes several tool calls at once."""
    return AIMessage(
        content="", tool_calls=[{"name": n, "args": a, "id": f"call_{i}"} for i, (n, a) in enumerate(pairs)]
    )


def comparable(answer: Answer) -> str:
    """The Answer as JSON without the one field that may differ between identical runs."""
    return answer.model_dump_json(exclude={"timing_ms"})


def cited_ids_are_sources(answer: Answer) -> bool:
    source_ids = {c.chunk_id for c in answer.sources}
    return all(c.chunk_id in source_ids for c in answer.citations)
