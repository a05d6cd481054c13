"""Incremental, failure-tolerant ingestion against the real index, on both engines: LanceDB in the home and
PostgreSQL with pgvector (a fresh database on the session's server)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from citewise.errors import ConfigError, IndexMismatchError
from citewise.index.embeddings import SHIPPED_DIR
from citewise.index.retriever import Retriever
from citewise.ingest.pipeline import Ingestor, remove_document
from citewise.settings import Settings
from citewise.types import DocStatus, make_doc_id

BROKEN = Path(__file__).parents[1] / "fixtures" / "broken"


@pytest.fixture
def settings(each_engine) -> Settings:
    return each_engine


def _env(settings: Settings) -> dict[str, str]:
    """A `citewise` subprocess's environment for these settings' home and engine."""
    env = {**os.environ, "CITEWISE_HOME": str(settings.home), "CITEWISE_STORE": settings.store}
    if settings.database_url is not None:
        env["CITEWISE_DATABASE_URL"] = settings.database_url.get_secret_value()
    return env


def _chunk_count(kb) -> int:
    return kb.store.count()


def _texts(result) -> str:
    return "\n".join(c.text for c in result.chunks)


def test_ingest_indexes_every_supported_file_with_metadata(kb, corpus):
    report = Ingestor(kb).ingest_paths([corpus])
    records = kb.registry.list()
    files = sorted(p.name for p in corpus.rglob("*") if p.is_file())
    assert report.failed == 0, report.failures
    assert sorted(r.filename for r in records) == files
    assert all(r.status == DocStatus.INDEXED and r.chunk_count > 0 for r in records)
    assert report.chunks_total == sum(r.chunk_count for r in records) == _chunk_count(kb)
    assert report.chunks_embedded == report.chunks_total

    chunks = kb.store.chunks()
    by_file = {c.filename: c for c in chunks}
    for record in records:
        chunk = by_file[record.filename]
        assert chunk.doc_id == record.doc_id == make_doc_id(record.source)
        assert chunk.owner == "public"
        assert chunk.modified and len(chunk.content_hash) == 64
    # module is the top folder below the ingested root
    assert {c.module for c in chunks} == {p.name for p in corpus.iterdir() if p.is_dir()}
    # chunk ids are unique and indexes are dense per document
    assert len({c.chunk_id for c in chunks}) == len(chunks)
    for record in records:
        indexes = sorted(c.chunk_index for c in chunks if c.doc_id == record.doc_id)
        assert indexes == list(range(record.chunk_count))


def test_unchanged_reingest_embeds_nothing(kb, corpus):
    Ingestor(kb).ingest_paths([corpus])
    version = kb.version
    again = Ingestor(kb).ingest_paths([corpus])
    assert again.chunks_embedded == 0 and again.indexed == 0
    assert again.unchanged == again.seen > 0
    assert kb.version == version  # nothing changed, so cached retrievals stay valid


def test_unchanged_reingest_does_not_load_the_embedding_model(tmp_path, corpus, settings, make_kb):
    """In a fresh process, re-ingesting an unchanged tree must not even import sentence-transformers."""
    Ingestor(make_kb(settings)).ingest_paths([corpus])
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from citewise.settings import Settings\n"
        "from citewise.index.knowledge_base import KnowledgeBase\n"
        "from citewise.ingest.pipeline import Ingestor\n"
        "kb = KnowledgeBase(Settings())\n"
        f"r = Ingestor(kb).ingest_paths([Path({str(corpus)!r})])\n"
        "print(json.dumps({'embedded': r.chunks_embedded, 'unchanged': r.unchanged,"
        " 'st': 'sentence_transformers' in sys.modules, 'torch': 'torch' in sys.modules}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=_env(settings)
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"embedded": 0, "unchanged": result["unchanged"], "st": False, "torch": False}
    assert result["unchanged"] > 0


def test_another_build_of_the_model_re_embeds_instead_of_mixing_vectors(settings, embedder, tmp_path):
    """Vectors are reused by chunk text *and* the embedder's vectors key: a home built before keys existed (an fp32
    export, whose key is "") is re-read and every chunk re-embedded by the shipped model's next ingest, not patched
    with the old vectors; a later ingest with nothing changed embeds nothing."""
    from citewise.index.knowledge_base import KnowledgeBase

    class Unkeyed:  # the same model, as an embedder from before vectors keys (fp32 exports and torch have none)
        name = embedder.name
        makes_sentences = embedder.makes_sentences
        embed_documents = staticmethod(embedder.embed_documents)
        embed_query = staticmethod(embedder.embed_query)
        embed_with_sentences = staticmethod(embedder.embed_with_sentences)

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha service listens on port 7301.\n\n## Limits\n\nAlpha allows 40.\n")
    old = Ingestor(KnowledgeBase(settings, embedder=Unkeyed())).ingest_paths([docs])
    assert old.chunks_embedded == old.chunks_total > 1

    assert embedder.vectors_key.startswith("shipped:")
    # the shipped file was rewritten with the same outputs to the bit: its vectors keep the key of the file before
    manifest = json.loads((SHIPPED_DIR / "manifest.json").read_text())
    assert embedder.vectors_key == f"shipped:{manifest.get('vectors_of_sha256', manifest['onnx_sha256'])[:16]}"
    new = Ingestor(KnowledgeBase(settings, embedder=embedder)).ingest_paths([docs])
    assert (new.indexed, new.unchanged) == (1, 0)
    assert new.chunks_embedded == new.chunks_total == old.chunks_total and new.chunks_reused == 0

    again = Ingestor(KnowledgeBase(settings, embedder=embedder)).ingest_paths([docs])
    assert (again.unchanged, again.chunks_embedded) == (1, 0)


def test_progress_names_the_phase_the_time_goes_to(kb, tmp_path):
    """Each phase reports as it begins, not only after its first step: embedding shows 0 done before the first model
    call (the model may load then), and the write to the index has a phase of its own, before the indexes."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"{i}.md").write_text(f"# Page {i}\n\nThe worker {i} drains queue {i} every {i + 2} minutes.\n")
    seen: list[tuple[str, int, int]] = []
    Ingestor(kb, progress=lambda stage, done, total: seen.append((stage, done, total))).ingest_paths([docs])
    stages = list(dict.fromkeys(stage for stage, _, _ in seen))
    assert stages == ["parse", "embed", "write", "optimize"]
    first_embed = next(event for event in seen if event[0] == "embed")
    assert first_embed[1] == 0 and first_embed[2] > 0
    assert ("write", 0, 1) in seen and ("write", 1, 1) in seen
    assert seen.index(("write", 0, 1)) > seen.index(first_embed)


def test_changed_file_replaces_exactly_its_chunks(kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(
        "# Alpha\n\nThe alpha service listens on port 7301.\n\n## Limits\n\nAlpha allows 40 jobs.\n"
    )
    (docs / "b.md").write_text("# Beta\n\nThe beta worker drains the zebra queue every 15 minutes.\n")
    Ingestor(kb).ingest_paths([docs])
    retriever = Retriever(kb)
    b_id = make_doc_id((docs / "b.md").resolve().as_posix())
    b_before = kb.store.chunks(f"doc_id = '{b_id}'")

    (docs / "a.md").write_text(
        "# Alpha\n\nThe alpha service listens on port 9911.\n\n## Limits\n\nAlpha allows 40 jobs.\n"
    )
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.unchanged) == (1, 1)
    # the unchanged "Limits" chunk reused its stored vector; only the edited chunk was embedded
    assert report.chunks_embedded == 1 and report.chunks_reused == report.chunks_total - 1

    assert "9911" in _texts(retriever.search("alpha port", mode="lexical"))
    assert "7301" not in _texts(retriever.search("alpha port 7301", mode="lexical"))
    assert kb.store.chunks(f"doc_id = '{b_id}'") == b_before
    assert _chunk_count(kb) == sum(r.chunk_count for r in kb.registry.list())


def test_prune_removes_deleted_files_and_they_are_never_retrieved(kb, corpus):
    Ingestor(kb).ingest_paths([corpus])
    victim = next(corpus.rglob("*.txt"))
    victim_id = make_doc_id(victim.resolve().as_posix())
    marker = kb.store.chunks(f"doc_id = '{victim_id}'")[0].text[:60]

    victim.unlink()
    without_prune = Ingestor(kb).ingest_paths([corpus])
    assert without_prune.pruned == 0 and kb.registry.get(victim_id) is not None

    report = Ingestor(kb).ingest_paths([corpus], prune=True)
    assert report.pruned == 1
    assert kb.registry.get(victim_id) is None
    retriever = Retriever(kb)
    for mode in ("hybrid", "dense", "lexical"):
        assert all(c.doc_id != victim_id for c in retriever.search(marker, 10, mode=mode).chunks)
    assert _chunk_count(kb) == sum(r.chunk_count for r in kb.registry.list())


def test_broken_files_fail_alone_and_the_batch_lands(kb, corpus):
    for broken in BROKEN.iterdir():
        shutil.copy(broken, corpus / broken.name)
    report = Ingestor(kb).ingest_paths([corpus])
    failed = kb.registry.list(status=DocStatus.FAILED)
    assert {r.filename for r in failed} == {p.name for p in BROKEN.iterdir()}
    assert report.failed == len(failed) and all(r.error and r.filename in r.error for r in failed)
    indexed = kb.registry.list(status=DocStatus.INDEXED)
    assert len(indexed) == report.indexed > 0
    assert _chunk_count(kb) == sum(r.chunk_count for r in indexed)


def test_file_that_breaks_later_stops_answering(kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "page.md"
    page.write_text("# Quokka\n\nThe quokka setting defaults to 12.\n")
    Ingestor(kb).ingest_paths([docs])
    page.write_bytes(b"\xff\xfe\xfa not utf-8 \xff")
    report = Ingestor(kb).ingest_paths([docs])
    assert report.failed == 1
    assert Retriever(kb).search("quokka setting", mode="lexical").empty


def test_oversized_file_fails_with_a_clear_error(settings, make_kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "big.txt").write_text("word " * 300_000)
    (docs / "small.md").write_text("# Small\n\nFine.\n")
    settings = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"max_file_mb": 1})})
    kb = make_kb(settings)
    report = Ingestor(kb).ingest_paths([docs])
    assert report.failed == 1 and "big.txt" in report.failures[0].error and "max_file_mb" in report.failures[0].error
    assert report.indexed == 1


def test_missing_path_is_a_config_error_and_writes_nothing(kb, tmp_path):
    with pytest.raises(ConfigError, match="No such file"):
        Ingestor(kb).ingest_paths([tmp_path / "nope"])
    assert kb.registry.list() == []


def test_folder_without_supported_files_is_a_clear_error(kb, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.docx").write_bytes(b"PK")
    with pytest.raises(ConfigError, match=r"No files to ingest.*\.md"):
        Ingestor(kb).ingest_paths([tmp_path / "empty"])
    assert Ingestor(kb).ingest_paths([tmp_path / "empty"], prune=True).seen == 0


def test_owner_tag_and_reingest_as_other_owner(kb, corpus):
    Ingestor(kb, owner="alice").ingest_paths([corpus])
    assert {r.owner for r in kb.registry.list()} == {"alice"}
    # A document's owner never changes silently: refused before anything is written, naming documents and owner.
    with pytest.raises(ConfigError, match=r"already indexed under another owner.*owner alice.*--reassign-owner"):
        Ingestor(kb, owner="bob").ingest_paths([corpus])
    assert {r.owner for r in kb.registry.list()} == {"alice"} == {c.owner for c in kb.store.chunks()}
    report = Ingestor(kb, owner="bob", reassign_owner=True).ingest_paths([corpus])
    # Same bytes, new owner: documents are rewritten (owner is part of every chunk) but no vector is recomputed.
    assert report.indexed == report.seen and report.chunks_embedded == 0
    assert {c.owner for c in kb.store.chunks()} == {"bob"}


def test_remove_document(kb, corpus):
    Ingestor(kb).ingest_paths([corpus])
    record = kb.registry.list()[0]
    remove_document(kb, record.doc_id)
    assert kb.registry.get(record.doc_id) is None
    assert all(c.doc_id != record.doc_id for c in kb.store.chunks())
    with pytest.raises(ConfigError, match="No document"):
        remove_document(kb, record.doc_id)


def test_index_built_with_another_model_is_a_clear_error(kb, corpus, settings):
    Ingestor(kb).ingest_paths([corpus])
    other = settings.model_copy(update={"embeddings": "openai:text-embedding-3-small"})
    from citewise.index.knowledge_base import KnowledgeBase

    with pytest.raises(IndexMismatchError, match="all-MiniLM-L6-v2"):
        KnowledgeBase(other)


@pytest.mark.slow
def test_kill_9_mid_ingest_leaves_previous_index_queryable(tmp_path, settings, make_kb):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(40):
        (docs / f"page{i:02d}.md").write_text(f"# Page {i}\n\nVersion one of page {i} mentions token{i}a.\n")
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([docs])
    for i in range(40):
        (docs / f"page{i:02d}.md").write_text(f"# Page {i}\n\nVersion two of page {i} mentions token{i}b.\n")

    env = {**_env(settings), "CITEWISE_INGEST__COMMIT_EVERY": "4", "CITEWISE_INGEST__EMBED_BATCH_SIZE": "4"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", "ingest", str(docs), "--json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first_version = kb.store.version()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            kb.store.refresh()
            if kb.store.version() > first_version:  # at least one batch committed, more to come
                break
            time.sleep(0.05)
        assert proc.poll() is None, "ingest finished before it could be interrupted"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)

    # The index answers, every document still has its chunks (old or new version), nothing is duplicated.
    survivor = make_kb(settings)
    chunks = survivor.store.chunks()
    assert len(chunks) == 40 and len({c.doc_id for c in chunks}) == 40
    assert not Retriever(survivor).search("token7a token7b", mode="lexical").empty
    statuses = {r.status for r in survivor.registry.list()}
    assert DocStatus.PENDING in statuses  # the interrupted documents are visibly unfinished

    report = Ingestor(survivor).ingest_paths([docs])
    assert report.failed == 0 and report.indexed > 0
    assert {r.status for r in survivor.registry.list()} == {DocStatus.INDEXED}
    texts = [c.text for c in survivor.store.chunks()]
    assert len(texts) == 40 and all("Version two" in t for t in texts)


def test_settings_change_reingests_everything(settings, make_kb, corpus):
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([corpus])
    smaller = settings.model_copy(
        update={"ingest": settings.ingest.model_copy(update={"chunk_size": 400, "chunk_overlap": 50})}
    )
    report = Ingestor(make_kb(smaller)).ingest_paths([corpus])
    assert report.unchanged == 0 and report.indexed == report.seen
