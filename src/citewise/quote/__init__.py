"""Quote mode: answers made only of verbatim, cited sentences of the retrieved passages — no language model.

It is an answerer in its own right (the default one): `answer()` takes the question's parts, each with the
passages its own search found, and returns one `QuoteAnswer` — the quoted sentences of every part the docs answer,
the parts they don't (reported, not guessed), or the refusal with the reason in plain words.

    question.py   what the question asks for: kind, subject, anchors, parts
    sentences.py  the candidate quotes of the passages
    compose.py    choose the sentences that answer the question's kind; gather the evidence's signals
    decide.py     answer or refuse: the anchor rule and the fitted logistic model

Deterministic by construction: the same question over the same passages gives the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from citewise.quote.compose import Composed, CorpusStats, Profile, Ranker, compose, with_definition
from citewise.quote.decide import FEATURES, Signals, Verdict, decide
from citewise.quote.question import Question, QuestionKind, analyse, question_focus, split_parts
from citewise.quote.sentences import candidates, is_asking
from citewise.settings import QuoteSettings
from citewise.types import REFUSAL_TEXT, AnswerStyle, ScoredChunk

__all__ = [
    "FEATURES",
    "CorpusStats",
    "Part",
    "PartResult",
    "Profile",
    "Question",
    "QuestionKind",
    "QuoteAnswer",
    "Signals",
    "analyse",
    "answer",
    "question_focus",
    "readable",
    "split_parts",
]


def readable(chunks: Sequence[tuple[int, ScoredChunk]], limit: int) -> list[tuple[int, ScoredChunk]]:
    """The first `limit` of a search's passages ((citation number, chunk), best first) that hold anything to quote.
    A passage of page furniture alone — a scraped page's "Copy" button and breadcrumbs above its first heading, a
    heading over a button label — matches a question by its title and headings, yet offers no sentence: it gives way
    to the next passage (quote mode searches deeper than it reads, `QuotePolicy.search_depth`)."""
    out: list[tuple[int, ScoredChunk]] = []
    for pair in chunks:
        if len(out) == limit:
            break
        if any(s.code or not is_asking(s.text) for s in candidates([pair], code=True)):  # as `compose.score` sees
            out.append(pair)
    return out


@dataclass(frozen=True)
class Part:
    """One question to answer and the passages its search found ((citation number, chunk), best first)."""

    question: Question
    chunks: Sequence[tuple[int, ScoredChunk]]
    profile: Profile | None = None


@dataclass
class PartResult:
    question: str
    kind: str
    refused: bool
    reason: str | None
    probability: float | None
    signals: dict[str, float] | None
    missing_anchors: list[str] = field(default_factory=list)
    missing_value: str = ""  # "duration" or "number" the question asks for and no quote states
    pointers: list[str] = field(default_factory=list)  # files its only quotes point to: worth searching in
    read: list[str] = field(default_factory=list)  # chunk ids of the passages it was composed from (`readable`)


@dataclass
class QuoteAnswer:
    text: str
    used: list[int] = field(default_factory=list)  # citation numbers in the order they appear in `text`
    refused: bool = False
    reason: str | None = None  # plain words, when refused
    parts: list[PartResult] = field(default_factory=list)

    @property
    def missing_parts(self) -> list[str]:
        """The parts of a multi-part question the docs don't answer (empty when all or none are answered)."""
        answered = [p for p in self.parts if not p.refused]
        return [p.question for p in self.parts if p.refused] if answered else []


def answer(
    parts: Sequence[Part],
    settings: QuoteSettings,
    *,
    style: AnswerStyle | str = AnswerStyle.DEFAULT,
    corpus: CorpusStats | None = None,
    max_sentences: int | None = None,
) -> QuoteAnswer:
    """Quote an answer to each part, or refuse it; the answer holds every answered part, in order."""

    def decider(signals: Signals) -> Verdict:
        return decide(signals, settings.weights, settings.intercept, settings.threshold)

    ranker = Ranker(dict(settings.ranker_weights), settings.ranker_intercept) if settings.ranker_weights else None
    limit = max_sentences or settings.max_sentences
    per_part = max(2, limit // len(parts)) if len(parts) > 1 else limit
    results: list[tuple[Part, Composed, list[str]]] = []  # with the chunk ids of the passages it read
    quoted: list[tuple[str, int, int]] = []  # what the parts before quoted: a later part doesn't repeat it
    composed_last: list[tuple[str, int, int]] = []  # the last quote of the text so far
    for part in parts:
        passages = with_definition(readable(part.chunks, settings.passages), part.chunks, part.question)
        composed = compose(
            part.question,
            passages,
            decider=decider,
            max_sentences=per_part,
            style=style,
            corpus=corpus,
            profile=part.profile,
            ranker=ranker,
            already=quoted,
            follows=composed_last,
        )
        quoted += composed.quoted
        composed_last = composed.quoted[-1:] if composed.text else composed_last
        results.append((part, composed, [c.chunk_id for _, c in passages]))
    reports = [
        PartResult(
            question=part.question.text,
            kind=str(part.question.kind),
            refused=c.refused,
            reason=c.reason,
            probability=c.probability,
            signals=c.signals.as_features() if c.signals else None,
            missing_anchors=list(c.signals.missing_anchors) if c.signals else [],
            missing_value=c.signals.missing_value if c.signals else "",
            pointers=c.pointers,
            read=read,
        )
        for part, c, read in results
    ]
    answered = [c for _, c, _ in results if not c.refused]
    if not answered:
        reason = (
            results[0][1].reason if len(results) == 1 else "The documentation answers none of the question's parts."
        )
        return QuoteAnswer(REFUSAL_TEXT, [], True, reason, reports)
    text = "\n\n".join(c.text for c in answered if c.text)
    used = list(dict.fromkeys(n for c in answered for n in c.used))
    return QuoteAnswer(text, used, False, None, reports)
