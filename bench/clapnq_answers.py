"""Answer quality on ClapNQ dev in quote mode: `citewise eval answers --jsonl` on 300 answerable + 300 unanswerable.

    .venv/bin/python bench/clapnq_answers.py [--mode quote] [--limit N] [--seed 0] [--keep FILE]

Converts the original annotated ClapNQ files (../shared/eval/clapnq/annotated_data_dev_clapnq_dev_{answerable,
unanswerable}.jsonl) to the JSONL shape `citewise eval answers --jsonl` reads, in a temporary file (the data is
never committed):

    {"id", "question": input, "answers": [every non-empty output[].answer] (none → unanswerable),
     "context": [passages[].text], "title": passages[0].title}

then runs exactly the command a user would, `citewise eval answers --jsonl TMP --mode quote --json --cache-dir
bench/data/eval-cache` (the cache makes a rerun skip the ingest), and writes its JSON to
bench/results/answers_clapnq.json. All 597 distinct passages form one corpus and every question is asked against
all of them; an unanswerable question's passage is a near miss (same topic, no answer), so refusing it is hard.
`--keep FILE` keeps the converted JSONL for your own runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, write_result

CLAPNQ = ROOT.parent / "shared" / "eval" / "clapnq"
FILES = ("annotated_data_dev_clapnq_dev_answerable.jsonl", "annotated_data_dev_clapnq_dev_unanswerable.jsonl")
CACHE = ROOT / "bench" / "data" / "eval-cache"


def convert(source: Path, out: Path) -> dict:
    """Write the questions of both annotated files to `out` as eval-answers JSONL; return counts."""
    rows = []
    for name in FILES:
        for line in (source / name).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            passages = row.get("passages") or []
            answers = [o["answer"] for o in row.get("output") or [] if (o.get("answer") or "").strip()]
            rows.append(
                {
                    "id": row["id"],
                    "question": row["input"],
                    "answers": list(dict.fromkeys(answers)),
                    "context": [p["text"] for p in passages if p.get("text")],
                    "title": passages[0].get("title", "") if passages else "",
                }
            )
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    answerable = sum(bool(r["answers"]) for r in rows)
    return {"questions": len(rows), "answerable": answerable, "unanswerable": len(rows) - answerable}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clapnq", type=Path, default=CLAPNQ, help="folder with the annotated ClapNQ files")
    parser.add_argument("--mode", default="quote")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="also keep the converted JSONL here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="clapnq-answers-") as tmp:
        jsonl = args.keep or Path(tmp) / "clapnq_dev.jsonl"
        counts = convert(args.clapnq, jsonl)
        command = [
            str(Path(sys.executable).parent / "citewise"),
            "eval",
            "answers",
            "--jsonl",
            str(jsonl),
            "--mode",
            args.mode,
            "--seed",
            str(args.seed),
            "--cache-dir",
            str(CACHE),
            "--details",
            str(ROOT / "bench" / "data" / "answers_clapnq_details.jsonl"),
            "--json",
        ]
        if args.limit:
            command += ["--limit", str(args.limit)]
        load_before = round(os.getloadavg()[0], 2)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"citewise eval answers failed (exit {done.returncode})")
        report = json.loads(done.stdout.strip().splitlines()[-1])
    shown = " ".join(["citewise", *command[1:]]).replace(str(jsonl), "clapnq_dev.jsonl").replace(f"{ROOT}/", "")
    path = write_result(
        "answers_clapnq",
        {"command": shown, "converted": counts, "wall_s": round(time.perf_counter() - started, 1), **report},
        load_before=load_before,
    )
    refusal = report["refusal"]
    print(
        f"ClapNQ dev, mode {report['mode']}: {report['questions']} questions; refusal precision "
        f"{refusal['precision']}, recall {refusal['recall']}, F1 {refusal['f1']} (tp {refusal['tp']}, fp "
        f"{refusal['fp']}, fn {refusal['fn']}, tn {refusal['tn']}); token F1 {report['token_f1']}; citation "
        f"validity {report['citation_validity']}; own-passage citation {report['context_citation']}\n→ {path}"
    )


if __name__ == "__main__":
    main()
