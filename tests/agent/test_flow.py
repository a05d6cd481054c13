"""The run's two engines: the LangGraph graph (streaming, sessions) and the in-process runner (quote mode's `ask`)
run the same nodes with the same routing functions, so they give identical Answers and traces."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest
from agent_support import ALICE, WORKER_QUESTION, comparable
from langgraph.checkpoint.memory import InMemorySaver

from citewise.agent import flow
from citewise.agent.state import GIVEN, KEPT, AgentState, fresh_run
from citewise.types import Answer

QUESTIONS = [
    WORKER_QUESTION,  # answered from one passage
    "What is the airspeed velocity of an unladen swallow?",  # refused
    "How do I pin the worker pool, and how do I rotate the vault key?",  # two parts, each searched
    "hello",  # a greeting: no search at all
    "   ",  # empty input
]


def _streamed(agent, question: str, **options) -> Answer:
    async def collect() -> Answer:
        events = [e async for e in agent.astream_events(question, **options)]
        return events[-1]["data"]["output"]["answer"]

    return asyncio.run(collect())


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_in_process_runner_and_the_graph_give_the_same_answer_and_trace(make_agent, question):
    agent = make_agent()
    inline = agent.ask(question, owner=ALICE)
    graph = _streamed(agent, question, owner=ALICE)
    assert comparable(inline) == comparable(graph)
    assert [e.model_dump() for e in inline.trace] == [e.model_dump() for e in graph.trace]
    # A checkpointer takes the graph too: a one-off thread, the same answer.
    saved = make_agent(checkpointer=InMemorySaver()).ask(question, owner=ALICE)
    assert comparable(saved) == comparable(inline)


def test_the_routing_table_is_the_graphs_shape(make_agent):
    graph = make_agent().graph.get_graph()
    edges = {(e.source, e.target) for e in graph.edges}
    expected = {("__start__", flow.FIRST)}
    for node, route in flow.ROUTES.items():
        targets = route[1] if route else (flow.END,)
        expected |= {(node, target) for target in targets}
    assert edges == expected


def test_fresh_run_resets_every_per_run_field_of_the_state():
    fields = set(AgentState.__annotations__)
    assert set(fresh_run()) == fields - KEPT - GIVEN
    start = fresh_run()
    assert start["empty_retrieval"] is True and start["answer"] is None and start["trace"] == []
    assert fresh_run()["sources"] is not start["sources"]  # a new list per run, never a shared one


def test_quote_mode_ask_loads_no_graph_machinery(agent_home):
    """Quote mode's ask runs in-process: neither LangGraph (`langgraph.graph`: a second of imports) nor LangChain
    (`langchain_core.messages` alone loads requests and pydantic.v1) is loaded for it."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from citewise.agent.runner import Citewise
        from citewise.settings import Settings
        settings = Settings(home={str(agent_home)!r}, server={{"log_questions": False}})
        answer = Citewise(settings).ask({WORKER_QUESTION!r}, mode="quote")
        loaded = sorted(m for m in sys.modules if m.startswith(("langgraph", "langchain")))
        print(json.dumps({{"status": answer.status, "loaded": loaded}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy(), timeout=300
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "success"
    assert result["loaded"] == []
