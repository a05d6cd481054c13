"""A vendor's embeddings over real HTTP: an OpenAI-compatible server on loopback (HTTP/1.1, keep-alive).

The documented way to use a self-hosted embedding model is `embeddings = "openai:<model>"` with
`embeddings_base_url`. These tests ingest and search through that path, and take the server down in the middle of
an ingest: nothing stored may be lost because the vendor failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.fake_openai import EMBEDDING_DIM, FakeOpenAI, Fault, Reply
from tests.support.settings import make_settings

from citewise.errors import ProviderError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.ingest.pipeline import Ingestor
from citewise.types import DocStatus, make_doc_id

PAGES = {
    "heron.md": "# Herons\n\nThe heron timeout is 42 seconds and the heron queue holds nine jobs.\n",
    "gannet.md": "# Gannets\n\nGannet replicas sync every hour over the gannet channel.\n",
    "puffin.md": "# Puffins\n\nPuffin exports are written as parquet files in the puffin folder.\n",
}


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def _kb(tmp_path: Path, fake: FakeOpenAI, monkeypatch, **ingest) -> KnowledgeBase:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-anything-the-server-accepts")
    settings = make_settings(
        tmp_path / "home",
        embeddings="openai:fake-embed",
        embeddings_base_url=fake.url,
        ingest={"commit_every": 1, **ingest},
    )
    return KnowledgeBase(settings)


def _docs(tmp_path: Path, version: str = "") -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for name, text in PAGES.items():
        (docs / name).write_text(text + version)
    return docs


def _texts(kb: KnowledgeBase, name: str, docs: Path) -> list[str]:
    doc_id = make_doc_id((docs / name).resolve().as_posix())
    return [c.text for c in kb.store.chunks() if c.doc_id == doc_id]


def test_an_openai_compatible_server_embeds_the_chunks_as_text_over_kept_alive_connections(tmp_path, fake, monkeypatch):
    kb = _kb(tmp_path, fake, monkeypatch)
    docs = _docs(tmp_path)
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.failed) == (3, 0), report.failures

    embedded = [r.body for r in fake.requests]
    assert embedded and all(body["model"] == "fake-embed" for body in embedded)
    # Raw text, not token ids from OpenAI's tokenizer: another server's model has its own (and fetching OpenAI's
    # tokenizer tables would reach a host nobody configured).
    assert all(isinstance(text, str) for body in embedded for text in body["input"])
    assert kb.manifest.dimension == EMBEDDING_DIM

    hits = Retriever(kb).search("How long is the heron timeout?", top_k=3).chunks
    assert hits and "42 seconds" in hits[0].text
    assert fake.connections < len(fake.requests)  # the client kept its connection open between calls


def test_an_embedding_outage_mid_ingest_stops_the_run_and_keeps_what_was_stored(tmp_path, fake, monkeypatch):
    kb = _kb(tmp_path, fake, monkeypatch)
    docs = _docs(tmp_path)
    assert Ingestor(kb).ingest_paths([docs]).indexed == 3

    _docs(tmp_path, version="Revised in version two.\n")
    # One batch (one document: commit_every is 1) embeds, then the server fails every call, retries included.
    fake.script(Reply(), *[Fault(status=503)] * 30)
    with pytest.raises(ProviderError, match="Embedding provider"):
        Ingestor(kb).ingest_paths([docs])

    records = {r.filename: r for r in kb.registry.list()}
    assert not [r for r in records.values() if r.status == DocStatus.FAILED], "the vendor failed, not the files"
    revised = [name for name in PAGES if any("version two" in t for t in _texts(kb, name, docs))]
    kept = [name for name in PAGES if _texts(kb, name, docs) and name not in revised]
    assert len(revised) == 1 and len(kept) == 2, (revised, kept)  # the others answer from their old text
    assert all(records[name].status == DocStatus.PENDING for name in kept)

    fake.clear_script()  # the server is back: the next run finishes the job
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.unchanged, report.indexed, report.failed) == (1, 2, 0)
    assert all(any("version two" in t for t in _texts(kb, name, docs)) for name in PAGES)


def test_a_text_the_provider_refuses_fails_its_document_alone(tmp_path, fake, monkeypatch):
    kb = _kb(tmp_path, fake, monkeypatch, commit_every=512)  # one batch for all three: the refusal is isolated
    docs = _docs(tmp_path)
    (docs / "gannet.md").write_text(PAGES["gannet.md"] + "An appendix far over the model's limit: OVERSIZED.\n")
    fake.refuse_embedding = "OVERSIZED"

    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.failed) == (2, 1)
    failure = report.failures[0]
    assert failure.source.endswith("gannet.md")
    assert "gannet.md" in failure.error and "maximum context length" in failure.error
    records = {r.filename: r for r in kb.registry.list()}
    assert records["gannet.md"].status == DocStatus.FAILED
    assert records["heron.md"].status == records["puffin.md"].status == DocStatus.INDEXED
    assert not _texts(kb, "gannet.md", docs) and _texts(kb, "heron.md", docs)

    fake.refuse_embedding = None  # the page was shortened, say: the next run indexes it and touches nothing else
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.unchanged, report.indexed, report.failed) == (2, 1, 0)


def test_a_refused_text_in_a_document_spanning_commits_stops_reading_it(tmp_path, fake, monkeypatch):
    kb = _kb(tmp_path, fake, monkeypatch, commit_every=1, chunk_size=200, chunk_overlap=0)
    docs = _docs(tmp_path)
    paragraphs = [f"Section {i} of the long page describes the kestrel setting number {i} in detail." for i in range(6)]
    paragraphs[2] += " OVERSIZED"
    (docs / "long.md").write_text("# Long\n\n" + "\n\n".join(paragraphs) + "\n")
    fake.refuse_embedding = "OVERSIZED"

    report = Ingestor(kb).ingest_paths([docs])
    assert report.failed == 1 and report.failures[0].source.endswith("long.md")
    assert kb.registry.list(status=DocStatus.FAILED)[0].filename == "long.md"
    assert not _texts(kb, "long.md", docs), "no part of the refused document stays searchable"
    assert report.indexed == 3
    # The report counts what was written: not the chunks of long.md committed before its refusal, then deleted.
    stored = len(list(kb.store.chunks()))
    assert report.chunks_total == report.chunks_embedded == stored, (report, stored)


def test_the_report_counts_no_chunk_of_a_refused_document(tmp_path, fake, monkeypatch):
    kb = _kb(tmp_path, fake, monkeypatch, commit_every=512, chunk_size=200, chunk_overlap=0)
    docs = _docs(tmp_path)
    paragraphs = [f"Section {i} of the long page describes the kestrel setting number {i} in detail." for i in range(4)]
    paragraphs[3] += " OVERSIZED"  # embedded one text a call, its first sections pass: the document fails anyway
    (docs / "long.md").write_text("# Long\n\n" + "\n\n".join(paragraphs) + "\n")
    fake.refuse_embedding = "OVERSIZED"

    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.failed) == (3, 1), report.failures
    stored = len(list(kb.store.chunks()))
    assert report.chunks_total == report.chunks_embedded == stored == 3, report


def test_a_provider_that_refuses_every_text_stops_the_run_and_blames_no_document(tmp_path, fake, monkeypatch):
    kb = _kb(tmp_path, fake, monkeypatch, commit_every=512)
    docs = _docs(tmp_path)
    assert Ingestor(kb).ingest_paths([docs]).indexed == 3
    _docs(tmp_path, version="Revised in version two.\n")
    fake.refuse_embedding = " "  # every text: a model that embeds nothing, a wrong setting

    with pytest.raises(ProviderError, match="maximum context length"):
        Ingestor(kb).ingest_paths([docs])
    assert {r.status for r in kb.registry.list()} == {DocStatus.PENDING}
    assert all(_texts(kb, name, docs) for name in PAGES), "nothing was deleted"


def test_a_server_s_batch_limit_is_not_taken_for_a_refused_text(tmp_path, fake, monkeypatch):
    kb = _kb(tmp_path, fake, monkeypatch, commit_every=512, chunk_size=200, chunk_overlap=0)
    docs = _docs(tmp_path)
    paragraphs = [f"Section {i} of the long page describes the kestrel setting number {i} in detail." for i in range(6)]
    (docs / "long.md").write_text("# Long\n\n" + "\n\n".join(paragraphs) + "\n")
    fake.max_inputs = 2  # the long page alone has more chunks than a call may carry

    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.failed) == (4, 0), report.failures
    assert len(_texts(kb, "long.md", docs)) >= 3
