"""The storage contract (`citewise.index.store.VectorStore`), run unchanged against every engine: LanceDB on disk
and PostgreSQL with pgvector (a real server the test session starts). Synthetic unit vectors keep the geometry
exact; the last tests rank a real corpus with the real model through the retriever on both engines.
"""

from __future__ import annotations

import numpy as np
import pytest

from citewise.index.lancedb_store import LanceStore
from citewise.index.postgres_store import PostgresStore
from citewise.index.retriever import Retriever
from citewise.index.store import build_where, search_text
from citewise.ingest.pipeline import Ingestor
from citewise.state.database import Database
from citewise.types import Chunk

DIM = 8
ENGINES = ["lancedb", "postgres"]


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


@pytest.fixture
def open_store(engine, tmp_path, request):
    """A function that opens a handle on one store (called twice: a second process's view of the same data)."""
    if engine == "lancedb":
        yield lambda: LanceStore(tmp_path / "lancedb")
        return
    url = request.getfixturevalue("pg_url")
    databases = []

    def open_pg():
        db = Database(url)
        databases.append(db)
        return PostgresStore(db)

    yield open_pg
    for db in databases:
        db.close()


@pytest.fixture
def store(open_store):
    return open_store()


def unit(seed: int | str) -> np.ndarray:
    rng = np.random.default_rng(abs(hash(str(seed))) % 2**32 if isinstance(seed, str) else seed)
    v = rng.normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def chunk(doc: str, index: int, text: str, *, owner: str = "public", **meta) -> Chunk:
    return Chunk(
        chunk_id=f"{doc}-{index}",
        doc_id=doc,
        chunk_index=index,
        text=text,
        filename=meta.pop("filename", f"{doc}.md"),
        owner=owner,
        content_hash=f"h-{doc}-{index}-{len(text)}",
        chapter=meta.pop("chapter", "Guide > Setup"),
        title=meta.pop("title", doc.title()),
        **meta,
    )


def vectors_for(chunks: list[Chunk]) -> np.ndarray:
    return np.vstack([unit(c.chunk_id) for c in chunks])


def put(store, chunks: list[Chunk], doc_ids: list[str] | None = None) -> None:
    store.replace_documents(doc_ids or sorted({c.doc_id for c in chunks}), chunks, vectors_for(chunks))


BASE = [
    chunk("alpha", 0, "Snapshots are taken nightly and kept for 35 days.", module="ops", page=None),
    chunk("alpha", 1, "Restore a snapshot with ledgerctl restore.", module="ops", source_url="https://x/alpha"),
    chunk("beta", 0, "Rotating the API token happens in the console.", module="dev", modified="2024-05-01"),
    chunk("gamma", 0, "Private salary bands for staff engineers.", owner="alice", module="hr", page=3),
]


def test_an_empty_store_answers_every_read(store):
    assert store.count() == 0
    assert store.dense(unit(1), 5, build_where(None)) == []
    assert store.lexical("snapshot", 5, build_where(None)) == []
    assert store.fetch(["nope"]) == {}
    assert store.chunks() == [] and store.chunk_rows() == [] and list(store.indexed_texts()) == []
    assert store.vectors_by_hash(["alpha"]) == {}


def test_replace_then_fetch_returns_every_field(store):
    put(store, BASE)
    assert store.count() == 4
    fetched = store.fetch([c.chunk_id for c in BASE] + ["missing"])
    assert set(fetched) == {c.chunk_id for c in BASE}  # ids no longer present are simply missing
    for original in BASE:
        assert fetched[original.chunk_id] == original
    assert store.chunks() == sorted(BASE, key=lambda c: (c.doc_id, c.chunk_index))
    assert [c.chunk_id for c in store.chunks(build_where("alice", {"module": "hr"}))] == ["gamma-0"]
    assert sorted(store.chunk_rows()) == sorted((c.chunk_id, c.doc_id) for c in BASE)
    assert sorted(store.indexed_texts()) == sorted((c.owner, search_text(c)) for c in BASE)


def test_sections_are_each_section_once_in_document_order_for_the_owner(store):
    assert store.sections() == []
    chunks = [
        chunk("beta", 0, "Intro.", chapter="Guide"),
        chunk("beta", 1, "Step one.", chapter="Guide > Setup"),
        chunk("beta", 2, "Step two.", chapter="Guide > Setup"),  # the same section again: listed once
        chunk("beta", 3, "Back to the top.", chapter="Guide"),
        chunk("alpha", 0, "No heading at all.", chapter=""),
        chunk("gamma", 0, "Alice's own.", owner="alice", chapter="Vault > Unsealing"),
    ]
    put(store, chunks)
    assert store.sections(build_where(None)) == [("alpha", ""), ("beta", "Guide"), ("beta", "Guide > Setup")]
    assert ("gamma", "Vault > Unsealing") in store.sections(build_where("alice"))
    assert len(store.sections()) == 4


def test_replacing_a_document_drops_its_other_chunks_in_one_commit(open_store):
    store = open_store()
    put(store, BASE)
    before = store.version()
    shorter = [chunk("alpha", 0, "Snapshots are kept for 40 days now.")]
    put(store, shorter, ["alpha"])
    assert store.version() > before
    assert [c.chunk_id for c in store.chunks(build_where(None, {"doc_id": "alpha"}))] == ["alpha-0"]
    assert store.fetch(["alpha-0"])["alpha-0"].text == shorter[0].text
    other = open_store()  # another process's handle sees the commit
    other.refresh()
    assert other.version() == store.version() and other.count() == 3
    vectors = other.vectors_by_hash(["alpha"])
    assert set(vectors) == {shorter[0].content_hash}
    vector, sentences = vectors[shorter[0].content_hash]
    np.testing.assert_allclose(vector, unit("alpha-0"), rtol=1e-6)
    assert sentences is None  # written without sentence vectors
    assert other.vectors_by_hash(["alpha"], hashes=["other"]) == {}


def test_a_big_document_is_written_in_batches_and_finished_by_the_last(store):
    old = [chunk("big", i, f"old part {i}") for i in range(6)]
    put(store, old)
    first = [chunk("big", i, f"new part {i}") for i in range(2)]
    store.write_chunks(first, vectors_for(first), finished={})
    assert store.count() == 6  # not finished: the old tail stays until the last batch
    last = [chunk("big", i, f"new part {i}") for i in range(2, 4)]
    store.write_chunks(last, vectors_for(last), finished={"big": 4})
    assert [c.text for c in store.chunks()] == [f"new part {i}" for i in range(4)]


def test_delete_documents(store):
    put(store, BASE)
    version = store.version()
    store.delete_documents(["alpha", "unknown"])
    assert store.version() > version
    assert {c.doc_id for c in store.chunks()} == {"beta", "gamma"}
    assert store.lexical("snapshots", 5, build_where("alice")) == []
    store.delete_documents([])


def test_dense_is_cosine_best_first_and_prefiltered(store):
    put(store, BASE)
    hits = store.dense(unit("beta-0"), 10, build_where(None))
    assert hits[0].chunk_id == "beta-0" and hits[0].dense == pytest.approx(1.0, abs=1e-5)
    assert [h.dense for h in hits] == sorted((h.dense for h in hits), reverse=True)
    assert "gamma-0" not in {h.chunk_id for h in hits}  # alice's chunk: not public
    # Two-phase: a hit carries ids and scores only.
    assert all(h.vector is None and h.lexical is None for h in hits)
    mine = store.dense(unit("gamma-0"), 2, build_where("alice"))
    assert mine[0].chunk_id == "gamma-0" and len(mine) == 2


def test_lexical_ranks_by_bm25_with_stemming_and_prefilter(store):
    put(store, BASE)
    store.optimize()
    hits = store.lexical("rotate token", 5, build_where(None))
    assert hits[0].chunk_id == "beta-0" and hits[0].lexical > 0  # "rotate" meets "Rotating" (stemmed)
    assert [h.lexical for h in hits] == sorted((h.lexical for h in hits), reverse=True)
    assert store.lexical("salary bands", 5, build_where(None)) == []
    assert store.lexical("salary bands", 5, build_where("bob")) == []
    mine = store.lexical("salary bands", 5, build_where("alice"), with_vectors=True)
    assert [h.chunk_id for h in mine] == ["gamma-0"]
    np.testing.assert_allclose(mine[0].vector, unit("gamma-0"), rtol=1e-6)
    assert store.lexical("   ", 5, None) == []
    # A rarer term weighs more than a common one (IDF): "restore" is in one chunk, "snapshot" in two.
    assert store.lexical("restore snapshot", 5, build_where(None))[0].chunk_id == "alpha-1"


# Both engines split, fold, stem and drop words the same way, so BM25 sees the same lengths and the same terms.
TOKENS = {
    "t1": "kestrel falcon kestrel",
    "t2": "kestrel falcon running runs",
    "t3": "kestrel eagle hawk owl v2 123 abc123 1.5",
    "t4": "sparrow robin wren finch lark",
    "t5": "café kestrel naïve",
    "t6": "Kestrels' wings: the 2nd-fastest; don't it's doesn't haven't you've e-mail",
}


def test_both_engines_score_bm25_identically(tmp_path, pg_url):
    """Accents folded ("cafe" finds "café"), numbers and letter-digit words kept, NLTK's stop words including the
    fragments of "doesn't" dropped after stemming (so lengths match), and a repeated query word counted twice."""
    chunks = [chunk(k, 0, v, title="", chapter="") for k, v in TOKENS.items()]
    db = Database(pg_url)
    engines = [LanceStore(tmp_path / "lancedb"), PostgresStore(db)]
    for store in engines:
        put(store, chunks)
        store.optimize()
    queries = ["kestrel", "kestrel kestrel", "run", "v2", "123", "cafe", "naïve", "2nd", "fastest", "mail", "wing"]
    for query in queries:
        lance, postgres = (store.lexical(query, 10, build_where(None)) for store in engines)
        assert [h.chunk_id for h in postgres] == [h.chunk_id for h in lance], query
        assert [h.lexical for h in postgres] == pytest.approx([h.lexical for h in lance], rel=1e-5), query
    assert engines[1].lexical("kestrel kestrel", 1, None)[0].lexical == pytest.approx(
        2 * engines[1].lexical("kestrel", 1, None)[0].lexical
    )
    for stop_word in ("doesn", "haven", "ve", "don"):
        assert all(store.lexical(stop_word, 10, None) == [] for store in engines), stop_word
    db.close()


def test_a_selective_filter_still_fills_the_candidate_list(store):
    """30 of alice's chunks lie nearer the query than any public one: the prefilter must run inside the search,
    not after it, or the public list comes back short."""
    query = unit("q")
    noise = np.random.default_rng(7)
    crowd = [chunk(f"a{i}", 0, f"alice note {i}", owner="alice") for i in range(30)]
    public = [chunk(f"p{i}", 0, f"public note {i}") for i in range(6)]
    vectors = []
    for c in crowd + public:
        near = 0.05 if c.owner == "alice" else 1.0
        v = query + near * noise.normal(size=DIM).astype(np.float32)
        vectors.append(v / np.linalg.norm(v))
    store.replace_documents([c.doc_id for c in crowd + public], crowd + public, np.vstack(vectors))
    store.optimize()
    hits = store.dense(query, 5, build_where(None))
    assert len(hits) == 5 and all(h.chunk_id.startswith("p") for h in hits)
    lexical = store.lexical("note", 5, build_where(None))
    assert len(lexical) == 5 and all(h.chunk_id.startswith("p") for h in lexical)


def test_filter_values_are_escaped_inside_the_engine(store):
    tricky = chunk("quote", 0, "An odd file name.", filename="it's; DROP TABLE chunks.md")
    # A percent sign (a URL-encoded source_url, "100% uptime.md") is no placeholder in a query with parameters.
    percent = chunk("percent", 0, "Uptime figures for the odd file.", filename="100% uptime %s %(q)s.md")
    put(store, [*BASE, tricky, percent])
    where = build_where(None, {"filename": "it's; DROP TABLE chunks.md"})
    assert [c.chunk_id for c in store.chunks(where)] == ["quote-0"]
    assert [h.chunk_id for h in store.dense(unit("quote-0"), 5, where)] == ["quote-0"]
    where = build_where(None, {"filename": "100% uptime %s %(q)s.md"})
    assert [c.chunk_id for c in store.chunks(where)] == ["percent-0"]
    assert [h.chunk_id for h in store.dense(unit("percent-0"), 5, where)] == ["percent-0"]
    assert [h.chunk_id for h in store.lexical("uptime figures", 5, where)] == ["percent-0"]
    assert list(store.fetch(["percent-0", "quote-0"], where)) == ["percent-0"]
    assert store.count() == 6


def test_versions_move_with_writes_only(store):
    v0 = store.version()
    put(store, BASE)
    v1 = store.version()
    store.dense(unit(1), 3, None)
    store.lexical("snapshot", 3, None)
    store.fetch(["alpha-0"])
    store.optimize()
    assert v1 > v0 and store.version() >= v1
    v2 = store.version()
    put(store, [chunk("delta", 0, "More text.")])
    assert store.version() > v2


def test_dedupe_and_optimize_leave_a_clean_store_alone(store):
    put(store, BASE)
    assert store.dedupe() == 0
    store.optimize()
    store.optimize()
    assert store.count() == 4 and store.dense(unit("alpha-1"), 1, None)[0].chunk_id == "alpha-1"


# -- the same corpus, the real model, through the retriever ----------------------------------------------------------
QUESTIONS = [
    "How do I rotate the API key?",
    "which port does the server listen on",
    "How do I remove deleted files from the index?",
]


def test_both_engines_rank_a_real_corpus_the_same_way(settings, pg_settings, make_kb, corpus):
    """Dense rankings are the same list with the same cosines on both engines (exact search vs HNSW at this size);
    the hybrid and lexical top hits are the same passage."""
    rankings = []
    for engine_settings in (settings, pg_settings):
        kb = make_kb(engine_settings)
        Ingestor(kb).ingest_paths([corpus])
        retriever = Retriever(kb)
        rankings.append(
            {
                q: (
                    [(c.chunk_id, c.dense_score) for c in retriever.rank(q, 10, mode="dense")],
                    retriever.rank(q, 3)[0].chunk_id,
                    retriever.rank(q, 3, mode="lexical")[0].chunk_id,
                )
                for q in QUESTIONS
            }
        )
    lance, postgres = rankings
    for q in QUESTIONS:
        assert [c for c, _ in postgres[q][0]] == [c for c, _ in lance[q][0]], q
        assert [s for _, s in postgres[q][0]] == pytest.approx([s for _, s in lance[q][0]], abs=1e-4)
        assert postgres[q][1:] == lance[q][1:], q


# -- PostgreSQL's own indexes ------------------------------------------------------------------------------------------
def test_postgres_builds_and_uses_its_hnsw_and_gin_indexes(pg_url):
    """The first write types the vector column and builds HNSW (cosine); searches go through it and the GIN index
    (pgvector builds of some wheels crashed only when the index was built, so a query alone proves nothing)."""
    db = Database(pg_url)
    store = PostgresStore(db)
    docs = [chunk(f"d{i}", 0, f"note number {i} about kestrel{i % 7}") for i in range(400)]
    put(store, docs)
    store.optimize()
    with db.transaction() as conn:
        indexes = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'chunks'").fetchall())
        assert "USING hnsw (embedding vector_cosine_ops)" in indexes["chunks_embedding_hnsw"]
        assert "USING gin (tsv)" in indexes["chunks_tsv"]
        typmod = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
        ).fetchone()[0]
        assert typmod == DIM
        # At 400 rows a scan and a sort are cheaper than either index; the point here is that the indexes work.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT chunk_id FROM chunks WHERE owner IN ('public') ORDER BY embedding <=> %b LIMIT 5",
                (unit("d3-0"),),
            )
        )
        assert "chunks_embedding_hnsw" in plan
        lexical_plan = "\n".join(
            r[0] for r in conn.execute("EXPLAIN SELECT chunk_id FROM chunks WHERE tsv @@ 'kestrel3'::tsquery")
        )
        assert "chunks_tsv" in lexical_plan
    assert store.dense(unit("d3-0"), 5, build_where(None))[0].chunk_id == "d3-0"
    assert {h.chunk_id for h in store.lexical("kestrel3", 100, build_where(None))} == {
        f"d{i}-0" for i in range(400) if i % 7 == 3
    }
    db.close()
