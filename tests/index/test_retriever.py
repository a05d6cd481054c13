"""Retrieval behaviour on a real index: modes, owner scoping, validation, the min-score gate, cache, selected text.

Each test that uses the knowledge base runs on both engines, LanceDB in the home and PostgreSQL with pgvector (a
fresh database on the session's server): the behaviour is the retriever's, whichever store holds the chunks."""

from __future__ import annotations

import pytest

from citewise.errors import ValidationError
from citewise.index.retriever import Retriever, keep_within, reciprocal_rank_fusion
from citewise.index.store import Hit
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings

PAGES = {
    "ops/backups.md": (
        "# Backups\n\nSnapshots of the ledger are taken nightly at 02:00 UTC and kept for 35 days.\n\n"
        "## Restoring\n\nRun `ledgerctl restore --snapshot ID` to roll the ledger back to a snapshot.\n"
    ),
    "ops/scaling.md": (
        "# Scaling\n\nAdd worker nodes with `ledgerctl scale --workers 8`. Each worker handles about 900 "
        "transactions per second.\n"
    ),
    "dev/auth.md": (
        "# Authentication\n\nClients authenticate with an API token sent in the `X-Ledger-Token` header. "
        "Tokens expire after 90 days and can be rotated from the console.\n"
    ),
}
SECRET = "# Salaries\n\nThe compensation band for staff engineers is confidential, reviewed every March.\n"


@pytest.fixture
def settings(each_engine) -> Settings:
    return each_engine


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    for rel, text in PAGES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def indexed(kb, docs, tmp_path):
    Ingestor(kb).ingest_paths([docs])
    private = tmp_path / "private"
    private.mkdir()
    (private / "salaries.md").write_text(SECRET)
    Ingestor(kb, owner="alice").ingest_paths([private])
    return kb


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_each_mode_finds_the_answering_chunk_first(indexed, mode):
    result = Retriever(indexed).search("How long are ledger snapshots kept?", 3, mode=mode)
    assert not result.empty and result.mode == mode
    top = result.chunks[0]
    assert top.filename == "backups.md" and "35 days" in top.text
    assert top.module == "ops" and top.chapter == "Backups"
    assert [c.score for c in result.chunks] == sorted((c.score for c in result.chunks), reverse=True)


def test_hybrid_carries_both_scores_and_passes_the_gate(indexed):
    result = Retriever(indexed).search("which header carries the API token", 5)
    assert result.chunks[0].filename == "auth.md"
    assert all(
        c.dense_score is not None and c.dense_score >= indexed.settings.retrieval.min_score for c in result.chunks
    )
    assert result.chunks[0].lexical_score is not None


def test_owner_scoping_is_enforced_in_every_mode(indexed):
    retriever = Retriever(indexed)
    query = "compensation band for staff engineers"
    for mode in ("hybrid", "dense", "lexical"):
        for owner in (None, "bob", "public"):
            found = retriever.search(query, 10, owner=owner, mode=mode).chunks
            assert all(c.owner == "public" for c in found), (mode, owner)
        mine = retriever.search(query, 10, owner="alice", mode=mode).chunks
        assert mine and mine[0].filename == "salaries.md" and mine[0].owner == "alice"


def test_owner_and_filter_values_cannot_inject_into_the_filter(indexed):
    retriever = Retriever(indexed)
    with pytest.raises(ValidationError, match="owner"):
        retriever.search("salaries", owner="x' OR owner = 'alice")
    # A quote inside a filter value is escaped, not interpreted: it simply matches nothing.
    result = retriever.search("compensation", filters={"module": "ops' OR owner = 'alice"}, mode="lexical")
    assert result.empty
    with pytest.raises(ValidationError, match="filter"):
        retriever.search("x", filters={"owner": "alice"})


def test_metadata_filter(indexed):
    result = Retriever(indexed).search("ledgerctl command", 10, filters={"module": "dev"}, mode="lexical")
    assert all(c.module == "dev" for c in result.chunks)
    result = Retriever(indexed).search("ledgerctl", 10, filters={"module": "ops"}, mode="lexical")
    assert {c.filename for c in result.chunks} == {"backups.md", "scaling.md"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "empty"),
        ({"query": "   \n"}, "empty"),
        ({"query": "x" * 10_001}, "limit"),
        ({"query": "ok", "top_k": 0}, "top_k"),
        ({"query": "ok", "top_k": 11}, "top_k"),
        ({"query": "ok", "top_k": "5"}, "top_k"),
        ({"query": "ok", "mode": "semantic"}, "mode"),
    ],
)
def test_bad_requests_are_clear_validation_errors(indexed, kwargs, message):
    with pytest.raises(ValidationError, match=message):
        Retriever(indexed).search(**kwargs)


def test_unrelated_question_is_flagged_empty(indexed):
    result = Retriever(indexed).search("What is the recipe for a chocolate souffle?", 5)
    assert result.empty and result.chunks == []


def test_empty_index_answers_empty_without_loading_a_model(settings):
    from citewise.index.embeddings import create_embedder
    from citewise.index.knowledge_base import KnowledgeBase

    embedder = create_embedder(settings)
    result = Retriever(KnowledgeBase(settings, embedder=embedder)).search("anything")
    assert result.empty and embedder.load_count == 0


def test_cache_hits_and_any_ingest_invalidates(indexed, docs):
    retriever = Retriever(indexed)
    first = retriever.search("nightly snapshots", 3)
    again = retriever.search("nightly snapshots", 3)
    assert not first.cached and again.cached
    assert again.model_copy(update={"cached": False}) == first
    assert not retriever.search("nightly snapshots", 4).cached  # different settings, different key

    (docs / "ops" / "backups.md").write_text("# Backups\n\nSnapshots are taken hourly and kept for 7 days.\n")
    Ingestor(indexed).ingest_paths([docs])
    fresh = retriever.search("nightly snapshots", 3)
    assert not fresh.cached and "7 days" in fresh.chunks[0].text


def test_empty_results_are_not_cached(indexed):
    retriever = Retriever(indexed)
    assert retriever.search("chocolate souffle recipe").empty
    assert not retriever.search("chocolate souffle recipe").cached


def test_ingest_in_another_process_is_seen(indexed, docs, make_kb):
    retriever = Retriever(indexed)
    assert retriever.search("quarterly audit", mode="lexical").empty
    writer = make_kb(indexed.settings)  # a second handle, as a separate `citewise ingest` would open
    (docs / "ops" / "audit.md").write_text("# Audit\n\nA quarterly audit reviews every ledger entry.\n")
    Ingestor(writer).ingest_paths([docs])
    assert retriever.search("quarterly audit", mode="lexical").chunks[0].filename == "audit.md"


def test_reciprocal_rank_fusion_by_hand():
    dense = [Hit("a", dense=0.9), Hit("b", dense=0.8), Hit("c", dense=0.7)]
    lexical = [Hit("c", lexical=5.0), Hit("a", lexical=3.0), Hit("d", lexical=1.0)]
    fused = reciprocal_rank_fusion([dense, lexical], k=60)
    # a: 1/61 + 1/62 = 0.032522…; c: 1/63 + 1/61 = 0.032266…; b: 1/62; d: 1/63
    assert [h.chunk_id for h in fused] == ["a", "c", "b", "d"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)
    assert (fused[1].dense, fused[1].lexical) == (0.7, 5.0)
    # exact ties break by best single-list rank, then by id: the order never depends on dict or set order
    tie = reciprocal_rank_fusion([[Hit("y"), Hit("x")], [Hit("x"), Hit("y")]])
    assert [h.chunk_id for h in tie] == ["x", "y"]
    # weighted, k=5, lexical at 0.5: a = 1/6 + 0.5/7 = 0.2381; c = 1/8 + 0.5/6 = 0.2083; b = 1/7 = 0.1429;
    # d = 0.5/8 = 0.0625 — c stays behind a although BM25 ranks it first
    weighted = reciprocal_rank_fusion([dense, lexical], k=5, weights=[1.0, 0.5])
    assert [h.chunk_id for h in weighted] == ["a", "c", "b", "d"]
    assert weighted[1].score == pytest.approx(1 / 8 + 0.5 / 6)


def test_keep_within_moves_only_the_buried_chunk_up():
    ranked = [Hit(c) for c in "abcdefg"]
    assert [h.chunk_id for h in keep_within(ranked, "f", 3)] == list("abfcdeg")
    assert [h.chunk_id for h in keep_within(ranked, "b", 3)] == list("abcdefg")  # already within
    assert [h.chunk_id for h in keep_within(ranked, "z", 3)] == list("abcdefg")  # not in the list (gated out)
    assert [h.chunk_id for h in keep_within(ranked, "f", 1)] == list("abcdefg")  # the first is never displaced
    assert [h.chunk_id for h in keep_within(ranked, "f", 0)] == list("abcdefg")  # off
    scored = [Hit(c, score=s) for c, s in zip("abcd", (0.4, 0.3, 0.2, 0.1), strict=True)]
    moved = [(h.chunk_id, h.score) for h in keep_within(scored, "d", 2)]
    assert moved == [("a", 0.4), ("d", 0.3), ("b", 0.3), ("c", 0.2)]  # scores still read best first


# A reference page of bare values embeds far from a question in words, while BM25 ranks it first: fusion alone puts
# it below a dozen prose pages that are about the mainnet but don't give its chain ID.
_PROSE_TOPICS = (
    "is the production network: every transaction is final and costs real tokens",
    "should only get contracts that were deployed to the testnet first",
    "and the testnet need separate settings in your wallet and your app",
    "is where you go live once your contract is audited",
    "can be added to a wallet to send transactions in production",
    "transactions are shown by the block explorer",
    "fees are paid in ORB, while the testnet charges test tokens",
    "upgrades are announced two weeks ahead and reach the testnet first",
    "validators stake ORB to produce blocks",
    "outages are reported on the status page",
    "receives tokens from other networks through the official bridge",
    "launched in 2025 after a year of public testnet",
    "blocks hold up to a thousand transactions",
)
_REFERENCE = (
    "# Reference\n\nNetwork\n\nMainnet\n\nTestnet\n\nChain ID\n\n5031\n\n50312\n\nRPC\n\n"
    "<https://rpc.orbit.example/v1/a8f3>\n\n<https://rpc-t.orbit.example/v1/c9d2>\n\nExplorer\n\n"
    "<https://scan.orbit.example/>\n\n<https://scan-t.orbit.example/>\n\nMulticall\n\n"
    "0x5e44F178E8cF9B2F5409B6f18ce936aB817C5a11\n\n0x841b8199E6d3Db3C6f264f6C2bd8848b3cA64223\n\nFaucet\n\n"
    "<https://faucet.orbit.example/drip?ref=docs>\n"
)


def test_hybrid_search_keeps_the_bm25_best_chunk_within_the_first_results(settings, make_kb, tmp_path):
    docs = tmp_path / "network"
    docs.mkdir()
    for i, topic in enumerate(_PROSE_TOPICS):
        (docs / f"mainnet-{i:02d}.md").write_text(f"# Mainnet notes {i}\n\nThe mainnet {topic}.\n")
    (docs / "reference.md").write_text(_REFERENCE)
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([docs])
    question = "What is the mainnet chain ID?"
    retriever = Retriever(kb)
    assert retriever.search(question, 3, mode="lexical").chunks[0].filename == "reference.md"

    within = settings.model_copy(update={"retrieval": settings.retrieval.model_copy(update={"lexical_best_within": 3})})
    off = settings.model_copy(update={"retrieval": settings.retrieval.model_copy(update={"lexical_best_within": 0})})
    found = [c.filename for c in Retriever(make_kb(within)).search(question, 3).chunks]
    assert found[2] == "reference.md" and "reference.md" not in found[:2]  # moved up to the third place
    fused_only = [c.filename for c in Retriever(make_kb(off)).search(question, 3).chunks]
    assert "reference.md" not in fused_only  # what fusion alone does with it
    assert fused_only[:2] == found[:2]  # nothing else moves
    assert "reference.md" in [c.filename for c in retriever.search(question, 5).chunks]  # the default: first five
    assert [c.filename for c in retriever.search(question, 3, mode="dense").chunks] == [
        c.filename for c in Retriever(make_kb(off)).search(question, 3, mode="dense").chunks
    ]  # dense and lexical searches are untouched


@pytest.mark.parametrize("each_engine", ["lancedb"], indirect=True)  # LanceDB's own index; PostgreSQL's is HNSW always
def test_large_index_gets_an_ann_index_and_still_finds_exact_neighbours(settings, make_kb):
    """Past retrieval.ann_index_threshold optimize() builds the vector index; searches must keep working on it."""
    import numpy as np

    from citewise.types import Chunk

    settings = settings.model_copy(
        update={"retrieval": settings.retrieval.model_copy(update={"ann_index_threshold": 1000})}
    )
    kb = make_kb(settings)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(1500, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [
        Chunk(
            chunk_id=f"c{i:05d}",
            doc_id=f"d{i // 10:04d}",
            chunk_index=i % 10,
            text=f"synthetic passage {i}",
            filename=f"f{i // 10}.md",
        )
        for i in range(1500)
    ]
    kb.embed_documents(["records the manifest"])
    kb.store.replace_documents(sorted({c.doc_id for c in chunks}), chunks, vectors)
    kb.store.optimize()
    assert "vector" in {ix.columns[0] for ix in kb.store._table.list_indices()}
    hits = kb.store.dense(vectors[42], 5, "owner IN ('public')")
    assert hits[0].chunk_id == "c00042" and hits[0].dense == pytest.approx(1.0, abs=1e-3)
    assert [h.chunk_id for h in kb.store.lexical("passage 42", 3, None)][:1] == ["c00042"]


# -- finding what a user means: typos, identifiers, section names --------------------------------------------------


def test_misspelt_words_are_searched_as_the_index_words_they_mean(indexed):
    retriever = Retriever(indexed)
    result = retriever.search("how long are ledgr snapshts kept", 3)
    assert result.corrections == {"ledgr": "ledger", "snapshts": "snapshots"}
    assert result.chunks[0].filename == "backups.md"
    # A correctly spelt question is searched as asked; so is a word no document uses.
    assert retriever.search("How long are ledger snapshots kept?", 3).corrections == {}
    assert retriever.prepare("Does it run on kubernetes?").corrections == {}


def test_a_misspelt_stop_word_is_not_turned_into_a_term(indexed):
    # Three letters are too few to correct safely, except back to a question word: "wat" is "what".
    assert Retriever(indexed).prepare("wat is the ledger token header").corrections == {"wat": "what"}
    assert Retriever(indexed).prepare("does the gpu matter").corrections == {}


def test_english_words_names_and_contractions_the_docs_lack_are_searched_as_asked(indexed):
    # What a question about something the docs don't cover hinges on: corrected to the nearest words the docs hold,
    # it would ask about them instead.
    retriever = Retriever(indexed)
    assert retriever.prepare("Is there an official Helm chart for the ledger?").corrections == {}
    assert retriever.prepare("What's the Pyth price feed address?").corrections == {}
    assert retriever.prepare("Does the ledger support SAML or OAuth logins?").corrections == {}
    assert retriever.prepare("Why aren't ledger snapshots logged?").corrections == {}
    assert retriever.prepare("Is the onnx-int8 backend faster?").corrections == {}
    # The same words misspelt are still corrected, a long identifier with a typo too; so is a word in quotes or with
    # a possessive "'s".
    assert retriever.prepare("Ledgr snapshts?").corrections == {"Ledgr": "ledger", "snapshts": "snapshots"}
    assert retriever.prepare("What are 'snapshts' of the ledgr's?").corrections == {
        "snapshts": "snapshots",
        "ledgr": "ledger",
    }


def test_one_owner_s_words_never_correct_another_s_question(indexed):
    retriever = Retriever(indexed)
    # "compensation" is only in alice's private document.
    assert retriever.prepare("compensaton band", owner="alice").corrections == {"compensaton": "compensation"}
    assert retriever.prepare("compensaton band").corrections == {}
    assert retriever.prepare("compensaton band", owner="bob").corrections == {}


def test_an_identifier_named_exactly_finds_the_passage_that_holds_it_whole(kb, tmp_path):
    root = tmp_path / "ids"
    root.mkdir()
    (root / "keys.md").write_text(
        "# API keys\n\nSet `LEDGER_API_KEYS` to a JSON object mapping each key to its owner.\n"
    )
    (root / "other.md").write_text(
        "# Notes\n\nThe ledger keeps API calls in a log. Keys of the log are ledger ids; API users see them.\n"
    )
    Ingestor(kb).ingest_paths([root])
    result = Retriever(kb).search("LEDGER_API_KEYS", 2, mode="lexical")
    assert result.chunks[0].filename == "keys.md"


def test_a_question_naming_a_section_finds_that_section(indexed):
    # "Restoring" is only the heading of the section; its text says "roll the ledger back".
    result = Retriever(indexed).search("restoring", 3, mode="lexical")
    assert "ledgerctl restore" in result.chunks[0].text


def test_a_search_reports_how_its_ranked_lists_looked(indexed):
    result = Retriever(indexed).search("How long are ledger snapshots kept?", 3)
    profile = result.profile
    assert profile.dense == sorted(profile.dense, reverse=True) and len(profile.dense) >= 3
    assert result.chunks[0].chunk_id in profile.dense_top and profile.lexical_top


def test_open_serves_a_chunk_only_to_who_may_see_it(indexed):
    retriever = Retriever(indexed)
    private = next(c for c in indexed.store.chunks() if c.owner == "alice")
    public = next(c for c in indexed.store.chunks() if c.owner == "public")
    assert retriever.open(private.chunk_id, owner="alice") == private
    assert retriever.open(private.chunk_id) is None and retriever.open(private.chunk_id, owner="bob") is None
    assert retriever.open(public.chunk_id, owner="bob", doc_id=public.doc_id) == public
    assert retriever.open(public.chunk_id, doc_id=private.doc_id) is None  # the id pair must match
    # The rule is applied inside the store's lookup: someone else's row is never read.
    from citewise.index.store import build_where

    assert indexed.store.fetch([private.chunk_id], build_where("bob")) == {}
