"""Several writers on one home: serialised by the home's write lock, never duplicating a chunk; `citewise doctor`
finds and repairs the damage unserialised writers used to leave; readers see every commit the moment it lands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.index.doctor import ProblemKind, check
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.index.write_lock import write_lock
from citewise.ingest.loaders import parse_plain_text
from citewise.ingest.pipeline import Ingestor, make_chunks
from citewise.types import DocStatus, make_doc_id

runner = CliRunner()


def _docs(root: Path, count: int, word: str = "plover") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"page{i:03d}.md").write_text(f"# Page {i}\n\nPage {i} sets the {word}{i} limit to {i * 7}.\n")
    return root


def _cli(*args: str, home: Path, stderr: Path) -> subprocess.Popen:
    env = {**os.environ, "CITEWISE_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr.open("w"),
        text=True,
    )


def _wait_for(paths: list[Path], text: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(text in p.read_text() for p in paths):
        assert time.monotonic() < deadline, [p.read_text() for p in paths]
        time.sleep(0.1)


@contextmanager
def held_by_another_thread(home: Path) -> Iterator[None]:
    """The home's write lock, held by another thread (in one thread the lock is re-entrant, as it must be for an
    ingest's own optimise step)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with write_lock(home, wait_s=0):
            held.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    try:
        yield
    finally:
        release.set()
        thread.join()


def _assert_clean(kb: KnowledgeBase) -> None:
    rows = kb.store.chunk_rows()
    assert len(rows) == len({chunk_id for chunk_id, _ in rows}), "a chunk is stored twice"
    assert len(rows) == sum(r.chunk_count for r in kb.registry.list(status=DocStatus.INDEXED))
    assert check(kb).problems == []


@pytest.mark.slow
def test_two_ingest_processes_on_one_home_never_duplicate_chunks(tmp_path, settings, make_kb):
    docs = _docs(tmp_path / "docs", 60)
    other = _docs(tmp_path / "other", 20, word="curlew")
    home = settings.home
    logs = [tmp_path / "first.err", tmp_path / "second.err"]
    # Hold the lock while both start, so both must wait: without the lock they raced and doubled every chunk.
    with write_lock(home, wait_s=0):
        first = _cli("ingest", str(docs), "--json", home=home, stderr=logs[0])
        second = _cli("ingest", str(docs), str(other), "--json", home=home, stderr=logs[1])
        _wait_for(logs, "Waiting for another writer")
    results = [proc.communicate(timeout=300)[0] for proc in (first, second)]
    assert [proc.returncode for proc in (first, second)] == [0, 0], [p.read_text() for p in logs]
    assert all(f"(pid {os.getpid()}:" in p.read_text() for p in logs)
    reports = [json.loads(stdout.strip().splitlines()[-1]) for stdout in results]
    # Whichever ran second found the first one's documents already indexed.
    assert sorted(r["indexed"] for r in reports) in ([60, 20], [0, 80]) or sum(r["unchanged"] for r in reports) >= 60

    kb = make_kb(settings)
    assert len(kb.registry.list(status=DocStatus.INDEXED)) == 80
    _assert_clean(kb)
    hits = Retriever(kb).search("plover7 limit", mode="lexical")
    assert len({c.chunk_id for c in hits.chunks}) == len(hits.chunks)


def test_no_wait_fails_at_once_naming_the_other_writer(tmp_path, settings):
    docs = _docs(tmp_path / "docs", 2)
    with held_by_another_thread(settings.home):
        result = runner.invoke(app, ["ingest", str(docs), "--no-wait", "--home", str(settings.home)])
        removal = runner.invoke(app, ["docs", "remove", "x", "--no-wait", "--home", str(settings.home)])
    assert result.exit_code == 2 and f"pid {os.getpid()}" in result.stderr and "--no-wait" in result.stderr
    assert removal.exit_code == 2 and "Another writer" in removal.stderr
    assert KnowledgeBase(settings).registry.list() == []


def test_a_waiting_writer_gives_up_after_write_lock_wait_s(tmp_path, settings, make_kb):
    docs = _docs(tmp_path / "docs", 2)
    impatient = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"write_lock_wait_s": 0.5})})
    messages: list[str] = []
    from citewise.errors import HomeBusyError

    with held_by_another_thread(settings.home), pytest.raises(HomeBusyError, match="gave up waiting"):
        Ingestor(make_kb(impatient), on_wait=messages.append).ingest_paths([docs])
    assert messages and "Waiting for another writer" in messages[0]


def test_the_lock_is_held_by_every_writer_thread(tmp_path, settings, make_kb):
    """Writers in one process (the server's worker beside a CLI-style call) exclude each other too."""
    docs = _docs(tmp_path / "docs", 3)
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([docs])
    record = kb.registry.list()[0]
    entered = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with make_kb(settings).writing():
            entered.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    entered.wait(10)
    messages: list[str] = []
    from citewise.ingest.pipeline import remove_document

    threading.Timer(0.5, release.set).start()
    remove_document(make_kb(settings), record.doc_id, on_wait=messages.append)
    holder.join()
    assert messages, "the second writer did not wait"
    assert kb.registry.get(record.doc_id) is None


def _corrupt(kb: KnowledgeBase) -> dict[str, str]:
    """Damage a home the ways unserialised writers did, through LanceDB and SQLite directly."""
    table = kb.store._table
    records = kb.registry.list()
    doubled, short, emptied = records[0], records[1], records[2]
    copies = table.search().where(f"doc_id = '{doubled.doc_id}'").limit(None).to_arrow()
    table.add(copies)  # every chunk of one document twice
    orphan_doc = parse_plain_text("An orphan passage about the dunlin.", source="orphan", filename="orphan.txt")
    orphan_id = make_doc_id("orphan")
    orphans = make_chunks(orphan_doc, kb.settings.ingest, doc_id=orphan_id, filename="orphan.txt")
    kb.store.write_chunks(orphans, np.ones((len(orphans), 384), dtype=np.float32) / 384**0.5, finished={})
    kb.registry.upsert([short.model_copy(update={"chunk_count": short.chunk_count + 3})])
    kb.store.delete_documents([emptied.doc_id])
    return {"doubled": doubled.doc_id, "orphan": orphan_id, "short": short.doc_id, "emptied": emptied.doc_id}


def test_doctor_finds_and_repairs_duplicates_orphans_and_count_mismatches(tmp_path, settings, make_kb):
    docs = _docs(tmp_path / "docs", 5)
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([docs])
    damaged = _corrupt(kb)
    home = str(settings.home)

    found = runner.invoke(app, ["doctor", "--home", home, "--json"])
    assert found.exit_code == 1
    report = json.loads(found.stdout)
    kinds = {p["kind"]: p["doc_id"] for p in report["problems"]}
    assert kinds == {
        ProblemKind.DUPLICATE_CHUNKS: damaged["doubled"],
        ProblemKind.ORPHAN_CHUNKS: damaged["orphan"],
        ProblemKind.COUNT_MISMATCH: damaged["short"],
        ProblemKind.NO_CHUNKS: damaged["emptied"],
    }
    # A search shows the damage: the doubled document's passage comes back twice.
    table_text = runner.invoke(app, ["doctor", "--home", home])
    assert table_text.exit_code == 1 and "doctor --repair" in table_text.stdout

    repaired = runner.invoke(app, ["doctor", "--repair", "--home", home])
    assert repaired.exit_code == 0, repaired.output
    assert "Repaired 4 problem(s)" in repaired.stdout
    again = runner.invoke(app, ["doctor", "--home", home])
    assert again.exit_code == 0 and "No problems found" in again.stdout

    fresh = make_kb(settings)
    rows = fresh.store.chunk_rows()
    assert len(rows) == len({c for c, _ in rows}) and damaged["orphan"] not in {d for _, d in rows}
    for key in ("short", "emptied"):
        assert fresh.registry.get(damaged[key]).status == DocStatus.PENDING
    # The next ingest redoes the documents doctor marked, and the home is whole again.
    report = Ingestor(fresh).ingest_paths([docs])
    assert report.indexed == 2
    _assert_clean(fresh)


def test_readers_see_a_commit_even_when_nothing_is_written_after_it(tmp_path, settings, make_kb):
    """A kill right after a commit (before any bookkeeping file) must not leave readers stale: the version they
    check is the commit itself."""
    docs = _docs(tmp_path / "docs", 2)
    Ingestor(make_kb(settings)).ingest_paths([docs])
    reader = make_kb(settings)
    retriever = Retriever(reader)
    assert retriever.search("sandpiper nesting", mode="lexical").empty
    version = reader.version

    writer = make_kb(settings)
    doc = parse_plain_text("The sandpiper nesting season starts in May.", source="late", filename="late.txt")
    chunks = make_chunks(doc, settings.ingest, doc_id=make_doc_id("late"), filename="late.txt")
    writer.store.replace_documents([make_doc_id("late")], chunks, writer.embed_documents([c.text for c in chunks]))
    # ... and the writer dies here: no registry update, no manifest write, nothing else.

    assert reader.version != version
    result = retriever.search("sandpiper nesting", mode="lexical")
    assert not result.empty and not result.cached and "sandpiper" in result.chunks[0].text


def test_another_thread_on_the_same_handle_takes_the_lock(tmp_path, settings, make_kb):
    """writing()'s nesting is counted per thread: a second thread using a handle that one thread is writing through
    is another writer (it used to count as nested, and wrote beside the first without the lock)."""
    from citewise.errors import HomeBusyError

    kb = make_kb(settings)
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with kb.writing(), kb.writing():  # nested in its own thread: no second lock, no wait
            entered.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(10)
    try:
        with pytest.raises(HomeBusyError, match="Another writer"), kb.writing(wait_s=0):
            pass
    finally:
        release.set()
        holder.join()
    with kb.writing(wait_s=0):  # released: this thread's turn
        pass
