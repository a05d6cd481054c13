"""The question sets quote mode is fitted and judged on, each over its own corpus, and one run of quote mode on each.

    .venv/bin/python bench/quote_data.py [--set NAME ...] [--rebuild]

None of the data is committed: the corpora and most question sets live outside the repository (../shared/eval and
../devsets, see bench/quote_sets.json, the manifest: what each set is, where it comes from, how many questions,
sha256 of every file). Homes are built once under bench/data/quote/homes/ and reused; every run writes
bench/data/quote/runs/<set>.jsonl — one line per question: its label, the answer, whether it was right, and the
decision's signals per part — which bench/fit_quote_decision.py fits on and bench/quote_report.py summarises.

Distributions (what a held-out set "of each kind" means here):
- docs QA: questions a user asks of product docs — Citewise's own docs (a frozen copy), the test fixtures' product,
  and questions written from the Somnia developer docs (a product nobody tuned on);
- on-topic passages without the answer: ClapNQ's unanswerable questions (a near-miss Wikipedia passage), the
  Somnia FAQ questions whose answer lives only on the held-out FAQ pages, and Somnia questions asked after their
  answering pages were removed from the corpus (`somnia_rejection`, RGB's negative-rejection setting);
- SQuAD-style: answerable and adversarially unanswerable questions written over ClapNQ passages.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import make_somnia_beir
from _common import ROOT, SOMNIA
from citewise.agent.runner import Citewise
from citewise.eval.formats import load_jsonl
from citewise.eval.metrics import normalize_answer, strip_citation_markers
from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.loaders import parse_plain_text
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.types import Status

SHARED = ROOT.parent / "shared" / "eval"
DEVSETS = ROOT.parent / "devsets"
# CITEWISE_QUOTE_DATA moves homes and runs elsewhere, e.g. to run an older checkout's quote mode on the same sets
# (PYTHONPATH=that/src) for the "before" column of BENCHMARKS.md.
DATA = Path(os.environ.get("CITEWISE_QUOTE_DATA", ROOT / "bench" / "data" / "quote"))
HOMES = DATA / "homes"
RUNS = DATA / "runs"
CLAPNQ = SHARED / "clapnq" / "clapnq_dev.jsonl"


@dataclass
class Question:
    id: str
    question: str
    answerable: bool
    expect_any: list[str] = field(default_factory=list)
    expect_all: list[list[str]] = field(default_factory=list)
    gold_ids: list[str] = field(default_factory=list)  # doc ids (passages/pages) that answer it
    gold_spans: list[str] = field(default_factory=list)  # short gold answers (SQuAD-style)
    kind: str = ""


@dataclass
class Corpus:
    name: str
    folders: list[Path] = field(default_factory=list)  # ingested as files
    passages: list[tuple[str, str, str]] = field(default_factory=list)  # (id, title, text), ingested in memory


@dataclass
class QuestionSet:
    name: str
    distribution: str  # docs | on_topic_negative | squad_style
    corpus: Callable[[], Corpus]
    questions: Callable[[], list[Question]]
    role: str  # fit (the decision is fitted on it) | dev (failures are studied on it) | judge (only ever scored)
    description: str = ""


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- corpora -------------------------------------------------------------------------------------------------------


def somnia_pages() -> dict[str, str]:
    """The Somnia pages minus the FAQ pages and any byte-identical copy of them (make_somnia_beir's rule)."""
    pairs = _jsonl(SOMNIA / "faq_qa_pairs.jsonl")
    pages = {p.name: p.read_text(encoding="utf-8") for p in sorted((SOMNIA / "docs").glob("*.md"))}
    faq = {hashlib.sha256(pages[Path(pair["source_page"]).name].encode()).hexdigest() for pair in pairs}
    return {n: t for n, t in pages.items() if hashlib.sha256(t.encode()).hexdigest() not in faq}


def _folder(name: str, pages: dict[str, str]) -> Path:
    folder = DATA / "corpora" / name
    if folder.exists() and sorted(p.name for p in folder.iterdir()) == sorted(pages):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for page, text in pages.items():
        (folder / page).write_text(text, encoding="utf-8")
    return folder


def somnia_corpus() -> Corpus:
    return Corpus("somnia", folders=[_folder("somnia", somnia_pages())])


# Half of the pages the written Somnia questions are answered from, drawn once with a fixed seed, are removed for
# the rejection set: its questions were answerable, and now only on-topic pages without their answer remain.
REJECTION_SEED = 9


def _rejection_split() -> tuple[set[str], dict[str, str]]:
    pages = somnia_pages()
    sources = sorted({s for q in _jsonl(DEVSETS / "somnia_questions.jsonl") if q["answerable"] for s in q["source"]})
    removed = set(random.Random(REJECTION_SEED).sample(sources, len(sources) // 2))
    digests = {hashlib.sha256(pages[p].encode()).hexdigest() for p in removed if p in pages}
    keep = {
        n: t for n, t in pages.items() if n not in removed and hashlib.sha256(t.encode()).hexdigest() not in digests
    }
    return removed, keep


def somnia_rejection_corpus() -> Corpus:
    _, keep = _rejection_split()
    return Corpus("somnia_rejection", folders=[_folder("somnia_rejection", keep)])


def citewise_docs_corpus() -> Corpus:
    return Corpus("citewise_docs", folders=[DEVSETS / "citewise_docs_frozen"])


def fixtures_corpus() -> Corpus:
    return Corpus("fixtures", folders=[ROOT / "tests" / "fixtures" / "corpus"])


def _passages(path: Path) -> list[tuple[str, str, str]]:
    dataset = load_jsonl(path)
    return [(p.id, p.title, p.text) for p in dataset.passages]


def clapnq_corpus() -> Corpus:
    return Corpus("clapnq", passages=_passages(CLAPNQ))


def squadlike_corpus() -> Corpus:
    return Corpus("squadlike", passages=_passages(DEVSETS / "squadlike.jsonl"))


# -- questions -----------------------------------------------------------------------------------------------------


def _written(path: Path) -> list[Question]:
    return [
        Question(
            id=row["id"],
            question=row["question"],
            answerable=bool(row["answerable"]),
            expect_any=list(row.get("expect_any") or []),
            expect_all=[list(group) for group in row.get("expect_all") or []],
            kind=row.get("kind", ""),
        )
        for row in _jsonl(path)
    ]


def _from_jsonl(path: Path) -> list[Question]:
    dataset = load_jsonl(path)
    return [
        Question(
            id=q.id,
            question=q.question,
            answerable=q.answerable,
            gold_ids=list(q.passage_ids),
            gold_spans=list(q.answers) if path.name == "squadlike.jsonl" else [],
        )
        for q in dataset.questions
    ]


def _somnia_half(parity: int) -> list[Question]:
    """The written Somnia questions with odd (1: the development half, read when studying failures) or even (0: the
    held-out half, only ever scored) numbers."""
    return [q for q in _written(DEVSETS / "somnia_questions.jsonl") if int(q.id.rsplit("-", 1)[1]) % 2 == parity]


def somnia_faq_questions() -> list[Question]:
    out = DATA / "somnia_beir"
    make_somnia_beir.build(SOMNIA, out)
    qrels: dict[str, list[str]] = {}
    for line in (out / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, page, _ = line.split("\t")
        qrels.setdefault(qid, []).append(page + ".md")
    return [
        Question(id=p["id"], question=p["question"], answerable=p["id"] in qrels, gold_ids=qrels.get(p["id"], []))
        for p in _jsonl(SOMNIA / "faq_qa_pairs.jsonl")
    ]


def somnia_rejection_questions() -> list[Question]:
    removed, keep = _rejection_split()
    remaining = "\n".join(keep.values()).lower()
    out = []
    for q in _written(DEVSETS / "somnia_questions.jsonl"):
        if not q.answerable or not set(_jsonl_sources(q.id)) <= removed:
            continue
        strings = q.expect_any + [s for group in q.expect_all for s in group]
        if any(s.lower() in remaining for s in strings):
            continue  # the answer is still somewhere in the corpus
        out.append(Question(id=q.id + "-rej", question=q.question, answerable=False, kind=q.kind))
    return out


def _jsonl_sources(question_id: str) -> list[str]:
    for row in _jsonl(DEVSETS / "somnia_questions.jsonl"):
        if row["id"] == question_id:
            return list(row["source"])
    return []


def squadlike2_corpus() -> Corpus:
    return Corpus("squadlike2", passages=_passages(DEVSETS / "squadlike2.jsonl"))


SETS: dict[str, QuestionSet] = {
    s.name: s
    for s in (
        QuestionSet(
            "citewise_docs",
            "docs",
            citewise_docs_corpus,
            lambda: _written(DEVSETS / "citewise_docs_questions.jsonl"),
            "fit",
            "85 answerable + 30 near-miss questions a new user asks of Citewise's own guide (a frozen copy of docs/ "
            "at 2892aed); typos and two-part questions included; docs/questions.jsonl is this set",
        ),
        QuestionSet(
            "fixtures",
            "docs",
            fixtures_corpus,
            lambda: _written(DEVSETS / "fixture_questions.jsonl"),
            "fit",
            "33 + 12 questions about the test fixtures' fictional product (tests/fixtures/questions.jsonl)",
        ),
        QuestionSet(
            "somnia_docs_dev",
            "docs",
            somnia_corpus,
            lambda: _somnia_half(1),
            "fit",
            "the odd-numbered half of 153 + 50 questions written from the Somnia developer docs (161 pages)",
        ),
        QuestionSet(
            "somnia_docs",
            "docs",
            somnia_corpus,
            lambda: _somnia_half(0),
            "judge",
            "the even-numbered half of the Somnia questions: never fitted on, never read when studying failures",
        ),
        QuestionSet(
            "clapnq",
            "on_topic_negative",
            clapnq_corpus,
            lambda: _from_jsonl(CLAPNQ),
            "fit",
            "ClapNQ dev: 300 answerable + 300 unanswerable questions whose passage is a near miss, over 597 passages",
        ),
        QuestionSet(
            "somnia_rejection",
            "on_topic_negative",
            somnia_rejection_corpus,
            somnia_rejection_questions,
            "judge",
            "answerable Somnia questions asked after their answering pages were removed (RGB's negative rejection): "
            "only on-topic pages without the answer remain",
        ),
        QuestionSet(
            "somnia_faq",
            "on_topic_negative",
            somnia_corpus,
            somnia_faq_questions,
            "judge",
            "the 53 Somnia FAQ questions with both FAQ pages held out; answerable when bench/make_somnia_beir.py's "
            "rule ties the FAQ answer to a page (22), else labelled unanswerable (31)",
        ),
        QuestionSet(
            "squadlike",
            "squad_style",
            squadlike_corpus,
            lambda: _from_jsonl(DEVSETS / "squadlike.jsonl"),
            "fit",
            "120 answerable + 120 adversarial unanswerable SQuAD-2.0-style questions written over ClapNQ passages",
        ),
        QuestionSet(
            "squadlike2",
            "squad_style",
            squadlike2_corpus,
            lambda: _from_jsonl(DEVSETS / "squadlike2.jsonl"),
            "judge",
            "100 + 100 more, over other ClapNQ passages, with SQuAD 2.0's mix of adversarial kinds",
        ),
    )
}


MANIFEST = ROOT / "bench" / "quote_sets.json"


def write_manifest() -> dict:
    """bench/quote_sets.json: every set's role, distribution, description, counts and the sha256 of the files it is
    built from (none of which is in the repository)."""

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    files = {
        "citewise_docs": [
            DEVSETS / "citewise_docs_questions.jsonl",
            *sorted((DEVSETS / "citewise_docs_frozen").glob("*")),
        ],
        "fixtures": [DEVSETS / "fixture_questions.jsonl"],
        "somnia_docs_dev": [DEVSETS / "somnia_questions.jsonl"],
        "somnia_docs": [DEVSETS / "somnia_questions.jsonl"],
        "clapnq": [CLAPNQ],
        "somnia_rejection": [DEVSETS / "somnia_questions.jsonl"],
        "somnia_faq": [SOMNIA / "faq_qa_pairs.jsonl"],
        "squadlike": [DEVSETS / "squadlike.jsonl"],
        "squadlike2": [DEVSETS / "squadlike2.jsonl"],
    }
    manifest = {
        "note": "Question sets quote mode's decision is fitted and judged on; the data stays outside the repository.",
        "sets": {},
    }
    for name, spec in SETS.items():
        questions = spec.questions()
        manifest["sets"][name] = {
            "role": spec.role,
            "distribution": spec.distribution,
            "description": spec.description,
            "answerable": sum(q.answerable for q in questions),
            "unanswerable": sum(not q.answerable for q in questions),
            "files": {str(path.relative_to(ROOT.parent)): digest(path) for path in files[name] if path.is_file()},
        }
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


# -- running -------------------------------------------------------------------------------------------------------


def settings_for(home: Path, **overrides) -> Settings:
    settings = Settings(home=home)
    server = settings.server.model_copy(update={"log_questions": False})
    return settings.model_copy(update={"server": server, **overrides})


def build_home(corpus: Corpus, rebuild: bool = False) -> Path:
    home = HOMES / corpus.name
    if rebuild:
        shutil.rmtree(home, ignore_errors=True)
    kb = KnowledgeBase(settings_for(home))
    ingestor = Ingestor(kb)
    if corpus.passages:
        docs = []
        for pid, title, text in corpus.passages:
            doc = parse_plain_text(text, source=f"passage:{pid}", filename=f"{pid}.txt")
            docs.append(doc.model_copy(update={"title": title}) if title else doc)
        ingestor.ingest_documents(docs)
    if corpus.folders:
        ingestor.ingest_paths(corpus.folders, prune=True)
    return home


_MARKUP = re.compile(r"[`*_]+")


def _norm(text: str) -> str:
    return " ".join(_MARKUP.sub("", strip_citation_markers(text)).lower().split())


def judge(question: Question, status: str, text: str, cited_docs: list[str]) -> str:
    """right | wrong | refused (answerable) ; refused | answered (unanswerable)."""
    refused = status == str(Status.REFUSED)
    if not question.answerable:
        return "refused" if refused else "answered"
    if refused or status != str(Status.SUCCESS):
        return "refused"
    answer = _norm(text)
    if question.expect_all:
        ok = all(any(_norm(s) in answer for s in group) for group in question.expect_all)
    elif question.expect_any:
        ok = any(_norm(s) in answer for s in question.expect_any)
    elif question.gold_spans:
        ok = any(normalize_answer(s) in normalize_answer(text) for s in question.gold_spans)
    else:
        ok = bool(set(cited_docs) & set(question.gold_ids))
    return "right" if ok else "wrong"


def run(name: str, *, rebuild: bool = False, decide_all: bool = False) -> Path:
    """Ask every question of the set in quote mode and log it. `decide_all`: threshold 0, so every question the
    anchor rule lets through is answered and its would-be answer and signals are logged (what fitting needs)."""
    spec = SETS[name]
    corpus = spec.corpus()
    home = build_home(corpus, rebuild)
    settings = settings_for(home)
    if decide_all:
        settings = settings.model_copy(update={"quote": settings.quote.model_copy(update={"threshold": 0.0})})
    cw = Citewise(settings, kb=KnowledgeBase(settings))
    RUNS.mkdir(parents=True, exist_ok=True)
    out = RUNS / f"{name}.jsonl"
    started = time.perf_counter()
    with out.open("w", encoding="utf-8") as f:
        for q in spec.questions():
            t = time.perf_counter()
            answer = cw.ask(q.question, mode="quote")
            latency = (time.perf_counter() - t) * 1000
            compose = [e for e in answer.trace if e.type == "compose"]
            parts = compose[-1].data.get("parts", []) if compose else []
            cited = []
            for c in answer.citations:
                source = c.filename if not c.filename.endswith(".txt") else c.filename[:-4]
                cited.append(source)
            verdict = judge(q, str(answer.status), answer.answer, cited)
            row = {
                "set": name,
                "distribution": spec.distribution,
                "role": spec.role,
                "id": q.id,
                "question": q.question,
                "kind": q.kind,
                "answerable": q.answerable,
                "status": str(answer.status),
                "verdict": verdict,
                "answer": answer.answer,
                "cited": cited,
                "gold": q.gold_ids or q.gold_spans or q.expect_any or q.expect_all,
                "parts": parts,
                "refusal_detail": getattr(answer, "refusal_detail", None),  # absent before quote mode said why
                "latency_ms": round(latency, 1),
            }
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{name}: {summary(out)}  ({time.perf_counter() - started:.0f}s)")
    return out


def summary(path: Path) -> str:
    rows = _jsonl(path)
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    right = sum(r["verdict"] == "right" for r in ans)
    refused = sum(r["verdict"] == "refused" for r in ans)
    wrong = len(ans) - right - refused
    una_ref = sum(r["verdict"] == "refused" for r in una)
    parts = [f"answerable {len(ans)}: right {right} ({right / max(1, len(ans)):.0%}), wrong {wrong}, refused {refused}"]
    if una:
        parts.append(f"unanswerable {len(una)}: refused {una_ref} ({una_ref / len(una):.0%})")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="+", choices=sorted(SETS), default=sorted(SETS))
    parser.add_argument("--rebuild", action="store_true", help="rebuild the homes (else reused)")
    parser.add_argument("--decide-all", action="store_true", help="threshold 0: log every would-be answer")
    args = parser.parse_args()
    for name in args.set:
        run(name, rebuild=args.rebuild, decide_all=args.decide_all)


if __name__ == "__main__":
    main()
