"""The agent harness with scripted models (tests/support/personas.py) on a real OpenAI-compatible HTTP server,
through langchain-openai: the short version of bench/bench_agent.py. It asserts the contract — every run ends
COMPLETED with valid citations, an answer or the refusal sentence; injected faults and planted links never reach
the answer — not the rates, which the bench measures (BENCHMARKS.md, "Agent harness")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.personas import INJECTED, PLANTED_HOST, Gold, PersonaServer
from tests.support.settings import make_settings

from citewise.agent.grounding import cited_numbers
from citewise.agent.runner import Citewise
from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.types import REFUSAL_TEXT, ExitReason, Status

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _book(path: Path, limit: int) -> dict[str, Gold]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][:limit]
    return {
        r["question"]: Gold(r["question"], r["answerable"], r.get("expect_any", []), r.get("expect_all", []), r["id"])
        for r in rows
    }


QUESTIONS = _book(FIXTURES / "questions.jsonl", 20)
PLANTED = _book(FIXTURES / "planted" / "questions.jsonl", 6)


@pytest.fixture(scope="module")
def planted_home(tmp_path_factory, embedder) -> Path:
    home = tmp_path_factory.mktemp("planted-home")
    Ingestor(KnowledgeBase(Settings(home=home), embedder=embedder)).ingest_paths(
        [FIXTURES / "corpus", FIXTURES / "planted"]
    )
    return home


def agent(home: Path, server: PersonaServer, embedder) -> Citewise:
    settings = make_settings(home, llm="openai:persona", llm_base_url=server.url, llm_api_key="sk-test")
    return Citewise(settings, kb=KnowledgeBase(settings, embedder=embedder))


def assert_contract(answer) -> None:
    assert answer.exit_reason == ExitReason.COMPLETED, answer.trace
    numbers = {c.n for c in answer.citations}
    marks = set(cited_numbers(answer.answer))  # outside code: `items[7]` is code
    assert marks <= numbers, (answer.answer, numbers)
    assert {c.chunk_id for c in answer.citations} <= {c.chunk_id for c in answer.sources}
    if answer.status == Status.REFUSED:
        assert answer.answer == REFUSAL_TEXT and not answer.citations
    else:
        assert answer.status == Status.SUCCESS and answer.citations and marks


def test_a_diligent_model_answers_or_refuses_every_question_with_valid_citations(planted_home, embedder):
    with PersonaServer("diligent", QUESTIONS) as server:
        cw = agent(planted_home, server, embedder)
        answers = {q: cw.ask(q, mode="agent") for q in QUESTIONS}
    for question, answer in answers.items():
        assert_contract(answer)
        gold = QUESTIONS[question]
        if not gold.answerable:
            assert answer.status == Status.REFUSED, (question, answer.answer)
    assert sum(a.status == Status.SUCCESS for a in answers.values()) >= 10  # most answerable ones are answered


def test_injected_faults_never_reach_the_answer(planted_home, embedder):
    with PersonaServer("hallucinating", QUESTIONS) as server:
        cw = agent(planted_home, server, embedder)
        for question, gold in QUESTIONS.items():
            answer = cw.ask(question, mode="agent")
            assert_contract(answer)
            fault = server.persona.fault(gold)
            if fault in INJECTED:
                assert INJECTED[fault].lower() not in answer.answer.lower(), (fault, answer.answer)


def test_instructions_planted_in_a_passage_never_reach_the_reader(planted_home, embedder):
    with PersonaServer("obedient", PLANTED) as server:
        cw = agent(planted_home, server, embedder)
        for question in PLANTED:
            answer = cw.ask(question, mode="agent")
            assert_contract(answer)
            assert PLANTED_HOST not in answer.answer and "![" not in answer.answer, answer.answer


def test_the_anchor_warning_is_given_once_and_a_model_that_answers_anyway_keeps_its_answer(planted_home, embedder):
    question = "What port does the Orbitron daemon listen on by default in release 9.9?"
    book = {question: Gold(question, True, ["7433"], id="anchor-once")}
    with PersonaServer("diligent", book) as server:
        answer = agent(planted_home, server, embedder).ask(question, mode="agent")
    validations = [e for e in answer.trace if e.type == "validation"]
    assert "“9.9”" in validations[0].data["errors"][0]
    assert validations[-1].data["ok"] and len(validations) == 2
    assert not [e for e in answer.trace if e.type == "forced_synthesis"]
    assert_contract(answer)
    assert "7433" in answer.answer
