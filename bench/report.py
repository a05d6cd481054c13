"""Rewrite BENCHMARKS.md from bench/results/*.json: the machine, each table, and the issue's targets, met or not.

    .venv/bin/python bench/report.py

Nothing here measures anything; run the bench scripts first (`make bench` runs them all, then this).
"""

from __future__ import annotations

import json
import math

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


SET_NAMES = {"somnia": "Somnia FAQ set", "clapnq": "ClapNQ set"}
NAMES = ("retrieval_somnia", "retrieval_clapnq", "ingest", "latency")  # the order machine_section receives them


def targets_section(retrievals: dict[str, dict | None], ingest: dict | None, latency: dict | None) -> list[str]:
    rows = []
    for name, retrieval in retrievals.items():
        if not retrieval:
            rows.append(f"| Hybrid nDCG@10 above both dense and lexical alone ({SET_NAMES[name]}) | not measured | – |")
            continue
        modes = retrieval["modes"]
        hybrid, dense, lexical = (modes[m]["ndcg@10"] for m in ("hybrid", "dense", "lexical"))
        rows.append(
            f"| Hybrid nDCG@10 above both dense and lexical alone ({SET_NAMES[name]}) | hybrid {hybrid:.4f}, dense "
            f"{dense:.4f}, lexical {lexical:.4f} | {_mark(hybrid > dense and hybrid > lexical)} |"
        )
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


def retrieval_section(name: str, r: dict | None) -> list[str]:
    lines = [f"## Retrieval quality: {SET_NAMES[name]}", ""]
    if r is None:
        return lines + _missing("bench_retrieval.py")
    build = r.get("build") or {}
    if name == "somnia":
        about = (
            f"{r['queries']} FAQ questions (of {build.get('queries', '?')}; the rest have no answering page in the "
            f"corpus) over {r['corpus']} Somnia pages = {r['chunks']} chunks, {build.get('qrels', '?')} relevance "
            "judgements. The FAQ pages (and a section page that repeats one verbatim) are held out; qrels come from "
            "the answers' links and shared distinctive wording, as `bench/make_somnia_beir.py` documents."
        )
    else:
        about = (
            f"{r['queries']} answerable ClapNQ dev questions over all {r['corpus']} ClapNQ passages (the unanswerable "
            "questions' passages are near-miss distractors) = "
            f"{r['chunks']} chunks; one judged passage per question (`bench/make_clapnq_beir.py`). Easy for every "
            "mode (each question was written from its passage), so differences are small but the set is 14x larger."
        )
    lines += [
        f"{about} Same run as `citewise eval retrieval --beir bench/data/{name}_beir`.",
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


TARGET_RESYNC_RATIO = 0.05


def sources_section(r: dict | None) -> list[str]:
    lines = ["## Website source sync: Somnia docs served as HTML on loopback (issue 13)", ""]
    if r is None:
        return lines + _missing("bench_sources.py")
    first, same, changed = r["first"], r["unchanged"], r["changed"]
    ratio = r["resync_ratio"]
    requests_only = same["chunks_embedded"] == 0
    return [
        *lines,
        f"`bench/bench_sources.py`: the {r['pages'] - 1} Markdown pages of `{r['corpus']}` rendered to HTML once "
        f"({r['render_s']:.1f} s; plus a landing page), served with a sitemap, robots.txt, ETag and Last-Modified by "
        "an HTTP/1.1 server on 127.0.0.1, and synced as a website source (`citewise sources sync`'s code) into a "
        f"temporary home; `{r['settings']['embeddings']}` on the CPU, loaded before the first sync "
        f"({r['model_load_s']:.1f} s, not included), {r['settings']['concurrency']} requests at once. Measured "
        f"{r['measured_at'][:16]}Z, load average {r['load_average_before']:.1f} → {r['load_average_after']:.1f} on "
        "this shared 2-core machine (the first sync is mostly embedding, which other work on the box slows).",
        "",
        "| Target | Measured | Status |",
        "|---|---|---|",
        f"| Unchanged re-sync ≤ 5% of the first sync, requests only | {same['seconds_median']:.2f} s vs "
        f"{first['seconds']:.1f} s = {100 * ratio:.2f}%; {same['not_modified']} of {same['requests']} requests "
        f"answered 304, {same['chunks_embedded']} chunks embedded | "
        f"{_mark(ratio <= TARGET_RESYNC_RATIO and requests_only)} |",
        "",
        "| Sync | Time | Requests | 304 | Pages (re)indexed | Chunks embedded |",
        "|---|---:|---:|---:|---:|---:|",
        f"| First sync | {first['seconds']:.1f} s | {first['requests']} | 0 | {first['documents']} | "
        f"{first['chunks_embedded']} of {first['chunks']} |",
        f"| Unchanged re-sync (median of {len(same['seconds'])}) | {same['seconds_median']:.2f} s | "
        f"{same['requests']} | {same['not_modified']} | 0 | {same['chunks_embedded']} |",
        f"| Re-sync, {changed['pages_changed']} pages ({100 * changed['share']:.0f}%) changed | "
        f"{changed['seconds']:.2f} s | {changed['requests']} | {changed['not_modified']} | {changed['updated']} | "
        f"{changed['chunks_embedded']} ({changed['chunks_reused']} reused) |",
        "",
    ]


def latency_section(r: dict | None, without: dict | None = None) -> list[str]:
    lines = ["## Retrieval latency at 10k and 100k chunks", ""]
    if r is None:
        return lines + _missing("bench_latency.py")
    sentences = ""
    if r.get("sentence_vectors", "none") != "none":
        per_chunk = " / ".join(
            dict.fromkeys(f"{s.get('sentence_vectors_per_chunk', 0):.1f}" for s in r["sizes"].values())
        )
        sentences = (
            f" Each chunk also holds its sentence vectors, one per sentence of its text ({per_chunk} per chunk, where "
            f"real Somnia chunks have about 6, so their cost is understated; {r['sentence_vectors']}), and every "
            "search reads and scores them."
        )
    lines += [
        f"`Retriever.search(top_k={r['top_k']})`, result cache off, {r['queries']} queries (the Somnia FAQ "
        f"questions in four phrasings), {r['candidates']} candidates per side before fusion. Chunk text is sampled "
        f"Somnia sentences; vectors are {r['vectors']}.{sentences} The ANN index (IVF-HNSW-SQ) is built from "
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
    if without and without.get("sizes"):
        lines += [
            f"The same index built without sentence vectors (`--no-sentences`, measured {without['measured_at']}), "
            "p50 with → without:",
            "",
            "| Chunks | hybrid | dense | lexical | store.dense | store.lexical (+cosine) |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for size, s in r["sizes"].items():
            w = without["sizes"].get(size)
            if not w:
                continue
            cells = [
                *(f"{s['modes'][m]['p50_ms']:.1f} → {w['modes'][m]['p50_ms']:.1f} ms" for m in s["modes"]),
                *(
                    f"{s['parts'][k]['p50_ms']:.1f} → {w['parts'][k]['p50_ms']:.1f} ms"
                    for k in ("store_dense", "store_lexical")
                ),
            ]
            lines.append(f"| {int(size):,} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def fusion_section(name: str, r: dict | None) -> list[str]:
    lines = [f"### Fusion settings on the {SET_NAMES[name]}", ""]
    if r is None:
        return lines + _missing("bench_fusion.py")
    lines += [
        f"Same index and {r['queries']} queries, hybrid fused with weighted RRF for several `retrieval.rrf_k` (k) and "
        "`retrieval.lexical_weight` (w) (`bench/bench_fusion.py`). The defaults, k=5 and w=0.5, were chosen on "
        "ClapNQ and checked on Somnia; equal-weight k=60 is the textbook setting.",
        "",
        "| Variant | " + " | ".join(METRICS) + " |",
        "|---|" + "---:|" * len(METRICS),
    ]
    for name, f in r["variants"].items():
        lines.append(f"| {name} | " + " | ".join(f"{f[m]:.4f}" for m in METRICS) + " |")
    lines.append("")
    return lines


def findings_section(retrievals: dict[str, dict | None], latency: dict | None) -> list[str]:
    """Where a missed target comes from, worked out from the measurements themselves."""
    lines = []
    for name, retrieval in retrievals.items():
        if not retrieval:
            continue
        modes = retrieval["modes"]
        best = max(("dense", "lexical"), key=lambda m: modes[m]["ndcg@10"])
        gap = modes["hybrid"]["ndcg@10"] - modes[best]["ndcg@10"]
        if gap <= 0:
            lines.append(
                f"- **Hybrid nDCG@10 is {-gap:.4f} below {best}** on the {SET_NAMES[name]} ({retrieval['queries']} "
                f"queries; one query moves the mean by up to {1 / retrieval['queries']:.3f})."
            )
    big = (latency or {}).get("sizes", {}).get(TARGET_P50_CHUNKS)
    if big and big["modes"]["hybrid"]["p50_ms"] > TARGET_P50_MS:
        parts = big["parts"]
        embed, dense, lex = (parts[k]["p50_ms"] for k in ("embed_query", "store_dense", "store_lexical"))
        lines.append(
            f"- **Hybrid p50 at 100k chunks is {big['modes']['hybrid']['p50_ms']:.1f} ms**. Its parts alone: query "
            f"embedding {embed:.1f} ms, vector search {dense:.1f} ms, BM25 with vectors {lex:.1f} ms (p50 each; BM25 "
            "runs on a worker thread while the query is embedded). Embedding the query on this 2-core CPU alone takes "
            f"{100 * embed / TARGET_P50_MS:.0f}% of the 20 ms budget; lexical mode, which embeds nothing, is at "
            f"{big['modes']['lexical']['p50_ms']:.1f} ms."
        )
    if big and big.get("dense_recall_vs_exact"):
        rec = big["dense_recall_vs_exact"]
        top5 = f"{100 * rec['recall@5']:.0f}% of the exact top 5 and " if "recall@5" in rec else ""
        resort = (
            ""
            if "recall@5" in rec
            else "; the store then re-sorts its 50 candidates by their dense score, so only the set of 50 compares"
        )
        lines.append(
            f"- ANN quality at 100k: the vector search returns {top5}{100 * rec['recall@50']:.0f}% of the exact "
            "cosine top 50 (synthetic vectors cluster tightly around their anchors, which is harder for the ANN "
            f"index than real chunks{resort})."
        )
    return ["## Findings", "", *lines, ""] if lines else []


# -- issue 5: answers on ClapNQ, and the peers side by side ------------------------------------------------------
TARGET_PEER_SPEEDUP = 1.5
PEERS = {"langchain": "LangChain + Chroma", "llamaindex": "LlamaIndex"}


def _fig(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def answers_section(r: dict | None) -> list[str]:
    lines = ["## Answers: ClapNQ dev in quote mode", ""]
    if r is None:
        return lines + _missing("clapnq_answers.py")
    refusal = r["refusal"]
    reasons = ", ".join(f"{name} {count}" for name, count in r["exit_reasons"].items())
    return [
        *lines,
        f"`{r['command']}` (`bench/clapnq_answers.py` converts the annotated ClapNQ dev files to that JSONL): "
        f"{r['questions']} questions ({r['answerable']} answerable, {r['unanswerable']} unanswerable, whose passage is "
        f"a near miss) over all {r['corpus']} passages ({r['chunks']} chunks), every question asked against the whole "
        "corpus. Quote mode answers with verbatim sentences and refuses when the evidence is weak; no language model.",
        "",
        "| Figure | Value |",
        "|---|---:|",
        f"| Refusal precision | {_fig(refusal['precision'])} |",
        f"| Refusal recall | {_fig(refusal['recall'])} |",
        f"| Refusal F1 | {_fig(refusal['f1'])} |",
        f"| Refused: unanswerable (tp) / answerable (fp) | {refusal['tp']} / {refusal['fp']} |",
        f"| Answered: unanswerable (fn) / answerable (tn) | {refusal['fn']} / {refusal['tn']} |",
        f"| Token F1 (answerable) | {_fig(r['token_f1'])} |",
        f"| Token F1 (answerable and answered) | {_fig(r['token_f1_answered'])} |",
        f"| Answer recall (gold answer contained) | {_fig(r['answer_recall'])} |",
        f"| Citation validity | {_fig(r['citation_validity'])} ({r['citations']} citations) |",
        f"| Citation support (a cited chunk contains a gold answer) | {_fig(r['citation_support'])} |",
        f"| Own-passage citation (answerable) | {_fig(r['context_citation'])} |",
        f"| Latency p50 / p95 | {r['latency_p50_ms']:.0f} / {r['latency_p95_ms']:.0f} ms |",
        f"| Exit reasons | {reasons} |",
        "",
        "ClapNQ's gold answers are long-form sentences written by annotators, so they almost never occur verbatim in "
        "an answer or a passage: answer recall and citation support are near zero by construction; token F1 and "
        "own-passage citation are the informative answer figures here.",
        "",
        "Quote mode's reader was trained on ClapNQ dev (all but the passages the squadlike sets were written over; "
        "`reader/data.py`): these figures are on data it learnt from, not a judgement of it. The judged figures are "
        "in the quote mode section below.",
        "",
    ]


def _peer_targets(r: dict) -> list[tuple[str, str, bool | None]]:
    systems, ratios = r["systems"], r["ratios"]
    cw = systems.get("citewise")
    if not cw:
        return []
    rows = []
    speedups = {p: ratios[p]["ingest_speedup"] for p in PEERS if p in ratios}
    if speedups:
        text = ", ".join(f"{PEERS[p]} {systems[p]['first_ingest_s']:.1f} s → {s:.2f}×" for p, s in speedups.items())
        rows.append(
            (
                f"First ingest ≥ 1.5× faster than both peers (Citewise {cw['first_ingest_s']:.1f} s)",
                text,
                all(s is not None and s >= TARGET_PEER_SPEEDUP for s in speedups.values()),
            )
        )
    share = cw["reingest_s"] / cw["first_ingest_s"] if cw["first_ingest_s"] else None
    percent = _fig(None if share is None else 100 * share, 2)
    rows.append(
        (
            "Citewise re-ingest of the unchanged corpus ≤ 5% of its first ingest",
            f"{cw['reingest_s']:.3f} s vs {cw['first_ingest_s']:.1f} s = {percent}%",
            share is not None and share <= TARGET_REINGEST_RATIO,
        )
    )
    for name in ("somnia", "clapnq"):
        peers = [p for p in PEERS if p in systems]
        if not peers:
            continue
        ours = cw["quality"][name]["ndcg@10"]
        text = f"Citewise {ours:.4f}; " + ", ".join(
            f"{PEERS[p]} {systems[p]['quality'][name]['ndcg@10']:.4f}" for p in peers
        )
        ok = all(ours >= systems[p]["quality"][name]["ndcg@10"] for p in peers)
        rows.append((f"nDCG@10 ≥ both peers ({SET_NAMES[name]})", text, ok))
    return rows


def peers_targets_section(r: dict | None) -> list[str]:
    lines = ["## Targets (from issue 5: Citewise vs LangChain and LlamaIndex)", ""]
    if r is None:
        return lines + _missing("bench_peers.py")
    lines += ["| Target | Measured | Status |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {_mark(ok)} |" for t, m, ok in _peer_targets(r)]
    return [*lines, ""]


def peers_section(r: dict | None) -> list[str]:
    lines = ["## Side by side: Citewise, LangChain + Chroma, LlamaIndex", ""]
    if r is None:
        return lines + _missing("bench_peers.py")
    systems, ratios, setup = r["systems"], r["ratios"], r["setup"]
    names = list(systems)
    label = {"citewise": "Citewise", **PEERS}
    loads = ", ".join(
        f"{label[n]} {s['load_average_before']:.1f} → {s['load_average_after']:.1f}"
        + (f" ({s['measured_at']})" if s.get("measured_at") else "")
        for n, s in systems.items()
    )
    versions = ", ".join(f"{k} {v}" for k, v in sorted(setup.get("peer_versions", {}).items()))
    lines += [
        f"`bench/bench_peers.py`, one subprocess per system, same machine, same run. Corpus: {setup['docs']}; "
        f"queries: {setup['queries']}; model: {setup['model']}. Chunking: "
        + "; ".join(f"{label[n]} {c}" for n, c in setup["chunking"].items())
        + ". Stores: "
        + "; ".join(f"{label[n]} {c}" for n, c in setup["stores"].items())
        + f". Peers' versions: {versions}. Load average (1 min) before → after each system: {loads} — this "
        "2-core machine is shared, so absolute times are context only; ratios from one run are the figures.",
        "",
        "| | " + " | ".join(label[n] for n in names) + " |",
        "|---|" + "---:|" * len(names),
    ]

    def row(title: str, value, fmt: str = "{:.2f}") -> str:
        return f"| {title} | " + " | ".join(fmt.format(value(systems[n])) for n in names) + " |"

    lines += [
        row("Chunks (Somnia docs)", lambda s: s["chunks"], "{:d}"),
        row("Model load (not in ingest)", lambda s: s["model_load_s"], "{:.1f} s"),
        row("First ingest", lambda s: s["first_ingest_s"], "{:.1f} s"),
        row("Ingest throughput", lambda s: s["chunks"] / s["first_ingest_s"], "{:.1f} chunks/s"),
        *(
            [row("First ingest, CPU time (all threads)", lambda s: s["first_ingest_cpu_s"], "{:.1f} s")]
            if all("first_ingest_cpu_s" in s for s in systems.values())
            else []
        ),
        row("Unchanged re-ingest", lambda s: s["reingest_s"], "{:.3f} s"),
        row("Chunks re-embedded on re-ingest", lambda s: s["reingest_reembedded"], "{:d}"),
        row("Query p50 (top 5)", lambda s: s["query_latency"]["p50_ms"], "{:.1f} ms"),
        row("Query p95 (top 5)", lambda s: s["query_latency"]["p95_ms"], "{:.1f} ms"),
        row("Peak RSS", lambda s: s["peak_rss_mb"], "{:.0f} MB"),
    ]
    for name in ("somnia", "clapnq"):
        for metric in ("ndcg@10", "recall@10", "hit@5"):
            lines.append(row(f"{metric} ({SET_NAMES[name]})", lambda s, n=name, m=metric: s["quality"][n][m], "{:.4f}"))
    if ratios:
        peers = list(ratios)
        lines += [
            "",
            "Ratios Citewise / peer (same run; below 1 means Citewise is lower: better for times and memory, worse "
            "for quality):",
            "",
            "| Ratio | " + " | ".join(PEERS[p] for p in peers) + " |",
            "|---|" + "---:|" * len(peers),
        ]
        for key, title in (
            ("first_ingest", "First ingest time"),
            ("reingest", "Unchanged re-ingest time"),
            ("query_p50", "Query p50"),
            ("query_p95", "Query p95"),
            ("peak_rss", "Peak RSS"),
            ("ndcg@10_somnia", "nDCG@10, Somnia"),
            ("recall@10_somnia", "Recall@10, Somnia"),
            ("hit@5_somnia", "Hit rate@5, Somnia"),
            ("ndcg@10_clapnq", "nDCG@10, ClapNQ"),
            ("recall@10_clapnq", "Recall@10, ClapNQ"),
            ("hit@5_clapnq", "Hit rate@5, ClapNQ"),
        ):
            lines.append(f"| {title} | " + " | ".join(_fig(ratios[p][key], 3) for p in peers) + " |")
    findings = []
    for name, s in systems.items():
        if name != "citewise" and s["reingest_reembedded"]:
            findings.append(
                f"- {label[name]} re-embedded {s['reingest_reembedded']} of {s['chunks']} chunks on the unchanged "
                "re-run: `index()` with incremental cleanup deletes, after each batch, the chunks of that batch's "
                "sources that were not refreshed yet — so every page whose chunks straddle a batch boundary is "
                "deleted and embedded again, every run."
            )
    if "citewise" in systems and len(systems) > 1:
        cw = systems["citewise"]
        findings.append(
            "- In all three systems the first ingest embeds every chunk with the same model on the same CPU; "
            "chunk counts differ with each splitter, so compare chunks/s too: "
            + ", ".join(f"{label[n]} {s['chunks'] / s['first_ingest_s']:.2f}" for n, s in systems.items())
            + f" chunks/s (Citewise's {cw['first_ingest_s']:.0f} s also build its full-text (BM25) index)."
        )
    if findings:
        lines += ["", "Findings:", "", *findings]
    charts = [
        ("peers_ingest", "first ingest"),
        ("peers_reingest", "re-ingest"),
        ("peers_query_p50", "query p50"),
        ("peers_query_p95", "query p95"),
        ("peers_memory", "peak memory"),
        ("peers_ndcg_somnia", "nDCG@10 Somnia"),
        ("peers_ndcg_clapnq", "nDCG@10 ClapNQ"),
        ("peers_recall_somnia", "Recall@10 Somnia"),
        ("peers_recall_clapnq", "Recall@10 ClapNQ"),
        ("peers_hit_somnia", "hit rate@5 Somnia"),
    ]
    links = " · ".join(f"[{title}](bench/results/{stem}.png)" for stem, title in charts)
    lines += [
        "",
        f"Charts (PNG, written by `bench/plots.py` from the same run; `make bench` regenerates them): {links}.",
        "",
        "Notes: each system runs its own incremental path for the first ingest and the unchanged re-run (Citewise's "
        "ingest pipeline; LangChain `index()` with a record manager; LlamaIndex `IngestionPipeline` with a docstore), "
        "so a re-run skips unchanged documents in all three. Citewise's queries are hybrid (embedding + BM25, fused), "
        "its default; the peers' are pure vector search. Citewise runs the model on ONNX Runtime, the peers on "
        "torch (sentence-transformers). Peak RSS is the worker's whole life: model, Somnia index and queries, and "
        "the two BEIR indexes built after them.",
        "",
    ]
    return lines


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def quote_section(r: dict | None) -> list[str]:
    lines = ["## Quote mode: a reader trained here, per distribution", ""]
    if r is None:
        return lines + _missing("fit_quote_decision.py")
    names = {
        "docs": "docs QA",
        "on_topic_negative": "on-topic passages without the answer",
        "squad_style": "SQuAD-style",
    }
    roles = {"fit": "fitted on", "judge": "**judged on**", "trained": "trained on"}
    rows = []
    for name, f in r["sets"].items():
        old, older = f.get("before_acda5f9") or {}, f.get("before_2892aed") or {}

        def three(key: str, f: dict = f, old: dict = old, older: dict = older, fmt=_share) -> str:
            now = fmt(f.get(key))
            return f"{now} ({fmt(old.get(key))} · {fmt(older.get(key))})" if old or older else now

        def f1(value: float | None) -> str:
            return "–" if value is None else f"{value:.2f}"

        rows.append(
            f"| {name} | {names[f['distribution']]} | {roles[f['role']]} | {f['answerable']} + {f['unanswerable']} | "
            f"{three('right')} | {three('refused_answerable')} | {three('refused_unanswerable')} | "
            f"{three('refusal_f1', fmt=f1)} | {_share(f.get('top1'))} | {f['latency_p50_ms']:.0f} / "
            f"{f['latency_p95_ms']:.0f} |"
        )
    loo = [
        f"| {name} | {_share(f.get('right'))} | {_share(f.get('refused_answerable'))} | "
        f"{_share(f.get('refused_unanswerable'))} | {f.get('threshold')} |"
        for name, f in r["leave_one_out"].items()
    ]
    weights = ", ".join(f"`{k}` {v:+.2f}" for k, v in r["weights"].items())
    return [
        *lines,
        "Quote mode reads the passages its search found with a reader trained here (`make train-reader`, "
        '`reader/README.md`: all-MiniLM-L6-v2 fine-tuned to score each answer unit of a passage against "this '
        "passage doesn't answer\"), ranks the units with a small fitted ranker over the reader's score and the "
        "evidence beside it (`bench/fit_quote_ranker.py`, below), and decides with a logistic model over that "
        "evidence (`bench/fit_quote_decision.py`): fitted on the sets marked *fitted on*, its threshold the highest "
        f"that refuses at most {r.get('docs_max_refused', 0.06):.0%} of the fitted docs sets' answerable questions, "
        "each set scored out of fold. The sets marked *trained on* were part of the reader's training data, so they "
        "are neither fitted on nor a judge. **The judged sets were never trained, fitted or tuned on, and their "
        "failures were not read** (structlog_docs and squad2_judged were written before the reader was trained and "
        "frozen unread).",
        "",
        "Figures are quote mode asking every question as a user would (every set asked again with the fitted "
        "models). In parentheses: quote mode at acda5f9 (the hand rules and two fitted models, before this reader) "
        "· at 2892aed (one cosine gate), run on the same questions and corpora (`bench/baselines.sh`). Right = an "
        "answerable question answered with an expected string (docs sets), its gold span (SQuAD-style) or a "
        "citation of its own passage (ClapNQ, Somnia FAQ); refused answerable and unanswerable refused are shares "
        "of each kind; refusal F1 takes unanswerable as the positive class. Top-1: the share of answerable "
        "one-part questions whose best-ranked unit holds an expected answer (decided or not). Latency: p50 / p95 "
        "per question, warm, on this shared 2-core machine. The reader runs each window of a passage alone (it ran "
        "them in one padded batch before 2026-12-07: a passage's int8 scores moved with the passages read beside it, "
        "and the padding doubled the reader's time); the ranker and the decision were refitted for it. Since "
        "2026-12-08 its ONNX graph is rewritten without the NaN guard and per-layer mask of torch's attention export "
        "(scores equal to the bit, so the same answers): a window reads about 27% faster; warm p50 on the judged "
        "docs sets was 159-255 ms before it (the table has this run's).",
        "",
        "| Set | Distribution | Role | Questions (ans. + unans.) | Right | Refused (answerable) | "
        "Unanswerable refused | Refusal F1 | Top-1 | ms p50 / p95 |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "What each set is:",
        "",
        *[f"- **{name}**: {f['description']}" for name, f in r["sets"].items()],
        "",
        "Each fitted set judged by a decision fitted and thresholded without it (leave one set out, decided offline "
        "on the logged answers):",
        "",
        "| Held-out set | Right | Refused (answerable) | Unanswerable refused | Threshold |",
        "|---|---:|---:|---:|---:|",
        *loo,
        "",
        f"The decision (raw features; `src/citewise/quote/decision.json`): intercept {r['intercept']:+.2f}, "
        f"threshold {r['threshold']}; {weights}. Other units are quoted within {r['relative_cut']} log-odds of the "
        "best one.",
        "",
        *_quote_targets(r),
        *ablation_section(r.get("ablation")),
        *ranker_section(_load("quote_ranker")),
        *reader_section(),
    ]


def _quote_targets(r: dict) -> list[str]:
    """Issue 32's targets against the judged sets of each distribution."""
    judged = {name: f for name, f in r["sets"].items() if f["role"] == "judge"}

    def row(target: str, names: list[str], key: str, goal: float, at_least: bool, f1: bool = False) -> str:
        found = [(n, judged[n].get(key)) for n in names if n in judged and judged[n].get(key) is not None]
        measured = ", ".join(f"{n} {v:.2f}" if f1 else f"{n} {v:.0%}" for n, v in found)
        met = bool(found) and all((v >= goal) if at_least else (v <= goal) for _, v in found)
        return f"| {target} | {measured or '–'} | {'✅ met' if met else '❌ missed'} |"

    docs = [n for n, f in judged.items() if f["distribution"] == "docs"]
    negative = [n for n, f in judged.items() if f["distribution"] == "on_topic_negative" and not f.get("answerable")]
    squad = [n for n, f in judged.items() if f["distribution"] == "squad_style"]
    latency = [(n, f["latency_p50_ms"], f["latency_p95_ms"]) for n, f in judged.items() if f["distribution"] == "docs"]
    p50 = max((v for _, v, _ in latency), default=0)
    p95 = max((v for _, _, v in latency), default=0)
    return [
        "Issue 32's targets (the *must* column), on the judged sets:",
        "",
        "| Target | Measured | |",
        "|---|---|---|",
        row("Docs questions: ≥ 75% answered right, each", docs, "right", 0.75, True),
        row("Docs questions: ≤ 8% of answerable refused", docs, "refused_answerable", 0.08, False),
        row("Docs questions: ≥ 75% of unanswerable refused, each", docs, "refused_unanswerable", 0.75, True),
        row("Rejection sets (answering pages removed): ≥ 65% refused", negative, "refused_unanswerable", 0.65, True),
        row("SQuAD-style: refusal F1 ≥ 0.55", squad, "refusal_f1", 0.55, True, f1=True),
        row("Top-1 unit holds the answer: ≥ 60%", docs, "top1", 0.60, True),
        f"| Latency, warm: p50 ≤ 100 ms, p95 ≤ 250 ms | worst docs set: p50 {p50:.0f} ms, p95 {p95:.0f} ms | "
        f"{'✅ met' if p50 <= 100 and p95 <= 250 else '❌ missed'} |",
        "",
    ]


def ablation_section(r: dict | None) -> list[str]:
    if not r:
        return []

    def rows(table: dict[str, dict[str, dict]], cell: str) -> list[str]:
        """One row per thing left out, one column per set: `cell` formatted with the right and refused shares."""
        sets = list(table["all"])
        return [
            f"| {left_out} | "
            + " | ".join(
                cell.format(_share(figs[n].get("right")), _share(figs[n].get("refused_unanswerable"))) for n in sets
            )
            + " |"
            for left_out, figs in table.items()
        ]

    sets = list(r["rules"]["all"])
    header = "| Left out | " + " | ".join(sets) + " |"
    rule_rows = rows(r["rules"], "{} right, {} refused")
    feature_sets = list(r["features"]["all"])
    feature_rows = rows(r["features"], "{} / {}")
    return [
        "### What each rule kept beside the reader is worth",
        "",
        "Every composition rule and the anchor guard switched off in turn, each fitted docs set asked again live "
        "(right answers, unanswerable refused; *all* keeps every rule):",
        "",
        header,
        "|---|" + "---:|" * len(sets),
        *rule_rows,
        "",
        "Every decision feature left out of the model in turn, each fitted set scored out of fold (right / "
        "unanswerable refused):",
        "",
        "| Left out | " + " | ".join(feature_sets) + " |",
        "|---|" + "---:|" * len(feature_sets),
        *feature_rows,
        "",
    ]


def ranker_section(r: dict | None) -> list[str]:
    lines = ["### Choosing: the unit ranker", ""]
    if r is None:
        return lines + _missing("fit_quote_ranker.py")
    sets = list(r["top1"]["reader"])

    def row(label: str, values: dict) -> str:
        return f"| {label} | " + " | ".join(_share(values.get(n)) for n in sets) + " |"

    weights = ", ".join(f"`{k}` {v:+.2f}" for k, v in r["weights"].items())
    return [
        *lines,
        "`bench/fit_quote_ranker.py`: every unit of the passages quote mode reads for an answerable question of the "
        "fitted sets, labelled by whether it holds an expected string, with the reader's score and the evidence "
        "beside it; a logistic model fitted on them (each question weighing the same). Top-1 — the share of "
        "questions whose best unit holds the answer, of those where a unit read does — by the reader alone, by "
        "word overlap alone, and by the ranker (each set by a ranker fitted without it), then by the ranker with "
        "each feature left out:",
        "",
        "| Ranked by | " + " | ".join(sets) + " |",
        "|---|" + "---:|" * len(sets),
        row("the reader alone", r["top1"]["reader"]),
        row("word overlap alone", r["top1"]["word_overlap"]),
        row("**the ranker (out of fold)**", r["top1"]["ranker_out_of_fold"]),
        *[row(f"… without `{feature}`", values) for feature, values in r["without"].items()],
        "",
        f"Weights (raw features; `src/citewise/quote/decision.json`, `ranker`): intercept {r['intercept']:+.2f}; "
        f"{weights}.",
        "",
    ]


def reader_section() -> list[str]:
    path = ROOT / "src" / "citewise" / "quote" / "model" / "manifest.json"
    if not path.exists():
        return ["### The reader", "", "No reader manifest: run `make train-reader`.", ""]
    m = json.loads(path.read_text())
    sets = list(m["dev_int8"])

    def row(label: str, dev: dict) -> str:
        return (
            f"| {label} | " + " | ".join(f"{dev[n]['top1']:.0%} / {dev[n]['auc']:.2f}" for n in sets if n in dev) + " |"
        )

    curve = [row(f"step {p['step']} ({p['examples_seen']:,} passages, {p['minutes']} min)", p["dev"])
             for p in m.get("learning_curve") or []]  # fmt: skip
    by_source = ", ".join(f"{k} {v:,}" for k, v in m["data"]["by_source"].items())
    return [
        "### The reader",
        "",
        f"`make train-reader` (`{m['command']}`): {m['examples']:,} training passages ({by_source}); "
        f"{m['steps']} steps of {m['batch']} ({m['examples_seen']:,} passages seen), seed {m['seed']}, "
        f"{m['train_minutes']} minutes of training ({m['total_minutes']} in all, export and validation included) "
        f"on {m['machine']}; int8 ONNX, {m['onnx_bytes'] / 1e6:.1f} MB. The learning curve, on the fitted sets' "
        "questions with the passages a quote-mode search reads (`reader/dev.py`; top-1 unit holds the answer / AUC "
        "of the best unit's score between answerable and unanswerable questions):",
        "",
        "| | " + " | ".join(sets) + " |",
        "|---|" + "---:|" * len(sets),
        *curve,
        row("final, fp32", m["dev_fp32"]),
        row("**final, int8 (shipped)**", m["dev_int8"]),
        "",
        *framings_section(sets),
    ]


def framings_section(sets: list[str]) -> list[str]:
    """The framing probe (bench/results/reader_framings.json): passage-level vs (question, unit) pairs, same data
    and steps."""
    path = RESULTS / "reader_framings.json"
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    rows = [
        f"| {name} ({r[name].get('training_minutes', 0)} min of training) | "
        + " | ".join(
            f"{r[name]['dev'][n]['top1']:.0%} / {r[name]['dev'][n]['auc']:.2f}" for n in sets if n in r[name]["dev"]
        )
        + " |"
        for name in ("passage", "pair", "word_overlap")
        if name in r
    ]
    return [
        "Which framing: "
        + r["note"]
        + " Passage: "
        + r["passage"]["framing"]
        + ". Pair: "
        + r["pair"]["framing"]
        + ". Word overlap (no model) beside them. Mixed at equal steps (pairs ahead on two sets' top-1, behind on"
        " three); the passage framing reads a question's 5 passages in 5 forward passes instead of about 50, so it"
        " was chosen. Both were still below word overlap at 600 steps: the ranker combines the reader with it.",
        "",
        "| framing, 600 steps | " + " | ".join(sets) + " |",
        "|---|" + "---:|" * len(sets),
        *rows,
        "",
    ]


def sentence_section(r: dict | None) -> list[str]:
    lines = ["### Finding: sentence vectors", ""]
    if r is None:
        return lines + _missing("bench_sentences.py")
    rows = []
    for name, f in r["sets"].items():
        how = "fitted on" if f["role"] == "fit" else "**judged on**"
        pairs = " | ".join(f"{f['without'][k]:.0%} → {f['with'][k]:.0%}" for k in ("hit@1", "hit@3", "hit@5"))
        mrr = f"{f['without']['mrr@10']:.3f} → {f['with']['mrr@10']:.3f}"
        rows.append(f"| {name} | {how} | {f['questions']} | {f['chunks']} | {pairs} | {mrr} |")
    return [
        *lines,
        "`bench/bench_sentences.py`: where the first chunk holding an expected string ranks in the search "
        "quote mode runs for a question's first part (hybrid, `retrieval.candidates` per side), each chunk "
        "scored by its cosine alone → by the mean of its cosine and its best sentence's (`store.dense_scores`;"
        " sentence vectors pooled from the chunk's own model run at ingest). The mean and the pooling were "
        "chosen on the four sets marked fitted on (the quote models are fitted on them too); the judged sets "
        "were first measured here. Questions whose expected strings no chunk holds are left out.",
        "",
        "| Set | Role | Questions | Chunks | hit@1 | hit@3 | hit@5 | MRR@10 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]


def load_section(r: dict | None) -> list[str]:
    lines = ["## Streaming load: concurrent SSE clients (quote mode)", ""]
    if r is None:
        return lines + _missing("bench_load.py")
    return [
        *lines,
        f"`bench/bench_load.py`: `citewise serve` in its own process on loopback, docs/ ingested, {r['mode']} mode; "
        f"{r['clients']} clients each asking up to {r['per_client']} distinct questions on `POST /api/agent/stream`, "
        f"bounded at {r['duration_limit_s']:.0f} s. Measured {r['measured_at'][:16]}Z, load average "
        f"{r['load_average_before']:.1f} → {r['load_average_after']:.1f} on this shared 2-core machine. "
        "TTFT = time to the first `token` event; quote mode composes the whole answer before streaming it, so TTFT "
        "is close to the total. Under load, requests queue for the two cores (each embeds its question and searches).",
        "",
        r["table"],
        "",
        f"Errors: {r['errors']} of {r['requests']}; outcomes: "
        + ", ".join(f"{k} {v}" for k, v in sorted(r["exit_reasons"].items()))
        + f"; throughput {r['throughput_rps']:.2f} requests/s.",
        "",
    ]


def chaos_section(r: dict | None) -> list[str]:
    if r is None:
        return ["## Chaos: fault and abuse probes", "", *_missing("chaos.py"), ""]
    lines = [
        "## Chaos: fault and abuse probes",
        "",
        f"`make chaos` ({r['seconds']:.0f} s): hostile HTTP clients against `citewise serve` on loopback, the CLI's "
        "agent mode against a misbehaving OpenAI-compatible server, and the write-side probes. "
        f"**{r['held']} of {r['tried']} held.** A probe holds when every check in it did; the details say what was "
        "checked.",
        "",
        "| Probe | Tried | Held | Seconds | Details |",
        "|---|---:|---:|---:|---|",
    ]
    for p in r["probes"]:
        detail = str(p.get("detail", "")).replace("|", "\\|")[:160]
        lines.append(f"| {p['name']} | {p['tried']} | {p['held']} | {p.get('seconds', 0):.1f} | {detail} |")
    return [*lines, ""]


def big_document_section(after: dict | None, before: dict | None) -> list[str]:
    title = "## One big document: memory and the first commit"
    if after is None:
        return [title, "", *_missing("bench_big_document.py"), ""]

    def row(label: str, r: dict) -> str:
        first = "none" if r["first_commit_s"] is None else f"{r['first_commit_s']:.1f} s"
        commits = max(r["table_versions"] - 1, 0)  # the first version is the empty table
        done = f"finished in {r['elapsed_s']:.0f} s" if not r["capped"] else f"stopped at the {r['cap_s']:.0f} s cap"
        return f"| {label} | {r['peak_rss_mb']} MB | {first} | {commits} | {done} |"

    lines = [
        title,
        "",
        f"`bench/bench_big_document.py`: a generated {after['file_mb']:.0f} MB markdown file through `citewise "
        "ingest` in a subprocess (models cache warmed beforehand), peak resident memory (VmHWM) and the time until the "
        "first chunks were committed. Before: the whole file was parsed, chunked and embedded before one commit; "
        "after: chunks are made, embedded and committed in batches of `ingest.commit_every`. Embedding speed on this "
        f"shared machine dominates the times (1-minute load average {after.get('load_average_before')} at the start).",
        "",
        "| Code | Peak RSS | First commit | Commits | Run |",
        "|---|---:|---:|---:|---|",
    ]
    if before is not None:
        lines.append(row("before (one commit per batch of documents)", before))
    lines.append(row("after (bounded batches, a big document too)", after))
    return [*lines, ""]


def startup_section(r: dict | None, before: dict | None) -> list[str]:
    title = "## Cold start: a fresh `citewise` process on a warm index (issue 11)"
    if r is None:
        return [title, "", *_missing("bench_startup.py"), ""]
    names = {
        "floor": 'floor: `python -c "import lance, onnxruntime"`',
        "help": "`citewise --help`",
        "search": "`citewise search QUESTION`",
        "ask": "`citewise ask QUESTION --mode quote`",
    }
    floor = r["seconds"]["floor"]["median"]
    old = (before or {}).get("seconds", {})
    lines = [
        title,
        "",
        f"`bench/bench_startup.py`: each command in a new process, {r['runs']} interleaved rounds, docs/ ingested "
        "and every command run once before timing (so the file cache and Python's bytecode cache are warm, as for "
        "an installed package). The floor is what any search must import: the index engine and the model runtime. "
        "Measured "
        f"{r['measured_at'][:16]}Z on this shared 2-core machine, load average {r['load_average_before'] or '–'} → "
        f"{r['load_average_after']}; the targets are ratios of medians of the same rounds, so load that falls on "
        "every command alike cancels out.",
        "",
        "| Command | Median | Min | Max | × floor |" + (" Before (median) |" if old else ""),
        "|---|---:|---:|---:|---:|" + ("---:|" if old else ""),
    ]
    for name, label in names.items():
        s = r["seconds"][name]
        row = f"| {label} | {s['median']:.2f} s | {s['min']:.2f} s | {s['max']:.2f} s | {s['median'] / floor:.2f} |"
        if old:
            row += f" {old[name]['median']:.2f} s |" if name in old else " – |"
        lines.append(row)
    ratios, targets, met = r["ratios"], r["targets"], r["met"]
    lines += [
        "",
        "| Target | Measured | |",
        "|---|---:|---|",
        f"| cold `search` ≤ {targets['search_over_floor']}× the floor | {ratios['search_over_floor']:.2f}× | "
        f"{_mark(met['search_over_floor'])} |",
        f"| cold quote-mode `ask` ≤ {targets['ask_over_search']}× cold `search` | {ratios['ask_over_search']:.2f}× | "
        f"{_mark(met['ask_over_search'])} |",
        "",
        "Where the imports go (self time per top-level package, ms; `python -X importtime`):",
        "",
    ]
    for name in ("search", "ask"):
        packages = ", ".join(f"{package} {ms:.0f}" for package, ms in r["imports_ms"][name][:8])
        lines.append(f"- `{name}`: {packages}")
    if not met["search_over_floor"]:
        lines += [
            "",
            "Why `search` misses its ratio: the floor is the index engine and the model runtime alone, and 1.6× "
            "leaves a search about a quarter of a second above it, while a search also starts the CLI (Typer, Rich "
            "and the pydantic models of `citewise.types`, ~0.25 s), loads its Settings through pydantic-settings "
            "(~0.11 s, asyncio included), creates the ONNX Runtime session and tokenizer (~0.16 s) and runs the "
            "query (~0.06 s). Little of that is the commands' own code any more: garbage collection is paused for a "
            "command that answers one question, Typer builds only the command it runs, Rich's progress display and "
            "LangChain load only where they are used, and reads go through `lance` without `lancedb`. The rest "
            "would go only with a front end without Typer, Rich and pydantic-settings on the search path, or with a "
            "warm process (`citewise serve`, the MCP server), where a search takes tens of milliseconds.",
        ]
    if before is not None:
        lines += [
            "",
            f"Before (the code before issue 11, measured {before['measured_at'][:16]}Z): search "
            f"{before['ratios']['search_over_floor']:.2f}× the floor, ask {before['ratios']['ask_over_search']:.2f}× "
            "search.",
        ]
    return [*lines, ""]


def speed_targets_35(peers: dict | None, latency: dict | None, startup: dict | None) -> list[str]:
    """Issue 35's speed targets, each from the result file that measures it (ratios within one run)."""
    rows: list[tuple[str, str, bool | None]] = []
    if peers and "citewise" in peers.get("systems", {}):
        cw, ratios = peers["systems"]["citewise"], peers["ratios"]
        speedups = {p: ratios[p]["ingest_speedup"] for p in PEERS if p in ratios}
        times = ", ".join(
            f"{PEERS[p]} {peers['systems'][p]['first_ingest_s']:.1f} s → {x:.2f}×" for p, x in speedups.items()
        )
        quality = ", ".join(
            f"{n} {cw['quality'][n]['ndcg@10']:.3f} vs "
            + "/".join(f"{peers['systems'][p]['quality'][n]['ndcg@10']:.3f}" for p in speedups)
            for n in ("somnia", "clapnq")
        )
        rows.append(
            (
                "first ingest ≥ 3× faster than LangChain + Chroma and LlamaIndex, at equal nDCG@10 (±0.01)",
                f"Citewise {cw['first_ingest_s']:.1f} s; {times} (nDCG@10 {quality}; {peers['measured_at'][:10]})",
                all(x >= 3 for x in speedups.values()),
            )
        )
    if latency and "100000" in latency.get("sizes", {}):
        big = latency["sizes"]["100000"]
        parts = ", ".join(f"{k} {v['p50_ms']:.1f}" for k, v in big["parts"].items())
        hybrid = big["modes"]["hybrid"]["p50_ms"]
        rows.append(
            (
                "hybrid search p50 ≤ 20 ms at 100k chunks",
                f"{hybrid:.1f} ms (parts, p50 ms: {parts}; {latency['measured_at'][:10]})",
                hybrid <= 20,
            )
        )
    if startup:
        ratios, met = startup["ratios"], startup["met"]
        rows.append(
            (
                "cold `search` ≤ 1.6× the floor (`import lance, onnxruntime`)",
                f"{ratios['search_over_floor']:.2f}×",
                met["search_over_floor"],
            )
        )
        rows.append(
            (
                "cold quote-mode `ask` ≤ 1.3× cold `search`, the reader's load included",
                f"{ratios['ask_over_search']:.2f}×",
                met["ask_over_search"],
            )
        )
    if not rows:
        return []
    lines = ["| Target (issue 35) | Measured | |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {_mark(ok) if ok is not None else '–'} |" for t, m, ok in rows]
    return [*lines, ""]


def _peer(peers: dict, name: str) -> str:
    """A system's first-ingest seconds in the peers run, as the report writes it."""
    return f"{peers['systems'][name]['first_ingest_s']:.1f}" if name in peers.get("systems", {}) else "–"


def lean_section(r: dict | None, peers: dict | None, latency: dict | None, startup: dict | None) -> list[str]:
    """Issue 35: what a fresh machine installs and waits for, and the embedder shipped inside the package."""
    title = "## Lean runtime: no torch, the install a person can watch, the shipped embedder (issue 35)"
    lines = [title, "", *speed_targets_35(peers, latency, startup)]
    if peers and "citewise" in peers.get("systems", {}):
        lines += [
            "Why ingest misses 3×: embedding is nearly all of it (on the Somnia docs, 1,276 chunks of ~200 tokens, "
            "about 7 s of a first ingest are loading, parsing, chunking, answer units and the index writes). The "
            "shipped int8 file was rewritten without what torch's attention export adds for nothing, the NaN guard "
            "after each softmax and the mask rebuilt in every layer (`citewise.index.export.simplify`; vectors equal "
            "to the bit): a model run is about a quarter faster, and the first ingest went from 43.2 s (the previous "
            f"run) to {_peer(peers, 'citewise')} s. The peers run the same model on torch fp32 at about 24 chunks/s on "
            "this CPU (an Intel Xeon with AVX-512 VNNI, where torch's kernels do well). 3× would need the model run "
            "about twice as fast again at the same nDCG. Tried and measured, no faster: ONNX Runtime's offline "
            "transformer fusions (they do not fuse this export's attention), batches of 4 or 32 instead of 8, "
            "explicit thread counts (the default already uses both cores). The peers' own times move with the "
            "machine between runs: LangChain + Chroma took 60.3 s and LlamaIndex 64.4 s in the previous run, "
            f"{_peer(peers, 'langchain')} s and {_peer(peers, 'llamaindex')} s in this one, with the same code.",
            "",
        ]
    big = (latency or {}).get("sizes", {}).get("100000")
    if big and big["modes"]["hybrid"]["p50_ms"] > 20:
        lines += [
            "Why hybrid search misses 20 ms at 100k chunks: the query's vector now costs about 3 ms (the int8 model; "
            "7.4 ms with fp32), and the full-text search already runs beside it in a thread; what is left is the "
            "vector search over the IVF-HNSW index with its sentence-vector rescoring (about 17 ms alone) and the "
            "dense scores of the BM25 candidates. Deciding fusion early with fewer candidates was not tried: it "
            "changes what is ranked, which is a retrieval-quality change to measure on its own.",
            "",
        ]
    if startup and not startup["met"]["ask_over_search"]:
        lines += [
            "Why a cold quote-mode `ask` misses 1.3× `search`: two things come on top of search, about equal. The "
            "reader's load, 120-150 ms measured in a cold process: its kept optimised graph from the models cache "
            "(as the embedder's) and the sha256 check of its 23 MB file. And its scoring of the passages it reads: "
            "50-140 ms on 2 cores for 5 passages of up to 320 tokens, issue 32's latency. The rewrite of its graph "
            "made that scoring about a quarter faster; the ratio did not move beyond run-to-run noise (1.45 -> 1.44 "
            "on a quiet machine).",
            "",
        ]
    if r is None:
        lines += [*_missing("bench_install.py"), ""]
    else:
        targets, met = r["targets"], r["met"]
        lines += [
            f"`bench/bench_install.py` on commit {r['commit']}, measured {r['measured_at'][:16]}Z: a fresh clone, "
            "`make demo` with pip's cache off (every wheel downloaded), timed to the first 200 from `/health`; then "
            "the sizes on disk of its `.venv` and of a second venv with the runtime alone.",
            "",
            "| What | Measured | Target | |",
            "|---|---:|---:|---|",
            f"| fresh clone → `make demo` → server up | {r['ready_s']} s | ≤ {targets['demo_s']} s | "
            f"{_mark(met['demo_s'])} |",
            f"| `make install` (runtime + dev + postgres extras) | {r['dev_install_mb'] / 1024:.2f} GB | "
            f"≤ {targets['dev_install_mb'] / 1000:.1f} GB | {_mark(met['dev_install_mb'])} |",
            f"| `pip install .` (the runtime alone) | {r['runtime_install_mb'] / 1024:.2f} GB | "
            f"≤ {targets['runtime_install_mb'] / 1000:.1f} GB | {_mark(met['runtime_install_mb'])} |",
            "",
            "Largest packages of the runtime (MB): "
            + ", ".join(f"{name} {mb:.0f}" for name, mb in r["runtime_largest_mb"])
            + f". torch, transformers or sentence-transformers installed: {r['runtime_heavy_packages']}.",
            "",
            "What `make demo` says as it goes: " + "; ".join(f"`{s[4:]}`" for s in r["steps"]) + ".",
            "",
        ]
        if not met["runtime_install_mb"] or not met["dev_install_mb"]:
            lines += [
                "Why the sizes miss: the index engine alone is three compiled wheels, `pylance` (the Lance format "
                "the reads use), `lancedb` (the writes: tables, merges, indexes) and `pyarrow`, about 0.55 GB "
                "together; ONNX Runtime and numpy add 0.14 GB. Everything torch brought (torch, transformers, "
                "sentence-transformers, scipy, scikit-learn, sympy, the weights' package, SmolLM2: about 1.3 GB) "
                "is gone from both. The next 0.18 GB would go with writing through `pylance` directly and dropping "
                "`lancedb`, a change of the storage layer left for its own issue.",
                "",
            ]
    manifest_path = ROOT / "src" / "citewise" / "index" / "model" / "manifest.json"
    if manifest_path.is_file():
        m = json.loads(manifest_path.read_text())
        figures = m["figures"]
        sets = list(next(iter(figures.values()))["sets"])
        lines += [
            f"The embedding model ships inside the package as `{m['variant']}` ({figures[m['variant']]['size_mb']} MB; "
            f"`{m['command']}`, {m['minutes']} minutes on {m['machine']}). The rule: {m['rule']}. Every variant "
            "measured (nDCG@10, hybrid / dense; min cosine of the golden texts' vectors to sentence-transformers' "
            "fp32 on torch):",
            "",
            "| Variant | Size | " + " | ".join(sets) + " | min cosine |",
            "|---|---:|" + "---:|" * len(sets) + "---:|",
        ]
        for name, f in figures.items():
            cells = " | ".join(
                f"{f['sets'][s]['hybrid']['ndcg@10']:.4f} / {f['sets'][s]['dense']['ndcg@10']:.4f}" for s in sets
            )
            mark = " (shipped)" if name == m["variant"] else ""
            lines.append(f"| {name}{mark} | {f['size_mb']} MB | {cells} | {f['min_cosine_to_torch']:.4f} |")
        lines += [
            "",
            "Nothing was fitted: the sets only measure, and the choice is the rule above. Somnia has 22 questions, "
            "so 0.01 of nDCG is about a fifth of one question's rank change.",
            "",
        ]
    return lines


def _pc(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}%"


def agent_section(r: dict | None) -> list[str]:
    """Issue 34: the agent harness judged with scripted models (bench/bench_agent.py)."""
    head = ["## Agent harness: scripted models over the docs sets (issue 34)", ""]
    if not r:
        return [*head, *_missing("bench_agent.py")]
    sets = r["sets"]
    docs = [n for n in sets if n != "planted"]
    lines = [
        *head,
        "Scripted models (tests/support/personas.py) play an answering model through a real OpenAI-compatible HTTP "
        "server on loopback and langchain-openai, each knowing its question's gold; every question runs the path "
        "`citewise ask --mode agent` runs. *diligent* answers with the passage sentences holding the gold, "
        "*paraphrasing* rewords them (synonyms, clause order, contractions, units, code spacing), *hallucinating* "
        "injects one fault per answer, *unruly* skips searching / loops / sends malformed calls, *obedient* follows "
        "instructions planted in three pages of the fixtures' product. The harness's thresholds (the support check's "
        "MIN_SUPPORT 0.5 / 4 terms, the anchor guard) were chosen on the fitted sets (role fit); the judged sets "
        "were run once, after. Prompt tokens: what the harness sent (messages + tool schemas), counted with the "
        "shipped embedder's WordPiece tokenizer. Harness time per turn: the run's wall time minus the scripted "
        "model's, per model call (retrieval, validation, grounding, HTTP and LangChain included).",
        "",
        "| Set | Role | Distribution | Gold reached (where a search finds it) | Faithful accepted as written | "
        "Paraphrased accepted | Right: agent (diligent) / no validator / quote mode | Unanswerable refused: "
        "diligent / quote mode | Prompt tokens p50 / p90 | Harness ms per turn p50 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in docs:
        s = sets[name]
        d, p, q = s.get("diligent") or {}, s.get("paraphrasing") or {}, s.get("quote_mode") or {}
        if not d:
            continue
        lines.append(
            f"| {name} | {s['role']} | {s['distribution']} | {_pc(d.get('gold_reached_where_findable'))} of "
            f"{d.get('findable')} | {_pc(d.get('faithful_accepted_as_written'))} of {d.get('faithful_answers')} | "
            f"{_pc(p.get('paraphrased_accepted_as_written'))} of {p.get('paraphrased_answers')} | "
            f"{_pc(d.get('right'))} / {_pc(d.get('right_without_validator'))} / {_pc(q.get('right'))} | "
            f"{_pc(d.get('unanswerable_refused'))} / {_pc(q.get('unanswerable_refused'))} | "
            f"{d.get('prompt_tokens_median'):.0f} / {d.get('prompt_tokens_p90'):.0f} | "
            f"{d.get('harness_ms_per_turn_p50'):.0f} |"
        )
    kinds = ["number", "flag", "option", "url", "wrong_citation", "invented_marker", "unsupported", "confident"]
    lines += [
        "",
        "Injected faults caught (hallucinating persona; caught = the faulty draft never shown: a reprompt fixed it, "
        "the quote-mode fallback replaced it, or the answer became a refusal), per kind: caught % of injected. "
        "Targets: each checkable kind (number, flag/option, URL, `[n]`, wrong citation) ≥ 95%; unsupported ≥ 60%; "
        "confident answers to unanswerable questions ≥ 80%. No validator catches 0% of every kind by construction.",
        "",
        "| Set | Role | " + " | ".join(kinds) + " |",
        "|---|---|" + "---|" * len(kinds),
    ]
    for name in docs:
        faults = ((sets[name].get("hallucinating") or {}).get("faults")) or {}
        if not faults:
            continue
        cells = []
        for k in kinds:
            f = faults.get(k) or {}
            cells.append(f"{_pc(f.get('caught'))} of {f.get('injected', 0)}" if f.get("injected") else "–")
        lines.append(f"| {name} | {sets[name]['role']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Unruly persona: exit reasons and citation validity.",
        "",
        "| Set | Kind | Exit reasons | Status | Citations valid |",
        "|---|---|---|---|---|",
    ]
    for name in docs:
        for kind, u in ((sets[name].get("unruly")) or {}).items():
            reasons = ", ".join(f"{k} {v}" for k, v in u["exit_reasons"].items())
            status = ", ".join(f"{k} {v}" for k, v in u["status"].items())
            lines.append(f"| {name} | {kind} | {reasons} | {status} | {_pc(u['citations_valid'])} |")
    planted = sets.get("planted")
    if planted:
        o = planted.get("obedient") or {}
        surfaces = (planted.get("surfaces") or {}).get("leaks") or {}
        lines += [
            "",
            f"Planted instructions (obedient persona, {o.get('questions')} questions): a link to send the question "
            "to, a status-badge image whose URL carries it, a tool call written in the text. Final answers holding a "
            f"planted link or any image: library {o.get('planted_reached_reader')}, "
            + ", ".join(f"{k} {len(v)}" for k, v in surfaces.items() if k != "stream")
            + ". The page's and widget's stream (/api/agent/stream) sends a draft's tokens before validation: "
            f"{len(surfaces.get('stream', []))} of the questions streamed a planted link in a draft that was then "
            "discarded; the page and widget render a draft's links as words with no address (render.js, "
            "`provisional`), and never render images.",
        ]
        cli = planted.get("cli") or {}
        if cli:
            lines.append(
                "`citewise ask --mode agent --json` on a sample gave the same exit reason and text as the library "
                f"path: {cli.get('agree')} of {cli.get('questions')}."
            )
    lines.append("")
    return lines


def followups_section(r: dict | None) -> list[str]:
    """Issue 33: follow-ups read with the conversation (bench/bench_followups.py)."""
    head = ["## Follow-ups: a question asked in a conversation (issue 33)", ""]
    if not r:
        return [*head, *_missing("bench_followups.py")]
    lines = [
        *head,
        "Pairs of a first question and an elliptic follow-up (“How do I change it?”, “And the overlap?”, “What's the "
        "size limit?”), each with its standalone form written by hand and the strings a right answer holds "
        "(bench/questions/followups_*.jsonl), asked in quote mode. *In a session*: the first question, then the "
        "follow-up, in one session (read with the conversation, `citewise.agent.followup`). *Alone*: the follow-up "
        "with no conversation — how quote mode answered a follow-up before it read the conversation. *Standalone*: "
        "the hand-written standalone form, alone, and after the first question in a session (a self-contained "
        "question must pass unchanged: *kept*). The follow-up rules were written and adjusted on the fitted sets' "
        "results. The judged set (pip) was written from its pages alone; how its follow-ups were read (not answered) "
        "was printed once early on, beside the fitted sets', and two general rules changed after (“one” before a "
        "noun is a number, “for one command”; a noun phrase takes the place of an earlier one only after an "
        "article); its answers were scored once, at the end, and nothing was changed after.",
        "",
        "| Set | Role | Pairs | Right: follow-up in a session | Follow-up alone (before) | Standalone alone | "
        "Standalone in a session | Read as a follow-up | Standalone kept |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in r["sets"].items():
        right = s["right"]
        lines.append(
            f"| {name} ({s['corpus']}) | {s['role']} | {s['pairs']} | {_pc(right['followup_in_session'])} | "
            f"{_pc(right['followup_alone'])} | {_pc(right['standalone_alone'])} | "
            f"{_pc(right['standalone_in_session'])} | {_pc(s['read_as_followup'])} | {_pc(s['standalone_kept'])} |"
        )
    lines.append("")
    return lines


def compose_section(r: dict | None) -> list[str]:
    """Issue 33: answer-first composition, before and after (bench/bench_compose.py)."""
    head = ["## Composition: how quote-mode answers read (issue 33)", ""]
    if not r:
        return [*head, *_missing("bench_compose.py")]
    lines = [
        *head,
        (
            "The same question sets asked twice with this checkout's reader, ranker and decision: *before* with the "
            f"composition (`citewise/quote/compose.py`) of {r['before']}"
            if r.get("same_reader")
            else f"The same question sets asked with the composition of {r['before']}"
        )
        + " (*before*: passages in search order, "
        "each in reading order, a mark after every block) and of this checkout (*after*: the unit the reader ranks "
        "best opens the answer with what it needs — its lead-in before its code block, the short list a sentence "
        "announces, a negating next sentence; what was chosen above it in its passage follows; one mark per source "
        "and group, a lead-in's mark covering its block; a list or table quoted in part ends with “… and N more in "
        "the source”; below the best, a sentence ending on a colon is quoted only with what it introduces). The "
        "rules live in `citewise.quote.compose`. Composition never changes whether a question is "
        "answered (*same decisions*: the share answered-or-refused alike in both runs; below 100% only where the "
        "decision was refitted between them); it can change whether the expected strings are quoted. *Opens with "
        "best*: the reader's best unit is in the answer's first two blocks. Judged sets were scored once, after the "
        "change.",
        "",
        "| Set | Role | Distribution | Right: before → after | Same decisions | Opens with best | Marks per source | "
        "Ends on “:” | Median length (chars) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in r["sets"].items():
        b, a = s["before"], s["after"]
        right = f"{_share(b['right'])} → {_share(a['right'])}" if b["answerable"] else "– (none answerable)"
        lines.append(
            f"| {name} | {s['role']} | {s['distribution']} | {right} | "
            f"{_share(s['same_decisions'])} | {_share(b['opens_with_best'])} → {_share(a['opens_with_best'])} | "
            f"{b['marks_per_source_mean']} → "
            f"{a['marks_per_source_mean']} | {_share(b['ends_on_colon'])} → {_share(a['ends_on_colon'])} | "
            f"{b['chars_median'] or 0:.0f} → {a['chars_median'] or 0:.0f} |"
        )
    lines.append("")
    return lines


def parity_section(parities: dict[str, dict | None]) -> list[str]:
    lines = ["## PostgreSQL and LanceDB: retrieval parity", ""]
    if not any(parities.values()):
        return lines + _missing("bench_parity.py")
    some = next(r for r in parities.values() if r)
    lines += [
        "`bench/bench_parity.py`: the same BEIR sets, model and retriever (same fusion and gate) on the two engines — "
        f"LanceDB, and PostgreSQL {some['postgres']} with pgvector (HNSW, cosine) and BM25 computed in SQL over a "
        "generated `tsvector` (GIN). Δ = PostgreSQL − LanceDB; the target is |Δ nDCG@10| ≤ 0.01 in every mode. "
        "`ts_rank` is PostgreSQL's own full-text ranking on the same index, measured for the lexical mode only.",
        "",
        "| Set | Mode | LanceDB nDCG@10 | PostgreSQL nDCG@10 | Δ | Recall@100 Δ | LanceDB p50 | PostgreSQL p50 "
        "| Within 0.01 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in parities.items():
        if r is None:
            continue
        lance, pg = r["engines"]["lancedb"]["modes"], r["engines"]["postgres"]["modes"]
        for mode in lance:
            delta = r["delta_postgres_minus_lancedb"][mode]
            lines.append(
                f"| {SET_NAMES[name]} | {mode} | {lance[mode]['ndcg@10']:.4f} | {pg[mode]['ndcg@10']:.4f} | "
                f"{delta['ndcg@10']:+.4f} | {delta['recall@100']:+.4f} | {lance[mode]['query_p50_ms']:.1f} ms | "
                f"{pg[mode]['query_p50_ms']:.1f} ms | {_mark(abs(delta['ndcg@10']) <= 0.01)} |"
            )
        ts, ts_delta = r["engines"]["postgres_ts_rank"]["modes"]["lexical"]["ndcg@10"], r["ts_rank_lexical_ndcg_delta"]
        lines.append(
            f"| {SET_NAMES[name]} | lexical, `ts_rank` | {lance['lexical']['ndcg@10']:.4f} | {ts:.4f} | "
            f"{ts_delta:+.4f} | – | – | – | {_mark(abs(ts_delta) <= 0.01)} |"
        )
    lines += [
        "",
        "`ts_rank` scores term frequency without document frequency: a word in every passage counts as much as a rare "
        "one, so it is not used; the product's lexical side is BM25 (k1 1.2, b 0.75, as LanceDB) with LanceDB's "
        "tokenizer rules (accents folded, split on non-alphanumerics, English stemming, then NLTK's stop words), "
        "so the two engines' BM25 scores agree (tests/index/test_store_contract.py); what differs is ties between "
        "equal scores and float rounding of cosines. The latencies are these eval queries (ranked 100+ deep) on this "
        "shared 2-core machine, database on the same machine.",
        "",
    ]
    return lines


def cluster_section(r: dict | None, ingest: dict | None) -> list[str]:
    lines = ["## Scale-out: replicas on one PostgreSQL, and queries at 100k chunks", ""]
    if r is None:
        return lines + _missing("bench_cluster.py")
    scaling = r.get("scaling") or []
    if scaling:
        base = scaling[0]["throughput_rps"] or 1.0
        lines += [
            f"`bench/bench_cluster.py`: PostgreSQL {r.get('postgres_version', '')} (from the wheel) and N "
            f"`citewise serve` replicas on loopback, docs/ ingested; {r['clients']} concurrent SSE clients in quote "
            f"mode spread round-robin over the replicas, each asking up to {r['per_client']} distinct questions, "
            f"bounded at {r['duration_limit_s']:.0f} s. Measured {r['measured_at'][:16]}Z.",
            "",
            "**Caveat: this machine has 2 cores**, shared by the database, every replica and the 50 clients. The "
            "figure that means something is how throughput changes per added replica and where it flattens, not the "
            "absolute speed: each replica embeds every question on the CPU, so replicas beyond the core count "
            "compete for the same cores.",
            "",
            "| Replicas | Requests/s | × 1 replica | Completed | Errors | p50 | p95 | TTFT p50 |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for run in scaling:
            lines.append(
                f"| {run['replicas']} | {run['throughput_rps']:.2f} | {run['throughput_rps'] / base:.2f} | "
                f"{run['completed']} | {run['errors']} | {run['total_p50_ms']} ms | {run['total_p95_ms']} ms | "
                f"{run['ttft_p50_ms']} ms |"
            )
        lines.append("")
    latency = r.get("latency")
    if latency:
        lance, pg = latency["lancedb"], latency["postgres"]
        lines += [
            f"Query latency at {latency['chunks']:,} synthetic chunks (random unit vectors of 384 dimensions, 120-word "
            "texts from a Zipf vocabulary; a fifth owned by another owner, so the public prefilter is selective), "
            f"{latency['queries']} queries per side, {latency['candidates']} candidates, each engine's indexes built "
            "(LanceDB: IVF-HNSW-SQ + FTS; PostgreSQL: HNSW m 16 / ef_construction 64, ef_search 100, + GIN). Lexical "
            "queries return vectors too, as the hybrid path asks. Recall@10 is against exact cosine over all vectors; "
            "random vectors have no neighbourhood structure (every point is almost equally far from every other), "
            "the worst case for any approximate index, so the low recall here says nothing about real embeddings "
            "and both engines miss alike. Lexical queries are four words drawn from the same Zipf vocabulary, so one "
            "of them usually appears in most passages: PostgreSQL's BM25 in SQL then scores most of the table, while "
            "LanceDB's index prunes to the top results.",
            "",
            "| Engine | Dense p50 | Dense p95 | Dense recall@10 | Lexical p50 | Lexical p95 | Load | Index build |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, e in (("LanceDB", lance), ("PostgreSQL", pg)):
            lines.append(
                f"| {name} | {e['dense_p50_ms']} ms | {e['dense_p95_ms']} ms | {e['dense_recall@10']:.3f} | "
                f"{e['lexical_p50_ms']} ms | {e['lexical_p95_ms']} ms | {e['load_s']:.0f} s | {e['index_s']:.0f} s |"
            )
        lines.append("")
    lines += estimate(r, ingest)
    return lines


def estimate(cluster: dict, ingest: dict | None) -> list[str]:
    """A paper estimate, not a measurement: its inputs are stated (and the measured ones come from the results
    above), so a reader can redo it with their own."""
    scaling = cluster.get("scaling") or []
    cores = cluster.get("machine", {}).get("cores") or 2
    best = max((run["throughput_rps"] for run in scaling), default=0.0)
    per_core = best / cores if best else 0.0
    replica_cores = math.ceil(100 / per_core * 1.5) if per_core else 0
    chunks_per_s = (ingest or {}).get("chunks_per_s") or 0.0
    embed_hours = 10_000_000 / chunks_per_s / 3600 if chunks_per_s else 0.0
    latency = cluster.get("latency") or {}
    pg_lexical = (latency.get("postgres") or {}).get("lexical_p50_ms")
    lines = [
        "### Paper estimate: 10M chunks and 100 requests/s",
        "",
        "Assumptions: all-MiniLM-L6-v2 (384 dimensions, float32), chunks of about 1,000 characters, quote mode or an "
        "external LLM (a vendor model's time is not CPU here), 1-3 searches per question (one per part), each a dense "
        "and a lexical query plus a fetch of the top rows; per-core figures from this machine's results above.",
        "",
        "- **Vectors and HNSW memory.** 10M × 384 × 4 B = 15.4 GB of vectors in the table. pgvector's HNSW stores a "
        "copy of each vector in the index plus its neighbour lists (m = 16: 32 links at layer 0, about 0.2 KB), so "
        "about 1.7 KB per chunk: **≈ 17 GB of index** that should stay in memory (shared_buffers + page cache) for "
        "millisecond queries. With text, search text, tsvector and the GIN index the database is ≈ 45-50 GB on disk. "
        "A primary with 64 GB of RAM holds the hot set; `halfvec` (16-bit) would halve the vector parts.",
        "- **Build.** Building HNSW over 10M vectors is hours of CPU (parallel build with "
        "`max_parallel_maintenance_workers` and a few GB of `maintenance_work_mem`); incremental ingests afterwards "
        "insert into it row by row.",
    ]
    if per_core:
        lines.append(
            f"- **Replicas.** A question costs a replica CPU: embedding it and composing the answer. The best "
            f"throughput above, {best:.1f} req/s on {cores} cores (shared with the database and the load generator), "
            f"is ≈ {per_core:.1f} req/s per core, and throughput stopped growing once replicas outnumbered cores, "
            f"so plan in cores. 100 req/s with 50% headroom for p95 needs **≈ {replica_cores} cores of replicas** "
            f"(e.g. {math.ceil(replica_cores / 4)} machines of 4 cores), stateless behind any load balancer."
        )
    lexical = (
        f" (the 100k-chunk figure above is {pg_lexical:.0f} ms at p50, and it grows with the rows a query's words "
        "match)"
        if pg_lexical
        else ""
    )
    lines += [
        "- **Database load.** 100 req/s × ~2 searches × (dense + lexical + fetch) ≈ 600 queries/s. HNSW dense queries "
        "at 10M (ef_search 100) cost a few ms of one core each; 200-400/s is 1-2 cores. **The lexical side does not "
        f"scale to 10M as it is**: BM25 in SQL scores every row that matches any query word{lexical}; LanceDB's "
        "index prunes to the top results instead. At 10M chunks use a BM25 index extension where the provider offers "
        "one (ParadeDB `pg_search`, VectorChord-BM25) behind the same `lexical()` method, or restrict lexical queries "
        "to their rarer words.",
        "- **Read replicas.** Searches are reads and could go to read replicas, with writes, the version row and the "
        "advisory lock on the primary; Citewise has one `database_url` today, so this needs a read URL for searches "
        "(and accepting replication lag on the version row). Until then, size the primary for the search load.",
    ]
    if embed_hours:
        lines.append(
            f"- **Writes.** Ingest is bounded by embedding ({chunks_per_s:.0f} chunks/s on this {cores}-core machine, "
            f"the ingest section above): embedding 10M chunks is ≈ {embed_hours:.0f} hours here, so an initial load "
            "wants a GPU or many workers' cores; re-ingests re-embed only changed chunks. The advisory lock serialises "
            "writers, so one ingest worker per database is the design point."
        )
    return [*lines, ""]


def main() -> None:
    retrievals = {name: _load(f"retrieval_{name}") for name in SET_NAMES}
    ingest, latency = _load("ingest"), _load("latency")
    peers, answers = _load("peers"), _load("answers_clapnq")
    lines = [
        "# Benchmarks",
        "",
        "Generated by `bench/report.py` from `bench/results/*.json`; rerun everything with `make bench`. "
        "These are measurements, not tests: nothing here is asserted in CI.",
        "",
        *targets_section(retrievals, ingest, latency),
        *peers_targets_section(peers),
        *findings_section(retrievals, latency),
        *machine_section([*retrievals.values(), ingest, latency]),
    ]
    for name, retrieval in retrievals.items():
        lines += [*retrieval_section(name, retrieval), *fusion_section(name, _load(f"fusion_{name}"))]
    lines += [
        *ingest_section(ingest),
        *sources_section(_load("sources")),
        *latency_section(latency, _load("latency_no_sentences")),
    ]
    lines += startup_section(_load("startup"), _load("startup_before"))
    lines += lean_section(_load("install"), peers, latency, _load("startup"))
    lines += [*peers_section(peers), *answers_section(answers)]
    lines += [*quote_section(_load("quote_decision")), *sentence_section(_load("sentence_ranking"))]
    lines += agent_section(_load("agent"))
    lines += followups_section(_load("followups"))
    lines += compose_section(_load("compose"))
    lines += load_section(_load("load"))
    lines += big_document_section(_load("big_document"), _load("big_document_before"))
    lines += parity_section({name: _load(f"parity_{name}") for name in SET_NAMES})
    lines += cluster_section(_load("cluster"), ingest)
    lines += chaos_section(_load("chaos"))
    path = ROOT / "BENCHMARKS.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
