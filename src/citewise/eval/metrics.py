"""Answer-quality metrics: refusals, answer recall and token F1, citation validity and support, latency.

Each metric is a small pure function whose formula is in its docstring; the tests check them against values
worked out by hand. `score_answers` applies them to a whole evaluation run. Retrieval metrics (nDCG, Recall,
MRR) live in `citewise.eval.retrieval`.

Text comparisons use SQuAD's normalisation (lower case, punctuation and the articles a/an/the removed, whitespace
collapsed), after removing the answer's own `[n]` citation markers, which are not part of what it says.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from citewise.types import Answer, Status

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_CITATION_MARKER = re.compile(r"\[\d+\]")


def normalize_answer(text: str) -> str:
    """SQuAD v2's normalisation: lower-case, drop punctuation, drop articles, collapse whitespace."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def strip_citation_markers(text: str) -> str:
    return _CITATION_MARKER.sub(" ", text)


def contains_answer(text: str, golds: Iterable[str]) -> bool:
    """True when any non-empty gold answer, normalised, occurs in the normalised text as whole words."""
    haystack = f" {normalize_answer(strip_citation_markers(text))} "
    return any((needle := normalize_answer(gold)) and f" {needle} " in haystack for gold in golds)


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 between two strings, on normalised tokens (a bag of words: repeats count):

    common    = |tokens(prediction) ∩ tokens(gold)|   (multiset intersection)
    precision = common / |tokens(prediction)|,  recall = common / |tokens(gold)|
    F1        = 2 · precision · recall / (precision + recall)   (0 when nothing is in common)

    Two empty strings score 1 (SQuAD's convention for "no answer" matching "no answer"); one empty string, 0.
    """
    pred = normalize_answer(strip_citation_markers(prediction)).split()
    truth = normalize_answer(gold).split()
    if not pred or not truth:
        return float(pred == truth)
    common = sum((Counter(pred) & Counter(truth)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(truth)
    return 2 * precision * recall / (precision + recall)


def best_token_f1(prediction: str, golds: Sequence[str]) -> float:
    """The best token F1 against any gold answer (SQuAD takes the maximum over the reference answers)."""
    return max((token_f1(prediction, gold) for gold in golds), default=0.0)


_MARKUP = re.compile(r"[`*_]+")


def _plain(text: str) -> str:
    """Lower case, citation markers and markdown emphasis removed, whitespace collapsed: flags (`--port`), paths
    and punctuation kept, since an expected string is often exactly that."""
    return " ".join(_MARKUP.sub("", strip_citation_markers(text)).lower().split())


def judge(
    answer: Answer,
    *,
    answerable: bool,
    expect_any: Sequence[str] = (),
    expect_all: Sequence[Sequence[str]] = (),
    golds: Sequence[str] = (),
) -> str:
    """One docs question's outcome: "right", "wrong" or "refused" for an answerable question; "refused" or
    "answered" for an unanswerable one. An answer that is no success (an error) counts as refused.

    right = the answer (citation markers and markdown emphasis removed, case ignored) contains one string of every
    `expect_all` group; else one `expect_any` string; else, with a gold answer, contains it (SQuAD-normalised) or
    holds at least half of its words (token recall >= 0.5); with none of these, any answer is right."""
    refused = answer.status != Status.SUCCESS
    if not answerable:
        return "refused" if refused else "answered"
    if refused:
        return "refused"
    text = _plain(answer.answer)
    if expect_all:
        ok = all(any(_plain(s) in text for s in group) for group in expect_all)
    elif expect_any:
        ok = any(_plain(s) in text for s in expect_any)
    elif golds:
        ok = contains_answer(answer.answer, golds) or max(_token_recall(answer.answer, g) for g in golds) >= 0.5
    else:
        ok = True
    return "right" if ok else "wrong"


def _token_recall(prediction: str, gold: str) -> float:
    truth = normalize_answer(gold).split()
    if not truth:
        return 0.0
    pred = normalize_answer(strip_citation_markers(prediction)).split()
    return sum((Counter(pred) & Counter(truth)).values()) / len(truth)


def score_docs(outcomes: Sequence[tuple[bool, str]]) -> dict:
    """right / wrong / refused over the answerable questions and refused / answered over the unanswerable ones,
    as counts and shares, from (answerable, outcome of `judge`) pairs."""
    answerable = [o for a, o in outcomes if a]
    unanswerable = [o for a, o in outcomes if not a]
    out: dict = {}
    for name, items, keys in (
        ("answerable", answerable, ("right", "wrong", "refused")),
        ("unanswerable", unanswerable, ("refused", "answered")),
    ):
        out[name] = {"questions": len(items)}
        for key in keys:
            count = items.count(key)
            out[name][key] = count
            out[name][f"{key}_share"] = _round(_ratio(count, len(items)))
    return out


@dataclass(frozen=True)
class RefusalScores:
    """Refusal as a detector of unanswerable questions. Positive = the question is unanswerable.

    tp: unanswerable and refused · fp: answerable but refused · fn: unanswerable but answered · tn: the rest.
    precision = tp / (tp + fp), recall = tp / (tp + fn), F1 = their harmonic mean = 2tp / (2tp + fp + fn).
    A ratio whose denominator is 0 is None (undefined: e.g. precision when nothing was refused), not 0 or 1; F1 is
    then still defined (0) as long as there was an unanswerable question or a refusal.
    """

    tp: int
    fp: int
    fn: int
    tn: int
    precision: float | None
    recall: float | None
    f1: float | None


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def refusal_scores(unanswerable: Sequence[bool], refused: Sequence[bool]) -> RefusalScores:
    if len(unanswerable) != len(refused):
        raise ValueError("unanswerable and refused must have one entry per question")
    pairs = list(zip(unanswerable, refused, strict=True))
    tp = sum(u and r for u, r in pairs)
    fp = sum(r and not u for u, r in pairs)
    fn = sum(u and not r for u, r in pairs)
    tn = len(pairs) - tp - fp - fn
    return RefusalScores(tp, fp, fn, tn, _ratio(tp, tp + fp), _ratio(tp, tp + fn), _ratio(2 * tp, 2 * tp + fp + fn))


def citation_validity(answers: Iterable[Answer]) -> float | None:
    """Share of all citations (over all answers) whose chunk_id is among that answer's `sources` — the chunks
    retrieved or opened during its run. Grounding must make this 1.0; None when there is no citation at all."""
    total = valid = 0
    for answer in answers:
        known = {chunk.chunk_id for chunk in answer.sources}
        total += len(answer.citations)
        valid += sum(citation.chunk_id in known for citation in answer.citations)
    return _ratio(valid, total)


def cited_texts(answer: Answer) -> list[str]:
    """The text of every cited chunk that is among the answer's sources (an invalid citation supports nothing)."""
    by_id = {chunk.chunk_id: chunk.text for chunk in answer.sources}
    return [by_id[c.chunk_id] for c in answer.citations if c.chunk_id in by_id]


def citation_supported(answer: Answer, golds: Sequence[str]) -> bool:
    """True when a chunk the answer cites contains a gold answer (normalised, whole words)."""
    return any(contains_answer(text, golds) for text in cited_texts(answer))


def percentiles_ms(samples_ms: Sequence[float]) -> tuple[float, float]:
    """(p50, p95) with linear interpolation (numpy's default), rounded to 0.01 ms; (0, 0) for no samples."""
    if not samples_ms:
        return 0.0, 0.0
    p50, p95 = np.percentile(np.asarray(samples_ms, dtype=float), [50, 95])
    return round(float(p50), 2), round(float(p95), 2)


@dataclass(frozen=True)
class Judged:
    """One asked question with what is known about it: gold answers, whether it is answerable, the Answer, and
    (optionally) the ids of the chunks cut from the question's own context passage."""

    answer: Answer
    golds: tuple[str, ...]
    answerable: bool
    latency_ms: float
    context_chunk_ids: frozenset[str] = frozenset()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def score_answers(judged: Sequence[Judged]) -> dict:
    """Every figure of `citewise eval answers` for one run, as a JSON-ready dict (ratios rounded to 4 places).

    Answer recall, token F1 and citation support are averaged over *all* answerable questions (a wrong refusal
    scores 0 on each); `*_answered` repeats recall and F1 over the answerable questions that were not refused,
    which separates "answers well when it answers" from "refuses too often". `context_citation` is the share of
    answerable questions, among those that came with their own context passage, whose answer cites a chunk of it
    (useful when gold answers are long-form and rarely occur verbatim).
    """
    refused = [j.answer.status == Status.REFUSED for j in judged]
    refusal = refusal_scores([not j.answerable for j in judged], refused)
    answerable = [j for j in judged if j.answerable]
    answered = [j for j in answerable if j.answer.status == Status.SUCCESS]
    with_context = [j for j in answerable if j.context_chunk_ids]

    def mean(values: list[float]) -> float | None:
        return _ratio(sum(values), len(values))

    def recall(items: list[Judged]) -> float | None:
        return mean([float(contains_answer(j.answer.answer, j.golds)) for j in items])

    def f1(items: list[Judged]) -> float | None:
        return mean([best_token_f1(j.answer.answer, j.golds) for j in items])

    exit_reasons = Counter(str(j.answer.exit_reason) for j in judged)
    statuses = Counter(str(j.answer.status) for j in judged)
    p50, p95 = percentiles_ms([j.latency_ms for j in judged])
    return {
        "questions": len(judged),
        "answerable": len(answerable),
        "unanswerable": len(judged) - len(answerable),
        "refused": sum(refused),
        "refusal": {
            "precision": _round(refusal.precision),
            "recall": _round(refusal.recall),
            "f1": _round(refusal.f1),
            "tp": refusal.tp,
            "fp": refusal.fp,
            "fn": refusal.fn,
            "tn": refusal.tn,
        },
        "answer_recall": _round(recall(answerable)),
        "token_f1": _round(f1(answerable)),
        "answer_recall_answered": _round(recall(answered)),
        "token_f1_answered": _round(f1(answered)),
        "citation_validity": _round(citation_validity(j.answer for j in judged)),
        "citations": sum(len(j.answer.citations) for j in judged),
        "citation_support": _round(mean([float(citation_supported(j.answer, j.golds)) for j in answerable])),
        "context_citation": _round(
            mean([float(any(c.chunk_id in j.context_chunk_ids for c in j.answer.citations)) for j in with_context])
        ),
        "exit_reasons": dict(sorted(exit_reasons.items())),
        "statuses": dict(sorted(statuses.items())),
        "latency_p50_ms": p50,
        "latency_p95_ms": p95,
    }
