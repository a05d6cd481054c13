"""Retrieval evaluation on BEIR-format data: load a dataset, index it in a throwaway home, score every mode.

A BEIR folder holds `corpus.jsonl` (`{"_id", "title", "text"}` per line), `queries.jsonl` (`{"_id", "text"}`) and
`qrels/<split>.tsv` (`query-id  corpus-id  score`, with a header line). Each corpus document is indexed the way
Citewise indexes any in-memory text, so it is one chunk unless it is longer than the chunk size; chunk hits are
mapped back to corpus ids (a document ranks where its best chunk ranks) before scoring.

The metrics are the usual ones (nDCG@10 with graded gains, Recall@k, MRR@10), written out here rather than taken
from pytrec_eval: they are a few lines each, exact, dependency-free, and pytrec_eval needs a C++ compiler to
install. Their formulas are in the docstrings; the tests check them against values worked out by hand.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from citewise.errors import ConfigError
from citewise.eval.formats import read_jsonl
from citewise.eval.metrics import percentiles_ms
from citewise.index.embeddings import Embedder
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.ingest.loaders import parse_plain_text
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.types import ParsedDocument, RetrievalMode, make_doc_id

Progress = Callable[[str, int, int], None]  # (stage, done, total), the same shape the ingest pipeline reports

METRIC_NAMES = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
DOCS_PER_QUERY = 100  # the deepest cut-off any metric looks at (Recall@100)


# -- dataset -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BeirDocument:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirDataset:
    """A loaded BEIR split. `queries` holds only queries that have at least one relevant document in `qrels`."""

    name: str
    corpus: dict[str, BeirDocument]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id → {corpus id: relevance grade > 0}


def _jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    missing = f"{path} is missing: a BEIR folder needs corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
    for number, row in read_jsonl(path, missing=missing):
        if "_id" not in row or not isinstance(row.get("text", ""), str):
            raise ConfigError(f'{path}, line {number}: expected an object with "_id" and a string "text"')
        yield number, row


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        splits = sorted(p.stem for p in path.parent.glob("*.tsv")) if path.parent.is_dir() else []
        hint = f" (available splits: {', '.join(splits)})" if splits else ""
        raise ConfigError(f"{path} is missing{hint}")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            fields = line.rstrip("\r\n").split("\t")
            if fields == [""]:
                continue
            if len(fields) != 3:
                fields = line.split()  # some hand-made qrels use spaces; ids never contain whitespace
            if number == 1 and fields and fields[0].strip().lower() == "query-id":
                continue
            if len(fields) != 3:
                raise ConfigError(f"{path}, line {number}: expected 3 columns (query-id, corpus-id, score)")
            query_id, doc_id, score = (f.strip() for f in fields)
            try:
                grade = int(score)
            except ValueError:
                raise ConfigError(f"{path}, line {number}: score {score!r} is not an integer") from None
            if grade > 0:
                qrels.setdefault(query_id, {})[doc_id] = grade
    return qrels


def load_beir(folder: Path, split: str = "test") -> BeirDataset:
    """Read a BEIR folder. Raises ConfigError naming the file (and line) when something is missing or malformed."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"BEIR folder {root} does not exist")
    corpus: dict[str, BeirDocument] = {}
    for number, row in _jsonl(root / "corpus.jsonl"):
        doc_id = str(row["_id"])
        if doc_id in corpus:
            raise ConfigError(f"{root / 'corpus.jsonl'}, line {number}: duplicate _id {doc_id!r}")
        corpus[doc_id] = BeirDocument(doc_id, str(row.get("title") or ""), row.get("text") or "")
    texts = {str(row["_id"]): row.get("text") or "" for _, row in _jsonl(root / "queries.jsonl")}
    qrels = _qrels(root / "qrels" / f"{split}.tsv")
    queries = {qid: texts[qid] for qid in qrels if qid in texts and texts[qid].strip()}
    if not corpus:
        raise ConfigError(f"{root / 'corpus.jsonl'} holds no documents")
    if not queries:
        raise ConfigError(f"No query in {root / 'queries.jsonl'} has a relevant document in qrels/{split}.tsv")
    return BeirDataset(root.name, corpus, queries, {qid: qrels[qid] for qid in queries})


# -- metrics -----------------------------------------------------------------------------------------------------
def _top(ranked: Sequence[str], k: int) -> list[str]:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return list(dict.fromkeys(ranked))[:k]  # a document counts once, at its first (best) rank


def ndcg_at_k(ranked: Sequence[str], relevance: Mapping[str, int], k: int = 10) -> float:
    """Normalised discounted cumulative gain with graded (linear) gains, as trec_eval's ndcg_cut computes it.

    DCG@k  = Σ_{i=1..k} rel(d_i) / log2(i + 1)          d_i = the document at rank i
    IDCG@k = the same sum over the qrels' grades sorted high to low (the best possible ranking)
    nDCG@k = DCG@k / IDCG@k                            (0 when the query has no relevant document)
    """
    dcg = sum(relevance.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(_top(ranked, k), 1))
    ideal = sorted((g for g in relevance.values() if g > 0), reverse=True)[:k]
    idcg = sum(grade / math.log2(rank + 1) for rank, grade in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: Sequence[str], relevance: Mapping[str, int], k: int = 100) -> float:
    """Recall@k = |relevant documents in the top k| / |relevant documents| (relevant: grade > 0; 0 if none)."""
    relevant = {doc for doc, grade in relevance.items() if grade > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_top(ranked, k))) / len(relevant)


def mrr_at_k(ranked: Sequence[str], relevance: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document within the top k: 1 / rank, or 0 if none is there.
    Averaged over queries it is MRR@k."""
    for rank, doc in enumerate(_top(ranked, k), 1):
        if relevance.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def score_run(ranked: Sequence[str], relevance: Mapping[str, int]) -> dict[str, float]:
    return {
        "ndcg@10": ndcg_at_k(ranked, relevance, 10),
        "recall@10": recall_at_k(ranked, relevance, 10),
        "recall@100": recall_at_k(ranked, relevance, 100),
        "mrr@10": mrr_at_k(ranked, relevance, 10),
    }


# -- evaluation --------------------------------------------------------------------------------------------------
def as_parsed_document(doc: BeirDocument) -> ParsedDocument:
    """A corpus document as the ingest pipeline takes it: its text parsed as plain text, its source the corpus id.

    The title goes in as the document's title only: the index already puts it in front of every chunk's embedded
    and BM25 text, so repeating it in the body would count it twice. It is set after parsing because the
    plain-text loader invents a title (first line, or the file name: here the corpus id) when given none.
    """
    body = doc.text if doc.text.strip() else doc.title
    return parse_plain_text(body, source=doc.id, filename=doc.id).model_copy(update={"title": doc.title})


def evaluate(
    settings: Settings,
    dataset: BeirDataset,
    modes: Sequence[RetrievalMode | str] = tuple(RetrievalMode),
    *,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
) -> dict:
    """Index `dataset.corpus` in a temporary home (nothing is written under `settings.home`), run every query in
    every mode against that one index, and return the metrics averaged over queries:

        {"modes": {"hybrid": {"ndcg@10", "recall@10", "recall@100", "mrr@10", "query_p50_ms", "query_p95_ms"},
                   ...},
         "ingest_s", "query_p50_ms", "query_p95_ms",        # latency percentiles over all modes' queries
         "queries", "corpus", "chunks", "ingest_failed"}

    Each query is ranked deep enough to fill 100 distinct documents (Recall@100), so the timings measure that
    depth, not the shallower `search(top_k=5)` an answer uses. `embedder` lets a caller share a loaded model.
    """
    report_progress = progress or (lambda stage, done, total: None)
    try:
        modes = [RetrievalMode(m) for m in modes]
    except ValueError as exc:
        raise ConfigError(f"{exc}; use hybrid, dense or lexical") from None
    with tempfile.TemporaryDirectory(prefix="citewise-eval-") as home:
        kb = KnowledgeBase(settings.model_copy(update={"home": Path(home)}), embedder=embedder)
        corpus_id = {make_doc_id(doc.id): doc.id for doc in dataset.corpus.values()}
        docs = [as_parsed_document(doc) for doc in dataset.corpus.values()]
        started = time.perf_counter()
        ingest = Ingestor(kb, progress=report_progress).ingest_documents(docs)
        ingest_s = time.perf_counter() - started

        # Deep enough that documents split into several chunks still fill 100 distinct documents.
        chunks_per_doc = ingest.chunks_total / max(1, ingest.indexed)
        depth = max(2 * DOCS_PER_QUERY, math.ceil(2 * DOCS_PER_QUERY * chunks_per_doc))
        depth = max(1, min(depth, ingest.chunks_total))

        retriever = Retriever(kb)
        per_mode: dict[str, dict[str, float]] = {}
        all_ms: list[float] = []
        total, done = len(modes) * len(dataset.queries), 0
        for mode in modes:
            sums = dict.fromkeys(METRIC_NAMES, 0.0)
            mode_ms: list[float] = []
            for query_id, text in dataset.queries.items():
                started = time.perf_counter()
                hits = retriever.rank(text, depth, mode=mode)
                mode_ms.append((time.perf_counter() - started) * 1000)
                ranked = list(dict.fromkeys(corpus_id[hit.doc_id] for hit in hits))[:DOCS_PER_QUERY]
                for name, value in score_run(ranked, dataset.qrels[query_id]).items():
                    sums[name] += value
                done += 1
                report_progress("query", done, total)
            figures = {name: round(value / len(dataset.queries), 4) for name, value in sums.items()}
            figures["query_p50_ms"], figures["query_p95_ms"] = percentiles_ms(mode_ms)
            per_mode[mode.value] = figures
            all_ms.extend(mode_ms)

    p50, p95 = percentiles_ms(all_ms)
    return {
        "modes": per_mode,
        "ingest_s": round(ingest_s, 2),
        "query_p50_ms": p50,
        "query_p95_ms": p95,
        "queries": len(dataset.queries),
        "corpus": len(dataset.corpus),
        "chunks": ingest.chunks_total,
        "ingest_failed": ingest.failed,
    }
