"""Fit quote mode's sentence ranker: which candidate sentences of the retrieved passages hold the answer.

    .venv/bin/python bench/fit_quote_ranker.py [--no-write]

For every answerable question of the docs sets quote mode is fitted on (bench/quote_data.py, role "fit",
distribution "docs"), the passages are retrieved as quote mode retrieves them (`quote.passages` of the search's
best, the question spelled as the search corrected it) and every candidate quote — sentence, short list item
whole, table row, label line, code block — gets the ranker's features (`citewise.quote.compose.RANKER_FEATURES`,
the hand-weighed relevance among them) and a label: whether it holds one of the question's expected strings. A
logistic regression (L2, numpy, Newton's method) is fitted on them, each set weighing the same and, inside a
question, its positive and its negative candidates weighing the same, so no set's size and no passage's length
decides the model. SQuAD-style and ClapNQ
sets are left out: their labels (a gold span, a long-form answer) say little about which sentence of a docs page a
reader needs, and adding them lowered the leave-one-set-out figures on the docs sets.

Reported: for each fit set, how often one of the first k candidates holds the answer (k = 1, 2, 3, 4), ranked by the
hand-weighed relevance and by a ranker fitted without that set (leave one set out), and the same on the judged docs
sets for the ranker fitted on all fit sets. Writes the "ranker" entry of src/citewise/quote/decision.json (read by
QuoteSettings) and bench/results/quote_ranker.json. Run bench/fit_quote_decision.py --rerun afterwards: the decision
sees what the ranker chose.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import fit_quote_decision
import quote_data
from _common import ROOT, write_result
from citewise.agent.quote_policy import quote_search_depth
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever, apply_corrections
from citewise.quote import analyse, readable
from citewise.quote.compose import RANKER_FEATURES, score
from citewise.quote.question import Question as Analysed

DECISION = ROOT / "src" / "citewise" / "quote" / "decision.json"
L2 = 1.0
KS = (1, 2, 3, 4)


def candidates(name: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(question id, features, labels) for every answerable question of a set with at least one labelled candidate."""
    spec = quote_data.SETS[name]
    home = quote_data.build_home(spec.corpus())
    settings = quote_data.settings_for(home)
    retriever = Retriever(KnowledgeBase(settings))
    depth = quote_search_depth(settings)
    out = []
    for q in spec.questions():
        strings = q.expect_any or [s for group in q.expect_all for s in group]
        if not q.answerable or not strings:
            continue
        result = retriever.search(q.question, top_k=depth)
        chunks = readable([(i + 1, c) for i, c in enumerate(result.chunks)], settings.quote.passages)
        if not chunks:
            continue
        question: Analysed = analyse(apply_corrections(q.question, result.corrections))
        scored = score(question, chunks, code=True)
        if not scored:
            continue
        wanted = [quote_data._norm(s) for s in strings]
        x = np.array([[item.features[f] for f in RANKER_FEATURES] for item in scored])
        y = np.array([int(any(w in quote_data._norm(item.sentence.rendered()) for w in wanted)) for item in scored])
        if y.any():
            out.append((q.id, x, y))
    return out


def fit(data: dict[str, list]) -> tuple[np.ndarray, float]:
    xs, ys, ws = [], [], []
    for items in data.values():
        for _, x, y in items:
            w = np.where(y == 1, 0.5 / y.sum(), 0.5 / max(1, (1 - y).sum())) / len(items)
            xs.append(x)
            ys.append(y)
            ws.append(w)
    return fit_quote_decision.logistic(np.vstack(xs), np.concatenate(ys).astype(float), np.concatenate(ws), L2)


def hits(items: list, rank) -> dict[str, float]:
    """Share of questions one of whose first k candidates (by `rank`, ties in candidate order) holds the answer."""
    out = {}
    for k in KS:
        found = sum(bool(y[np.argsort(-rank(x), kind="stable")[:k]].any()) for _, x, y in items)
        out[f"top{k}"] = round(found / len(items), 4) if items else 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="report only; leave decision.json as it is")
    args = parser.parse_args()
    docs = [n for n, s in quote_data.SETS.items() if s.distribution == "docs"]
    fit_names = [n for n in docs if quote_data.SETS[n].role == "fit"]
    judge_names = [n for n in docs if quote_data.SETS[n].role == "judge"]
    data = {n: candidates(n) for n in docs}
    relevance = RANKER_FEATURES.index("relevance")

    def hand(x):
        return x[:, relevance]

    def fitted(weights, intercept):
        return lambda x: x @ weights + intercept

    report: dict = {"features": list(RANKER_FEATURES), "fitted_on": fit_names, "judged_on": judge_names, "sets": {}}
    weights, intercept = fit({n: data[n] for n in fit_names})
    for name in docs:
        entry = {"role": quote_data.SETS[name].role, "questions": len(data[name]), "hand": hits(data[name], hand)}
        if name in fit_names:
            w, b = fit({n: data[n] for n in fit_names if n != name})
            entry["ranker_left_out"] = hits(data[name], fitted(w, b))
        else:
            entry["ranker"] = hits(data[name], fitted(weights, intercept))
        report["sets"][name] = entry
        print(f"{name:16} {json.dumps(entry)}")
    report["weights"] = dict(zip(RANKER_FEATURES, map(float, np.round(weights, 4)), strict=True))
    report["intercept"] = round(intercept, 4)
    print("weights", report["weights"], "intercept", report["intercept"])
    if not args.no_write:
        decision = json.loads(DECISION.read_text())
        decision["ranker"] = {
            "weights": report["weights"],
            "intercept": report["intercept"],
            "fitted_on": fit_names,
            "script": "bench/fit_quote_ranker.py",
        }
        DECISION.write_text(json.dumps(decision, indent=2) + "\n")
        write_result("quote_ranker", report)
        fit_quote_decision.document()


if __name__ == "__main__":
    main()
