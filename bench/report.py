"""Rewrite BENCHMARKS.md from bench/results/*.json: the machine, each table, and the issue's targets, met or not.

    .venv/bin/python bench/report.py

Nothing here measures anything; run the bench scripts first (`make bench` runs them all, then this).
"""

from __future__ import annotations

import json

from _common import RESULTS, ROOT

TARGET_REINGEST_RATIO = 0.05
TARGET_P50_MS = 20.0
TARGET_P50_CHUNKS = "100000"
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def _load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _mark(ok: bool) -> str:
    return "✅ met" if ok else "❌ missed"


def _missing(script: str) -> list[str]:
    return [f"_Not measured yet: run `.venv/bin/python bench/{script}`._", ""]


def machine_section(results: list[dict]) -> list[str]:
    machine = next((r["machine"] for r in results if r), None)
    if machine is None:
        return ["## Machine", "", "_No results yet._", ""]
    dates = ", ".join(f"{name} {r['measured_at']}" for name, r in zip(NAMES, results, strict=True) if r)
    return [
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {machine['cpu']} |",
        f"| Cores | {machine['cores']} |",
        f"| RAM | {machine['ram_gb']} GB |",
        f"| OS | {machine['os']} |",
        f"| Python | {machine['python']} |",
        f"| torch | {machine['torch']} |",
        f"| sentence-transformers | {machine['sentence_transformers']} |",
        f"| lancedb / pylance | {machine['lancedb']} / {machine['pylance']} |",
        "",
        f"Measured (UTC): {dates}.",
        "",
    ]


def targets_section(retrieval: dict | None, ingest: dict | None, latency: dict | None) -> list[str]:
    rows = []
    if retrieval:
        modes = retrieval["modes"]
        hybrid, dense, lexical = (modes[m]["ndcg@10"] for m in ("hybrid", "dense", "lexical"))
        rows.append(
            f"| Hybrid nDCG@10 above both dense and lexical alone (Somnia FAQ set) | hybrid {hybrid:.4f}, dense "
            f"{dense:.4f}, lexical {lexical:.4f} | {_mark(hybrid > dense and hybrid > lexical)} |"
        )
    else:
        rows.append("| Hybrid nDCG@10 above both dense and lexical alone | not measured | – |")
    if ingest:
        ratio = ingest["reingest_ratio"]
        rows.append(
            f"| Re-ingest of an unchanged corpus ≤ 5% of the first ingest | {ingest['reingest_s']:.2f} s vs "
            f"{ingest['first_ingest_s']:.1f} s = {100 * ratio:.2f}% | {_mark(ratio <= TARGET_REINGEST_RATIO)} |"
        )
    else:
        rows.append("| Re-ingest of an unchanged corpus ≤ 5% of the first ingest | not measured | – |")
    big = (latency or {}).get("sizes", {}).get(TARGET_P50_CHUNKS)
    if big:
        modes = big["modes"]
        figures = ", ".join(f"{m} {s['p50_ms']:.1f} ms" for m, s in modes.items())
        rows.append(
            f"| Retrieval p50 ≤ 20 ms at 100k chunks (default mode: hybrid) | {figures} | "
            f"{_mark(modes['hybrid']['p50_ms'] <= TARGET_P50_MS)} |"
        )
    else:
        rows.append("| Retrieval p50 ≤ 20 ms at 100k chunks | not measured | – |")
    return ["## Targets (from issue 2)", "", "| Target | Measured | Status |", "|---|---|---|", *rows, ""]


def retrieval_section(r: dict | None) -> list[str]:
    lines = ["## Retrieval quality: Somnia FAQ questions", ""]
    if r is None:
        return lines + _missing("bench_retrieval.py")
    build = r.get("build") or {}
    lines += [
        f"{r['queries']} FAQ questions (of {build.get('queries', '?')}; the rest have no answering page in the "
        f"corpus) over {r['corpus']} Somnia pages = {r['chunks']} chunks, {build.get('qrels', '?')} relevance "
        "judgements. The FAQ pages (and a section page that repeats one verbatim) are held out; qrels come from the "
        "answers' links and shared distinctive wording, as `bench/make_somnia_beir.py` documents. Same run as "
        "`citewise eval retrieval --beir bench/data/somnia_beir`.",
        "",
        "| Mode | " + " | ".join(f"{m}" for m in METRICS) + " | query p50 | query p95 |",
        "|---|" + "---:|" * (len(METRICS) + 2),
    ]
    for mode, f in r["modes"].items():
        cells = " | ".join(f"{f[m]:.4f}" for m in METRICS)
        lines.append(f"| {mode} | {cells} | {f['query_p50_ms']:.1f} ms | {f['query_p95_ms']:.1f} ms |")
    lines += [
        "",
        f"Ingest of the corpus: {r['ingest_s']:.1f} s. Query latency here ranks each query deep enough to fill 100 "
        "documents (for Recall@100), so it is higher than an answer's top-5 search below.",
        "",
        f"With {r['queries']} queries one query moves a mean by up to {1 / r['queries']:.3f}: differences of a "
        "few hundredths between modes are within noise on this set.",
        "",
    ]
    return lines


def ingest_section(r: dict | None) -> list[str]:
    lines = ["## Ingest throughput: Somnia docs", ""]
    if r is None:
        return lines + _missing("bench_ingest.py")
    s = r["settings"]
    return [
        *lines,
        f"`{r['corpus']}`: {r['files']} Markdown files, chunk size {s['chunk_size']} / overlap "
        f"{s['chunk_overlap']}, `{s['embeddings']}` on the CPU, batch {s['embed_batch_size']}.",
        "",
        "| | |",
        "|---|---:|",
        f"| Documents indexed (failed) | {r['documents_indexed']} ({r['documents_failed']}) |",
        f"| Chunks | {r['chunks']} |",
        f"| First ingest | {r['first_ingest_s']:.1f} s |",
        f"| Throughput | {r['chunks_per_s']:.1f} chunks/s |",
        f"| Model load (before the first ingest, not included) | {r['model_load_s']:.1f} s |",
        f"| Unchanged re-ingest | {r['reingest_s']:.3f} s ({r['reingest_chunks_embedded']} chunks embedded) |",
        f"| Re-ingest / first ingest | {100 * r['reingest_ratio']:.2f}% |",
        "",
    ]


def latency_section(r: dict | None) -> list[str]:
    lines = ["## Retrieval latency at 10k and 100k chunks", ""]
    if r is None:
        return lines + _missing("bench_latency.py")
    lines += [
        f"`Retriever.search(top_k={r['top_k']})`, result cache off, {r['queries']} queries (the Somnia FAQ "
        f"questions in four phrasings), {r['candidates']} candidates per side before fusion. Chunk text is sampled "
        f"Somnia sentences; vectors are {r['vectors']}. The ANN index (IVF-HNSW-SQ) is built from "
        f"{r['ann_index_threshold']:,} chunks on.",
        "",
        "| Chunks | Indexes | Mode | p50 | p95 | mean |",
        "|---:|---|---|---:|---:|---:|",
    ]
    for size, s in r["sizes"].items():
        for mode, t in s["modes"].items():
            indexes = ", ".join(s["indices"])
            lines.append(
                f"| {int(size):,} | {indexes} | {mode} | {t['p50_ms']:.1f} ms | {t['p95_ms']:.1f} ms | "
                f"{t['mean_ms']:.1f} ms |"
            )
    lines += [
        "",
        "Where the time goes (each part timed alone, same queries, p50 / p95):",
        "",
        "| Chunks | query embedding | store.dense | store.lexical (+cosine) | store.lexical alone | write | optimize |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, s in r["sizes"].items():
        p = s["parts"]
        cells = " | ".join(
            f"{p[k]['p50_ms']:.1f} / {p[k]['p95_ms']:.1f} ms"
            for k in ("embed_query", "store_dense", "store_lexical", "store_lexical_no_vector")
        )
        lines.append(f"| {int(size):,} | {cells} | {s['write_s']:.1f} s | {s['optimize_s']:.1f} s |")
    lines.append("")
    return lines


NAMES = ("retrieval_somnia", "ingest", "latency")


def main() -> None:
    retrieval, ingest, latency = (_load(name) for name in NAMES)
    lines = [
        "# Benchmarks",
        "",
        "Generated by `bench/report.py` from `bench/results/*.json`; rerun everything with `make bench`. "
        "These are measurements, not tests: nothing here is asserted in CI.",
        "",
        *targets_section(retrieval, ingest, latency),
        *machine_section([retrieval, ingest, latency]),
        *retrieval_section(retrieval),
        *ingest_section(ingest),
        *latency_section(latency),
    ]
    path = ROOT / "BENCHMARKS.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
