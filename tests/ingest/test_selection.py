"""Searching only inside a selected text: chunked, embedded and ranked in memory, nothing stored."""

from __future__ import annotations

import pytest

from citewise.errors import ValidationError
from citewise.index.retriever import Retriever
from citewise.ingest.pipeline import Ingestor
from citewise.ingest.selection import search_selected
from citewise.types import MAX_SELECTED_TEXT_CHARS


@pytest.fixture
def indexed(kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "backups.md").write_text("# Backups\n\nSnapshots of the ledger are kept for 35 days.\n")
    Ingestor(kb).ingest_paths([docs])
    return kb


def test_selected_text_searches_only_that_text_and_stores_nothing(indexed):
    before = sorted(p.name for p in indexed.dir.rglob("*"))
    version = indexed.store.version()
    selected = (
        "Release notes.\n\nThe turbine module now spins at 4,200 rpm by default.\n\n"
        "The ledger snapshot retention changed to 60 days in this release."
    )
    result = search_selected(Retriever(indexed), "How long are ledger snapshots kept?", 5, text=selected)
    assert not result.empty
    assert all(c.filename == "selected text" and c.text in selected for c in result.chunks)
    assert "60 days" in result.chunks[0].text
    assert sorted(p.name for p in indexed.dir.rglob("*")) == before and indexed.store.version() == version


@pytest.mark.parametrize("text", ["  ", "x" * (MAX_SELECTED_TEXT_CHARS + 1), "bad \ud800 text"])
def test_an_empty_oversized_or_broken_selection_is_a_validation_error(indexed, text):
    with pytest.raises(ValidationError, match="selected_text"):
        search_selected(Retriever(indexed), "q", text=text)
