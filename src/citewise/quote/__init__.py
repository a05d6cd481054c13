"""Quote mode: answers made only of verbatim, cited units of the retrieved passages, chosen by a reader model trained
here (`reader.py`) — no language model writes anything.

It is an answerer in its own right (the default one), behind one contract, like a model behind a chat API:

    QuoteAnswerer(settings).answer([Part(question, passages), ...]) -> QuoteAnswer

It gets each part of the question with the passages that part's search found (their text, heading path and the
answer units ingest stored) and returns a typed answer: the text, and the spans it quotes (citation number, start,
end), which grounding turns into citations as they are — or the refusal, with the reason in plain words. It reads
nothing else: no agent state, no search of its own.

    question.py  a question's focus, anchors and parts
    reader.py    the reader model (ONNX): every unit's log-odds that it answers
    compose.py   the best unit with what it needs to stand; the text
    decide.py    answer or refuse: a fitted logistic model over the reader's evidence, and the anchor guard

Deterministic: the same question over the same passages, with the same model, gives the same text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from citewise.quote.compose import (
    RULES,
    UNIT_FEATURES,
    Candidate,
    Chosen,
    Passage,
    Ranker,
    candidates,
    choose,
    order,
    render,
)
from citewise.quote.decide import FEATURES, CorpusStats, decide, features, missing_anchors
from citewise.quote.question import Question, analyse, question_focus, split_parts
from citewise.quote.reader import Reader, heading_line
from citewise.settings import QuoteSettings
from citewise.types import REFUSAL_TEXT, AnswerStyle

__all__ = [
    "FEATURES",
    "RULES",
    "UNIT_FEATURES",
    "CorpusStats",
    "Part",
    "PartResult",
    "Passage",
    "Question",
    "QuoteAnswer",
    "QuoteAnswerer",
    "analyse",
    "question_focus",
    "shared_reader",
    "split_parts",
]

_READER: Reader | None = None
_READER_LOCK = threading.Lock()


def shared_reader(keep: Path | None = None) -> Reader:
    """The shipped reader, one per process (its ONNX session is read-only and thread-safe); `keep`: the machine's
    models cache, where its optimised graph is kept for the next process (the first caller's is used)."""
    global _READER
    with _READER_LOCK:
        if _READER is None:
            _READER = Reader(keep=keep)
        return _READER


@dataclass(frozen=True)
class Part:
    """One question to answer and the passages its search found, best first."""

    question: str
    passages: Sequence[Passage]


@dataclass
class PartResult:
    question: str
    refused: bool
    reason: str | None
    probability: float | None
    features: dict[str, float] | None
    missing_anchors: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)  # chunk ids of the passages it read
    best: str = ""  # the text of the unit ranked best (the trace shows it, answered or not)


@dataclass
class QuoteAnswer:
    text: str
    used: list[int] = field(default_factory=list)  # citation numbers in the order they appear in `text`
    refused: bool = False
    reason: str | None = None  # plain words, when refused
    parts: list[PartResult] = field(default_factory=list)
    quotes: list[tuple[int, int, int]] = field(default_factory=list)  # (citation number, start, end) it quotes

    @property
    def missing_parts(self) -> list[str]:
        """The parts of a multi-part question the docs don't answer (empty when all or none are answered)."""
        answered = [p for p in self.parts if not p.refused]
        return [p.question for p in self.parts if p.refused] if answered else []


def holding_anchors(question: Question, passages: Sequence[Passage], corpus: CorpusStats | None) -> list[Passage]:
    """Only the passages that hold every anchor of the question, when any does: a question about enclosure 417 is
    not answered from the passages about enclosures 234 and 186, however similar. When none does, all of them (the
    anchor guard then refuses)."""
    if not question.anchors:
        return list(passages)
    holding = [p for p in passages if not missing_anchors(question, [p], corpus)]
    return holding or list(passages)


def readable(passages: Sequence[Passage], limit: int) -> list[Passage]:
    """The first `limit` passages that hold anything to quote (a passage of page furniture alone — a scraped page's
    breadcrumbs above its first heading — has no unit and gives way to the next)."""
    return [p for p in passages if p.units][:limit]


class QuoteAnswerer:
    """Quote mode's answerer: the reader scores, the decision decides, the composer quotes."""

    def __init__(self, settings: QuoteSettings, reader: Reader | None = None, models_dir: Path | None = None) -> None:
        self.settings = settings
        self.reader = reader or shared_reader(models_dir)

    def score(self, question: Question, passages: Sequence[Passage]) -> list[Candidate]:
        """Every unit of the passages, scored by the reader and ranked with the evidence beside it, best first."""
        scores = self.reader.score(
            question.focus,
            [(heading_line(p.chunk.title, p.chunk.chapter), p.chunk.text, p.units) for p in passages],
        )
        ranker = Ranker(dict(self.settings.ranker_weights), self.settings.ranker_intercept)
        return candidates(
            passages, [s.units for s in scores], terms=question.terms, anchors=question.anchors, ranker=ranker
        )

    def answer(
        self,
        parts: Sequence[Part],
        *,
        style: AnswerStyle | str = AnswerStyle.DEFAULT,
        corpus: CorpusStats | None = None,
    ) -> QuoteAnswer:
        """Quote an answer to each part, or refuse it; the answer holds every answered part, in order."""
        settings = self.settings
        style = AnswerStyle(style)
        rules = frozenset(settings.rules)
        limit = settings.max_sentences
        per_part = max(2, limit // len(parts)) if len(parts) > 1 else limit
        reports: list[PartResult] = []
        texts: list[str] = []
        used: list[int] = []
        quotes: list[tuple[int, int, int]] = []
        quoted: set[tuple[int, int, int]] = set()  # (citation number, start, end) an earlier part quoted
        for part in parts:
            question = analyse(part.question)
            passages = readable(part.passages, settings.passages)
            if "anchors" in rules:
                passages = holding_anchors(question, passages, corpus)
            ranked = self.score(question, passages) if passages else []
            missing = missing_anchors(question, passages, corpus) if "anchors" in rules else ()
            values = features(question, ranked, passages, corpus)
            verdict = decide(values, missing, settings.weights, settings.intercept, settings.threshold)
            best = ranked[0] if ranked else None
            report = PartResult(
                question=part.question,
                refused=not verdict.answer or not passages,
                reason=verdict.reason if passages else "Nothing in the docs matches this question.",
                probability=verdict.probability,
                features=values,
                missing_anchors=list(verdict.missing_anchors),
                read=[p.chunk.chunk_id for p in passages],
                best=passages[best.slot].chunk.text[best.start : best.end] if best else "",
            )
            reports.append(report)
            if report.refused:
                continue
            skip = frozenset(
                (slot, i)
                for slot, p in enumerate(passages)
                for i, u in enumerate(p.units)
                if (p.n, u[0], u[1]) in quoted
            )
            chosen, left_out = choose(
                ranked,
                passages,
                max_units=per_part,
                relative_cut=settings.relative_cut,
                min_score=settings.min_unit_score,
                rules=rules,
                skip=skip,
            )
            topic = heading_line("", passages[best.slot].chunk.chapter).split(" > ")[-1] if best else ""
            taken = {(c.slot, c.index) for c in chosen} | skip
            why = next((Chosen(c.slot, c.index, "why") for c in ranked if c.key not in taken), None)
            text, part_used, part_quotes = render(
                order(chosen, ranked), passages, style=style, left_out=left_out, topic=topic, why=why
            )
            if text:
                texts.append(text)
            used += [n for n in part_used if n not in used]
            quotes += part_quotes
            quoted |= set(part_quotes)
        answered = [r for r in reports if not r.refused]
        if not answered:
            reason = reports[0].reason if len(reports) == 1 else "The docs answer none of the question's parts."
            return QuoteAnswer(REFUSAL_TEXT, [], True, reason, reports)
        return QuoteAnswer("\n\n".join(texts), used, False, None, reports, quotes)
