"""Build a BEIR folder from the Somnia docs in ../shared/eval/somnia: real questions over a real docs site.

    .venv/bin/python bench/make_somnia_beir.py [--somnia DIR] [--out bench/data/somnia_beir]

The output is generated, never committed (bench/data/ is gitignored): the Somnia pages carry no license.

corpus.jsonl   every page in docs/ except the two FAQ pages the questions come from, and any page byte-identical
               to one of them (the GitBook section page `support-and-community.md` repeats the General FAQs
               verbatim: keeping it would hand every answer to the retriever). `_id` is the file name without
               `.md`, `title` the page's first `# ` heading without the " | Somnia Docs" suffix, `text` the rest.
queries.jsonl  the 53 FAQ questions, `_id` = the pair's id.
qrels/test.tsv which corpus pages hold each FAQ answer. The pairs only name their FAQ page, which is held out, so
               relevance is derived from the answer text by two transparent rules, and the higher grade wins:

  1. Link (grade 2): the answer links a docs.somnia.network page that is in the corpus (the URL path with `/`
     turned into `_` is the file name). The site root is not counted: answers cite it as "the docs" in general.
  2. Shared content: the answer and the page share distinctive word 3-grams (lower-cased alphanumeric tokens;
     a 3-gram is distinctive when at most 5% of corpus pages contain it, which drops phrases such as "on somnia
     network"). With `shared` such 3-grams and `coverage` = shared / the answer's distinctive 3-grams:
     grade 2 if coverage >= 0.20 and shared >= 5, grade 1 if coverage >= 0.08 and shared >= 3.

  A page byte-identical to a relevant page (GitBook section pages repeat their first child) gets the same grade.
  Questions whose answer no rule ties to a page (e.g. "What is a blockchain?", only answered in the FAQ) get no
  qrels; BEIR loaders, Citewise's included, skip them. The script prints how many queries kept qrels.

Queries are the questions, not the answers, so the words a query uses are not the ones that decided its qrels;
rule 2 still favours pages that repeat the FAQ's wording, which may favour lexical retrieval a little.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOMNIA = ROOT.parent / "shared" / "eval" / "somnia"
DEFAULT_OUT = ROOT / "bench" / "data" / "somnia_beir"

DISTINCTIVE_MAX_DF = 0.05
GRADES = ((2, (0.20, 5)), (1, (0.08, 3)))  # grade, (minimum coverage, minimum shared 3-grams), strongest first
LINK_RE = re.compile(r"https?://docs\.somnia\.network(/[^\s)\]>\"#?]*)?")
TOKEN_RE = re.compile(r"[a-z0-9]+")


def _trigrams(text: str) -> set[tuple[str, ...]]:
    tokens = TOKEN_RE.findall(text.lower())
    return {tuple(tokens[i : i + 3]) for i in range(len(tokens) - 2)}


def _split_page(markdown: str) -> tuple[str, str]:
    first, _, rest = markdown.partition("\n")
    if first.startswith("# "):
        return first[2:].removesuffix(" | Somnia Docs").strip(), rest.strip()
    return "", markdown.strip()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build(somnia: Path, out: Path) -> dict:
    pairs = [json.loads(line) for line in (somnia / "faq_qa_pairs.jsonl").read_text().splitlines() if line.strip()]
    pages = {p.stem: p.read_text(encoding="utf-8") for p in sorted((somnia / "docs").glob("*.md"))}
    faq_hashes = {_digest(pages[Path(pair["source_page"]).stem]) for pair in pairs}
    held_out = sorted(name for name, text in pages.items() if _digest(text) in faq_hashes)
    corpus = {name: text for name, text in pages.items() if name not in held_out}

    copies: dict[str, list[str]] = {}
    for name, text in corpus.items():
        copies.setdefault(_digest(text), []).append(name)
    page_grams = {name: _trigrams(text) for name, text in corpus.items()}
    df = Counter(gram for grams in page_grams.values() for gram in grams)
    max_df = DISTINCTIVE_MAX_DF * len(corpus)

    qrels: dict[str, dict[str, int]] = {}
    by_rule = Counter()
    for pair in pairs:
        grades: dict[str, int] = {}
        for path in LINK_RE.findall(pair["answer"]):
            name = path.strip("/").replace("/", "_")
            if name and name in corpus:
                grades[name] = 2
                by_rule["link"] += 1
        distinctive = {g for g in _trigrams(pair["answer"]) if df[g] <= max_df}
        for name, grams in page_grams.items():
            shared = len(distinctive & grams)
            coverage = shared / len(distinctive) if distinctive else 0.0
            grade = next((g for g, (cov, least) in GRADES if coverage >= cov and shared >= least), 0)
            if grade:
                by_rule[f"shared-grade-{grade}"] += 1
                grades[name] = max(grades.get(name, 0), grade)
        for name, grade in list(grades.items()):
            for twin in copies[_digest(corpus[name])]:
                grades[twin] = max(grades.get(twin, 0), grade)
        if grades:
            qrels[pair["id"]] = grades

    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for name, text in corpus.items():
            title, body = _split_page(text)
            f.write(json.dumps({"_id": name, "title": title, "text": body}, ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as f:
        for pair in pairs:
            f.write(json.dumps({"_id": pair["id"], "text": pair["question"]}, ensure_ascii=False) + "\n")
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for query_id, grades in qrels.items():
            for name, grade in sorted(grades.items()):
                f.write(f"{query_id}\t{name}\t{grade}\n")

    judged = [len(g) for g in qrels.values()]
    return {
        "out": os.path.relpath(out, ROOT),
        "pages": len(pages),
        "held_out": held_out,
        "corpus": len(corpus),
        "queries": len(pairs),
        "queries_with_qrels": len(qrels),
        "qrels": sum(judged),
        "relevant_per_query_mean": round(sum(judged) / max(1, len(judged)), 2),
        "grade_2": sum(1 for g in qrels.values() for v in g.values() if v == 2),
        "rule_hits": dict(by_rule),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--somnia", type=Path, default=DEFAULT_SOMNIA, help="folder with docs/ and faq_qa_pairs.jsonl")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="BEIR folder to (re)write")
    args = parser.parse_args()
    stats = build(args.somnia, args.out)
    print(
        f"{stats['out']}: {stats['corpus']} pages ({stats['pages']} minus held-out {', '.join(stats['held_out'])}); "
        f"{stats['queries_with_qrels']} of {stats['queries']} questions have qrels "
        f"({stats['qrels']} judgements, {stats['relevant_per_query_mean']} per query, {stats['grade_2']} of grade 2)"
    )


if __name__ == "__main__":
    main()
