"""What an ingest may touch: never the home itself, never another owner's documents without being told, and big
documents in bounded batches."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.errors import ConfigError
from citewise.ingest.pipeline import Ingestor
from citewise.types import DocStatus

runner = CliRunner()


def _upload(settings, owner: str, name: str, text: str):
    folder = settings.home / "uploads" / owner
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder


def test_reingesting_uploads_never_reowns_them(settings, make_kb):
    kb = make_kb(settings)
    folder = _upload(settings, "alice", "secret.md", "# Secret\n\nAlice's vault code is 7731.\n")
    Ingestor(kb, owner="alice").ingest_paths([folder])  # the server's uploads flow: uploads/<owner> as that owner
    uploads = settings.home / "uploads"

    refused = runner.invoke(app, ["ingest", str(uploads), "--home", str(settings.home)])
    assert refused.exit_code == 2 and "inside the Citewise home" in refused.stderr
    assert "--owner OWNER" in refused.stderr.replace("\n", "")
    as_bob = runner.invoke(app, ["ingest", str(folder), "--owner", "bob", "--home", str(settings.home)])
    assert as_bob.exit_code == 2
    assert {c.owner for c in kb.store.chunks()} == {"alice"}
    # Re-indexing them as their owner is the uploads flow, and allowed.
    again = runner.invoke(app, ["ingest", str(folder), "--owner", "alice", "--home", str(settings.home)])
    assert again.exit_code == 0, again.output


def test_owner_change_is_refused_naming_documents_and_owner(settings, make_kb, corpus):
    kb = make_kb(settings)
    Ingestor(kb, owner="alice").ingest_paths([corpus])
    result = runner.invoke(app, ["ingest", str(corpus), "--home", str(settings.home)])
    assert result.exit_code == 2
    message = result.stderr.replace("\n", "")
    assert "owner alice" in message and "getting-started.md" in message and "--reassign-owner" in message
    assert {c.owner for c in kb.store.chunks()} == {"alice"}
    moved = runner.invoke(app, ["ingest", str(corpus), "--reassign-owner", "--home", str(settings.home)])
    assert moved.exit_code == 0
    assert {c.owner for c in make_kb(settings).store.chunks()} == {"public"}


def test_the_home_is_never_ingested(tmp_path, make_kb):
    from citewise.settings import Settings

    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "page.md").write_text("# Page\n\nThe petrel flag is on.\n")
    settings = Settings(home=docs / "data")  # a home that lives inside the docs tree
    kb = make_kb(settings)
    _upload(settings, "alice", "private.md", "# Private\n\nAlice only.\n")
    (settings.home / "notes.md").write_text("# Notes\n\nNot a document.\n")

    report = Ingestor(kb).ingest_paths([docs])
    assert report.indexed == 1 and any("the Citewise home" in note for note in report.skipped)
    assert {r.filename for r in kb.registry.list()} == {"page.md"}
    cli = runner.invoke(app, ["ingest", str(docs), "--home", str(settings.home)])
    assert cli.exit_code == 0 and "Skipped" in cli.stderr
    for inside in (settings.home, settings.home / "notes.md", settings.home / "index"):
        with pytest.raises(ConfigError, match="inside the Citewise home"):
            Ingestor(kb).ingest_paths([inside])


def test_a_big_document_is_committed_in_several_batches(settings, make_kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    sections = "".join(f"## Part {i}\n\nPart {i} explains the shearwater{i} option in detail.\n\n" for i in range(40))
    (docs / "big.md").write_text("# Big\n\n" + sections)
    (docs / "small.md").write_text("# Small\n\nA small page.\n")
    batched = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"commit_every": 8})})
    kb = make_kb(batched)
    report = Ingestor(kb).ingest_paths([docs])
    big = next(r for r in kb.registry.list() if r.filename == "big.md")
    assert big.status == DocStatus.INDEXED and big.chunk_count == 40
    assert report.commits >= 40 // 8 and report.chunks_total == 41
    chunks = kb.store.chunks(f"doc_id = '{big.doc_id}'")
    assert [c.chunk_index for c in chunks] == list(range(40))

    # Shrunk to fewer chunks than one batch holds: the leftovers of the old version go in the same commits.
    (docs / "big.md").write_text("# Big\n\n" + "".join(sections.split("\n\n## ")[0]) + "\n")
    Ingestor(kb).ingest_paths([docs])
    assert len(kb.store.chunks(f"doc_id = '{big.doc_id}'")) == kb.registry.get(big.doc_id).chunk_count == 1


def test_a_stopped_run_leaves_its_document_pending_and_the_next_run_finishes_it(settings, make_kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    sections = "".join(f"## Part {i}\n\nPart {i} explains the fulmar{i} option.\n\n" for i in range(30))
    (docs / "big.md").write_text("# Big\n\n" + sections)
    batched = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"commit_every": 8})})
    kb = make_kb(batched)
    commits: list[int] = []

    def stop_after_first_commit() -> bool:
        commits.append(kb.store.version() if kb.manifest else 0)
        return len(set(commits)) > 1  # the version moved: one batch is in

    report = Ingestor(kb, should_stop=stop_after_first_commit).ingest_paths([docs])
    assert report.interrupted and report.indexed == 0 and report.commits >= 1
    assert kb.registry.list()[0].status == DocStatus.PENDING
    again = Ingestor(kb).ingest_paths([docs])
    assert again.indexed == 1 and again.chunks_reused >= 8  # what the stopped run committed is not embedded again
    assert kb.registry.list()[0].status == DocStatus.INDEXED and kb.store.count() == 30
