"""Sync callers of agent mode against a real OpenAI-compatible HTTP server (tests/support/fake_openai.py) through the
real `langchain-openai` client. langchain-openai caches one async HTTP client per base URL for the whole process; a
sync caller that ran every question on a new event loop reused that client's kept-alive connections on a closed loop
from the second question on ("Event loop is closed" → LLM_ERROR). A scripted model cannot show this."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_support import WORKER_QUESTION
from tests.support.settings import make_settings

from citewise.agent.runner import Citewise
from citewise.index.knowledge_base import KnowledgeBase
from citewise.types import ExitReason, Status


def openai_settings(home: Path, fake, **overrides):
    return make_settings(home, llm="openai:gpt-fake", llm_base_url=fake.url, llm_api_key="sk-fake", **overrides)


def assert_answered(answer) -> None:
    assert answer.exit_reason == ExitReason.COMPLETED, [e.model_dump() for e in answer.trace if e.type == "llm_error"]
    assert answer.status == Status.SUCCESS and answer.citations, answer.answer


def vendor_agent(home: Path, fake, embedder) -> Citewise:
    settings = openai_settings(home, fake)
    return Citewise(settings, kb=KnowledgeBase(settings, embedder=embedder))


def test_ask_in_a_loop_keeps_working(agent_home, embedder, fake_openai):
    cw = vendor_agent(agent_home, fake_openai, embedder)
    for _ in range(3):
        assert_answered(cw.ask(WORKER_QUESTION))
    # Two model calls per question (plan, answer), over kept-alive connections.
    assert len(fake_openai.requests) == 6
    assert fake_openai.connections < len(fake_openai.requests)


def test_a_second_instance_after_the_first_is_gone(agent_home, embedder, fake_openai):
    for _ in range(2):
        cw = vendor_agent(agent_home, fake_openai, embedder)
        assert_answered(cw.ask(WORKER_QUESTION))
        del cw


def test_citewise_chat_answers_every_question(agent_home, fake_openai, tmp_path):
    env = {
        **os.environ,
        "CITEWISE_HOME": str(agent_home),
        "CITEWISE_LLM": "openai:gpt-fake",
        "CITEWISE_LLM_BASE_URL": fake_openai.url,
        "CITEWISE_LLM_API_KEY": "sk-fake",
        "CITEWISE_GENERATION__CACHE": "false",
        "CITEWISE_GENERATION__LLM_RETRY_WAIT_S": "0",
        "CITEWISE_SERVER__LOG_QUESTIONS": "false",
        "COLUMNS": "200",
    }
    questions = "\n".join([WORKER_QUESTION] * 3) + "\nexit\n"
    done = subprocess.run(
        [sys.executable, "-m", "citewise.cli", "chat"],
        input=questions,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Event loop is closed" not in done.stderr + done.stdout
    assert "exit_reason" not in done.stderr, done.stderr  # printed only for a run that did not complete
    assert "unregistered type" not in done.stderr and "Blocked deserialization" not in done.stderr, done.stderr
    assert done.stdout.count("Sources") == 3, done.stdout
    assert len(fake_openai.requests) == 6


def test_eval_answers_with_a_vendor_model(embedder, fake_openai, tmp_path):
    from citewise.eval.answers import evaluate_answers
    from citewise.eval.formats import load_jsonl

    fixtures = Path(__file__).parents[1] / "fixtures"
    settings = openai_settings(tmp_path / "home", fake_openai)
    report = evaluate_answers(
        load_jsonl(fixtures / "eval" / "small.jsonl"), settings, mode="openai:gpt-fake", embedder=embedder
    )
    assert report["questions"] == 6
    assert ExitReason.LLM_ERROR not in report["exit_reasons"], report["exit_reasons"]
    assert report["statuses"].get("error", 0) == 0, report["statuses"]
