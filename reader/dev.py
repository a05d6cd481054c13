"""Validation data for choosing the reader's framing and budget: the fitted question sets' questions with the
passages quote mode read for them, and a quick offline score of a reader on them.

    .venv/bin/python -m reader.dev build     # the fitted sets' homes (bench/quote_data.py builds them), searched
    .venv/bin/python -m reader.dev score CHECKPOINT_OR_ONNX

Only sets whose role is "fit" are read: judged sets are never used to choose anything. The figures are offline (one
search of the whole question, its passages read as quote mode reads them) and serve only to compare readers:
- top1: of the answerable questions where some passage read holds an expected string, the share whose best unit
  holds one;
- auc: how well the best unit's score (log-odds against "no answer") separates answerable from unanswerable
  questions;
- refused@10: the share of unanswerable questions refused at the threshold that refuses 10% of the answerable ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

WORK = ROOT / "reader" / "work"
DEV = WORK / "dev.jsonl"
FIT_SETS = ("citewise_docs", "fixtures", "somnia_a", "starlette_docs", "squadlike")


def build() -> None:
    """Each fitted set's questions with the passages a quote-mode search reads for them (the whole question
    searched, its first `quote.passages` results that hold a unit), from the homes bench/quote_data.py builds."""
    import quote_data
    from citewise.quote.reader import heading_line

    rows_out = []
    for name in FIT_SETS:
        assert quote_data.SETS[name].role == "fit", name
        for q, found in quote_data.read_passages(name):
            passages = [
                {"chunk_id": c.chunk_id, "heading": heading_line(c.title, c.chapter), "text": c.text, "units": c.units}
                for c in found
            ]
            rows_out.append(
                {"set": name, "id": q.id, "question": q.question, "answerable": q.answerable,
                 "gold": quote_data.expected(q), "passages": passages}
            )  # fmt: skip
    DEV.parent.mkdir(parents=True, exist_ok=True)
    with DEV.open("w", encoding="utf-8") as f:
        for row in rows_out:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows_out)} questions → {DEV}")


def _norm(text: str) -> str:
    import re

    return " ".join(re.sub(r"[`*_]+", "", text).lower().split())


def holds(text: str, gold: list[str]) -> bool:
    t = _norm(text)
    return any(_norm(g) in t for g in gold if g)


def auc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def evaluate(score_fn, rows: list[dict]) -> dict:
    """score_fn(question, passages) → per passage a list of unit scores (None for a unit never scored)."""
    by_set: dict[str, dict] = {}
    for row in rows:
        stats = by_set.setdefault(row["set"], {"top": 0, "reachable": 0, "pos": [], "neg": []})
        passages = row["passages"]
        scores = score_fn(row["question"], passages) if passages else []
        best, best_text = -1e9, ""
        for p, unit_scores in zip(passages, scores, strict=True):
            for (a, b, _), s in zip(p["units"], unit_scores, strict=True):
                if s is not None and s > best:
                    best, best_text = s, p["text"][a:b]
        if row["answerable"]:
            stats["pos"].append(best)
            reachable = any(holds(p["text"][a:b], row["gold"]) for p in passages for a, b, _ in p["units"])
            if reachable:
                stats["reachable"] += 1
                stats["top"] += holds(best_text, row["gold"])
        else:
            stats["neg"].append(best)
    out = {}
    for name, s in by_set.items():
        pos, neg = sorted(s["pos"]), s["neg"]
        threshold = pos[int(0.1 * len(pos))] if pos else 0.0
        out[name] = {
            "top1": round(s["top"] / max(1, s["reachable"]), 3),
            "auc": round(auc(pos, neg), 3),
            "refused@10": round(sum(n < threshold for n in neg) / max(1, len(neg)), 3),
        }
    return out


def load_rows() -> list[dict]:
    return [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build")
    score = sub.add_parser("score")
    score.add_argument("model", help="an ONNX reader folder")
    args = parser.parse_args()
    if args.command == "build":
        build()
        return
    from citewise.quote.reader import Reader

    reader = Reader(Path(args.model))

    def score_fn(question, passages):
        scored = reader.score(question, [(p["heading"], p["text"], p["units"]) for p in passages])
        return [list(s.units) for s in scored]

    print(json.dumps(evaluate(score_fn, load_rows()), indent=2))


if __name__ == "__main__":
    main()
