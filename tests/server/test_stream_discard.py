"""Streamed text that does not stand is discarded by one documented event, `discard`, on every path that replaces
it. The client here implements only what docs/server.md says about tokens: concatenate `token` texts, forget them
all on `discard`; the text it ends with must be `complete.answer` (empty for a failed or cached run, whose message
comes with `complete`). Before, a forced synthesis replaced streamed text with no signal a client could know."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from tests.agent.agent_support import WORKER_ANSWER, WORKER_QUESTION
from tests.server.conftest import PLAN
from tests.support.fake_openai import FakeOpenAI, Fault
from tests.support.sse import literal_client

from citewise.llm.testing import ScriptedChatModel

DOCS = Path(__file__).parents[2] / "docs" / "server.md"
INVENTED = "Run `orbitron pool --pin 99` to pin the pool [1]."  # a command no source holds: never stands


def test_the_discard_rule_is_documented():
    text = DOCS.read_text()
    assert "| `discard` |" in text
    assert "after the last `discard`" in text


def check(shown: str, answer: dict) -> None:
    expected = "" if answer["status"] == "error" or answer["cached"] else answer["answer"]
    assert shown == expected, (shown, answer["answer"])


def tool_call(query: str, text: str = "") -> AIMessage:
    return AIMessage(content=text, tool_calls=[{"name": "search_docs", "args": {"query": query}, "id": "c1"}])


@pytest.mark.parametrize(
    ("replies", "settings", "step"),
    [
        ([INVENTED, WORKER_ANSWER], {}, "reprompt"),
        ([INVENTED], {"agent": {"max_reprompts": 0}}, "final"),  # forced synthesis replaces the draft
        ([tool_call("worker threads", "Let me look that up first."), WORKER_ANSWER], {}, "tool_call"),
        (
            [*(tool_call(f"worker pool threads {i}", f"Checking {i}.") for i in range(4)), "", ""],
            {"agent": {"max_turns": 10}},
            "final",  # the lookup budget spent and no answer written: composed from what was found
        ),
    ],
    ids=["reprompt", "forced-synthesis", "aside-before-lookup", "budget-spent"],
)
def test_a_literal_client_ends_with_the_answer(agent_app, live_server, replies, settings, step):
    server = live_server(agent_app(ScriptedChatModel([PLAN, *replies]), **settings))
    shown, answer, names = literal_client(server.url, {"question": WORKER_QUESTION, "mode": "agent"})
    assert "discard" in names
    check(shown, answer)
    assert answer["status"] in ("success", "refused")


def test_quote_mode_needs_no_discard(agent_app, live_server):
    server = live_server(agent_app())
    shown, answer, names = literal_client(server.url, {"question": WORKER_QUESTION, "mode": "quote"})
    assert "discard" not in names
    check(shown, answer)


def test_a_reply_cut_off_mid_stream_is_discarded_before_the_retry(agent_app, live_server, served_home):
    """A real OpenAI-compatible server cuts its streamed reply after a few words; the client retries the call and the
    half-written text must go."""
    with FakeOpenAI() as fake:
        fake.script(Fault(hang_s=0.01))  # the planner call: answered normally
        app = agent_app(None, llm="openai:gpt-fake", llm_base_url=fake.url, llm_api_key="sk-fake")
        server = live_server(app)
        fake.script(Fault(truncate=True))  # the first answer call: "Half an ans", then the connection is cut
        shown, answer, names = literal_client(server.url, {"question": WORKER_QUESTION, "mode": "agent"})
    assert answer["exit_reason"] == "COMPLETED", answer
    assert "discard" in names
    check(shown, answer)


def test_a_failed_run_leaves_nothing_shown(agent_app, live_server, served_home):
    with FakeOpenAI() as fake:
        fake.script(Fault(hang_s=0.01), *[Fault(truncate=True)] * 3)
        app = agent_app(None, llm="openai:gpt-fake", llm_base_url=fake.url, llm_api_key="sk-fake")
        shown, answer, _ = literal_client(live_server(app).url, {"question": WORKER_QUESTION, "mode": "agent"})
    assert answer["exit_reason"] == "LLM_ERROR" and answer["status"] == "error"
    check(shown, answer)
