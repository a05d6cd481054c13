"""How hybrid quality on the Somnia FAQ set depends on the reciprocal-rank-fusion constant k (`retrieval.rrf_k`).

    .venv/bin/python bench/bench_fusion.py

Indexes bench/data/somnia_beir once (build it with make_somnia_beir.py or bench_retrieval.py), fetches each
query's full dense and BM25 chunk rankings, and fuses them with `reciprocal_rank_fusion` for several k, scoring
each exactly as `citewise eval retrieval` does (k=60 here reproduces its hybrid row). Small k trusts the top of
each list more. With 22 queries this is tuning on the test set: read it as sensitivity, not as a better default.
Writes bench/results/fusion_somnia.json.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import wait_for_quiet, write_result
from citewise.eval.retrieval import METRIC_NAMES, as_parsed_document, load_beir, score_run
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import reciprocal_rank_fusion
from citewise.index.store import build_where
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.types import make_doc_id
from make_somnia_beir import DEFAULT_OUT

RRF_KS = (1, 5, 10, 20, 40, 60, 100)


def main() -> None:
    load_before = wait_for_quiet()
    dataset = load_beir(DEFAULT_OUT)
    corpus_id = {make_doc_id(doc_id): doc_id for doc_id in dataset.corpus}
    with tempfile.TemporaryDirectory(prefix="citewise-fusion-") as home:
        kb = KnowledgeBase(Settings(home=Path(home)))
        report = Ingestor(kb).ingest_documents([as_parsed_document(doc) for doc in dataset.corpus.values()])
        depth, where = report.chunks_total, build_where(None)
        runs = {}
        for query_id, text in dataset.queries.items():
            vector = kb.embed_query(text)
            runs[query_id] = (kb.store.dense(vector, depth, where), kb.store.lexical(text, depth, where, vector))

    def score(fuse) -> dict[str, float]:
        sums = dict.fromkeys(METRIC_NAMES, 0.0)
        for query_id, (dense, lexical) in runs.items():
            ranked = list(dict.fromkeys(corpus_id[c.doc_id] for c in fuse(dense, lexical)))[:100]
            for name, value in score_run(ranked, dataset.qrels[query_id]).items():
                sums[name] += value
        return {name: round(value / len(runs), 4) for name, value in sums.items()}

    variants = {"dense": score(lambda d, lex: d), "lexical": score(lambda d, lex: lex)}
    for k in RRF_KS:
        variants[f"hybrid rrf_k={k}"] = score(lambda d, lex, k=k: reciprocal_rank_fusion([d, lex], k=k))
    path = write_result(
        "fusion_somnia",
        {"queries": len(runs), "default_rrf_k": Settings().retrieval.rrf_k, "variants": variants},
        load_before=load_before,
    )
    print(f"{'variant':<20}" + "".join(f"{m:>12}" for m in METRIC_NAMES))
    for name, figures in variants.items():
        print(f"{name:<20}" + "".join(f"{figures[m]:>12.4f}" for m in METRIC_NAMES))
    print(f"→ {path}")


if __name__ == "__main__":
    main()
