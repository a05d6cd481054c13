"""Sentence vectors (`store.dense_scores`): where each sentence lies in what the model reads, a vector per sentence
from the chunk's own model run, both engines storing and ranking by them, and indexes built before them (LanceDB
and PostgreSQL) read as they were and brought up to date by the next ingest. Hand-made unit vectors in 4
dimensions keep the store tests' geometry exact; the rest runs the real model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import lancedb
import numpy as np
import psycopg
import pytest

from citewise.errors import ConfigError
from citewise.index.embeddings import BUNDLED_MODEL, OnnxEmbedder
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.lancedb_store import SENTENCES, TABLE, LanceStore
from citewise.index.postgres_store import PostgresStore
from citewise.index.retriever import Retriever
from citewise.index.store import (
    build_where,
    dense_scores,
    pack_sentences,
    search_text,
    sentence_spans,
    unpack_sentences,
)
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.state import database as database_module
from citewise.state.database import Database
from citewise.state.migrations import LATEST, MIGRATIONS
from citewise.types import Chunk, DocStatus

DIM = 4
E0, E1, E2, E3 = np.eye(DIM, dtype=np.float32)
# float16 keeps 11 significant bits: a stored sentence's cosine moves by well under this.
HALF = 2e-3


def at(cosine: float, away: np.ndarray) -> np.ndarray:
    """A unit vector whose cosine to E0 is `cosine`, leaning towards `away` (orthogonal to E0)."""
    return (cosine * E0 + math.sqrt(1 - cosine**2) * away).astype(np.float32)


def chunk(doc: str, text: str, **meta) -> Chunk:
    return Chunk(
        chunk_id=f"{doc}-0",
        doc_id=doc,
        chunk_index=0,
        text=text,
        filename=f"{doc}.md",
        owner="public",
        content_hash=f"h-{doc}",
        **meta,
    )


@pytest.fixture(params=["lancedb", "postgres"])
def store(request, tmp_path):
    if request.param == "lancedb":
        yield LanceStore(tmp_path / "lancedb")
        return
    db = Database(request.getfixturevalue("pg_url"))
    yield PostgresStore(db)
    db.close()


def test_sentence_spans_point_at_each_sentence_in_what_the_model_reads():
    c = chunk(
        "port",
        "Short. The server listens on port 8000 by default. Set `--port` to change it.",
        title="Serving",
        chapter="Guide > Serving > Ports",
    )
    text = search_text(c)
    spans = sentence_spans(c)
    assert text[: spans.headings_end] == "Serving\nGuide > Serving > Ports\nPorts\n"
    assert [text[a:b] for a, b in spans.sentences] == [
        "The server listens on port 8000 by default.",
        "Set `--port` to change it.",
    ]  # "Short." has too few words to be scored alone
    bare = chunk("bare", "No headings at all here.")
    assert sentence_spans(bare).headings_end == 0
    assert [search_text(bare)[a:b] for a, b in sentence_spans(bare).sentences] == ["No headings at all here."]


def test_each_sentence_gets_a_vector_from_the_chunks_own_model_run(embedder):
    """The chunk vectors are exactly `embed_documents`'; each sentence's vector is pooled from the same run, and
    the sentence that answers is the one nearest the question, well ahead of the feature list under it."""
    answer = chunk(
        "intro",
        "Orbitron is a lightweight job queue for Python services.\n\nFeatures:\n\n- retries with backoff\n"
        "- dead letter queues\n- cron schedules\n- rate limits\n- a web dashboard\n- Prometheus metrics\n"
        "- OpenTelemetry traces\n- Redis and PostgreSQL brokers",
        title="Introduction",
    )
    other = chunk("other", "Too short.")
    texts = [search_text(answer), search_text(other)]
    vectors, sentences = embedder.embed_with_sentences(texts, [sentence_spans(answer), sentence_spans(other)])
    np.testing.assert_allclose(vectors, embedder.embed_documents(texts), atol=1e-5)
    assert sentences[0].shape == (len(sentence_spans(answer).sentences), vectors.shape[1])
    assert sentences[1].shape == (0, vectors.shape[1])
    np.testing.assert_allclose(np.linalg.norm(sentences[0], axis=1), 1.0, atol=1e-5)
    cosines = sentences[0] @ embedder.embed_query("What is Orbitron?")
    assert len(cosines) >= 4 and cosines.argmax() == 0 and cosines[0] > max(cosines[1:]) + 0.05


def test_sentence_vectors_come_back_with_their_chunk(store):
    rng = np.random.default_rng(3)
    pooled = rng.normal(size=(3, DIM)).astype(np.float32)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    chunks = [
        chunk("pooled", "Kestrels hover over the field."),
        chunk("unpooled", "Kestrels nest in old towers."),
        chunk("wordless", "Kestrels."),
    ]
    vectors = np.vstack([E0, E1, E2])
    with pytest.raises(ValueError, match="per chunk"):
        store.replace_documents([c.doc_id for c in chunks], chunks, vectors, [pooled])
    empty = np.zeros((0, DIM), dtype=np.float32)  # computed, but the chunk has no sentence long enough
    store.replace_documents([c.doc_id for c in chunks], chunks, vectors, [pooled, None, empty])

    stored = store.vectors_by_hash(["pooled", "unpooled", "wordless"])
    vector, sentences = stored["h-pooled"]
    np.testing.assert_array_equal(vector, E0)
    assert sentences.dtype == np.float32 and sentences.shape == (3, DIM)
    np.testing.assert_allclose(sentences, pooled, atol=HALF)
    assert stored["h-unpooled"][1] is None
    assert stored["h-wordless"][1].shape == (0, DIM)
    assert store.vectors_by_hash(["pooled"], hashes=["h-pooled"])["h-pooled"][1].shape == (3, DIM)

    store.optimize()  # LanceDB's full-text search needs its index made once
    hits = {h.chunk_id: h for h in store.lexical("kestrels", 5, build_where(None), with_vectors=True)}
    np.testing.assert_allclose(unpack_sentences(hits["pooled-0"].sentences, DIM), pooled, atol=HALF)
    assert hits["unpooled-0"].sentences is None
    assert store.lexical("kestrels", 5, build_where(None))[0].sentences is None  # asked for with the vectors only


def test_dense_ranks_a_chunk_by_its_best_sentence_too(store):
    """The query is E0. `listing` is the nearest chunk (cosine 0.9) but none of its sentences says what is asked
    (0.7): 0.8. `answer` is a little further (0.85) with one sentence that is the answer (1.0): 0.925. `old`, from
    before sentence vectors, keeps its cosine: 0.88."""
    chunks = [
        chunk("listing", "Feature one. Feature two."),
        chunk("answer", "The answer. A feature."),
        chunk("old", "x"),
    ]
    vectors = np.vstack([at(0.9, E1), at(0.85, E2), at(0.88, E3)])
    sentences = [np.vstack([at(0.7, E2), at(0.7, E3)]), np.vstack([E0, at(0.1, E1)]), None]
    store.replace_documents([c.doc_id for c in chunks], chunks, vectors, sentences)

    hits = store.dense(E0, 3, build_where(None))
    assert [h.chunk_id for h in hits] == ["answer-0", "old-0", "listing-0"]
    assert [h.dense for h in hits] == pytest.approx([0.925, 0.88, 0.8], abs=HALF)
    # Ranking by score, not by cosine: a filter that leaves only the two keeps their order.
    where = build_where(None, {"doc_id": ["listing", "answer"]})
    assert [h.chunk_id for h in store.dense(E0, 2, where)] == ["answer-0", "listing-0"]


def test_a_database_from_before_sentence_vectors_upgrades_in_place(pg_url, monkeypatch):
    [added] = [m for m in MIGRATIONS if "sentence_vectors" in m.sql]
    monkeypatch.setattr(database_module, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version < added.version))
    Database(pg_url).upgrade()
    monkeypatch.undo()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a row as the previous Citewise wrote it
        conn.execute(
            "INSERT INTO chunks (chunk_id, doc_id, chunk_index, text, search_text, filename, owner, content_hash, "
            "embedding) VALUES ('old-0', 'old', 0, 'Kept.', 'Kept.', 'old.md', 'public', 'h-old', '[1,0,0,0]')"
        )

    db = Database(pg_url)
    assert db.check_schema() == LATEST
    store = PostgresStore(db)
    [(vector, sentences)] = store.vectors_by_hash(["old"]).values()
    np.testing.assert_array_equal(vector, E0)
    assert sentences is None
    assert [(h.chunk_id, h.dense) for h in store.dense(E0, 5, build_where(None))] == [("old-0", pytest.approx(1.0))]

    new = chunk("new", "Written after the upgrade.")
    store.replace_documents(["new"], [new], at(0.8, E1)[None], [E0[None]])
    assert store.vectors_by_hash(["new"])["h-new"][1].shape == (1, DIM)
    assert [h.chunk_id for h in store.dense(E0, 5, build_where(None))] == ["old-0", "new-0"]
    db.close()


def test_a_lancedb_index_from_before_sentence_vectors_is_read_then_brought_up_to_date(
    settings, make_kb, corpus, monkeypatch
):
    monkeypatch.setattr(Settings, "ingest_fingerprint", lambda self: "before sentence vectors")
    first = Ingestor(make_kb(settings)).ingest_paths([corpus])
    monkeypatch.undo()
    lancedb.connect(settings.index_dir / "lancedb").open_table(TABLE).drop_columns([SENTENCES])

    kb = make_kb(settings)
    doc_ids = [r.doc_id for r in kb.registry.list()]
    stored = kb.store.vectors_by_hash(doc_ids)
    assert stored and all(sentences is None for _, sentences in stored.values())
    # Searched as before: each chunk by its own cosine.
    question = "which port does the daemon listen on"
    [top] = Retriever(kb).search(question, top_k=1, mode="dense").chunks
    query = kb.embed_query(question)
    assert top.dense_score == pytest.approx(float(stored[top.content_hash][0] @ query), abs=1e-5)

    report = Ingestor(kb).ingest_paths([corpus])
    assert report.unchanged == 0 and report.chunks_embedded == report.chunks_total == first.chunks_total
    assert all(sentences is not None for _, sentences in kb.store.vectors_by_hash(doc_ids).values())
    assert Ingestor(make_kb(settings)).ingest_paths([corpus]).chunks_embedded == 0


def test_a_changed_file_keeps_the_sentence_vectors_of_its_unchanged_chunks(kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    page = "# Alpha\n\nThe alpha service listens on port {}.\n\n## Limits\n\nAlpha allows 40 jobs per worker.\n"
    (docs / "a.md").write_text(page.format(7301))
    Ingestor(kb).ingest_paths([docs])
    [doc_id] = [r.doc_id for r in kb.registry.list()]
    before = kb.store.vectors_by_hash([doc_id])

    (docs / "a.md").write_text(page.format(9911))
    report = Ingestor(kb).ingest_paths([docs])
    assert (report.chunks_embedded, report.chunks_reused) == (1, 1)
    after = kb.store.vectors_by_hash([doc_id])
    [kept] = set(before) & set(after)
    np.testing.assert_array_equal(after[kept][1], before[kept][1])
    assert all(sentences is not None and len(sentences) for _, sentences in after.values())


def test_only_a_mean_pooling_model_makes_sentence_vectors(tmp_path, settings, make_kb):
    """A span has no CLS token of its own: a CLS-pooling model makes none, and says so before it is loaded, so the
    ingest keeps reusing its stored vectors (a stored vector without sentences is re-embedded only when the
    embedder would make them)."""

    def model_folder(name: str, *, cls_pooling: bool) -> Path:  # a sentence-transformers config without weights
        folder = tmp_path / name
        (folder / "1_Pooling").mkdir(parents=True)
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ]
        (folder / "modules.json").write_text(json.dumps(modules))
        pooling = {"pooling_mode_cls_token": cls_pooling, "pooling_mode_mean_tokens": not cls_pooling}
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256}))
        return folder

    cls = OnnxEmbedder("local:cls", str(model_folder("cls", cls_pooling=True)), tmp_path / "models", quantize=False)
    assert not cls.makes_sentences and cls.load_count == 0
    mean = OnnxEmbedder("local:mean", str(model_folder("mean", cls_pooling=False)), tmp_path / "models", quantize=True)
    assert mean.makes_sentences and mean.load_count == 0
    shipped = OnnxEmbedder("local:all-MiniLM-L6-v2", BUNDLED_MODEL, tmp_path / "models", quantize=True)
    assert shipped.makes_sentences and shipped.load_count == 0
    assert make_kb(settings).pools_sentences  # the bundled model, on the default backend


def test_sentence_vectors_can_be_turned_off_and_on_again(settings, make_kb, corpus):
    def stored(kb):
        return kb.store.vectors_by_hash([r.doc_id for r in kb.registry.list()]).values()

    off = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"sentence_vectors": False})})
    first = Ingestor(make_kb(off)).ingest_paths([corpus])
    assert all(sentences is None for _, sentences in stored(make_kb(off)))

    on = Ingestor(make_kb(settings)).ingest_paths([corpus])
    assert on.unchanged == 0 and on.chunks_embedded == first.chunks_total  # pooled only from a model run
    assert all(sentences is not None for _, sentences in stored(make_kb(settings)))

    again = Ingestor(make_kb(off)).ingest_paths([corpus])
    assert again.unchanged == 0 and again.chunks_embedded == 0  # the vectors are kept, the sentences dropped
    assert all(sentences is None for _, sentences in stored(make_kb(off)))


def test_many_chunks_are_scored_at_once_as_each_alone():
    rng = np.random.default_rng(7)
    query = rng.normal(size=DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    matrices = [rng.normal(size=(n, DIM)).astype(np.float32) for n in (3, 1, 0, 5)] + [None]
    cosines = [0.4, 0.1, 0.3, -0.2, 0.5]
    blobs = [pack_sentences(m) for m in matrices]
    # Each alone, by the definition: the mean of the cosine and the best sentence's; the cosine without sentences.
    stored = [unpack_sentences(b, DIM) for b in blobs]
    alone = [
        c if m is None or not len(m) else (c + float(np.max(m @ query))) / 2
        for c, m in zip(cosines, stored, strict=True)
    ]
    assert dense_scores(cosines, blobs, query) == pytest.approx(alone, abs=1e-6)
    assert dense_scores(cosines, [None] * 5, query) == cosines


def test_a_model_that_is_gone_stops_the_ingest_before_it_changes_anything(settings, make_kb, tmp_path):
    """Whether chunks get sentence vectors is read from the model's config. A model folder that was moved away
    stops the run with its error, as the embedding would; it never fails (and empties) the edited documents."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha service listens on port 7301.\n")
    Ingestor(make_kb(settings)).ingest_paths([docs])
    before = make_kb(settings).store.chunks(None)
    (docs / "a.md").write_text("# Alpha\n\nThe alpha service listens on port 9911.\n")

    moved = OnnxEmbedder(settings.embeddings, str(tmp_path / "moved-model"), tmp_path / "models", quantize=False)
    with pytest.raises(ConfigError, match="model folder on disk"):
        Ingestor(KnowledgeBase(settings, embedder=moved)).ingest_paths([docs])

    kb = make_kb(settings)
    assert kb.store.chunks(None) == before
    assert [r.status for r in kb.registry.list()] == [DocStatus.INDEXED]
