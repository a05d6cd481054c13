"""Retrieval latency (p50/p95 of `Retriever.search`, top_k=5, cache off) at 10k and 100k chunks, per mode.

    .venv/bin/python bench/bench_latency.py [--sizes 10000 100000] [--queries 200] [--no-sentences] [--name NAME]

The index is built directly with `LanceStore.replace_documents`, not through the ingest pipeline:
- chunk text is 4-7 sentences sampled from the Somnia docs, so BM25 sees a realistic vocabulary and postings;
- vectors are real all-MiniLM-L6-v2 embeddings of a few thousand distinct Somnia sentences (each chunk starts with
  its anchor sentence), tiled over the chunks with a small Gaussian perturbation and re-normalised. Embedding 100k
  chunks for real would take about two hours on this machine; the vector index only needs realistic geometry.
- each chunk also gets its sentence vectors (`store.dense_scores`), one per sentence the ingest would pool from
  its text (`store.sentence_spans`), its chunk vector perturbed a little more and re-normalised, stored as an ingest
  stores them: every search reads and scores them. The sampled one-line texts split into fewer sentences (about 3
  a chunk) than real pages do (about 6 on the Somnia docs), so this understates their cost. `--no-sentences`
  leaves them out (an index built without them); `make bench` runs both, the second as
  `--no-sentences --name latency_no_sentences`.
Then `store.optimize()` builds the FTS index, and the ANN index (IVF-HNSW-SQ) once the table reaches
`retrieval.ann_index_threshold` chunks, exactly as after an ingest. Queries are the 53 Somnia FAQ questions in
four phrasings; every timed call embeds its query (the model is warm). Besides the end-to-end figures, the parts
are timed alone (query embedding, store.dense, store.lexical) so a miss can be located.
Writes bench/results/latency.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from pathlib import Path

import lancedb
import numpy as np

from _common import SOMNIA, wait_for_quiet, write_result
from citewise.index.embeddings import create_embedder
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.index.store import sentence_spans
from citewise.settings import RetrievalSettings, Settings
from citewise.types import PUBLIC_OWNER, Chunk, RetrievalMode, make_chunk_id, make_doc_id

SEED = 13
ANCHORS = 3000  # distinct sentences embedded for real
NOISE = 0.02  # per-dimension σ: perturbed copies keep cosine ≈ 0.93 with their anchor
SENTENCE_NOISE = 0.04  # a sentence vector's σ around its chunk's vector
CHUNKS_PER_DOC = 10
BATCH = 5000  # chunks per replace_documents call
LINK_RE = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def somnia_sentences(docs: Path) -> list[tuple[str, str]]:
    """(page, sentence) for every distinct prose sentence of 40-300 characters in the Somnia pages."""
    seen: dict[str, str] = {}
    for page in sorted(docs.glob("*.md")):
        text = LINK_RE.sub(r"\1", page.read_text(encoding="utf-8"))
        text = re.sub(r"[`*#>|_]+", " ", text)
        for paragraph in re.split(r"\n\s*\n", text):
            for sentence in re.split(r"(?<=[.!?])\s+", " ".join(paragraph.split())):
                if 40 <= len(sentence) <= 300 and len(sentence.split()) >= 6:
                    seen.setdefault(sentence, page.stem)
    return [(page, sentence) for sentence, page in seen.items()]


def questions(somnia: Path, count: int) -> list[str]:
    base = [json.loads(line)["question"] for line in (somnia / "faq_qa_pairs.jsonl").read_text().splitlines() if line]
    variants = [lambda q: q, str.lower, lambda q: f"Somnia docs: {q}", lambda q: q.rstrip("?") + " on mainnet?"]
    out = [variant(q) for variant in variants for q in base]
    return (out * (count // len(out) + 1))[:count]


def synthetic_chunks(size: int, pool, anchors, anchor_vectors, rng: random.Random, nrng) -> tuple[list, np.ndarray]:
    chunks = []
    for i in range(size):
        doc = i // CHUNKS_PER_DOC
        doc_id = make_doc_id(f"synthetic/{size}/{doc}")
        page, first = anchors[i % len(anchors)]
        text = " ".join([first, *(s for _, s in rng.sample(pool, rng.randint(3, 6)))])
        chunks.append(
            Chunk(
                chunk_id=make_chunk_id(doc_id, i % CHUNKS_PER_DOC),
                doc_id=doc_id,
                chunk_index=i % CHUNKS_PER_DOC,
                text=text,
                filename=f"{page}-{doc}.md",
                module=page.split("_", 1)[0],
                chapter=page.replace("_", " > "),
                title=page.rsplit("_", 1)[-1].replace("-", " ").title(),
                owner=PUBLIC_OWNER,
                content_hash=f"{i:032x}",
            )
        )
    vectors = anchor_vectors[np.arange(size) % len(anchors)] + nrng.normal(0, NOISE, (size, anchor_vectors.shape[1]))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return chunks, vectors.astype(np.float32)


def _stats(samples_ms: list[float]) -> dict[str, float]:
    p50, p95 = np.percentile(samples_ms, [50, 95])
    mean = float(np.mean(samples_ms))
    return {"p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2), "mean_ms": round(mean, 2)}


def _timed(fn, items) -> list[float]:
    samples = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _dense_recall(store, chunks, vectors: np.ndarray, query_vectors, where: str, ks=(5, 50)) -> dict[str, float]:
    """How much of the exact (brute-force) cosine top-k store.dense returns: 1.0 for flat search, < 1 for ANN.
    With sentence vectors only k = 50 is asked: the store finds its 50 candidates by the chunk's cosine, then
    re-sorts them by the dense score (`store.dense_scores`), so its first 5 are not the cosine's first 5."""
    ids = np.array([c.chunk_id for c in chunks])
    found = {k: [] for k in ks}
    for q in query_vectors:
        exact = ids[np.argsort(-(vectors @ q))[:50]]
        got = [c.chunk_id for c in store.dense(q, 50, where)]
        for k in found:
            found[k].append(len(set(exact[:k]) & set(got[:k])) / k)
    return {f"recall@{k}": round(float(np.mean(v)), 4) for k, v in found.items()}


def sentence_vectors(chunks: list[Chunk], vectors: np.ndarray, nrng) -> list[np.ndarray]:
    """One vector per sentence the ingest would pool for each chunk, near the chunk's own vector."""
    out = []
    for chunk, vector in zip(chunks, vectors, strict=True):
        count = len(sentence_spans(chunk).sentences)
        matrix = vector + nrng.normal(0, SENTENCE_NOISE, (count, len(vector)))
        out.append((matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32))
    return out


def measure(size: int, embedder, pool, anchors, anchor_vectors, queries: list[str], *, sentences: bool) -> dict:
    rng, nrng = random.Random(SEED), np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory(prefix="citewise-latency-") as home:
        settings = Settings(home=Path(home), retrieval=RetrievalSettings(cache_size=0))
        kb = KnowledgeBase(settings, embedder=embedder)
        kb.embed_documents(["manifest"])  # records model and dimension, as the first ingest would
        chunks, vectors = synthetic_chunks(size, pool, anchors, anchor_vectors, rng, nrng)

        write_s = 0.0
        per_chunk = []
        for start in range(0, size, BATCH):
            part, part_vectors = chunks[start : start + BATCH], vectors[start : start + BATCH]
            matrices = sentence_vectors(part, part_vectors, nrng) if sentences else None
            per_chunk += [len(m) for m in matrices or []]
            started = time.perf_counter()
            kb.store.replace_documents(sorted({c.doc_id for c in part}), part, part_vectors, sentences=matrices)
            write_s += time.perf_counter() - started
        started = time.perf_counter()
        kb.store.optimize()
        optimize_s = time.perf_counter() - started
        table = lancedb.connect(str(settings.index_dir / "lancedb")).open_table("chunks")
        indices = sorted(f"{ix.columns[0]}:{ix.index_type}" for ix in table.list_indices())

        retriever = Retriever(kb)
        for mode in RetrievalMode:  # warm caches of the engine and the model, untimed
            for query in queries[:10]:
                retriever.search(query, mode=mode)
        modes = {
            mode.value: _stats(_timed(lambda q, mode=mode: retriever.search(q, mode=mode), queries))
            for mode in RetrievalMode
        }
        query_vectors = {q: kb.embed_query(q) for q in queries}
        where = "owner IN ('public')"
        depth = settings.retrieval.candidates
        parts = {
            "embed_query": _stats(_timed(kb.embed_query, queries)),
            "store_dense": _stats(_timed(lambda q: kb.store.dense(query_vectors[q], depth, where), queries)),
            "store_lexical": _stats(_timed(lambda q: kb.store.lexical(q, depth, where, with_vectors=True), queries)),
            "store_lexical_no_vector": _stats(_timed(lambda q: kb.store.lexical(q, depth, where), queries)),
        }
        ann_recall = _dense_recall(
            kb.store, chunks, vectors, [query_vectors[q] for q in queries[:50]], where, (50,) if sentences else (5, 50)
        )
    return {
        "chunks": size,
        "sentence_vectors_per_chunk": round(float(np.mean(per_chunk)), 2) if per_chunk else 0,
        "dense_recall_vs_exact": ann_recall,
        "write_s": round(write_s, 1),
        "optimize_s": round(optimize_s, 1),
        "indices": indices,
        "modes": modes,
        "parts": parts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-sentences", action="store_true", help="build the index without sentence vectors")
    parser.add_argument("--name", default="latency", help="result file name (bench/results/NAME.json)")
    args = parser.parse_args()
    load_before = wait_for_quiet()

    pool = somnia_sentences(SOMNIA / "docs")
    anchors = random.Random(SEED).sample(pool, min(ANCHORS, len(pool)))
    settings = Settings()
    embedder = create_embedder(settings)
    started = time.perf_counter()
    anchor_vectors = embedder.embed_documents([s for _, s in anchors]).astype(np.float64)
    embed_s = time.perf_counter() - started
    queries = questions(SOMNIA, args.queries)
    print(f"{len(pool)} distinct Somnia sentences; {len(anchors)} embedded for real in {embed_s:.0f} s")

    sizes = {}
    for size in args.sizes:
        sizes[str(size)] = result = measure(
            size, embedder, pool, anchors, anchor_vectors, queries, sentences=not args.no_sentences
        )
        line = ", ".join(f"{m} p50 {s['p50_ms']:.1f} / p95 {s['p95_ms']:.1f} ms" for m, s in result["modes"].items())
        print(f"{size:>7} chunks (write {result['write_s']} s, optimize {result['optimize_s']} s): {line}")

    path = write_result(
        args.name,
        {
            "queries": len(queries),
            "top_k": settings.retrieval.top_k,
            "candidates": settings.retrieval.candidates,
            "ann_index_threshold": settings.retrieval.ann_index_threshold,
            "vectors": (
                f"synthetic: {len(anchors)} real MiniLM sentence embeddings tiled with N(0, {NOISE}) noise and "
                "re-normalised (embedding 100k chunks for real would take ~2 h on this machine)"
            ),
            "sentence_pool": len(pool),
            "sentence_vectors": (
                "none" if args.no_sentences else f"per sentence: the chunk's vector with N(0, {SENTENCE_NOISE}) noise"
            ),
            "sizes": sizes,
        },
        load_before=load_before,
    )
    print(f"→ {path}")


if __name__ == "__main__":
    main()
