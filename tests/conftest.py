"""Shared fixtures. Everything is real: LanceDB on disk in a temp dir, the bundled MiniLM model on the CPU.

The embedding model is loaded once per test session (it takes seconds) and shared by every knowledge base the
tests build; tests that must prove the model is *not* loaded run in a subprocess instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Every home the tests create (and every `citewise` subprocess they start) shares one exported ONNX model instead
# of exporting its own. Set before any Settings is built.
os.environ.setdefault("CITEWISE_MODELS_DIR", tempfile.mkdtemp(prefix="citewise-test-models-"))

from citewise.index.embeddings import Embedder, create_embedder
from citewise.index.knowledge_base import KnowledgeBase
from citewise.settings import Settings

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"
BROKEN = FIXTURES / "broken"


@pytest.fixture(scope="session")
def embedder(tmp_path_factory) -> Embedder:
    """The default local embedder (bundled MiniLM on the default backend), loaded once for the session."""
    return create_embedder(Settings(home=tmp_path_factory.mktemp("embedder-home")))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home")


@pytest.fixture
def make_kb(embedder):
    """Build a KnowledgeBase on given settings that shares the session's loaded model."""

    def make(settings: Settings) -> KnowledgeBase:
        return KnowledgeBase(settings, embedder=embedder)

    return make


@pytest.fixture
def kb(settings, make_kb) -> KnowledgeBase:
    return make_kb(settings)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A private copy of the fixture corpus that a test may edit, delete from or add to."""
    target = tmp_path / "corpus"
    shutil.copytree(CORPUS, target)
    return target


@pytest.fixture
def fake_openai():
    """A real OpenAI-compatible HTTP/1.1 keep-alive server on loopback (tests/support/fake_openai.py)."""
    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        yield server
