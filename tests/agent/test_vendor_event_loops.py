"""One process, several event loops, one vendor model: the library's sync API (agent/sync.py's loop) and HTTP servers
(uvicorn's loop each) asking through the real `langchain-openai` client against a real OpenAI-compatible server
(tests/support/fake_openai.py).

langchain-openai caches one async HTTP client per base URL for the whole process, and an httpx connection pool binds
its locks to the first loop that used it: the first model call from any other loop failed ("<asyncio.locks.Event
object> is bound to a different event loop" → LLM_ERROR). llm/models.py gives each loop its own connections."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from agent_support import WORKER_QUESTION
from test_sync_vendor import assert_answered, openai_settings
from tests.server.conftest import LiveServer

from citewise.agent.runner import Citewise
from citewise.index.knowledge_base import KnowledgeBase
from citewise.llm.models import LLMClient
from citewise.server.app import create_app


@pytest.fixture
def servers():
    started: list[LiveServer] = []

    def start(cw: Citewise) -> LiveServer:
        server = LiveServer(create_app(cw.settings, citewise=cw)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def agent(home, fake, embedder) -> Citewise:
    settings = openai_settings(home, fake)
    return Citewise(settings, kb=KnowledgeBase(settings, embedder=embedder))


def ask_server(server: LiveServer) -> None:
    response = httpx.post(
        f"{server.url}/api/agent/run", json={"question": WORKER_QUESTION, "mode": "agent"}, timeout=120
    )
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["exit_reason"] == "COMPLETED", run
    assert run["status"] == "success" and run["citations"], run


@pytest.mark.parametrize("shared", [False, True], ids=["two-instances", "one-instance"])
def test_library_then_server(agent_home, embedder, fake_openai, servers, shared):
    library = agent(agent_home, fake_openai, embedder)
    assert_answered(library.ask(WORKER_QUESTION, mode="agent"))
    server = servers(library if shared else agent(agent_home, fake_openai, embedder))
    ask_server(server)
    ask_server(server)
    assert_answered(library.ask(WORKER_QUESTION, mode="agent"))
    assert len(fake_openai.requests) == 8
    # Kept-alive connections are still reused within each loop: at most one per loop here (asked one at a time).
    assert fake_openai.connections <= 2


@pytest.mark.parametrize("shared", [False, True], ids=["two-instances", "one-instance"])
def test_server_then_library(agent_home, embedder, fake_openai, servers, shared):
    library = agent(agent_home, fake_openai, embedder)
    server = servers(library if shared else agent(agent_home, fake_openai, embedder))
    ask_server(server)
    assert_answered(library.ask(WORKER_QUESTION, mode="agent"))
    assert_answered(library.ask(WORKER_QUESTION, mode="agent"))
    ask_server(server)
    assert len(fake_openai.requests) == 8
    assert fake_openai.connections <= 2


def test_two_servers_and_a_stopped_one(agent_home, embedder, fake_openai, servers):
    first = servers(agent(agent_home, fake_openai, embedder))
    second = servers(agent(agent_home, fake_openai, embedder))
    ask_server(first)
    ask_server(second)
    ask_server(first)
    first.stop()  # its loop is closed: its connections must not be handed to anyone else
    ask_server(second)
    ask_server(servers(agent(agent_home, fake_openai, embedder)))
    assert_answered(agent(agent_home, fake_openai, embedder).ask(WORKER_QUESTION, mode="agent"))


def test_a_new_loop_each_time(agent_home, fake_openai):
    """asyncio.run on one client again and again (a new loop each time, closed after): every call is answered,
    connections are kept alive within a loop, and the clients of closed loops are let go."""
    from langchain_core.messages import HumanMessage

    client = LLMClient(openai_settings(agent_home, fake_openai))
    [(_, model)] = client.models
    pool = model.http_async_client

    def closed() -> int:
        return sum(1 for loop in pool.clients if loop.is_closed())

    async def twice() -> None:
        for question in ("one", "two"):
            assert (await client.ainvoke([HumanMessage(question)])).content

    for run in range(1, 5):
        asyncio.run(twice())
        assert len(fake_openai.requests) == 2 * run
        assert fake_openai.connections == run  # one per loop, kept alive between its two calls
        assert closed() == 1  # only the last loop's, until the next loop asks
