"""How hybrid quality depends on the fusion settings: the RRF constant k (`retrieval.rrf_k`) and a lexical weight.

    .venv/bin/python bench/bench_fusion.py [--set somnia|clapnq]

Indexes the BEIR set once (bench/data/<set>_beir; build it with make_somnia_beir.py / make_clapnq_beir.py),
fetches each query's full dense and BM25 chunk rankings, and fuses them for several settings, scoring each exactly
as `citewise eval retrieval` does. Small k trusts the top of each list more; a lexical weight below 1 lets BM25
break ties and add recall without reordering dense's confident top hits. Somnia has 22 judged queries (noisy);
ClapNQ has 300, so settings are chosen on ClapNQ and only checked on Somnia. The last variant is the default as
searches run it: the BM25 list's best chunk kept within the first `retrieval.lexical_best_within` results.
Writes bench/results/fusion_<set>.json.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import ROOT, write_result
from citewise.eval.retrieval import METRIC_NAMES, as_parsed_document, load_beir, score_run
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import keep_within
from citewise.index.store import Hit, build_where
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.types import make_doc_id

RRF_KS = (1, 5, 10, 20, 60)
LEXICAL_WEIGHTS = (1.0, 0.5, 0.3)


def weighted_rrf(dense: list[Hit], lexical: list[Hit], k: int, lexical_weight: float) -> list[str]:
    scores: dict[str, float] = {}
    for weight, ranked in ((1.0, dense), (lexical_weight, lexical)):
        for rank, hit in enumerate(ranked, 1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda c: (-scores[c], c))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=["somnia", "clapnq"], default="somnia")
    args = parser.parse_args()
    load_before = None  # quality, not timing: no need to wait for a quiet machine
    dataset = load_beir(ROOT / "bench" / "data" / f"{args.set}_beir")
    corpus_id = {make_doc_id(doc_id): doc_id for doc_id in dataset.corpus}
    with tempfile.TemporaryDirectory(prefix="citewise-fusion-") as home:
        kb = KnowledgeBase(Settings(home=Path(home)))
        report = Ingestor(kb).ingest_documents([as_parsed_document(doc) for doc in dataset.corpus.values()])
        doc_of = {c.chunk_id: corpus_id[c.doc_id] for c in kb.store.chunks()}
        depth, where = report.chunks_total, build_where(None)
        runs = {}
        for query_id, text in dataset.queries.items():
            vector = kb.embed_query(text)
            runs[query_id] = (kb.store.dense(vector, depth, where), kb.store.lexical(text, depth, where))

    def score(fuse) -> dict[str, float]:
        sums = dict.fromkeys(METRIC_NAMES, 0.0)
        for query_id, (dense, lexical) in runs.items():
            ranked = list(dict.fromkeys(doc_of[c] for c in fuse(dense, lexical)))[:100]
            for name, value in score_run(ranked, dataset.qrels[query_id]).items():
                sums[name] += value
        return {name: round(value / len(runs), 4) for name, value in sums.items()}

    variants = {
        "dense": score(lambda d, lex: [h.chunk_id for h in d]),
        "lexical": score(lambda d, lex: [h.chunk_id for h in lex]),
    }
    for k in RRF_KS:
        for w in LEXICAL_WEIGHTS:
            variants[f"hybrid k={k} w={w}"] = score(lambda d, lex, k=k, w=w: weighted_rrf(d, lex, k, w))
    defaults = Settings().retrieval

    def with_lexical_best(dense: list[Hit], lexical: list[Hit]) -> list[str]:
        fused = weighted_rrf(dense, lexical, defaults.rrf_k, defaults.lexical_weight)
        if not lexical:
            return fused
        hits = keep_within([Hit(c, 0.0) for c in fused], lexical[0].chunk_id, defaults.lexical_best_within)
        return [h.chunk_id for h in hits]

    name = f"hybrid k={defaults.rrf_k} w={defaults.lexical_weight}, BM25 best in top {defaults.lexical_best_within}"
    variants[name] = score(with_lexical_best)
    path = write_result(
        f"fusion_{args.set}",
        {"set": args.set, "queries": len(runs), "default_rrf_k": defaults.rrf_k, "variants": variants},
        load_before=load_before,
    )
    print(f"{'variant':<22}" + "".join(f"{m:>12}" for m in METRIC_NAMES))
    for name, figures in variants.items():
        print(f"{name:<22}" + "".join(f"{figures[m]:>12.4f}" for m in METRIC_NAMES))
    print(f"→ {path}")


if __name__ == "__main__":
    main()
