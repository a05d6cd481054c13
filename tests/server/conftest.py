"""Server fixtures: an app on a temp home sharing the session's embedding model, a TestClient, and a real uvicorn
server on a loopback port for the tests that need real HTTP (SSE framing, disconnects)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.agent.agent_support import ALICE
from tests.conftest import CORPUS
from tests.support.settings import make_settings

from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor
from citewise.server import create_app
from citewise.server.serving import uvicorn_config
from citewise.settings import ServerSettings, Settings
from citewise.types import PUBLIC_OWNER

KEYS = {"key-alice": "alice", "key-bob": "bob", "key-ops": PUBLIC_OWNER}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def server_settings(tmp_path: Path) -> Settings:
    # Unlimited rate: only the rate-limit test wants 429s.
    # A generous write wait: on a busy test machine an upload must not turn into a 202 (test_write_queue tests that).
    return Settings(
        home=tmp_path / "home",
        server=ServerSettings(rate_limit_per_minute=0, log_questions=False, write_wait_s=300),
    )


@pytest.fixture
def keyed_settings(server_settings: Settings) -> Settings:
    return server_settings.model_copy(update={"api_keys": KEYS})


@pytest.fixture
def ingest_corpus(make_kb, corpus) -> Callable[[Settings, str], KnowledgeBase]:
    def ingest(settings: Settings, owner: str = PUBLIC_OWNER) -> KnowledgeBase:
        kb = make_kb(settings)
        Ingestor(kb, owner=owner).ingest_paths([corpus])
        return kb

    return ingest


@pytest.fixture
def make_client(make_kb) -> Iterator[Callable[..., TestClient]]:
    """A started TestClient (lifespan run: the checkpointer is open) for create_app(settings, **kwargs)."""
    opened: list[TestClient] = []

    def make(settings: Settings, **kwargs) -> TestClient:
        if "kb" not in kwargs and "citewise" not in kwargs:
            kwargs["kb"] = make_kb(settings)
        client = TestClient(create_app(settings, **kwargs), raise_server_exceptions=False)
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


class LiveServer:
    """A real uvicorn server on 127.0.0.1 in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # As `citewise serve` runs it: header timeout, keep-alive, connection limit, no proxy headers.
        settings = app.state.citewise.settings
        config = uvicorn_config(app, settings, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def live_server() -> Iterator[Callable[[FastAPI], LiveServer]]:
    started: list[LiveServer] = []

    def start(app: FastAPI) -> LiveServer:
        server = LiveServer(app).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


AGENT_CORPUS = Path(__file__).parents[1] / "fixtures" / "agent_corpus"
VAULT_QUESTION = "Which command rotates the journal encryption key in the vault?"
VAULT_SECRET = "kestrel-vault-7"
PLAN = '["Search the docs for the question", "Answer with citations"]'


@pytest.fixture(scope="module")
def served_home(tmp_path_factory, embedder) -> Path:
    """The fixture corpus (public) plus Alice's private notes, indexed once per module and only read."""
    home = tmp_path_factory.mktemp("served-home")
    kb = KnowledgeBase(Settings(home=home), embedder=embedder)
    Ingestor(kb).ingest_paths([CORPUS])
    Ingestor(kb, owner=ALICE).ingest_paths([AGENT_CORPUS / "alice"])
    return home


@pytest.fixture
def agent_app(served_home, embedder) -> Callable[..., FastAPI]:
    """create_app over a Citewise on the served index: agent_app(chat_model=None, home=None, **settings overrides)."""
    from citewise.agent.runner import Citewise

    def make(chat_model=None, *, home: Path | None = None, **overrides) -> FastAPI:
        settings = make_settings(home or served_home, **overrides)
        kb = KnowledgeBase(settings, embedder=embedder)
        return create_app(settings, citewise=Citewise(settings, kb=kb, chat_model=chat_model))

    return make


@pytest.fixture
def started() -> Iterator[Callable[[FastAPI], TestClient]]:
    """Start a TestClient on an app (lifespan included) and close it after the test."""
    opened: list[TestClient] = []

    def start(app: FastAPI) -> TestClient:
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        opened.append(client)
        return client

    yield start
    for client in opened:
        client.__exit__(None, None, None)
