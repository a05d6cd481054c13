"""The index is read through `lance` and written through LanceDB (lancedb_store.py): every read must return exactly
what LanceDB's own query builder returns for the same table — the same rows in the same order, the same cosine
distances and BM25 scores to the bit — on the fixture corpus, on rows the indexes do not cover yet, and through a
vector index. The reference is LanceDB's query builder on the same files (`_LanceDBReads`, which also reads the
store held in memory)."""

from __future__ import annotations

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from tests.conftest import CORPUS

from citewise.index.lancedb_store import _CHUNK_COLUMNS, TABLE, LanceStore, _LanceDBReads, _LanceReads
from citewise.index.retriever import Retriever
from citewise.index.store import build_where
from citewise.ingest.pipeline import Ingestor
from citewise.types import Chunk

QUESTIONS = [
    "How do I install Orbitron on Linux?",
    "which port does the daemon listen on",
    "retry failed jobs with backoff",
    "ORBITRON_LEASE_TIMEOUT",
    "How long are jobs kept after they are acknowledged?",
    "orbitrn instal",  # misspelt: corrected words on both sides
    "the of and",  # stop words only: nothing to match
    "What changed in version 3.2?",
    "dead letter queue",
    "lease",
]
PRIVATE = "# Payroll\n\nThe payroll export for Orbitron staff runs on the first Monday of each month.\n"


def _both(store: LanceStore, path) -> tuple[_LanceReads, _LanceDBReads]:
    ours = store._reads
    assert isinstance(ours, _LanceReads)
    return ours, _LanceDBReads(lancedb.connect(str(path)).open_table(TABLE))


def _assert_same(ours: pa.Table, theirs: pa.Table) -> None:
    assert ours.schema == theirs.schema
    assert ours.num_rows == theirs.num_rows
    assert ours.equals(theirs), (ours.to_pydict(), theirs.to_pydict())


def _assert_same_up_to_ties(ours: pa.Table, theirs: pa.Table, score: str) -> None:
    """The same scores in the same order and, for each score, the same rows; only the order among rows of equal score
    may differ, and at the cut-off score which of them made the list. Rows outside the indexes are merged with the
    indexed ones in parallel, and LanceDB itself returns such ties in a different order from one run to the next."""
    assert ours.column(score).to_pylist() == theirs.column(score).to_pylist()
    last = ours.column(score)[-1].as_py() if ours.num_rows else None

    def by_score(rows: pa.Table) -> dict[float, set[str]]:
        groups: dict[float, set[str]] = {}
        for chunk_id, value in zip(rows.column("chunk_id").to_pylist(), rows.column(score).to_pylist(), strict=True):
            if value != last:
                groups.setdefault(value, set()).add(chunk_id)
        return groups

    assert by_score(ours) == by_score(theirs)


WHERES = [
    None,
    build_where(None),
    build_where("alice"),
    build_where("alice", {"module": "guide"}),
    build_where(None, {"filename": ["getting-started.md", "changelog.txt"]}),
]


@pytest.fixture(scope="module")
def corpus_kb(tmp_path_factory, embedder):
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.settings import Settings

    home = tmp_path_factory.mktemp("lance-reads") / "home"
    kb = KnowledgeBase(Settings(home=home), embedder=embedder)
    Ingestor(kb).ingest_paths([CORPUS])
    private = home.parent / "private"
    private.mkdir()
    (private / "payroll.md").write_text(PRIVATE)
    Ingestor(kb, owner="alice").ingest_paths([private])
    return kb


def test_searches_match_lancedb_on_the_fixture_corpus(corpus_kb):
    store = corpus_kb.store
    ours, theirs = _both(store, corpus_kb.dir / "lancedb")
    assert (ours.version, ours.count(), ours.indexed_columns()) == (
        theirs.version,
        theirs.count(),
        theirs.indexed_columns(),
    )
    retriever = Retriever(corpus_kb)
    matched = 0
    for question in QUESTIONS:
        prepared = retriever.prepare(question, "alice")
        vector = corpus_kb.embed_query(prepared.corrected)
        for where in WHERES:
            for limit in (5, 30):
                _assert_same(ours.nearest(vector, limit, where, None), theirs.nearest(vector, limit, where, None))
                for columns in (["chunk_id", "_score"], ["chunk_id", "_score", "vector"]):
                    found = ours.match(prepared.lexical, limit, where, columns)
                    _assert_same(found, theirs.match(prepared.lexical, limit, where, columns))
                    matched += found.num_rows
    assert matched > 100  # the full-text side found plenty to compare


def test_lookups_and_scans_match_lancedb(corpus_kb):
    ours, theirs = _both(corpus_kb.store, corpus_kb.dir / "lancedb")
    wanted = sorted(ours.scan(["chunk_id"]).column("chunk_id").to_pylist())[::3]
    for where in WHERES:
        rows = theirs.scan(_CHUNK_COLUMNS, where)
        _assert_same(ours.scan(_CHUNK_COLUMNS, where).sort_by("chunk_id"), rows.sort_by("chunk_id"))
        expected = {row["chunk_id"]: Chunk(**row) for row in rows.to_pylist() if row["chunk_id"] in set(wanted)}
        assert corpus_kb.store.fetch(wanted, where) == expected
    _assert_same(
        ours.scan(["owner", "search_text"]).sort_by("search_text"),
        theirs.scan(["owner", "search_text"]).sort_by("search_text"),
    )


def test_a_store_in_memory_ranks_like_the_store_on_disk(corpus_kb):
    """The selected-text search's scratch store is read through LanceDB: the same rows, the same ranking."""
    disk = corpus_kb.store
    chunks, vectors, sentences = [], [], []
    for part, part_vectors, part_sentences in disk.export():
        chunks += part
        vectors.append(part_vectors)
        sentences += part_sentences
    assert all(matrix is not None for matrix in sentences)  # the ingest pooled them: ranking uses them
    memory = LanceStore.ephemeral()
    memory.replace_documents(sorted({c.doc_id for c in chunks}), chunks, np.vstack(vectors), sentences)
    memory.optimize()
    retriever = Retriever(corpus_kb)
    for question in QUESTIONS:
        prepared = retriever.prepare(question)
        vector = corpus_kb.embed_query(prepared.corrected)
        where = build_where(None)
        assert _hits(memory.dense(vector, 20, where)) == _hits(disk.dense(vector, 20, where))
        assert _hits(memory.lexical(prepared.lexical, 20, where)) == _hits(disk.lexical(prepared.lexical, 20, where))


def _hits(hits) -> list[tuple[str, float | None, float | None]]:
    return [(h.chunk_id, h.dense, h.lexical) for h in hits]


def _synthetic(count: int, dim: int, seed: int, prefix: str = "c") -> tuple[list[Chunk], np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    words = ["harbour", "lantern", "ferry", "tide", "beacon", "anchor", "gull", "pier"]
    chunks = [
        Chunk(
            chunk_id=f"{prefix}{i:05d}",
            doc_id=f"{prefix}-d{i // 10:04d}",
            chunk_index=i % 10,
            text=" ".join(words[(i * k) % len(words)] for k in range(1, 2 + i % 7)) + f" passage {i}",
            filename=f"{prefix}{i // 10}.md",
            owner="public" if i % 4 else "alice",
        )
        for i in range(count)
    ]
    return chunks, vectors


def _put(store: LanceStore, chunks: list[Chunk], vectors: np.ndarray) -> None:
    store.replace_documents(sorted({c.doc_id for c in chunks}), chunks, vectors)


def test_rows_the_indexes_do_not_cover_yet_are_searched_alike(tmp_path):
    """After an optimize, new rows are searched flat beside the indexed ones, by both readers alike (up to the order
    of equal BM25 scores, which varies from run to run for LanceDB too)."""
    store = LanceStore(tmp_path / "db")
    chunks, vectors = _synthetic(300, 16, seed=1)
    _put(store, chunks, vectors)
    store.optimize()
    more, more_vectors = _synthetic(120, 16, seed=2, prefix="n")
    _put(store, more, more_vectors)  # not optimised: outside the FTS and scalar indexes
    ours, theirs = _both(store, tmp_path / "db")
    assert ours.version == theirs.version
    for i, text in enumerate(["harbour lantern", "tide passage 7", "gull", "anchor beacon pier ferry"]):
        for where in (None, build_where(None), build_where("alice")):
            vector = more_vectors[i * 13]
            _assert_same(ours.nearest(vector, 25, where, None), theirs.nearest(vector, 25, where, None))
            found = ours.match(text, 25, where, ["chunk_id", "_score"])
            _assert_same_up_to_ties(found, theirs.match(text, 25, where, ["chunk_id", "_score"]), "_score")


def test_searches_through_a_vector_index_match_lancedb(tmp_path):
    """Past ann_index_threshold the vector index answers, re-ranked by exact distance (refine_factor); with more IVF
    partitions than a query probes, both readers probe the same 20, filtered or not."""
    from lancedb.index import IvfHnswSq

    store = LanceStore(tmp_path / "db", ann_index_threshold=1000)
    chunks, vectors = _synthetic(3000, 32, seed=3)
    _put(store, chunks, vectors)
    store.optimize()
    assert store._has_ann
    assert store.dense(vectors[42], 1, None)[0].chunk_id == "c00042"
    ours, theirs = _both(store, tmp_path / "db")
    for i in range(0, 3000, 197):
        for where in (None, build_where("alice")):
            _assert_same(ours.nearest(vectors[i], 10, where, 5), theirs.nearest(vectors[i], 10, where, 5))

    table = lancedb.connect(str(tmp_path / "db")).open_table(TABLE)
    table.create_index("vector", config=IvfHnswSq(distance_type="cosine", num_partitions=48), replace=True)
    store.refresh()
    ours, theirs = _both(store, tmp_path / "db")
    queries = np.random.default_rng(4).normal(size=(12, 32)).astype(np.float32)
    rare = build_where(None, {"filename": [f"c{i}.md" for i in range(0, 300, 29)]})  # 110 rows of 3000
    for query in queries:
        for refine_factor in (None, 5):
            for where in (None, build_where("alice"), rare):
                _assert_same(
                    ours.nearest(query, 40, where, refine_factor), theirs.nearest(query, 40, where, refine_factor)
                )


def test_a_quoted_query_is_searched_as_its_words(corpus_kb):
    """LanceDB's binding reads a query in double quotes as a phrase, which an index without word positions refuses
    ("… phrase queries"): a user who quotes their question would get an error. Quotes are searched as words."""
    store = corpus_kb.store
    words = [(h.chunk_id, h.lexical) for h in store.lexical("install orbitron", 5, None)]
    assert words
    assert [(h.chunk_id, h.lexical) for h in store.lexical('"install orbitron"', 5, None)] == words
    assert [(h.chunk_id, h.lexical) for h in store.lexical('how do I "install orbitron"', 5, None)] == [
        (h.chunk_id, h.lexical) for h in store.lexical("how do I install orbitron", 5, None)
    ]


def test_equal_bm25_scores_come_back_in_chunk_id_order(tmp_path):
    """Rows written since the last optimize are scored flat, and LanceDB returns equal scores among them in a
    different order from run to run; ranks feed fusion, so the store breaks ties by chunk id."""
    store = LanceStore(tmp_path / "db")
    chunks, vectors = _synthetic(60, 16, seed=5)
    _put(store, chunks, vectors)
    store.optimize()
    same = [
        c.model_copy(update={"chunk_id": f"tie-{i:02d}", "doc_id": f"tie-{i:02d}"}) for i, c in enumerate(chunks[:8])
    ]
    same = [c.model_copy(update={"text": "identical lantern harbour words"}) for c in same]
    _put(store, same, vectors[:8])
    hits = store.lexical("lantern harbour", 20, None)
    keys = [(-h.lexical, h.chunk_id) for h in hits]
    assert keys == sorted(keys)
