"""Retrieval quality on the Somnia FAQ set: nDCG@10, Recall@10/100 and MRR@10 for hybrid, dense and lexical.

    .venv/bin/python bench/bench_retrieval.py

(Re)builds bench/data/somnia_beir with make_somnia_beir.py (deterministic, about a second), then runs
`citewise.eval.retrieval.evaluate` — the code behind `citewise eval retrieval --beir` — for every mode on one
index. Writes bench/results/retrieval_somnia.json.
"""

from __future__ import annotations

from _common import SOMNIA, wait_for_quiet, write_result
from citewise.eval.retrieval import METRIC_NAMES, evaluate, load_beir
from citewise.settings import Settings
from citewise.types import RetrievalMode
from make_somnia_beir import DEFAULT_OUT, build


def main() -> None:
    load_before = wait_for_quiet()
    dataset_stats = build(SOMNIA, DEFAULT_OUT)
    dataset = load_beir(DEFAULT_OUT)
    results = evaluate(Settings(), dataset, list(RetrievalMode))
    path = write_result(
        "retrieval_somnia",
        {
            "dataset": "somnia FAQ questions over the Somnia docs (bench/make_somnia_beir.py)",
            "build": dataset_stats,
            **results,
        },
        load_before=load_before,
    )
    print(f"{results['queries']} queries over {results['corpus']} pages ({results['chunks']} chunks)")
    print(f"{'mode':<8}" + "".join(f"{m:>12}" for m in METRIC_NAMES))
    for mode, figures in results["modes"].items():
        print(f"{mode:<8}" + "".join(f"{figures[m]:>12.4f}" for m in METRIC_NAMES))
    print(
        f"ingest {results['ingest_s']:.1f} s, query p50 {results['query_p50_ms']:.1f} ms, "
        f"p95 {results['query_p95_ms']:.1f} ms\n→ {path}"
    )


if __name__ == "__main__":
    main()
