"""Answer or refuse: a logistic model over the reader's scores, calibrated on fitted question sets, and one guard.

The reader says, unit by unit, how likely the unit answers the question rather than nothing in its passage does. The
decision reads that evidence across every passage read (`features`):

- best: the best unit's log-odds; margin: how far it stands above the next best unit (at most `MARGIN_CAP`, which a
  lone unit gets);
- agree: the share of passages whose own best unit says "answers" (log-odds above 0);
- lead: whether the best unit is in the best search result;
- covered: the share of the question's content words the best unit, with its heading path, holds;
- unknown: the share of the question's content words no chunk of the whole corpus holds (the docs never mention it);

in a logistic model (`QuoteSettings.weights`, fitted by bench/fit_quote_decision.py on fitted sets and judged on
others), answering when its probability reaches `QuoteSettings.threshold`. One guard stands before it: an anchor of
the question — an identifier, a number, a quoted string or a name — that no passage read holds refuses
(`missing_anchors`): the reader compares meanings, and "enclosure 417" means much what "enclosure 234" does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from citewise.quote.compose import Candidate, Passage, text_of
from citewise.quote.question import Question
from citewise.quote.reader import heading_line
from citewise.text import compact, content_terms

FEATURES = ("best", "margin", "agree", "lead", "covered", "unknown")
# The margin a lone unit gets (nothing to stand above), and the most any unit gets: about the 99th percentile of the
# fitted sets' margins (4.7), so a one-unit passage or selection is not read 2x beyond what the model was fitted on.
MARGIN_CAP = 5.0
NOTHING = -10.0  # the best log-odds when there is no unit to score at all
# An anchor most of the corpus holds (the product's name) is the corpus's topic, not the question's.
COMMON_ANCHOR_SHARE = 0.2
COMMON_ANCHOR_MIN_CHUNKS = 3


class CorpusStats(Protocol):
    """What the decision asks of the whole corpus (`citewise.index.vocabulary.VocabularyView` provides it): how many
    chunks hold a word's stem, and how many chunks there are."""

    chunks: int

    def stem_df(self, term: str) -> int: ...  # pragma: no cover - protocol


@dataclass(frozen=True)
class Verdict:
    answer: bool
    probability: float
    reason: str | None  # plain words, when refusing
    features: dict[str, float] = field(default_factory=dict)
    missing_anchors: tuple[str, ...] = ()


def features(
    question: Question, ranked: Sequence[Candidate], passages: Sequence[Passage], corpus: CorpusStats | None
) -> dict[str, float]:
    """The decision's inputs for one question (or part), from the reader's ranked units."""
    if not ranked:
        return {"best": NOTHING, "margin": 0.0, "agree": 0.0, "lead": 0.0, "covered": 0.0, "unknown": 1.0}
    best = ranked[0]
    second = next((c.score for c in ranked[1:]), best.score - MARGIN_CAP)
    per_passage: dict[int, float] = {}
    for c in ranked:
        per_passage.setdefault(c.slot, c.score)
    passage = passages[best.slot]
    held = content_terms(text_of(passage, (best.start, best.end, best.kind)))
    held |= content_terms(heading_line(passage.chunk.title, passage.chunk.chapter))
    terms = question.terms
    unknown = 0.0
    if corpus is not None and corpus.chunks and terms:
        unknown = sum(1 for t in terms if corpus.stem_df(t) == 0) / len(terms)
    return {
        "best": round(best.score, 4),
        "margin": round(min(MARGIN_CAP, best.score - second), 4),
        "agree": round(sum(1 for s in per_passage.values() if s > 0) / max(1, len(passages)), 4),
        "lead": 1.0 if best.slot == 0 else 0.0,
        "covered": round(len(terms & held) / len(terms), 4) if terms else 1.0,
        "unknown": round(unknown, 4),
    }


def probability(values: Mapping[str, float], weights: Mapping[str, float], intercept: float) -> float:
    z = intercept + sum(weights.get(name, 0.0) * value for name, value in values.items())
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def _anchor_present(anchor: str, evidence: str, evidence_terms: set[str]) -> bool:
    """Whether `evidence` (lower case) names `anchor`: in any case, with its punctuation left out (`max_turns` for
    MAX-TURNS), or by all its words' stems. A number or a version must stand as written, not inside a longer one
    ("3.1.7" is not in "3.1.71", nor in "31.7")."""
    if not re.search(r"[a-z]", anchor.lower()):
        return bool(re.search(rf"(?<![\w.]){re.escape(anchor.lower())}(?![\w]|\.\d)", evidence))
    if anchor.lower() in evidence:
        return True
    key = compact(anchor)
    if len(key) >= 3 and key in re.sub(r"[^0-9a-z]+", "", evidence):
        return True
    words = content_terms(anchor)
    return bool(words) and words <= evidence_terms


def missing_anchors(question: Question, passages: Sequence[Passage], corpus: CorpusStats | None) -> tuple[str, ...]:
    """The question's anchors no passage read holds (text, title, headings, file name), except those most of the
    corpus holds: the product's own name is the corpus's topic, not something a passage must repeat."""
    if not question.anchors:
        return ()
    evidence = "\n".join(
        "\n".join(p for p in (x.chunk.title, x.chunk.chapter, x.chunk.filename, x.chunk.text) if p) for x in passages
    ).lower()
    evidence_terms = content_terms(evidence)
    missing = []
    for anchor in question.anchors:
        if _anchor_present(anchor, evidence, evidence_terms):
            continue
        if corpus is not None and corpus.chunks and re.search(r"[a-z]", anchor.lower()):  # a number is no topic
            words = list(content_terms(anchor)) or [compact(anchor)]
            common = max(COMMON_ANCHOR_MIN_CHUNKS, COMMON_ANCHOR_SHARE * corpus.chunks)
            if all(w in evidence_terms or corpus.stem_df(w) >= common for w in words):
                continue
        missing.append(anchor)
    return tuple(missing)


def decide(
    values: dict[str, float],
    anchors_missing: Sequence[str],
    weights: Mapping[str, float],
    intercept: float,
    threshold: float,
) -> Verdict:
    """Answer when no anchor is missing and the model's probability reaches `threshold`; otherwise refuse, saying
    why in words a reader understands."""
    p = round(probability(values, weights, intercept), 6)
    if anchors_missing:
        named = ", ".join(f"“{a}”" for a in anchors_missing[:3])
        return Verdict(False, p, f"The docs don't mention {named}.", values, tuple(anchors_missing))
    if p >= threshold:
        return Verdict(True, p, None, values)
    if values.get("unknown", 0.0) >= 0.5:
        return Verdict(False, p, "The docs never mention what this question is about.", values)
    return Verdict(False, p, "What the docs say that comes closest to this question doesn't answer it.", values)
