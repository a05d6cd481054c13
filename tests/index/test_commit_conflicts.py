"""A LanceDB commit that meets a concurrent one (Lance's "Retryable commit conflict") is retried on the latest version
with backoff; one that keeps meeting them ends as HomeBusyError — the CLI's error message, not a traceback —
with nothing committed. The conflict is raised where Lance raises it, from LanceDB's merge_insert."""

from __future__ import annotations

import time

import numpy as np
import pytest
from lancedb.merge import LanceMergeInsertBuilder
from typer.testing import CliRunner

from citewise.cli import app
from citewise.errors import HomeBusyError
from citewise.index.lancedb_store import CONFLICT_ATTEMPTS, LanceStore
from citewise.types import Chunk

CONFLICT = (
    "lance error: Retryable commit conflict for version 3: This Merge transaction was preempted by concurrent "
    "transaction Merge at version 3. Please retry."
)


def _chunk(doc: str, index: int = 0) -> Chunk:
    return Chunk(chunk_id=f"{doc}-{index}", doc_id=doc, chunk_index=index, text=f"{doc} passage", filename=f"{doc}.md")


def _vectors(count: int) -> np.ndarray:
    return np.full((count, 4), 0.5, dtype=np.float32)


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The backoff's sleeps, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


@pytest.fixture
def conflicts(monkeypatch):
    """Make LanceDB's merge_insert lose its commit race `times` times (None: every time); returns the attempts."""
    attempts: list[int] = []
    real = LanceMergeInsertBuilder.execute

    def arrange(times: int | None) -> list[int]:
        def execute(self, *args, **kwargs):
            attempts.append(1)
            if times is None or len(attempts) <= times:
                raise RuntimeError(CONFLICT)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(LanceMergeInsertBuilder, "execute", execute)
        return attempts

    return arrange


def test_a_commit_that_lost_the_race_once_is_retried_and_lands(tmp_path, conflicts, waits):
    store = LanceStore(tmp_path / "db")
    store.replace_documents(["a"], [_chunk("a")], _vectors(1))
    attempts = conflicts(1)
    store.replace_documents(["b"], [_chunk("b"), _chunk("b", 1)], _vectors(2))
    assert len(attempts) == 2 and len(waits) == 1
    assert sorted(c.chunk_id for c in store.chunks()) == ["a-0", "b-0", "b-1"]


def test_a_commit_that_always_loses_ends_as_home_busy_with_nothing_written(tmp_path, conflicts, waits):
    store = LanceStore(tmp_path / "db")
    store.replace_documents(["a"], [_chunk("a")], _vectors(1))
    version = store.version()
    attempts = conflicts(None)
    with pytest.raises(HomeBusyError, match="Another writer kept committing") as caught:
        store.replace_documents(["b"], [_chunk("b")], _vectors(1))
    assert len(attempts) == CONFLICT_ATTEMPTS and len(waits) == CONFLICT_ATTEMPTS - 1
    assert "Retryable commit conflict" in str(caught.value) and isinstance(caught.value.__cause__, RuntimeError)
    assert store.version() == version and [c.chunk_id for c in store.chunks()] == ["a-0"]


def test_the_cli_reports_a_lasting_conflict_as_an_error_not_a_traceback(tmp_path, conflicts, waits):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbour.md").write_text("# Harbour\n\nThe harbour opens at dawn.\n")
    conflicts(None)
    result = CliRunner().invoke(app, ["ingest", str(docs), "--home", str(tmp_path / "home"), "--json"])
    assert result.exit_code == 2, result.output
    assert " ".join(result.stderr.split()).startswith("Error: Another writer kept committing to the index")
    assert "Traceback" not in result.output
