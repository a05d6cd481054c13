"""Agent fixtures: one index of the fixture corpus plus tests/fixtures/agent_corpus (two dated docs that disagree on
a setting, public; one private doc owned by "alice"), built once per session and only read by the tests, and
agents built on it with per-test settings. Helpers are in agent_support.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_support import ALICE, FIXTURES
from tests.support.settings import make_settings

from citewise.agent.runner import Citewise
from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings


@pytest.fixture(scope="session")
def agent_home(tmp_path_factory, embedder) -> Path:
    home = tmp_path_factory.mktemp("agent-home")
    kb = KnowledgeBase(Settings(home=home), embedder=embedder)
    Ingestor(kb).ingest_paths([FIXTURES / "corpus", FIXTURES / "agent_corpus" / "public"])
    Ingestor(kb, owner=ALICE).ingest_paths([FIXTURES / "agent_corpus" / "alice"])
    return home


@pytest.fixture
def make_agent(agent_home, embedder) -> Callable[..., Citewise]:
    """Citewise on the shared index: make_agent(chat_model, fallbacks=..., checkpointer=..., **settings overrides)."""

    def make(chat_model=None, *, fallbacks=None, checkpointer=None, home: Path | None = None, **overrides) -> Citewise:
        settings = make_settings(home or agent_home, **overrides)
        kb = KnowledgeBase(settings, embedder=embedder)
        return Citewise(settings, kb=kb, chat_model=chat_model, fallbacks=fallbacks, checkpointer=checkpointer)

    return make
