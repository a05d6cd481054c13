"""Fit quote mode's unit ranker: the reader's score combined with the evidence beside it, judged out of fold.

    .venv/bin/python bench/fit_quote_ranker.py [--no-write]

For every question of the fitted sets (role "fit", minus those the reader was trained on), the passages a quote-mode
search reads for it (`quote_data.read_passages`) are scored by the shipped reader, and every unit gets
`citewise.quote.compose.UNIT_FEATURES`: the reader's log-odds, how far below its passage's best unit it is, where its
passage ranked in the search, how much of the question it and its heading path hold, whether it names the question's
anchors, its kind. A logistic regression (each question weighing the same; inside a question, the units that hold an
expected answer against the others) says which unit holds the answer.

Reported per set, out of fold (the ranker fitted without that set): top-1 — the share of answerable questions whose
best unit holds an expected answer, of those where any unit read does — for the reader alone, for word overlap
alone, and for the ranker; and the ranker without each feature in turn (what each is worth beside the reader).

Writes the "ranker" entry of src/citewise/quote/decision.json and bench/results/quote_ranker.json.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import quote_data
from _common import ROOT, write_result
from citewise.quote import UNIT_FEATURES, Passage, analyse, shared_reader
from citewise.quote.compose import unit_features
from citewise.quote.reader import heading_line
from fit_quote_decision import TRAINED_ON, logistic

DECISION = ROOT / "src" / "citewise" / "quote" / "decision.json"


def rows_of(name: str) -> list[dict]:
    """Each answerable question with a gold string: its units' features and which hold the answer."""
    reader = shared_reader()
    out = []
    for q, found in quote_data.read_passages(name):
        strings = quote_data.expected(q)
        if not q.answerable or not strings or not found:
            continue
        question = analyse(q.question)
        passages = [Passage(i + 1, c) for i, c in enumerate(found)]
        scores = reader.score(
            question.focus,
            [(heading_line(c.title, c.chapter), c.text, p.units) for p, c in zip(passages, found, strict=True)],
        )
        units = unit_features(passages, [s.units for s in scores], question.terms, question.anchors)
        labels = [quote_data.holds(passages[slot].chunk.text[slice(*passages[slot].units[i][:2])], strings)
                  for slot, i, _ in units]  # fmt: skip
        out.append({"id": q.id, "units": [f for _, _, f in units], "labels": labels, "lexical": [
            f["covered_unit"] - 0.01 * slot - 0.001 * i for slot, i, f in units]})  # fmt: skip
    return out


def fit(rows: list[dict], features: tuple[str, ...]) -> tuple[np.ndarray, float]:
    xs, ys, ws = [], [], []
    for row in rows:
        pos = sum(row["labels"])
        neg = len(row["labels"]) - pos
        if not pos or not neg:
            continue
        for f, y in zip(row["units"], row["labels"], strict=True):
            xs.append([f[name] for name in features])
            ys.append(float(y))
            ws.append(1.0 / pos if y else 1.0 / neg)
    return logistic(np.array(xs), np.array(ys), np.array(ws))


def top1(rows: list[dict], score) -> float | None:
    reachable = [r for r in rows if any(r["labels"])]
    if not reachable:
        return None
    hits = 0
    for row in reachable:
        values = [score(f, i, row) for i, f in enumerate(row["units"])]
        best = max(range(len(values)), key=lambda i: (values[i], -i))
        hits += row["labels"][best]
    return round(hits / len(reachable), 4)


def linear(weights: np.ndarray, intercept: float, features: tuple[str, ...]):
    return lambda f, i, row: float(intercept + sum(w * f[n] for w, n in zip(weights, features, strict=True)))


def out_of_fold(data: dict[str, list[dict]], features: tuple[str, ...]) -> dict[str, float | None]:
    out = {}
    for held in data:
        others = [r for n, rows in data.items() if n != held for r in rows]
        w, b = fit(others, features)
        out[held] = top1(data[held], linear(w, b, features))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    names = [n for n, s in quote_data.SETS.items() if s.role == "fit" and n not in TRAINED_ON]
    data = {name: rows_of(name) for name in names}
    weights, intercept = fit([r for rows in data.values() for r in rows], UNIT_FEATURES)
    report: dict = {
        "features": list(UNIT_FEATURES),
        "weights": dict(zip(UNIT_FEATURES, map(float, np.round(weights, 4)), strict=True)),
        "intercept": round(intercept, 4),
        "fitted_on": names,
        "top1": {
            "reader": {n: top1(rows, lambda f, i, row: (f["reader"], -f["slot"])) for n, rows in data.items()},
            "word_overlap": {n: top1(rows, lambda f, i, row: row["lexical"][i]) for n, rows in data.items()},
            "ranker_out_of_fold": out_of_fold(data, UNIT_FEATURES),
        },
        "without": {},
    }
    for feature in UNIT_FEATURES:
        kept = tuple(f for f in UNIT_FEATURES if f != feature)
        report["without"][feature] = out_of_fold(data, kept)
    print(json.dumps(report, indent=1))
    if not args.no_write:
        decision = json.loads(DECISION.read_text())
        decision["ranker"] = {k: report[k] for k in ("features", "weights", "intercept", "fitted_on")}
        decision["ranker"]["script"] = "bench/fit_quote_ranker.py"
        DECISION.write_text(json.dumps(decision, indent=2) + "\n")
        write_result("quote_ranker", report)


if __name__ == "__main__":
    main()
