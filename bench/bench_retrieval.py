"""Retrieval quality on two BEIR sets: nDCG@10, Recall@10/100 and MRR@10 for hybrid, dense and lexical.

    .venv/bin/python bench/bench_retrieval.py [--set somnia clapnq]

(Re)builds bench/data/<set>_beir with make_somnia_beir.py / make_clapnq_beir.py (deterministic, seconds), then
runs `citewise.eval.retrieval.evaluate` — the code behind `citewise eval retrieval --beir` — for every mode on one
index per set. Writes bench/results/retrieval_<set>.json.
"""

from __future__ import annotations

import argparse

import make_clapnq_beir
import make_somnia_beir
from _common import ROOT, SOMNIA, wait_for_quiet, write_result
from citewise.eval.retrieval import METRIC_NAMES, evaluate, load_beir
from citewise.settings import Settings
from citewise.types import RetrievalMode

SETS = {
    "somnia": (
        "Somnia FAQ questions over the Somnia docs (bench/make_somnia_beir.py)",
        lambda out: make_somnia_beir.build(SOMNIA, out),
    ),
    "clapnq": (
        "ClapNQ dev answerable questions over all 597 ClapNQ passages (bench/make_clapnq_beir.py)",
        lambda out: make_clapnq_beir.build(make_clapnq_beir.CLAPNQ, out),
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="+", choices=sorted(SETS), default=["somnia", "clapnq"])
    for name in parser.parse_args().set:
        run(name)


def run(name: str) -> None:
    description, build = SETS[name]
    load_before = wait_for_quiet()
    out = ROOT / "bench" / "data" / f"{name}_beir"
    dataset_stats = build(out)
    dataset = load_beir(out)
    results = evaluate(Settings(), dataset, list(RetrievalMode))
    path = write_result(
        f"retrieval_{name}",
        {"dataset": description, "build": dataset_stats, **results},
        load_before=load_before,
    )
    print(f"{name}: {results['queries']} queries over {results['corpus']} documents ({results['chunks']} chunks)")
    print(f"{'mode':<8}" + "".join(f"{m:>12}" for m in METRIC_NAMES))
    for mode, figures in results["modes"].items():
        print(f"{mode:<8}" + "".join(f"{figures[m]:>12.4f}" for m in METRIC_NAMES))
    print(
        f"ingest {results['ingest_s']:.1f} s, query p50 {results['query_p50_ms']:.1f} ms, "
        f"p95 {results['query_p95_ms']:.1f} ms\n→ {path}"
    )


if __name__ == "__main__":
    main()
