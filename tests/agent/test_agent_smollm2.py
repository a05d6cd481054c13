"""The real bundled SmolLM2 drives the agent end to end. A 135M model answers badly; what is tested is that the
agent stays honest whatever it says: no citation outside the retrieved chunks, and a valid exit reason."""

from __future__ import annotations

import re

import pytest
from agent_support import WORKER_QUESTION

from citewise.types import REFUSAL_TEXT, ExitReason, Status


@pytest.mark.slow
@pytest.mark.extras
def test_smollm2_end_to_end_cites_only_retrieved_chunks(make_agent):
    agent = make_agent(
        llm="local",
        agent={"max_turns": 3, "max_reprompts": 1},
        generation={"max_tokens": 160, "cache": False, "llm_retries": 0},
    )
    answer = agent.ask(WORKER_QUESTION)

    assert answer.exit_reason in set(ExitReason)
    assert [e.type for e in answer.trace].count("exit") == 1
    assert answer.mode == "local" or answer.exit_reason != ExitReason.COMPLETED
    retrieved = {
        chunk_id
        for e in answer.trace
        if e.type == "tool_result"
        for chunk_id in (e.data.get("chunk_ids") or ([e.data["chunk_id"]] if e.data.get("found") else []))
    }
    assert {c.chunk_id for c in answer.sources} == retrieved
    for citation in answer.citations:
        assert citation.chunk_id in retrieved
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)}
    assert markers <= {c.n for c in answer.citations}
    if answer.status == Status.SUCCESS:
        assert answer.citations
    if answer.status == Status.REFUSED:
        assert REFUSAL_TEXT in answer.answer and not answer.citations
