"""Question-answering data sets `citewise eval answers` reads, turned into one shape: passages + questions.

Every format becomes an `AnswerDataset`: the passages that form the corpus (each becomes one document of one
index) and the questions, each with its gold answers and whether it is answerable. Every question is asked
against the whole corpus, never only against its own passage.

- SQuAD v2 JSON (`load_squad2`): every paragraph of every article is a passage; `is_impossible` questions (or ones
  without answers) are unanswerable.
- JSONL (`load_jsonl`): `{"question", "answers": [...] | [], "context"?: str | [str], "title"?, "id"?}` per line;
  an empty `answers` list marks an unanswerable question; the contexts, de-duplicated, form the corpus.
- Docs questions (`load_questions`): `{"question", "answerable": bool, "expect_any"?: [...], "expect_all"?: [[...],
  ...]}` or `{"question", "answer"}` per line, asked against a docs folder (`--docs`); see `metrics.judge`.
- RGB-style JSONL (`load_rgb`): `{"query", "answer", "positive": [...], "negative": [...]}` per line. Positive and
  negative passages (de-duplicated) form the corpus and every question is answerable; with `rejection=True` only
  the negative passages do, so the right behaviour for every question is to refuse.

Malformed input raises `ConfigError` naming the file and, for line formats, the line. A file without passages is an
error unless the caller indexes a docs folder as the corpus (`require_passages=False`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citewise.errors import ConfigError


@dataclass(frozen=True)
class Passage:
    id: str  # stable: a hash of the text (line formats) or the article/paragraph position (SQuAD)
    text: str
    title: str = ""


@dataclass(frozen=True)
class EvalQuestion:
    id: str
    question: str
    answers: tuple[str, ...]  # gold answers; empty for unanswerable questions
    answerable: bool
    passage_ids: tuple[str, ...] = ()  # the question's own passages, when the data set says which
    expect_any: tuple[str, ...] = ()  # a right answer contains at least one of these (docs question sets)
    expect_all: tuple[tuple[str, ...], ...] = ()  # ... or one of each group (a question with several parts)


@dataclass
class AnswerDataset:
    name: str
    format: str
    passages: list[Passage] = field(default_factory=list)
    questions: list[EvalQuestion] = field(default_factory=list)

    @property
    def corpus_hash(self) -> str:
        """Identifies the corpus (not the questions): two runs over the same passages can share one index."""
        digest = hashlib.sha256()
        for passage in self.passages:
            digest.update(json.dumps([passage.id, passage.title, passage.text]).encode())
        return digest.hexdigest()[:16]


class _Corpus:
    """Passages keyed by their text, so a passage repeated across questions is indexed once."""

    def __init__(self) -> None:
        self.passages: dict[str, Passage] = {}

    def add(self, text: str, title: str = "") -> str | None:
        if not text.strip():
            return None
        passage_id = hashlib.sha1(text.encode()).hexdigest()[:16]
        self.passages.setdefault(passage_id, Passage(passage_id, text, title))
        return passage_id


def read_jsonl(path: Path, *, missing: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; ConfigError naming the file and line for anything else."""
    if not path.is_file():
        raise ConfigError(missing or f"{path} does not exist")
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}, line {number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}, line {number}: expected a JSON object")
            yield number, row


def _strings(value: Any, where: str, key: str) -> list[str]:
    """A string or a (possibly nested) list of strings → a flat list of non-empty strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            out.extend(_strings(item, where, key))
        return out
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [str(value)]  # RGB has numeric answers ("2021")
    raise ConfigError(f'{where}: "{key}" must be a string or a list of strings')


def _require_text(row: dict, key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f'{where}: expected a non-empty string "{key}"')
    return value.strip()


def _empty_check(dataset: AnswerDataset, path: Path, require_passages: bool) -> AnswerDataset:
    if not dataset.questions:
        raise ConfigError(f"{path} holds no questions")
    if require_passages and not dataset.passages:
        raise ConfigError(f"{path} holds no passages to index: add contexts, or give a docs folder with --corpus")
    return dataset


def load_squad2(path: Path, *, require_passages: bool = True) -> AnswerDataset:
    """SQuAD v2: `{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers":
    [{"text"}], "is_impossible"}]}]}]}`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise ConfigError(f'{path}: expected SQuAD v2 JSON, an object with a "data" list of articles')
    dataset = AnswerDataset(path.stem, "squad2")
    for a, article in enumerate(articles):
        title = str(article.get("title") or "") if isinstance(article, dict) else ""
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ConfigError(f'{path}: article {a} ("{title}") has no "paragraphs" list')
        for p, paragraph in enumerate(paragraphs):
            where = f'{path}: article {a} ("{title}"), paragraph {p}'
            if not isinstance(paragraph, dict):
                raise ConfigError(f"{where}: expected an object")
            context = _require_text(paragraph, "context", where)
            passage_id = f"{a:04d}-{p:03d}"
            dataset.passages.append(Passage(passage_id, context, title))
            for q, qa in enumerate(paragraph.get("qas") or []):
                qa_where = f"{where}, question {q}"
                if not isinstance(qa, dict):
                    raise ConfigError(f"{qa_where}: expected an object")
                answers = [
                    ans["text"] if isinstance(ans, dict) else ans
                    for ans in qa.get("answers") or []
                    if not isinstance(ans, dict) or "text" in ans
                ]
                golds = tuple(dict.fromkeys(_strings(answers, qa_where, "answers")))
                answerable = not qa.get("is_impossible", False) and bool(golds)
                dataset.questions.append(
                    EvalQuestion(
                        id=str(qa.get("id") or f"{passage_id}-{q}"),
                        question=_require_text(qa, "question", qa_where),
                        answers=golds if answerable else (),
                        answerable=answerable,
                        passage_ids=(passage_id,),
                    )
                )
    return _empty_check(dataset, path, require_passages)


def load_jsonl(path: Path, *, require_passages: bool = True) -> AnswerDataset:
    """`{"question", "answers": [...] | [], "context"?: str | [str], "title"?, "id"?}` per line."""
    path = Path(path)
    dataset = AnswerDataset(path.stem, "jsonl")
    corpus = _Corpus()
    for number, row in read_jsonl(path):
        where = f"{path}, line {number}"
        if "answers" not in row:
            raise ConfigError(f'{where}: missing "answers" (use [] for an unanswerable question)')
        golds = tuple(dict.fromkeys(_strings(row["answers"], where, "answers")))
        title = str(row.get("title") or "")
        own = [corpus.add(text, title) for text in _strings(row.get("context"), where, "context")]
        dataset.questions.append(
            EvalQuestion(
                id=str(row.get("id") or number),
                question=_require_text(row, "question", where),
                answers=golds,
                answerable=bool(golds),
                passage_ids=tuple(p for p in own if p),
            )
        )
    dataset.passages = list(corpus.passages.values())
    return _empty_check(dataset, path, require_passages)


def _groups(value: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(group, list) for group in value):
        raise ConfigError(f'{where}: "expect_all" must be a list of lists of strings (one list per part)')
    return tuple(tuple(_strings(group, where, "expect_all")) for group in value if group)


def load_questions(path: Path) -> AnswerDataset:
    """Questions about a docs folder, one JSON object per line:

        {"question": "How do I change the port?", "answerable": true, "expect_any": ["--port"]}
        {"question": "What is quote mode and how do I switch?", "answerable": true,
         "expect_all": [["verbatim"], ["--mode agent", "CITEWISE_LLM"]]}
        {"question": "Who founded Citewise?", "answerable": false}
        {"question": "What is quote mode?", "answer": "Answers made of verbatim sentences from the docs."}

    `expect_any`: a right answer contains one of the strings; `expect_all`: one string of every group (a question
    with several parts); `answer`: a gold answer (the question is answerable). The passages come from `--docs`."""
    path = Path(path)
    dataset = AnswerDataset(path.stem, "questions")
    for number, row in read_jsonl(path):
        where = f"{path}, line {number}"
        gold = _strings(row.get("answer"), where, "answer")
        if "answerable" in row and not isinstance(row["answerable"], bool):
            raise ConfigError(f'{where}: "answerable" must be true or false')
        if "answerable" not in row and not gold:
            raise ConfigError(f'{where}: give "answerable" (true or false) or a gold "answer"')
        answerable = bool(row.get("answerable", True))
        expect_any = tuple(_strings(row.get("expect_any"), where, "expect_any"))
        expect_all = _groups(row.get("expect_all"), where)
        if not answerable and (gold or expect_any or expect_all):
            raise ConfigError(f"{where}: an unanswerable question has no expected answer")
        dataset.questions.append(
            EvalQuestion(
                id=str(row.get("id") or number),
                question=_require_text(row, "question", where),
                answers=tuple(gold),
                answerable=answerable,
                expect_any=expect_any,
                expect_all=expect_all,
            )
        )
    return _empty_check(dataset, path, require_passages=False)


def load_rgb(path: Path, *, rejection: bool = False, require_passages: bool = True) -> AnswerDataset:
    """RGB (Chen et al., 2024) style: `{"id"?, "query", "answer", "positive": [...], "negative": [...]}` per line.

    `rejection=True` is RGB's negative-rejection test: only negative passages are indexed and every question is
    marked unanswerable (its gold answers are kept off, since no indexed passage holds them)."""
    path = Path(path)
    dataset = AnswerDataset(path.stem, "rgb-rejection" if rejection else "rgb")
    corpus = _Corpus()
    for number, row in read_jsonl(path):
        where = f"{path}, line {number}"
        golds = tuple(dict.fromkeys(_strings(row.get("answer"), where, "answer")))
        negatives = _strings(row.get("negative"), where, "negative")
        positives = [] if rejection else _strings(row.get("positive"), where, "positive")
        own = [corpus.add(text) for text in positives]
        for text in negatives:
            corpus.add(text)
        if not rejection and not golds:
            raise ConfigError(f'{where}: "answer" is empty (RGB questions are answerable; use --rejection)')
        dataset.questions.append(
            EvalQuestion(
                id=str(row.get("id", number)),
                question=_require_text(row, "query", where),
                answers=() if rejection else golds,
                answerable=not rejection,
                passage_ids=tuple(p for p in own if p),
            )
        )
    dataset.passages = list(corpus.passages.values())
    return _empty_check(dataset, path, require_passages)
