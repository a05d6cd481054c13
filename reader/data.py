"""The reader's training data: (question, passage with its units, which units answer) examples, from four sources.

    .venv/bin/python -m reader.data            # writes reader/work/train.jsonl and reader/work/sources.json

Every example is one passage read for one question: its heading line, its text, its answer units (the same
`citewise.text.answer_units` ingest stores) and the indices of the units that answer — none when the passage does
not answer (the model then learns to prefer "no answer"). Negatives are on-topic by construction: another paragraph
of the same article, another section of the same page, a real adversarial unanswerable.

1. SQuAD 1.1 train (../shared/train, CC BY-SA 4.0): the sentence holding the answer; questions whose answer occurs in
   two different sentences are dropped (the rebuilt file has no offsets to tell which one was meant). For some
   questions, the paragraph of the same article sharing the most words with the question without holding the answer,
   as a negative.
2. SQuAD 2.0 dev, the 14 articles bench/questions/squad2_split.json leaves for training: answerable questions (every
   sentence holding a gold answer) and the real adversarial unanswerables (negation, antonym, entity swap …) on their
   own paragraph. Counted twice: they are the only real unanswerables there are.
3. ClapNQ dev (../shared/eval/clapnq, Apache-2.0): the annotators' selected sentences, and the unanswerable
   questions on their near-miss passage; the passages the squadlike sets were written over are left out (squadlike is
   fitted on, squadlike2 judged).
4. Docs pages from the sdists of ten Python projects on PyPI (pinned by sha256 in DOCS_CORPORA; none is a set this
   project is judged or fitted on), chunked by Citewise's own loaders and chunker: a section's heading turned into
   a question ("Removing deleted files" → "How do I remove deleted files?"), its first passage's opening unit (and
   the code block or list its lead-in announces) as the answer, the same page's other sections as negatives.
5. Questions written for training on nine of those projects' docs (reader/questions/: 440 answerable, 140
   unanswerable, each checked against the pages), asked through Citewise's own ingest and search exactly as quote
   mode asks: every passage read is an example — the units holding an expected string answer, the other on-topic
   passages answer nothing. Counted twice.

Everything is seeded (`--seed`); the same inputs give the same file, byte for byte.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import random
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from citewise.errors import IngestError  # noqa: E402
from citewise.ingest.chunking import iter_chunks  # noqa: E402
from citewise.ingest.loaders import load_bytes  # noqa: E402
from citewise.quote.reader import heading_line  # noqa: E402
from citewise.settings import IngestSettings  # noqa: E402
from citewise.text import answer_units, content_terms, english_count, leading_overlap  # noqa: E402

SHARED = ROOT.parent / "shared"
SQUAD1 = SHARED / "train" / "squad11-train.json"
SQUAD2 = SHARED / "train" / "squad2-dev-19-articles.json"
CLAPNQ_ANSWERABLE = SHARED / "eval" / "clapnq" / "annotated_data_dev_clapnq_dev_answerable.jsonl"
CLAPNQ_UNANSWERABLE = SHARED / "eval" / "clapnq" / "annotated_data_dev_clapnq_dev_unanswerable.jsonl"
CLAPNQ_DEV = SHARED / "eval" / "clapnq" / "clapnq_dev.jsonl"
SQUAD2_SPLIT = ROOT / "bench" / "questions" / "squad2_split.json"
SQUADLIKE = [ROOT / "bench" / "questions" / "squadlike_a.jsonl", ROOT / "bench" / "questions" / "squadlike_b.jsonl"]
WORK = ROOT / "reader" / "work"
SDISTS = WORK / "sdists"

# Python projects whose documentation ships in their sdist: (file, sha256, docs folder inside the sdist, licence).
# None of them is a corpus any question set here is written on.
DOCS_CORPORA = [
    (
        "django-5.2.20.tar.gz",
        "37a2895b4039ad388ffc8fb62603aba497b0c2fe884eb40ead3e8ad7a3ccad57",
        "docs",
        "BSD-3-Clause",
    ),
    ("pytest-9.2.0.tar.gz", "97c4f3b1f3c7414aa36465e09b8220f1d03627993bd51b1282e193753c80557b", "doc/en", "MIT"),
    ("sphinx-9.0.4.tar.gz", "594ef59d042972abbc581d8baa577404abe4e6c3b04ef61bd7fc2acbd51f3fa3", "doc", "BSD-2-Clause"),
    ("flask-3.1.3.tar.gz", "0ef0e52b8a9cd932855379197dd8f94047b359ca0a78695144304cb45f87c9eb", "docs", "BSD-3-Clause"),
    ("coverage-7.18.0.tar.gz", "dd7258fab7dbc3bedcc94d6e9d4431408e390f080687b3463dbee3147715867f", "doc", "Apache-2.0"),
    ("click-8.5.1.tar.gz", "9bbfada76703fd1d784b83eea012e3e8c6a001a876543ef104fa56aaaeb072b4", "docs", "BSD-3-Clause"),
    (
        "werkzeug-3.1.9.tar.gz",
        "55ca7c70a75689be937aa27f8ff4b018f06ff4838fc73045560bf0f5a1291060",
        "docs",
        "BSD-3-Clause",
    ),
    ("black-26.10.1.tar.gz", "5f9f83beae62437e060dafd53d7f1fc327e3d3494f74d72ee5c2b73eb90fc4e7", "docs", "MIT"),
    ("attrs-26.1.0.tar.gz", "d03ceb89cb322a8fd706d4fb91940737b6642aa36998fe130a9bc96c985eff32", "docs", "MIT"),
    ("jinja2-3.1.6.tar.gz", "0137fb05990d35f1275a587e9aee6d56da821fc83491a0fb838183be43f66d6d", "docs", "BSD-3-Clause"),
]
DOC_SUFFIXES = (".md", ".rst", ".txt")
LICENCES = {
    "squad": "CC BY-SA 4.0 (Rajpurkar et al., SQuAD 1.1 and 2.0; https://rajpurkar.github.io/SQuAD-explorer/)",
    "clapnq": "Apache-2.0 (IBM, ClapNQ; https://github.com/primeqa/clapnq)",
}


@dataclass
class Example:
    question: str
    heading: str
    text: str
    units: list[tuple[int, int, str]]
    gold: list[int]  # indices into units; empty: the passage doesn't answer
    source: str
    group: str = ""  # what it came from (article, page): the validation split keeps a group together
    extra: dict = field(default_factory=dict)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stable(*parts: str) -> int:
    return int(hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12], 16)


def units_holding(text: str, units, needle: str) -> set[int] | None:
    """Indices of the units every occurrence of `needle` falls in; None when it occurs in two different places
    (ambiguous) or nowhere."""
    found: list[set[int]] = []
    start = text.find(needle)
    while start >= 0 and needle:
        end = start + len(needle)
        found.append({i for i, (a, b, _) in enumerate(units) if a < end and start < b})
        start = text.find(needle, start + 1)
    found = [f for f in found if f]
    if not found or any(f != found[0] for f in found[1:]):
        return None
    return found[0]


# -- SQuAD ---------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=200_000)
def _terms(text: str) -> frozenset[str]:
    return frozenset(content_terms(text))


def _overlap(question_terms: set[str], text: str) -> int:
    return len(question_terms & _terms(text))


def squad1(rng: random.Random, positives: int, negatives: int) -> Iterator[Example]:
    data = json.loads(SQUAD1.read_text(encoding="utf-8"))["data"]
    items = []
    for article in data:
        for p, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                items.append((article, p, qa))
    rng.shuffle(items)
    made = 0
    for article, p, qa in items:
        if made >= positives:
            break
        context = article["paragraphs"][p]["context"]
        units = answer_units(context)
        answer = qa["answers"][0]["text"] if isinstance(qa["answers"][0], dict) else qa["answers"][0]
        gold = units_holding(context, units, answer)
        if not gold:
            continue
        title = article["title"].replace("_", " ")
        yield Example(qa["question"], title, context, list(units), sorted(gold), "squad1", article["title"])
        made += 1
        if made <= negatives:
            terms = content_terms(qa["question"])
            others = [
                (_overlap(terms, o["context"]), -i, o["context"])
                for i, o in enumerate(article["paragraphs"])
                if i != p and answer.lower() not in o["context"].lower()
            ]
            if others:
                _, _, text = max(others)
                yield Example(qa["question"], title, text, list(answer_units(text)), [], "squad1-negative",
                              article["title"])  # fmt: skip


def squad2(split: dict) -> Iterator[Example]:
    data = json.loads(SQUAD2.read_text(encoding="utf-8"))["data"]
    train = set(split["train"])
    for article in data:
        if article["title"] not in train:
            continue
        title = article["title"].replace("_", " ")
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            units = list(answer_units(context))
            for qa in paragraph["qas"]:
                if qa.get("is_impossible"):
                    yield Example(qa["question"], title, context, units, [], "squad2-unanswerable", article["title"])
                    continue
                gold: set[int] = set()
                for answer in qa.get("answers") or []:
                    text = answer["text"] if isinstance(answer, dict) else answer
                    gold |= units_holding(context, units, text) or set()
                if gold:
                    yield Example(qa["question"], title, context, units, sorted(gold), "squad2", article["title"])


# -- ClapNQ --------------------------------------------------------------------------------------------------------


def _squadlike_passages() -> tuple[set[str], set[str]]:
    rows = {json.loads(line)["id"]: json.loads(line) for line in CLAPNQ_DEV.read_text().splitlines() if line.strip()}
    ids = set()
    for path in SQUADLIKE:
        for line in path.read_text().splitlines():
            if line.strip():
                ids.add(json.loads(line)["passage_id"])
    return ids, {" ".join(rows[i]["context"].split()) for i in ids if i in rows}


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def clapnq() -> Iterator[Example]:
    excluded_ids, excluded_texts = _squadlike_passages()
    for path in (CLAPNQ_ANSWERABLE, CLAPNQ_UNANSWERABLE):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            passage = row["passages"][0]
            text = passage["text"]
            if row["id"] in excluded_ids or " ".join(text.split()) in excluded_texts:
                continue
            units = list(answer_units(text))
            selected = [_norm(s) for out in row.get("output") or [] for s in out.get("selected_sentences") or []]
            gold = set()
            for sentence in selected:
                best = max(
                    range(len(units)),
                    key=lambda i: len(set(_norm(text[units[i][0] : units[i][1]]).split()) & set(sentence.split())),
                    default=None,
                )
                if best is not None:
                    gold.add(best)
            source = "clapnq" if gold else "clapnq-unanswerable"
            if selected and not gold:
                continue
            yield Example(row["input"], passage.get("title") or "", text, units, sorted(gold), source, row["id"])


# -- docs: headings turned into questions --------------------------------------------------------------------------

_GENERIC = {
    "introduction", "overview", "example", "examples", "notes", "note", "see also", "summary", "changelog",
    "changes", "api", "reference", "contents", "indices and tables", "quickstart", "tutorial", "faq", "glossary",
    "license", "licence", "credits", "authors", "contributing", "deprecated", "parameters", "returns", "raises",
    "attributes", "methods", "arguments", "background", "details", "discussion", "more", "other", "misc",
    "miscellaneous", "next steps", "what's next", "conclusion", "todo", "warning", "caution", "tip", "important",
    "api reference", "api documentation", "table of contents", "community", "support", "getting help", "history",
}  # fmt: skip
_VERBS = {
    "install", "configure", "use", "create", "add", "run", "enable", "disable", "set", "write", "define", "handle",
    "deploy", "upgrade", "migrate", "test", "customize", "customise", "avoid", "make", "get", "build", "register",
    "extend", "override", "connect", "render", "access", "serve", "remove", "delete", "change", "update", "pass",
    "call", "load", "save", "store", "send", "read", "debug", "log", "check", "control", "specify", "select",
    "choose", "limit", "skip", "mark", "share", "reuse", "include", "exclude", "import", "export", "convert", "parse",
    "validate", "filter", "sort", "group", "display", "show", "hide", "return", "raise", "catch", "provide", "modify",
    "organize", "organise", "split", "combine", "manage", "protect", "secure", "authenticate", "cache", "generate",
    "apply", "port", "work", "integrate", "start", "stop", "restart", "monitor", "measure", "profile", "optimize",
}  # fmt: skip
_IDENTIFIER = re.compile(r"[`()_]|\w\.\w|^[a-z]+[A-Z]\w*$|^--?\w|^[A-Z][a-z]+[A-Z]\w*$")
_HOW = re.compile(r"^how (?:to|do (?:i|you)|can (?:i|you)) ", re.I)


def _base_verb(gerund: str) -> str | None:
    stem = gerund[:-3]
    candidates = [stem, stem + "e"] + ([stem[:-1]] if len(stem) > 2 and stem[-1] == stem[-2] else [])
    candidates = [c for c in candidates if len(c) > 2 or c in ("go", "do")]
    best = max(candidates, key=english_count, default=None)
    return best if best and english_count(best) else None


def question_of(heading: str, project: str, variant: int) -> str | None:
    """A question a user would ask that the section under `heading` answers, or None when the heading says nothing
    a question could ask (Introduction, Parameters, a version number)."""
    text = re.sub(r"[*_]{1,2}(\S.*?)[*_]{1,2}", r"\1", heading).strip().rstrip(":.")
    plain = text.strip("`").lower()
    words = text.split()
    if not words or len(words) > 12 or plain in _GENERIC or not re.search(r"[A-Za-z]{3}", text):
        return None
    if re.match(r"^v?\d+(\.\d+)*", plain) or plain.startswith(("version ", "release ", "changes in")):
        return None
    if text.endswith("?"):
        return text
    if plain in ("installation", "installing"):
        return f"How do I install {project}?"
    if plain in ("usage", "basic usage"):
        return f"How do I use {project}?"
    how = _HOW.match(text)
    first = words[0].lower()
    if how:
        action = text[how.end() :]
    elif first.endswith("ing") and len(first) > 4 and len(words) > 1 and (verb := _base_verb(first)):
        action = " ".join([verb, *words[1:]])
    elif first in _VERBS and len(words) > 1:
        action = " ".join([first, *words[1:]])
    else:
        action = None
    if action:
        action = action[0].lower() + action[1:] if not _IDENTIFIER.search(action.split()[0]) else action
        forms = [f"How do I {action}?", f"How can I {action}?", f"how to {action}", f"How do you {action}?"]
        return forms[variant % len(forms)]
    if _IDENTIFIER.search(text) and len(words) <= 3:
        forms = [f"What does {text} do?", f"What is {text} for?", f"{text}"]
        return forms[variant % len(forms)]
    subject = text if text[:2].isupper() else text[0].lower() + text[1:]
    plural = words[-1].lower().endswith("s") and not words[-1].lower().endswith(("ss", "us", "is"))
    if plural:
        forms = [f"What are the {subject}?", f"Which {subject} are there?", f"{subject} in {project}"]
    else:
        forms = [f"What is {subject}?", f"Tell me about {subject}", f"{subject} {project}"]
    return forms[variant % len(forms)]


def _sdist(name: str, digest: str) -> Path:
    path = SDISTS / name
    if not path.is_file():
        SDISTS.mkdir(parents=True, exist_ok=True)
        package, _, version = name.removesuffix(".tar.gz").rpartition("-")
        pip = [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-binary", ":all:", "--no-deps"]
        subprocess.run([*pip, "-q", "-d", str(SDISTS)], check=True)
    if sha256(path) != digest:
        raise SystemExit(f"{path} does not match its pinned sha256: delete it and run again")
    return path


@dataclass
class Section:
    page: str
    title: str
    headings: tuple[str, ...]
    chunks: list[tuple[str, list[tuple[int, int, str]]]]  # (text, units) of its chunks, in order


def docs_sections(name: str, digest: str, folder: str) -> list[Section]:
    """Every section of the project's docs pages, chunked as `citewise ingest` chunks them."""
    settings = IngestSettings()
    sections: dict[tuple[str, str], Section] = {}
    folder_is_rst_txt = name.startswith("django-")
    with tarfile.open(_sdist(name, digest)) as sdist:
        members = sorted((m for m in sdist.getmembers() if m.isfile()), key=lambda m: m.name)
        for member in members:
            rel = member.name.split("/", 1)[-1]
            if not rel.startswith(folder + "/") or not rel.endswith(DOC_SUFFIXES):
                continue
            page = rel[len(folder) + 1 :]
            if re.search(r"(^|/)(changelog|changes|news|releases?|history|license|authors)", page.lower()):
                continue
            try:
                name_in = page.rsplit("/", 1)[-1]
                if folder_is_rst_txt:  # Django writes its reStructuredText pages as .txt
                    name_in = name_in.removesuffix(".txt") + ".rst"
                doc = load_bytes(sdist.extractfile(member).read(), name=name_in, source=page)
            except IngestError:
                continue
            previous = None
            for chunk in iter_chunks(doc, settings, doc_id=page, filename=page):
                overlap = 0
                if previous is not None and previous.chapter == chunk.chapter:
                    overlap = leading_overlap(previous.text, chunk.text, settings.chunk_overlap)
                key = (page, chunk.chapter)
                headings = tuple(chunk.chapter.split(" > ")) if chunk.chapter else ()
                section = sections.setdefault(key, Section(page, doc.title, headings, []))
                section.chunks.append((chunk.text, list(answer_units(chunk.text, overlap=overlap))))
                previous = chunk
    return list(sections.values())


def _gold_opening(units, text: str, question: str) -> list[int]:
    if not units:
        return []
    gold = [0]
    first = text[units[0][0] : units[0][1]].rstrip("*_ ")
    if first.endswith(":") and len(units) > 1:
        gold.append(1)  # the lead-in and what it announces
    if question.lower().startswith(("how do", "how can", "how to")):
        code = next((i for i, u in enumerate(units[:3]) if u[2] == "code"), None)
        if code is not None and code not in gold:
            gold.append(code)
    return sorted(gold)


def docs(rng: random.Random, per_corpus: int) -> Iterator[Example]:
    for name, digest, folder, _ in DOCS_CORPORA:
        project = name.split("-")[0].capitalize()
        sections = docs_sections(name, digest, folder)
        by_page: dict[str, list[Section]] = {}
        for s in sections:
            by_page.setdefault(s.page, []).append(s)
        made = []
        for s in sections:
            if not s.headings or not s.chunks or not s.chunks[0][1]:
                continue
            question = question_of(s.headings[-1], project, _stable(name, s.page, *s.headings) % 12)
            if not question:
                continue
            text, units = s.chunks[0]
            gold = _gold_opening(units, text, question)
            keep_own = _stable("own", name, s.page, *s.headings) % 2 == 0
            heading = heading_line(s.title, " > ".join(s.headings if keep_own else s.headings[:-1]))
            positive = Example(question, heading, text, units, gold, "docs", f"{name}:{s.page}")
            own = content_terms(s.headings[-1])
            others = [
                o
                for o in by_page[s.page]
                if o is not s and o.chunks and o.chunks[0][1] and not (own & content_terms(" ".join(o.headings[-1:])))
            ]
            terms = content_terms(question)
            others.sort(key=lambda o: (-_overlap(terms, o.chunks[0][0]), o.headings))
            negatives = []
            for o in others[:1] + ([rng.choice(others[1:])] if len(others) > 1 else []):
                t, u = o.chunks[0]
                negatives.append(
                    Example(question, heading_line(o.title, " > ".join(o.headings)), t, u, [], "docs-negative",
                            f"{name}:{s.page}")
                )  # fmt: skip
            made.append((positive, negatives))
        rng.shuffle(made)
        for positive, negatives in made[:per_corpus]:
            yield positive
            yield from negatives


# -- docs: questions written for training, asked through Citewise's own search ---------------------------------------

QUESTIONS = ROOT / "reader" / "questions"
HOMES = WORK / "homes"
PASSAGES = 5  # what quote mode reads per search (QuoteSettings.passages)
SEARCH_DEPTH = 10


def _extract_docs(name: str, digest: str, folder: str) -> Path:
    """The project's docs folder, unpacked once under reader/work/docs/ (Django's .txt pages renamed .rst)."""
    target = WORK / "docs" / name.removesuffix(".tar.gz")
    if target.is_dir():
        return target
    tmp = target.with_suffix(".tmp")
    with tarfile.open(_sdist(name, digest)) as sdist:
        for member in sdist.getmembers():
            rel = member.name.split("/", 1)[-1]
            if not member.isfile() or not rel.startswith(folder + "/") or not rel.endswith(DOC_SUFFIXES):
                continue
            page = rel[len(folder) + 1 :]
            if name.startswith("django-"):
                if not page.startswith(("topics/", "howto/")):
                    continue
                page = page.removesuffix(".txt") + ".rst"
            out = tmp / page
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(sdist.extractfile(member).read())
    tmp.rename(target)
    return target


def written(rng: random.Random) -> Iterator[Example]:
    """reader/questions/*.jsonl: docs questions written for training, on the training corpora, each asked through
    Citewise's own ingest and search as quote mode asks it; every passage read is an example (the ones holding an
    expected string answer with those units, the others — on-topic, same corpus — answer nothing). An answerable
    question whose search missed every answer gets its answer's passage added."""
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.index.retriever import Retriever
    from citewise.ingest.pipeline import Ingestor
    from citewise.settings import Settings

    corpora = {name: (digest, folder) for name, digest, folder, _ in DOCS_CORPORA}
    rows = []
    for path in sorted(QUESTIONS.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_corpus: dict[str, list[dict]] = {}
    for row in rows:
        by_corpus.setdefault(row["corpus"], []).append(row)
    for name in sorted(by_corpus):
        digest, folder = corpora[name]
        docs = _extract_docs(name, digest, folder)
        settings = Settings(home=HOMES / name.removesuffix(".tar.gz"))
        settings = settings.model_copy(update={"server": settings.server.model_copy(update={"log_questions": False})})
        kb = KnowledgeBase(settings)
        Ingestor(kb).ingest_paths([docs])
        retriever = Retriever(kb)
        every = kb.store.chunks()
        for row in by_corpus[name]:
            strings = list(row.get("expect_any") or []) + [s for g in row.get("expect_all") or [] for s in g]
            found = [c for c in retriever.search(row["question"][:1000], SEARCH_DEPTH).chunks if c.units][:PASSAGES]
            answered = False
            for chunk in found:
                gold = _holding(chunk.text, chunk.units, strings) if row["answerable"] else []
                answered |= bool(gold)
                source = "written" if gold else "written-negative"
                heading = heading_line(chunk.title, chunk.chapter)
                yield Example(
                    row["question"], heading, chunk.text, list(chunk.units), gold, source, f"{name}:{row['id']}"
                )
            if row["answerable"] and not answered:
                sources = {s.removesuffix(".txt") + ".rst" if name.startswith("django-") else s for s in row["source"]}
                holding = [c for c in every if c.filename in {Path(s).name for s in sources} and c.units
                           and _holding(c.text, c.units, strings)]  # fmt: skip
                if holding:
                    chunk = holding[0]
                    yield Example(row["question"], heading_line(chunk.title, chunk.chapter), chunk.text,
                                  list(chunk.units), _holding(chunk.text, chunk.units, strings), "written-added",
                                  f"{name}:{row['id']}")  # fmt: skip


def _holding(text: str, units, strings: list[str]) -> list[int]:
    """The units that hold one of the expected strings (case and markup aside)."""
    wanted = [_plain(s) for s in strings if s.strip()]
    return [i for i, (a, b, _) in enumerate(units) if any(w in _plain(text[a:b]) for w in wanted)]


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[`*_]+", "", text).lower().split())


def build(seed: int, squad1_positives: int, squad1_negatives: int, docs_per_corpus: int) -> dict:
    rng = random.Random(seed)
    split = json.loads(SQUAD2_SPLIT.read_text(encoding="utf-8"))
    examples: list[Example] = []
    counts: dict[str, int] = {}
    for source in (
        squad1(rng, squad1_positives, squad1_negatives),
        squad2(split),
        squad2(split),  # counted twice: the only real adversarial unanswerables
        clapnq(),
        docs(rng, docs_per_corpus),
        *[(asked := list(written(rng))), asked],  # counted twice: the closest to what quote mode is asked
    ):
        for example in source:
            examples.append(example)
            counts[example.source] = counts.get(example.source, 0) + 1
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / "train.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for example in examples:
            f.write(json.dumps(asdict(example), ensure_ascii=False) + "\n")
    inputs = [
        {"file": str(p.relative_to(ROOT.parent)), "sha256": sha256(p), "licence": LICENCES["squad"]}
        for p in (SQUAD1, SQUAD2)
    ]
    inputs += [
        {"file": str(p.relative_to(ROOT.parent)), "sha256": sha256(p), "licence": LICENCES["clapnq"]}
        for p in (CLAPNQ_ANSWERABLE, CLAPNQ_UNANSWERABLE, CLAPNQ_DEV)
    ]
    inputs += [{"file": f"PyPI sdist {n}", "sha256": d, "docs": f, "licence": lic} for n, d, f, lic in DOCS_CORPORA]
    inputs += [
        {"file": str(p.relative_to(ROOT)), "sha256": sha256(p), "licence": "ours (Apache-2.0)"}
        for p in [SQUAD2_SPLIT, *sorted(QUESTIONS.glob("*.jsonl"))]
    ]
    manifest = {"seed": seed, "examples": len(examples), "by_source": counts, "inputs": inputs,
                "train_sha256": sha256(out)}  # fmt: skip
    (WORK / "sources.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--squad1", type=int, default=14000, help="SQuAD 1.1 questions (positives)")
    parser.add_argument("--squad1-negatives", type=int, default=5000, help="of them, also asked of another paragraph")
    parser.add_argument("--docs-per-corpus", type=int, default=1500, help="heading questions per docs corpus")
    args = parser.parse_args()
    manifest = build(args.seed, args.squad1, args.squad1_negatives, args.docs_per_corpus)
    print(json.dumps({k: v for k, v in manifest.items() if k != "inputs"}, indent=2))


if __name__ == "__main__":
    main()
