"""Ingest throughput on the Somnia docs, then the cost of re-ingesting the unchanged tree.

    .venv/bin/python bench/bench_ingest.py [--docs DIR] [--max-load 0.6]

Both runs go into a temporary home. The embedding model is loaded (and timed) before the first ingest, so the
first-ingest figure is parsing + chunking + embedding + writing + indexing, not Python importing torch; the
re-ingest opens a fresh KnowledgeBase on the same home, as a second `citewise ingest` run would.
Writes bench/results/ingest.json.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _common import ROOT, SOMNIA, wait_for_quiet, write_result
from citewise.index.embeddings import create_embedder
from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=SOMNIA / "docs", help="folder to ingest")
    parser.add_argument(
        "--max-load", type=float, default=0.6, help="wait until the 1-minute load average is below this (shared box)"
    )
    args = parser.parse_args()
    load_before = wait_for_quiet(args.max_load, timeout_s=300)

    with tempfile.TemporaryDirectory(prefix="citewise-bench-") as home:
        settings = Settings(home=Path(home))
        started = time.perf_counter()
        embedder = create_embedder(settings)
        embedder.embed_documents(["warm up"])
        model_load_s = time.perf_counter() - started

        started = time.perf_counter()
        first = Ingestor(KnowledgeBase(settings, embedder=embedder)).ingest_paths([args.docs])
        first_s = time.perf_counter() - started

        started = time.perf_counter()
        again = Ingestor(KnowledgeBase(settings, embedder=embedder)).ingest_paths([args.docs])
        again_s = time.perf_counter() - started

    result = {
        "corpus": os.path.relpath(args.docs, ROOT),
        "files": first.seen,
        "documents_indexed": first.indexed,
        "documents_failed": first.failed,
        "chunks": first.chunks_total,
        "model_load_s": round(model_load_s, 2),
        "first_ingest_s": round(first_s, 2),
        "chunks_per_s": round(first.chunks_total / first_s, 1),
        "reingest_s": round(again_s, 3),
        "reingest_unchanged_documents": again.unchanged,
        "reingest_chunks_embedded": again.chunks_embedded,
        "reingest_ratio": round(again_s / first_s, 4),
        "settings": {
            "chunk_size": settings.ingest.chunk_size,
            "chunk_overlap": settings.ingest.chunk_overlap,
            "embed_batch_size": settings.ingest.embed_batch_size,
            "embeddings": settings.embeddings,
        },
    }
    path = write_result("ingest", result, load_before=load_before)
    print(
        f"first ingest: {first.indexed} documents ({first.failed} failed), {first.chunks_total} chunks in "
        f"{first_s:.1f} s = {result['chunks_per_s']} chunks/s (model load {model_load_s:.1f} s, not included)\n"
        f"unchanged re-ingest: {again_s:.3f} s = {100 * result['reingest_ratio']:.2f}% of the first, "
        f"{again.chunks_embedded} chunks embedded\n→ {path}"
    )


if __name__ == "__main__":
    main()
