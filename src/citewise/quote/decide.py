"""Answer or refuse: a small logistic model over signals that transfer across corpora, plus the anchor rule.

No single similarity decides. Absolute cosines of a small embedding model don't carry from one corpus or question
style to another (documentation questions about a CLI score 0.35-0.5 on the right passage; Wikipedia questions
0.6-0.8 on a near miss), and topical similarity can't tell "about the same thing" from "answers it". So quote mode
combines:

- how much of the question the chosen evidence covers (its sentences, and with its section headings), weighted by
  how rare each word is in the whole corpus — the words a question hinges on weigh the most;
- how much of the question the corpus has never seen (a word in no chunk at all: the docs don't cover it);
- how far the best passage stands out from the rest of the corpus (cosine margin and z-score against the
  question's other candidates, not the cosine itself), and whether the vector and the full-text ranking agree;
- whether the chosen sentences hold what the question's kind asks for (a value for "how many", a definition for
  "what is X", a command or steps for "how do I"), and how sure the sentence ranker is that its best candidate
  holds the answer;

in a logistic model (`QuoteDecision`, fitted by bench/fit_quote_decision.py on several distributions and judged on
others), and refuses whatever the score when an anchor of the question — an identifier, number, quoted string or
name it hinges on — is missing from the evidence (`missing_anchors`), or when the question asks how long, how often
or how many and no quoted sentence states a time, an interval or a number (`missing_value`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Order matters only for display; the model is a {feature: weight} mapping.
FEATURES = (
    "coverage",
    "coverage_best",
    "coverage_sentence",
    "coverage_heading",
    "missing_weight",
    "rare_lead",
    "anchors_lead",
    "unknown",
    "dense_best",
    "dense_margin",
    "dense_z",
    "agreement",
    "answer_type",
    "negation",
    "terms",
    "factoid",
    "factoid_dense",
    "procedure",
    "ranker_best",
)


@dataclass(frozen=True)
class Signals:
    """The decision's inputs for one question (or one part of one), each documented where it is computed
    (`citewise.quote.compose`). `as_features()` is what the model sees."""

    coverage: float  # share of the question's corpus-IDF weight held by the chosen sentences + their headings
    coverage_best: float  # share held by the leading sentence + its passage's headings
    coverage_sentence: float  # share held by the best single sentence (IDF over the candidate sentences)
    coverage_heading: float  # share held by the best passage's title and headings
    missing_weight: float  # the corpus IDF of the rarest question word the lead + its headings lack, over log(1+N)
    rare_lead: float  # share of the question's rare words (in at most 2% of chunks) the lead sentence holds
    anchors_lead: float  # share of the question's anchors the lead sentence holds (1 without anchors)
    unknown: float  # share of the question's weight in words no chunk of the corpus holds
    dense_best: float  # dense score (cosine with the best sentence's, `store.dense_scores`) of the best opened passage
    dense_margin: float  # that score minus the mean score of the question's other candidates
    dense_z: float  # the same margin in standard deviations of the candidates' scores
    agreement: float  # 1 when the best passage is near the top of both the vector and the full-text ranking
    answer_type: float  # +1 the lead holds what the question's kind wants (a date, a number, a name, a command, a
    # definition of the subject), -1 it doesn't, 0 the kind wants nothing in particular
    negation: float  # 1 when the question asks about an exception ("not", "never") and the lead states none
    terms: float  # log(1 + number of content words in the question)
    factoid: float = 0.0  # 1 when the question wants a date, a number, a duration or a name (who/when/how many)
    factoid_dense: float = 0.0  # factoid × dense_best: how close a factoid question's passage must be differs
    procedure: float = 0.0  # 1 for a "how do I" question
    ranker_best: float = 0.0  # the sentence ranker's probability that its best candidate holds the answer
    missing_anchors: tuple[str, ...] = field(default=())  # anchors absent from the evidence: refuse
    missing_value: str = ""  # "duration" or "number": what "how long/often/many" asks and no quote states: refuse

    def as_features(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in FEATURES}


@dataclass(frozen=True)
class Verdict:
    answer: bool
    probability: float
    reason: str | None  # plain words, when refusing


def probability(features: Mapping[str, float], weights: Mapping[str, float], intercept: float) -> float:
    z = intercept + sum(weights.get(name, 0.0) * value for name, value in features.items())
    z = max(-60.0, min(60.0, z))
    return 1.0 / (1.0 + math.exp(-z))


def decide(signals: Signals, weights: Mapping[str, float], intercept: float, threshold: float) -> Verdict:
    """Answer when no anchor is missing and the model's probability that the evidence answers the question reaches
    `threshold`; otherwise refuse, saying why in words a reader understands."""
    p = round(probability(signals.as_features(), weights, intercept), 6)
    if signals.missing_anchors:
        named = ", ".join(f"“{a}”" for a in signals.missing_anchors[:3])
        return Verdict(False, p, f"The closest passages don't mention {named}, which the question asks about.")
    if signals.missing_value:
        return Verdict(False, p, _MISSING_VALUE[signals.missing_value])
    if p >= threshold:
        return Verdict(True, p, None)
    if signals.unknown >= 0.3:
        return Verdict(False, p, "The question asks about something the documentation never mentions.")
    return Verdict(False, p, "The closest passages are about the same topic but don't answer this question.")


_MISSING_VALUE = {
    "duration": "The closest passages don't say how long or how often: they state no time or interval.",
    "number": "The closest passages state no number for what the question asks.",
}


def standardise(rows: Sequence[Mapping[str, float]]) -> dict[str, tuple[float, float]]:
    """Mean and standard deviation of each feature (for fitting; the committed weights are on raw features)."""
    out = {}
    for name in FEATURES:
        values = [row[name] for row in rows]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)) or 1.0
        out[name] = (mean, std)
    return out
