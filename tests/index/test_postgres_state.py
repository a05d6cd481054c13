"""Everything that is state, in PostgreSQL (`store = "postgres"`), on a real server the test session starts:
versioned migrations and `citewise db upgrade`, the advisory write lock, the registry and version row seen by
another process at once, the vocabulary shared through the database, the question log, the LLM cache, shared
rate-limit buckets, `citewise doctor`, and `citewise migrate` from an embedded home (vectors copied, not re-made).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from langchain_core.outputs import Generation
from pydantic import SecretStr
from typer.testing import CliRunner

from citewise.agent.question_log import log_question
from citewise.cli import app
from citewise.errors import ConfigError, HomeBusyError
from citewise.eval.gaps import gap_report
from citewise.index.doctor import check
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.registry import open_registry
from citewise.index.retriever import Retriever
from citewise.ingest.pipeline import Ingestor, remove_document
from citewise.llm.cache import PostgresLLMCache
from citewise.server.auth import SharedRateLimiter
from citewise.settings import Settings, SourceSpec
from citewise.sources.state import open_source_state
from citewise.sources.sync import remove_source, sync_source
from citewise.sources.sync import runs as source_runs
from citewise.state.database import Database
from citewise.state.locks import advisory_write_lock
from citewise.state.migrations import LATEST, MIGRATIONS
from citewise.types import Answer, DocStatus, DocumentRecord

runner = CliRunner()


def _env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "CITEWISE_HOME": str(settings.home),
        "CITEWISE_STORE": "postgres",
        "CITEWISE_DATABASE_URL": settings.database_url.get_secret_value(),
    }


# -- schema ------------------------------------------------------------------------------------------------------
def test_db_upgrade_creates_the_schema_once_and_records_each_migration(pg_url, tmp_path, monkeypatch):
    monkeypatch.setenv("CITEWISE_DATABASE_URL", pg_url)
    first = runner.invoke(app, ["db", "upgrade", "--home", str(tmp_path), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout.strip().splitlines()[-1]) == {
        "before": 0,
        "version": LATEST,
        "applied": [m.version for m in MIGRATIONS],
    }
    again = runner.invoke(app, ["db", "upgrade", "--home", str(tmp_path)])
    assert again.exit_code == 0 and "nothing to do" in again.stdout
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version, name FROM citewise_schema ORDER BY version").fetchall()
        extensions = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
    assert [r[0] for r in rows] == [m.version for m in MIGRATIONS] and "vector" in extensions


def test_concurrent_first_connections_apply_each_migration_once(pg_url):
    errors: list[BaseException] = []

    def connect():
        try:
            Database(pg_url).check_schema()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=connect) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM citewise_schema").fetchone()[0] == len(MIGRATIONS)


def test_a_newer_or_unmigrated_schema_is_refused_with_what_to_do(pg_url):
    with pytest.raises(ConfigError, match="citewise db upgrade"):
        Database(pg_url, auto_upgrade=False).check_schema()
    Database(pg_url).upgrade()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO citewise_schema (version, name) VALUES (%s, 'from the future')", (LATEST + 1,))
    with pytest.raises(ConfigError, match="newer than this Citewise"):
        Database(pg_url).check_schema()


def test_a_logical_backup_restores_into_a_working_knowledge_base(postgres, pg_settings, make_kb, corpus, tmp_path):
    """pg_dump and pg_restore (what a managed service's logical backups run): the restore recomputes the generated
    tsvector with an empty search_path, which the full-text function must survive; the copy then answers alike."""
    kb = make_kb(pg_settings)
    Ingestor(kb).ingest_paths([corpus])
    dump = tmp_path / "citewise.dump"
    url = pg_settings.database_url.get_secret_value()
    subprocess.run([str(postgres.bin / "pg_dump"), "-Fc", "-f", str(dump), "-d", url], check=True, capture_output=True)
    restored_url = postgres.create_database()
    subprocess.run(
        [str(postgres.bin / "pg_restore"), "--no-owner", "--exit-on-error", "-d", restored_url, str(dump)],
        check=True,
        capture_output=True,
    )
    restored = make_kb(pg_settings.model_copy(update={"database_url": SecretStr(restored_url)}))
    question = "How do I rotate the API key?"
    for mode in ("lexical", "hybrid"):
        expected = [(c.chunk_id, c.score) for c in Retriever(kb).search(question, mode=mode).chunks]
        assert [(c.chunk_id, c.score) for c in Retriever(restored).search(question, mode=mode).chunks] == expected


def test_an_unreachable_database_is_a_config_error_without_the_password(tmp_path):
    from tests.support.local_postgres import free_port

    settings = Settings(
        home=tmp_path,
        store="postgres",
        database_url=SecretStr(f"postgresql://u:hunter2@127.0.0.1:{free_port()}/db"),
        postgres={"connect_timeout_s": 2},
    )
    with pytest.raises(ConfigError) as caught:
        KnowledgeBase(settings).registry.list()
    assert "hunter2" not in str(caught.value) and "CITEWISE_DATABASE_URL" in str(caught.value)


def test_store_postgres_without_a_url_is_refused_at_start():
    with pytest.raises(ValueError, match="database_url"):
        Settings(store="postgres")


# -- the knowledge base ----------------------------------------------------------------------------------------------
def test_a_second_process_sees_an_ingest_at_once_and_nothing_is_kept_on_disk(pg_settings, make_kb, corpus):
    writer = make_kb(pg_settings)
    reader = make_kb(pg_settings.model_copy(update={"home": pg_settings.home.parent / "other-home"}))
    retriever = Retriever(reader)
    assert retriever.search("How do I rotate the API key?").empty and reader.version == 0
    report = Ingestor(writer).ingest_paths([corpus])
    assert report.indexed and not report.failed
    found = retriever.search("How do I rotate the API key?")
    assert not found.empty and reader.version == writer.version > 0
    assert {r.doc_id for r in reader.registry.list(status=DocStatus.INDEXED)} == {
        r.doc_id for r in writer.registry.list()
    }
    # The cache follows the version row: a delete through the writer is seen by the reader's next search.
    doc = found.chunks[0].doc_id
    remove_document(writer, doc)
    assert all(c.doc_id != doc for c in retriever.search("How do I rotate the API key?").chunks)
    # The home holds the exported model only: index, registry, vocabulary and locks live in the database.
    assert not (pg_settings.home / "index").exists() and not (pg_settings.home / "write.lock").exists()


@pytest.mark.parametrize("backend", ["lancedb", "postgres"])
def test_both_registries_keep_every_field_of_a_record(backend, settings, pg_settings):
    """Every field of DocumentRecord round-trips through either registry (a field added to the model but not to
    the `documents` table fails here), and a Git document's commit is found for its citations."""
    registry = open_registry(pg_settings if backend == "postgres" else settings)
    git = DocumentRecord(
        doc_id="g1",
        source="repo/guide.md",
        path="/tmp/repo/guide.md",
        filename="guide.md",
        title="Guide",
        owner="team-a",
        status=DocStatus.INDEXED,
        chunk_count=3,
        file_hash="abc",
        updated_at="2026-01-01T00:00:00Z",
        revision="0123456789abcdef",
    )
    local = git.model_copy(update={"doc_id": "f1", "source": "notes.md", "revision": "", "error": None})
    registry.upsert([git, local])
    assert registry.get("g1") == git and registry.get("f1") == local
    assert registry.revisions(["g1", "f1", "missing"]) == {"g1": "0123456789abcdef"}
    assert registry.revisions([]) == {}


def test_the_vocabulary_is_built_once_per_version_and_shared(pg_settings, make_kb, corpus):
    kb = make_kb(pg_settings)
    Ingestor(kb).ingest_paths([corpus])
    assert Retriever(kb).prepare("how do i delet a page").corrections == {"delet": "delete"}
    with psycopg.connect(pg_settings.database_url.get_secret_value()) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM citewise_vocabulary")]
    assert versions == [kb.version]
    other = make_kb(pg_settings)
    assert other.vocabulary.view(None).counts == kb.vocabulary.view(None).counts


def test_writers_take_turns_on_the_advisory_lock(pg_settings, make_kb):
    kb = make_kb(pg_settings)
    db = kb._db
    held, release = threading.Event(), threading.Event()

    def hold():
        with advisory_write_lock(db, wait_s=0):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(30)
    try:
        with pytest.raises(HomeBusyError, match="pid"), kb.writing(wait_s=0):
            pass
        messages: list[str] = []
        started = time.monotonic()
        threading.Timer(0.5, release.set).start()
        with kb.writing(wait_s=30, on_wait=messages.append):
            waited = time.monotonic() - started
        assert waited >= 0.4 and messages and "Waiting for another writer" in messages[0]
    finally:
        release.set()
        thread.join()


def test_a_killed_writer_releases_the_lock(pg_settings, tmp_path):
    """The lock belongs to the writer's connection: kill -9 the process and the next writer goes on at once."""
    script = (
        "import sys, time\n"
        "from citewise.settings import Settings\n"
        "from citewise.index.knowledge_base import KnowledgeBase\n"
        "kb = KnowledgeBase(Settings())\n"
        "with kb.writing(wait_s=0):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=_env(pg_settings), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        kb = KnowledgeBase(pg_settings)
        with pytest.raises(HomeBusyError), kb.writing(wait_s=0):
            pass
        proc.kill()
        proc.wait(30)
        with kb.writing(wait_s=10):
            pass
    finally:
        proc.kill()


def test_two_concurrent_cli_ingests_leave_no_duplicates(pg_settings, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"page{i:02d}.md").write_text(f"# Page {i}\n\nPage {i} sets the plover{i} limit to {i * 7}.\n")
    env = _env(pg_settings)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "citewise.cli", "ingest", str(docs), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert sorted(r["indexed"] for r in reports) == [0, 12]  # the second found everything done by the first
    kb = KnowledgeBase(pg_settings)
    rows = kb.store.chunk_rows()
    assert len(rows) == len({c for c, _ in rows}) == 12
    doctor = check(kb)
    assert doctor.problems == [] and doctor.documents == 12


def test_doctor_repairs_a_document_whose_chunks_went_missing(pg_settings, make_kb, corpus):
    kb = make_kb(pg_settings)
    Ingestor(kb).ingest_paths([corpus])
    victim = kb.registry.list()[0]
    kb.store.delete_documents([victim.doc_id])
    report = check(kb, repair=True)
    assert [p.doc_id for p in report.problems] == [victim.doc_id] and not report.remaining
    assert kb.registry.get(victim.doc_id).status == DocStatus.PENDING


# -- the rest of the state -----------------------------------------------------------------------------------------
def test_question_log_lands_in_the_database_and_feeds_gaps(pg_settings):
    refused = Answer(question="How do I fly the plover?", answer="", status="refused", exit_reason="COMPLETED")
    for owner in ("alice", None, "bob"):
        log_question(pg_settings, refused, ["fly plover"], owner=owner)
    report = gap_report(pg_settings)
    assert report["questions"] == 3 and report["groups"][0]["count"] == 3
    assert not pg_settings.questions_log_path.exists()


def test_feedback_is_kept_in_the_database_for_every_replica(pg_settings):
    """An answer recorded through one process is rated through another; owners stay apart; nothing on disk."""
    from citewise.feedback.store import AnswerRecord, Rating, open_feedback_store

    answer = Answer(question="Which port?", answer="Port 7433 [1].", status="success", exit_reason="COMPLETED")
    first, second = open_feedback_store(pg_settings), open_feedback_store(pg_settings)
    record = AnswerRecord.of(answer, owner="alice", docs_version=3, session_id="s1", surface="stream")
    first.record_answer(record)
    assert second.rate(record.answer_id, "bob", Rating("down"), "not mine") is None  # another owner's answer
    rated = second.rate(record.answer_id, "alice", Rating("down"), "The TLS port is missing")
    assert rated is not None and rated.comment == "The TLS port is missing" and rated.docs_version == 3
    assert [r.answer_id for r in first.rated("alice")] == [record.answer_id]
    assert first.rated("bob") == [] and first.rating_counts("alice") == {"up": 0, "down": 1}
    unrated = AnswerRecord.of(answer, owner="alice", docs_version=3, session_id="s2", surface="run")
    first.record_answer(unrated)
    assert first.forget_unrated("9999") == 1  # the rated one stays
    assert first.rating_counts(None)["down"] == 1
    assert not pg_settings.feedback_path.exists()


def test_llm_cache_is_shared_by_every_process(pg_settings):
    db_a, db_b = (
        Database(pg_settings.database_url.get_secret_value()),
        Database(pg_settings.database_url.get_secret_value()),
    )
    db_a.check_schema()
    a, b = PostgresLLMCache(db_a, namespace="openai:m"), PostgresLLMCache(db_b, namespace="openai:m")
    other_model = PostgresLLMCache(db_b, namespace="groq:m")
    a.update("prompt", "llm", [Generation(text="cached reply")])
    assert b.lookup("prompt", "llm")[0].text == "cached reply"
    assert other_model.lookup("prompt", "llm") is None and len(b) == 1
    b.clear()
    assert a.lookup("prompt", "llm") is None


def test_rate_limit_buckets_are_shared_across_processes(pg_settings):
    url = pg_settings.database_url.get_secret_value()
    Database(url).check_schema()
    one = SharedRateLimiter(6, Database(url), prefix="requests")
    two = SharedRateLimiter(6, Database(url), prefix="requests")
    granted = [limiter.acquire("key-1") for limiter in (one, two, one, two, one, two)]
    assert granted == [0.0] * 6
    wait = two.acquire("key-1")
    assert 9.0 < wait <= 10.0  # 6 a minute: the next token in about 10 s, whichever replica is asked
    assert one.acquire("key-2") == 0.0  # another caller has a bucket of its own
    assert SharedRateLimiter(0, Database(url), prefix="requests").acquire("key-1") == 0.0


# -- sources -------------------------------------------------------------------------------------------------------
def test_sources_state_is_shared_through_the_database(pg_settings, make_kb, corpus, tmp_path, monkeypatch):
    """A source synced through one process is listed, with its last run, by another, whose scheduler then finds it
    not due and whose next sync finds every document unchanged; removing it from there removes its documents and
    state, and no home holds a sources file."""
    monkeypatch.setenv("CITEWISE_CONFIG", str(tmp_path / "citewise.toml"))
    writer = make_kb(pg_settings)
    other_settings = pg_settings.model_copy(update={"home": tmp_path / "other-home"})
    other = make_kb(other_settings)
    open_source_state(pg_settings).save_spec("handbook", SourceSpec(url=str(corpus), every="6h"))
    first = sync_source(writer, "handbook", only_if_due=True)  # never synced: due
    assert first.ok and first.kind == "folder" and first.documents >= 3
    [listed] = source_runs(other_settings)
    assert listed.name == "handbook" and listed.last_ok is True and listed.documents == first.documents
    # Replicas' schedulers all find a source due at once and queue on the write lock: the first one syncs, the
    # others find it synced when their turn comes and leave the record of the first sync alone.
    late = sync_source(other, "handbook", only_if_due=True)
    assert not late.ran and late.ok and source_runs(other_settings) == [listed]
    again = sync_source(other, "handbook")
    assert again.ok and again.unchanged == first.documents and not again.added and not again.chunks_embedded
    assert remove_source(other, "handbook") == first.documents
    assert writer.registry.list() == [] and source_runs(pg_settings) == []
    # A replica started before the removal still declares the source in its settings: the removal, kept in the
    # database, wins, so its scheduler neither lists nor syncs it; `sources add` (save_spec) declares it again.
    replica = pg_settings.model_copy(update={"sources": {"handbook": SourceSpec(url=str(corpus), every="6h")}})
    assert source_runs(replica) == [] and "was removed" in sync_source(writer, "handbook").error
    open_source_state(pg_settings).save_spec("handbook", SourceSpec(url=str(corpus), every="6h"))
    assert [run.name for run in source_runs(replica)] == ["handbook"]
    for home in (pg_settings.home, other_settings.home):
        assert not (home / "index").exists()


# -- migrate -------------------------------------------------------------------------------------------------------
def test_migrate_copies_an_embedded_home_with_its_vectors(settings, make_kb, corpus, pg_url, tmp_path):
    embedded = make_kb(settings)
    open_source_state(settings).save_spec("handbook", SourceSpec(url=str(corpus)))  # the corpus, as a folder source
    synced = sync_source(embedded, "handbook")
    assert synced.ok and synced.documents >= 3
    refused = Answer(question="Where is the moon?", answer="", status="refused", exit_reason="COMPLETED")
    log_question(settings, refused, [])
    from citewise.feedback.store import AnswerRecord, Rating, open_feedback_store

    kept = open_feedback_store(settings)
    answered = Answer(question="Which port?", answer="Port 7433 [1].", status="success", exit_reason="COMPLETED")
    rated = AnswerRecord.of(answered, owner="alice", docs_version=3, session_id="s1", surface="stream")
    rated.citations = [{"n": 1, "chunk_id": "c-1", "filename": "ports.md", "source_url": "https://x.test/p#a"}]
    kept.record_answer(rated)
    kept.record_answer(AnswerRecord.of(refused, owner="public", docs_version=3, session_id=None, surface="run"))
    assert kept.rate(rated.answer_id, "alice", Rating("down"), "The TLS port is missing") is not None
    # Sentence vectors for one document's chunks, made from each chunk's own vector (so chunks sharing a content
    # hash share them too), whether or not the ingest pooled any: the copy must carry them.
    first = embedded.registry.list()[0].doc_id
    rewritten = [c for c in embedded.store.chunks() if c.doc_id == first]
    stored = embedded.store.vectors_by_hash([first])
    vectors = np.vstack([stored[c.content_hash][0] for c in rewritten])
    sentences = [np.vstack([v, np.roll(v, 1)]) for v in vectors]
    embedded.store.write_chunks(rewritten, vectors, finished={}, sentences=sentences)
    result = runner.invoke(app, ["migrate", "--from", str(settings.home), "--to", pg_url, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["chunks"] == embedded.store.count() and report["documents"] == len(embedded.registry.list())
    assert report["questions"] == 1 and report["sources"] == 1
    assert (report["feedback_answers"], report["feedback_ratings"]) == (2, 1)
    assert not any("feedback" in item for item in report["not_copied"])

    target = Settings(home=tmp_path / "replica", store="postgres", database_url=SecretStr(pg_url))
    copied = make_kb(target)
    assert copied.registry.list() == embedded.registry.list()
    assert copied.store.chunks() == embedded.store.chunks()
    doc_ids = [r.doc_id for r in embedded.registry.list()]
    mine, theirs = copied.store.vectors_by_hash(doc_ids), embedded.store.vectors_by_hash(doc_ids)
    assert mine.keys() == theirs.keys()
    for key, (vector, sentences) in theirs.items():
        np.testing.assert_array_equal(mine[key][0], vector)  # copied bit for bit: nothing was embedded again
        if sentences is None:
            assert mine[key][1] is None
        else:
            np.testing.assert_array_equal(mine[key][1], sentences)  # float16 both sides: bit for bit too
    assert all(mine[c.content_hash][1] is not None for c in rewritten)
    question = "How do I rotate the API key?"
    expected = [c.chunk_id for c in Retriever(embedded).search(question, mode="dense").chunks]
    assert [c.chunk_id for c in Retriever(copied).search(question, mode="dense").chunks] == expected
    assert gap_report(target)["questions"] == 1
    copied_feedback = open_feedback_store(target)  # answers, citations and ratings as the home kept them
    assert copied_feedback.rated("alice") == kept.rated("alice") and copied_feedback.rated("alice")[0].citations
    assert copied_feedback.rating_counts(None) == kept.rating_counts(None) == {"up": 0, "down": 1}
    assert copied_feedback.forget_unrated("9999") == 1  # the unrated answer came along too
    [source] = source_runs(target)  # the sources' state came along: the next sync re-embeds nothing
    assert source.name == "handbook" and source.last_ok is True and source.documents == synced.documents
    resynced = sync_source(copied, "handbook")
    assert resynced.ok and resynced.unchanged == synced.documents and not resynced.chunks_embedded

    again = runner.invoke(app, ["migrate", "--from", str(settings.home), "--to", pg_url])
    assert again.exit_code == 2 and "already holds" in again.output


def test_migrate_refuses_a_home_with_no_index(tmp_path, pg_url):
    result = runner.invoke(app, ["migrate", "--from", str(tmp_path / "nothing"), "--to", pg_url])
    assert result.exit_code == 2 and "No Citewise index" in result.output


def test_docs_list_reads_the_database(pg_settings, make_kb, corpus, monkeypatch):
    Ingestor(make_kb(pg_settings)).ingest_paths([corpus])
    for key, value in _env(pg_settings).items():
        if key.startswith("CITEWISE_"):
            monkeypatch.setenv(key, value)
    result = runner.invoke(app, ["docs", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout.strip().splitlines()[-1])) == len(list(corpus.rglob("*.*")))


def test_uploads_dir_moves_uploads(tmp_path):
    shared = tmp_path / "shared-uploads"
    assert Settings(home=tmp_path / "h", uploads_dir=shared).uploads_path == shared
    assert Settings(home=tmp_path / "h").uploads_path == Path(tmp_path / "h" / "uploads")
