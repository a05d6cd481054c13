"""Settings come from arguments, CITEWISE_* env vars (nested with __) and citewise.toml, in that order."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from citewise.settings import Settings


def test_defaults():
    s = Settings(_env_file=None)
    assert s.home == Path(".citewise") and s.embeddings == "local:all-MiniLM-L6-v2"
    assert (s.ingest.chunk_size, s.retrieval.top_k, s.retrieval.mode) == (1000, 5, "hybrid")


def test_env_nested_and_toml(tmp_path, monkeypatch):
    toml = tmp_path / "citewise.toml"
    toml.write_text('home = "from-toml"\n[ingest]\nchunk_size = 700\n[retrieval]\nmin_score = 0.4\n')
    monkeypatch.setenv("CITEWISE_CONFIG", str(toml))
    monkeypatch.setenv("CITEWISE_RETRIEVAL__MIN_SCORE", "0.3")
    s = Settings()
    assert s.home == Path("from-toml") and s.ingest.chunk_size == 700
    assert s.retrieval.min_score == 0.3  # env beats the file
    assert Settings(home=tmp_path).home == tmp_path  # arguments beat both


@pytest.mark.parametrize(
    "kwargs",
    [
        {"embeddings": "no-provider"},
        {"ingest": {"chunk_size": 10}},
        {"ingest": {"chunk_size": 1000, "chunk_overlap": 600}},
        {"retrieval": {"top_k": 0}},
        {"retrieval": {"unknown": 1}},
        {"surprise": True},
    ],
)
def test_invalid_settings_are_rejected(kwargs):
    with pytest.raises(ValidationError):
        Settings(**kwargs)


def test_fingerprint_tracks_what_changes_chunks_or_vectors():
    base = Settings().ingest_fingerprint()
    assert Settings(ingest={"chunk_size": 800}).ingest_fingerprint() != base
    assert Settings(embeddings="local:/models/other").ingest_fingerprint() != base
    assert Settings(retrieval={"top_k": 3}).ingest_fingerprint() == base
