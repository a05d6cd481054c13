"""Build a BEIR folder from ClapNQ dev (../shared/eval/clapnq): 300 real questions over 600 Wikipedia passages.

    .venv/bin/python bench/make_clapnq_beir.py [--clapnq FILE] [--out bench/data/clapnq_beir]

corpus.jsonl   every distinct `context` passage of clapnq_dev.jsonl (answerable and unanswerable), `_id` = a hash
               of the passage, `title` = its Wikipedia title. The unanswerable questions' passages are near misses,
               so they make hard distractors.
queries.jsonl  the 300 answerable questions.
qrels/test.tsv each answerable question's own passage, grade 1.

A larger, cleaner set than the Somnia FAQ one (one judged passage per query, 300 queries), so differences between
fusion settings are less noisy. The output is generated, never committed (bench/data/ is gitignored).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLAPNQ = ROOT.parent / "shared" / "eval" / "clapnq" / "clapnq_dev.jsonl"


def build(source: Path, out: Path) -> dict:
    corpus: dict[str, dict] = {}
    queries, qrels = [], []
    for line in source.read_text().splitlines():
        row = json.loads(line)
        doc_id = hashlib.sha1(row["context"].encode()).hexdigest()[:16]
        corpus.setdefault(doc_id, {"_id": doc_id, "title": row.get("title", ""), "text": row["context"]})
        if row["answers"]:
            queries.append({"_id": row["id"], "text": row["question"]})
            qrels.append((row["id"], doc_id))
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus.values()))
    (out / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (out / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels)
    )
    return {"out": str(out), "corpus": len(corpus), "queries": len(queries)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clapnq", type=Path, default=CLAPNQ)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "data" / "clapnq_beir")
    args = parser.parse_args()
    print(json.dumps(build(args.clapnq, args.out)))


if __name__ == "__main__":
    main()
