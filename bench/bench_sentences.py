"""Where the answering chunk ranks with and without sentence vectors (`citewise.index.store.dense_scores`), on every
docs set of bench/quote_data.py, fitted on or judged alike (nothing here is fitted).

    .venv/bin/python bench/bench_sentences.py [--set NAME ...]

For each answerable question with expected strings: the rank of the first chunk holding one of them (as the quote
sets judge an answer: case- and space-folded) in the ranking quote mode searches: hybrid, the question's first part
(`citewise.quote.split_parts`), spelled as the search corrects it, `retrieval.candidates` fetched per side and the
first ten fused read. "Without" is the same index and code
with each chunk scored by its cosine alone, as an index built before sentence vectors (or by an embedder that makes
none) is: `dense_scores` is swapped for the cosines where the stores and the retriever call it. Questions whose
expected strings no chunk holds are counted apart. Writes bench/results/sentence_ranking.json.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import numpy as np

import quote_data
from _common import write_result
from citewise.index import lancedb_store, postgres_store, retriever
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.quote import split_parts

DEPTH = 10
DOCS_SETS = [name for name, spec in quote_data.SETS.items() if spec.distribution == "docs"]
CALLERS = (lancedb_store, postgres_store, retriever)


@contextlib.contextmanager
def cosine_only() -> Iterator[None]:
    """Score every chunk by its own cosine, as before sentence vectors."""
    saved = [module.dense_scores for module in CALLERS]
    for module in CALLERS:
        module.dense_scores = lambda cosines, blobs, query: [float(c) for c in cosines]
    try:
        yield
    finally:
        for module, original in zip(CALLERS, saved, strict=True):
            module.dense_scores = original


def figures(ranks: list[int]) -> dict[str, float]:
    array = np.array(ranks)
    return {
        "hit@1": round(float(np.mean(array < 1)), 4),
        "hit@3": round(float(np.mean(array < 3)), 4),
        "hit@5": round(float(np.mean(array < 5)), 4),
        "mrr@10": round(float(np.mean([1 / (r + 1) if r < DEPTH else 0.0 for r in ranks])), 4),
    }


def measure(name: str) -> dict:
    spec = quote_data.SETS[name]
    kb = KnowledgeBase(quote_data.settings_for(quote_data.build_home(spec.corpus())))
    search = Retriever(kb)
    chunks = kb.store.chunks(None)
    folded = {c.chunk_id: quote_data._norm(c.text) for c in chunks}
    ranks: dict[str, list[int]] = {"with": [], "without": []}
    unfindable = 0
    for question in spec.questions():
        expected = question.expect_any or [s for group in question.expect_all for s in group[:1]]
        if not question.answerable or not expected:
            continue
        wanted = [quote_data._norm(s) for s in expected]
        gold = {cid for cid, text in folded.items() if any(w in text for w in wanted)}
        if not gold:
            unfindable += 1
            continue
        part = split_parts(question.question)[0]
        for variant in ranks:
            with cosine_only() if variant == "without" else contextlib.nullcontext():
                # As a search fetches them: `retrieval.candidates` per side, fused, the first ten read.
                ranked = [c.chunk_id for c in search.rank(part, kb.settings.retrieval.candidates)][:DEPTH]
            ranks[variant].append(next((i for i, cid in enumerate(ranked) if cid in gold), DEPTH))
    return {
        "role": spec.role,
        "questions": len(ranks["with"]),
        "unfindable": unfindable,
        "chunks": len(chunks),
        "without": figures(ranks["without"]),
        "with": figures(ranks["with"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="+", choices=DOCS_SETS, default=DOCS_SETS)
    sets = {}
    for name in parser.parse_args().set:
        sets[name] = result = measure(name)
        pairs = ", ".join(f"{k} {result['without'][k]:.0%} → {result['with'][k]:.0%}" for k in ("hit@1", "hit@3"))
        print(f"{name:16} {result['role']:5} {result['questions']:3} q.: {pairs}", flush=True)
    path = write_result("sentence_ranking", {"depth": DEPTH, "sets": sets})
    print(f"→ {path}")


if __name__ == "__main__":
    main()
