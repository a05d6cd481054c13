"""Files that break in odd ways fail alone, with a clear error, and never take the run down with them."""

from __future__ import annotations

from pathlib import Path

import pytest

import citewise.ingest.pipeline as pipeline
from citewise.ingest.pipeline import Ingestor
from citewise.types import DocStatus, make_doc_id


def _docs(tmp_path: Path, count: int = 3) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(count):
        (docs / f"page{i}.md").write_text(f"# Page {i}\n\nPage {i} talks about the heron{i} setting.\n")
    return docs


def test_a_file_that_vanishes_after_discovery_fails_alone(kb, tmp_path, monkeypatch):
    docs = _docs(tmp_path)
    victim = docs / "page1.md"
    real_discover = pipeline.discover

    def discover_then_delete(paths, globs, **options):
        found = real_discover(paths, globs, **options)
        victim.unlink()  # gone between discovery and hashing, as when an editor swaps files
        return found

    monkeypatch.setattr(pipeline, "discover", discover_then_delete)
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.failed) == (2, 1)
    assert "page1.md" in report.failures[0].error and "no longer exists" in report.failures[0].error
    record = kb.registry.get(make_doc_id(victim.resolve().as_posix()))
    assert record is not None and record.status == DocStatus.FAILED and "page1.md" in record.error


def test_an_unreadable_file_fails_alone(kb, tmp_path, monkeypatch):
    docs = _docs(tmp_path)
    victim = (docs / "page2.md").resolve()
    real_read = Path.read_bytes

    def read_bytes(self):  # the tests run as root, which chmod cannot lock out: refuse like the kernel would
        if self == victim:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.failed) == (2, 1)
    assert "page2.md" in report.failures[0].error and "Permission denied" in report.failures[0].error
    assert kb.registry.get(make_doc_id(victim.as_posix())).status == DocStatus.FAILED


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16", "utf-32"])
def test_utf16_and_utf32_text_is_decoded_not_indexed_as_nul_garbage(kb, tmp_path, encoding):
    docs = tmp_path / "docs"
    docs.mkdir()
    text = "# Gannet\n\nThe gannet timeout is 42 seconds; café naïve.\n"
    (docs / "wide.md").write_bytes(text.encode(encoding))
    report = Ingestor(kb).ingest_paths([docs])
    assert report.failed == 0, report.failures
    chunk = kb.store.chunks()[0]
    assert "\x00" not in chunk.text and "gannet timeout is 42 seconds; café naïve" in chunk.text
    assert chunk.title == "Gannet"


def test_binary_with_nul_bytes_fails_clearly(kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "blob.txt").write_bytes(b"\x00\x01\x02garbage\x00\xff" * 50)
    (docs / "ok.md").write_text("# Fine\n\nA fine page.\n")
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.indexed, report.failed) == (1, 1)
    assert "blob.txt" in report.failures[0].error and "NUL" in report.failures[0].error


def test_a_symlinked_file_is_ingested_under_the_path_it_has_in_the_tree(kb, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "zebras.md").write_text("# Zebras\n\nZebras have stripes that differ from animal to animal.\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "zebras.md").symlink_to(outside / "zebras.md")
    (docs / "again.md").symlink_to(outside / "zebras.md")  # the same target twice: one document
    report = Ingestor(kb).ingest_paths([docs])
    assert not report.failures
    [record] = kb.registry.list()
    assert record.filename in ("again.md", "zebras.md") and record.status == "INDEXED"
