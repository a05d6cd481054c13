"""Choose the sentences that answer a question's kind, then decide whether they answer it at all.

1. every sentence (and code block) of the opened passages is a candidate (`citewise.quote.sentences`);
2. each is scored by how much of the question it covers — content words weighted by their IDF over the candidate
   sentences, its section's headings counting too (most documentation questions name the section) — times its
   passage's strength relative to the best passage, and by what the question's kind wants: a definition of the
   subject for "what is X", a value for "what is the default / which port / how many", the command or the steps
   for "how do I"; a sentence that is itself a question (a FAQ's "Q:") is never quoted, one that only points
   elsewhere ("See …") only when nothing else is;
3. the best are picked (near-duplicates dropped, a sentence that points back only after what it points back to,
   at most one code block, steps of a procedure in order) and put back in reading order, each with its `[n]`;
4. the decision (`citewise.quote.decide`) sees what was picked: the question's anchors must all be in the
   evidence, and the fitted model must find the evidence answering.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from citewise.quote.decide import Signals, Verdict
from citewise.quote.question import Question, QuestionKind
from citewise.quote.sentences import (
    Sentence,
    announces_list,
    antecedents,
    block_after,
    candidates,
    candidates_in,
    defines,
    describes,
    is_anaphoric,
    is_asking,
    is_fragment,
    is_furniture,
    is_introduction,
    is_navigation,
    is_shouting,
    item_marker,
    label_row,
    link_targets,
    link_words,
    list_after,
    predecessor,
    subject_opening,
    values,
    whole_table,
)
from citewise.text import compact, content_terms, fenced_lines, is_english, jaccard
from citewise.types import REFUSAL_TEXT, AnswerStyle, ScoredChunk

TABLE_ROW_IN_PROCEDURE = 0.3  # how much a table row counts in the answer to "how do I …"
RELATIVE_CUTOFF = 0.5  # a sentence joins the answer when at least this fraction as relevant as the best one
REDUNDANCY_JACCARD = 0.6  # two sentences sharing this much of their content words say the same thing
COMMAND_MAX_LINES = 6  # a block of a question's words may be a command without them only up to this many lines
CODE_MIN_COVERAGE = 0.5  # a code block covering this much of the question is quoted beside its passage's prose
LISTING_HEADING_COVERAGE = 0.5  # a list question's best passage is a listing when its headings cover this much
HEADING_SHARE = 0.3  # how much a sentence's section headings count in its relevance
NAVIGATION_FACTOR = 0.5  # a sentence that only points elsewhere ("See [X](x.md) for …")
FURNITURE_FACTOR = 0.2  # breadcrumbs, "Previous / Next" links, notices in capitals
INTRODUCTION_FACTOR = 0.6  # "This guide will teach you how to …" (not for "what is X": a page may define it so)
FRAGMENT_FACTOR = 0.5  # a bare heading line repeated in the text
FACTOID_EXPECTS = ("date", "number", "duration", "name", "name_or_value")
RARE_SHARE = 0.02  # a question word in at most this share of chunks (at least 2) is one the question hinges on
_WORD_NAME_RE = re.compile(r"[A-Z][a-z]+")
_CAPITALISED_RE = re.compile(r"\b[A-Z][A-Za-z]*\b")
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
COMMON_ANCHOR_SHARE = 0.1  # an anchor in more than this share of chunks is the corpus's topic, not the question's ...
COMMON_ANCHOR_MIN_CHUNKS = 5  # ... when in at least this many (in a tiny corpus every word is in a large share)
# A capitalised common word is the corpus's topic (a product named "Flask", "Click", "Relay") when it is in at least
# this share of chunks: a product's name is in about half or more of its docs' chunks (Somnia 48%, Starlette 66%, pip
# 79%); a word used as a word is not ("word" in Citewise's guide: 10%, "session": 12%).
NAME_TOPIC_SHARE = 0.3
_ADDRESS_ANCHORS = frozenset({"url", "urls", "uri", "uris"})
_WEB_ADDRESS_RE = re.compile(r"\bhttps?://|\bwww\.[a-z0-9-]")
_IMPERATIVE_RE = re.compile(
    r"^[\"'*_`]*(?:run|set|use|add|call|install|create|open|pass|enable|disable|configure|start|stop|restart|"
    r"point|change|edit|copy|remove|delete|upload|send|import|export|deploy|connect|give|type|click|select|"
    r"choose|go|make|put|write|replace|raise|lower|keep)\b",
    re.I,
)


class CorpusStats:
    """What quote mode asks of the whole corpus: how many chunks hold a word (`df`, by stem) and how many chunks
    there are. `citewise.index.vocabulary` provides it; None means no corpus statistics (the candidate sentences
    stand in)."""

    chunks: int

    def df(self, word: str) -> int: ...  # pragma: no cover - protocol

    def stem_df(self, term: str) -> int: ...  # pragma: no cover - protocol


@dataclass(frozen=True)
class Profile:
    """How the question's retrieval went, beyond the passages: the cosines of its candidates (best first), and the
    chunk ids at the top of the vector and the full-text rankings."""

    dense: tuple[float, ...] = ()
    dense_top: tuple[str, ...] = ()
    lexical_top: tuple[str, ...] = ()


@dataclass
class Composed:
    """One question's (or part's) quote answer: its text and citation order, or a refusal with the reason."""

    text: str
    used: list[int] = field(default_factory=list)
    refused: bool = False
    reason: str | None = None
    signals: Signals | None = None
    probability: float | None = None
    kind: QuestionKind = QuestionKind.GENERAL
    pointers: list[str] = field(default_factory=list)  # files the only quoted sentences point to ("See [X](x.md)")
    quoted: list[Quoted] = field(default_factory=list)  # what the text quotes: (chunk id, start, end)


Quoted = tuple[str, int, int]


def _unquoted(ordered: list[Sentence], chunks, already: Sequence[Quoted], follows: Sequence[Quoted]) -> list[Sentence]:
    """`ordered` without what earlier parts quoted; but a sentence that points back ("It is fast: …") keeps the
    sentence it points back to, quoted again, unless that is the quote right above it: a repeated sentence reads
    better than an "It" that seems to mean the last thing the answer said."""
    out: list[Sentence] = []
    for s in ordered:
        if _quoted_before(s, chunks, already):
            continue
        if not s.code and is_anaphoric(s.text):
            before = predecessor(s, chunks)
            if before is not None and (not out or out[-1].key != before.key):
                right_above = not out and _quoted_before(before, chunks, follows)
                if not right_above and _quoted_before(before, chunks, already):
                    out.append(before)
        out.append(s)
    return out


def _span(sentence: Sentence, chunks) -> Quoted:
    return (chunks[sentence.slot][1].chunk_id, sentence.start, sentence.end)


def _quoted_before(sentence: Sentence, chunks, already: Sequence[Quoted]) -> bool:
    chunk_id, first, last = _span(sentence, chunks)
    return any(cid == chunk_id and start < last and first < end for cid, start, end in already)


def _refuse(reason: str, signals: Signals | None = None, probability: float | None = None) -> Composed:
    return Composed(REFUSAL_TEXT, [], True, reason, signals, probability)


# ---------------------------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------------------------


def _local_idf(sentences: Sequence[Sentence], terms: set[str]) -> dict[str, float]:
    # Smoothed so that with a handful of sentences one missing question word doesn't outweigh all the others.
    n = len(sentences)
    return {t: math.log(1 + (n + 1) / (sum(t in s.terms for s in sentences) + 1)) for t in sorted(terms)}


def _term_df(term: str, corpus: CorpusStats) -> int:
    if re.search(r"[_.]", term):
        return corpus.df(compact(term))
    return corpus.stem_df(term)


def _corpus_idf(terms: set[str], corpus: CorpusStats | None, fallback: dict[str, float]) -> dict[str, float]:
    if corpus is None or not corpus.chunks:
        return fallback
    n = corpus.chunks
    return {t: math.log(1 + n / (_term_df(t, corpus) + 1)) for t in sorted(terms)}


def _coverage(terms: set[str], have: set[str] | frozenset[str], idf: dict[str, float]) -> float:
    # fsum: the exact sum, whatever order the set gives the terms in. A plain sum over a set of strings can differ
    # in its last bit from one process to the next (string hashing is seeded per process), and a near-tie between
    # candidates would then break differently: determinism must not hang on the hash seed.
    total = math.fsum(idf[t] for t in terms)
    return math.fsum(idf[t] for t in terms & have) / total if total else 0.0


def _own_heading(chunk: ScoredChunk) -> frozenset[str]:
    """The words of the heading right above a passage ("Supported file types"), without the page's title or the
    headings above it, which every section of the page shares."""
    return frozenset(content_terms((chunk.chapter or "").rsplit(" > ", 1)[-1]))


def _headings(chunk: ScoredChunk) -> frozenset[str]:
    return frozenset(content_terms(" ".join(part for part in (chunk.title, chunk.chapter) if part)))


def _strengths(chunks: Sequence[tuple[int, ScoredChunk]]) -> list[float]:
    """Each passage's strength relative to the best one, in [0, 1]: its cosine over the best cosine when known,
    else its fused score over the best."""
    dense = [c.dense_score for _, c in chunks]
    if all(d is not None for d in dense):
        best = max(max(dense), 1e-6)  # type: ignore[type-var]
        return [max(0.0, min(1.0, float(d) / best)) for d in dense]  # type: ignore[arg-type]
    best = max((c.score for _, c in chunks), default=0.0) or 1.0
    return [max(0.0, c.score / best) for _, c in chunks]


# ---------------------------------------------------------------------------------------------------------------
# What the question's kind wants
# ---------------------------------------------------------------------------------------------------------------


def _new_values(text: str, question: Question) -> list[str]:
    asked = question.focus.lower()
    return [v for v in values(text) if v.lower().strip("`") not in asked]


def _has_name(text: str, question: Question) -> bool:
    asked = question.focus.lower()
    names = re.findall(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*", text.strip())
    return any(name.lower() not in asked for name in names)


def with_definition(
    passages: list[tuple[int, ScoredChunk]], chunks: Sequence[tuple[int, ScoredChunk]], question: Question
) -> list[tuple[int, ScoredChunk]]:
    """For "what is X?": when no passage read defines X, in a sentence or by a section headed X, but one found further
    down the search does ("**Agent mode** (…) lets a language model run …", the eighth under passages that only
    mention agent mode), that one is read in place of the last. A sentence stating what X is set to ("Agent mode is
    off by default") defines nothing."""
    subject = question.subject
    if question.kind != QuestionKind.DEFINITION or not subject or not passages:
        return passages

    opening = subject_opening(subject)
    if opening is None:
        return passages  # no word to define
    state = re.compile(rf"{opening}(?:s)?\s+{_STATE}", re.I)

    def defining(pair: tuple[int, ScoredChunk]) -> bool:
        return any(not s.code and defines(s.text, subject) and not state.match(s.text) for s in candidates([pair]))

    if any(defining(pair) or _section_is(pair[1], subject) for pair in passages):
        return passages
    read = {chunk.chunk_id for _, chunk in passages}
    for pair in chunks:
        if pair[1].chunk_id not in read and defining(pair):
            return [*passages[:-1], pair]
    return passages


def _section_is(chunk: ScoredChunk, subject: str) -> bool:
    """Whether the passage's own section is headed by the subject alone ("Modes > Agent mode"): it is about X."""
    wanted = content_terms(subject)
    return bool(wanted) and wanted == _own_heading(chunk)


# "X is off by default", "X are now optional": what X is set to, not what it is
_STATE = (
    r"(?:is|are)\s+(?:now\s+|not\s+|also\s+)?(?:on|off|enabled|disabled|optional|required|deprecated|experimental|"
    r"unavailable|supported|unsupported|true|false)(?![-\w])"
)


def _section_names_subject(chunk: ScoredChunk, subject: str | None) -> bool:
    wanted = content_terms(subject) if subject else set()
    return bool(wanted) and wanted <= _own_heading(chunk)


@dataclass(frozen=True)
class _Form:
    """What a candidate's form says about it, found once: the hand-weighed factor and the ranker both read it."""

    navigation: bool  # only points elsewhere ("See [X](x.md) for …")
    furniture: bool  # breadcrumbs, "Previous / Next" links, a notice in capitals
    introduction: bool  # a page's introduction of itself
    fragment: bool  # a bare heading line repeated in the text

    @classmethod
    def of(cls, sentence: Sentence) -> _Form:
        prose, text = not sentence.code, sentence.text
        return cls(
            navigation=prose and is_navigation(text),
            furniture=prose and (is_furniture(text) or is_shouting(text)),
            introduction=prose and is_introduction(text),
            fragment=is_fragment(sentence),
        )


def _form_factor(form: _Form, question: Question) -> float:
    """How much a sentence's form lets it answer anything: a pointer elsewhere, page furniture (breadcrumbs,
    "Next" links), a notice in capitals, a page's introduction of itself and a bare heading line weigh less than a
    statement."""
    factor = 1.0
    if form.navigation:
        factor *= NAVIGATION_FACTOR
    if form.furniture:
        factor *= FURNITURE_FACTOR
    if form.introduction and question.kind != QuestionKind.DEFINITION:
        factor *= INTRODUCTION_FACTOR
    if form.fragment:
        factor *= FRAGMENT_FACTOR
    return factor


def _kind_factor(sentence: Sentence, question: Question, chunk: ScoredChunk, chunks) -> float:
    kind = question.kind
    if kind in (QuestionKind.VALUE,):
        return 1.0 if _new_values(sentence.text, question) else 0.6
    if kind == QuestionKind.ENTITY:
        return 1.0 if _has_name(sentence.text, question) else 0.7
    if kind == QuestionKind.DEFINITION and question.subject:
        if defines(sentence.text, question.subject):
            return 1.6
        if sentence.index == 0 and _section_names_subject(chunk, question.subject):
            return 1.3
        return 1.0
    if kind == QuestionKind.PROCEDURE:
        if sentence.header:
            return TABLE_ROW_IN_PROCEDURE  # a table describes; a procedure is told in sentences, steps and commands
        factor = 1.0
        if block_after(sentence, chunks) is not None:
            factor *= 1.3
        if _IMPERATIVE_RE.match(sentence.text) or sentence.step:
            factor *= 1.1
        return factor
    return 1.0


_YEAR_RE = re.compile(
    r"\b(?:1[0-9]{3}|20[0-9]{2})s?\b|\b(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december)\b|\bcentur(?:y|ies)\b|\b\d{1,2}(?:st|nd|rd|th)\b|\b(?:yesterday|today|tomorrow)\b",
    re.I,
)
_DURATION_RE = re.compile(
    r"\b\d+(?:[.,]\d+)?\s*(?:ms|µs|μs|s|sec|secs|seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)(?!\w)"
    r"|\b(?-i:\d+(?:us|ns))\b"  # microseconds, nanoseconds: not "2 US regions", "NS records"
    r"|\b(?-i:(?:\d+(?:ms|[smhdw]))+)\b"  # a compact interval: `30m`, `6h`, `1d`, `1h30m` (not "3D")
    # a unit word, in a name too (`poll_interval_seconds`); "every" alone is no interval ("every replica"), nor
    # "once" ("Once the server starts, …"; "once a day" counts by its "day")
    r"|(?<![A-Za-z0-9])(?:(?:milli|micro|nano)?seconds?|minutes?|hours?|days?|weeks?|fortnights?|months?|years?|"
    r"daily|hourly|weekly|biweekly|fortnightly|monthly|quarterly|annually|yearly|nightly|twice|instantly|"
    r"immediately|sub-second)(?![A-Za-z0-9])",
    re.I,
)
# What a question expects that a code block states plainly or not at all: a command may be "the value" asked for,
# and "when …" is as often a condition as a date
_MEASURES = frozenset({"duration", "number"})
_NUMBER_WORD_RE = re.compile(
    r"(?<![\w.])\d+(?:[.,]\d+)*|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|"
    r"ninety|hundreds?|thousands?|millions?|billions?|dozens?|half|several|few|single|twice)\b",
    re.I,
)
# What also answers "how often" ("on every request", "whenever a file changes"), "how long" ("tokens never expire") or
# "how many" ("no limit") without a unit or a number: never taken for a missing value
_UNMEASURED = {
    "often": re.compile(
        r"\b(?:on|after|at|with|for)\s+(?:every|each)\b|\b(?:every|each)\s+time\b|\b(?:whenever|as soon as|"
        r"continuously|on demand|real[- ]time)\b",
        re.I,
    ),
    "long": re.compile(r"\b(?:never|indefinitely|forever|until)\b", re.I),
    "many": re.compile(r"\b(?:no limit|unlimited|any number|as many)\b", re.I),
    "much": re.compile(r"\b(?:no limit|unlimited|any amount|as much)\b", re.I),
}
# The questions whose answer must state a time, an interval or a number, "how much" only of memory, disk, storage or
# bandwidth (an amount; "how much CPU" may be "every core"). "How long" asking for a length ("How long can a question
# be?"), "how much" of anything else (a price may be "free") and "how big" are left to the model.
_MEASURE_QUESTION_RE = re.compile(
    r"\bhow\s+(?:(many|often|frequently|long)\b(?!\s+(?:can|could|may|might|should|must)\b[^?]*\bbe\b)"
    r"|(much)\s+(?:memory|ram|disk(?:\s+space)?|storage|bandwidth)\b)",
    re.I,
)
_NEGATED_RE = re.compile(r"\b(?:not|never|no|none|without|except|cannot|neither|nor|only)\b|n't\b", re.I)


def _missing_value(
    question: Question,
    chosen: list[Sentence],
    blocks: list[Sentence],
    chunks: Sequence[tuple[int, ScoredChunk]],
    scored: Sequence[Scored],
    *,
    structured: bool,
    pointers: list[str],
) -> bool:
    """Whether a "how many", "how often" or "how long" question would be answered without a number, an interval or
    a time in what is quoted: its sentences and the one command quoted beside them (none in the structured style).
    Not when the quotes only point to a page worth searching, nor when they say "on every request", "never"."""
    asked = _MEASURE_QUESTION_RE.search(question.focus)
    if question.expects not in _MEASURES or pointers or not asked:
        return False
    word = (asked.group(1) or asked.group(2)).lower()
    unmeasured = _UNMEASURED[{"frequently": "often"}.get(word, word)]
    relevance = {item.sentence.key: item.relevance for item in scored}
    block = None if structured else _code_block(chosen, blocks, chunks, question, relevance)
    shown = [s.text if s.code else s.rendered() for s in [*chosen, *([block] if block else [])]]
    return not any(_states(question.expects, text, question) or unmeasured.search(text) for text in shown)


def _new_matches(pattern: re.Pattern[str], text: str, asked: str) -> bool:
    """Whether `text` holds a match of `pattern` more often than the question does: "4" in "there were 4 releases"
    for "How many releases were there in 2024?", "3 replicas" for "How many replicas does a 3-node cluster keep?"
    (whole matches, not "4" inside "2024" nor "one" inside "phones")."""
    before = Counter(m.group(0).lower() for m in pattern.finditer(asked))
    found = Counter(m.group(0).lower() for m in pattern.finditer(text))
    return any(count > before[match] for match, count in found.items())


def _states(expected: str, text: str, question: Question) -> bool:
    """Whether `text` states what a question expecting `expected` wants, beyond what the question already says."""
    asked = question.focus
    if expected == "date":
        return _new_matches(_YEAR_RE, text, asked)
    if expected == "duration":
        return _new_matches(_DURATION_RE, text, asked)
    if expected == "number":
        return _new_matches(_NUMBER_WORD_RE, text, asked)
    if expected == "name":
        return _has_name(text, question)
    if expected == "location":  # a place, or where in a system: a path, a URL, a setting
        return (
            _has_name(text, question)
            or bool(_new_values(text, question))
            or bool(re.search(r"\b(?:in|under|at|on|from)\s+\S", text))
        )
    if expected == "name_or_value":
        return _has_name(text, question) or bool(_new_values(text, question))
    return bool(_new_values(text, question))


def answer_type(lead: Sentence, chosen: Sequence[Sentence], question: Question, chunks) -> float:
    """+1 when the lead quote holds what the question's kind asks for, -1 when it doesn't, 0 when the kind asks for
    nothing in particular (see `Signals.answer_type`)."""
    if question.expects is not None:
        return 1.0 if _states(question.expects, lead.rendered(), question) else -1.0
    if question.kind == QuestionKind.DEFINITION and question.subject:
        ok = defines(lead.text, question.subject) or (
            lead.index == 0 and _section_names_subject(chunks[lead.slot][1], question.subject)
        )
        return 1.0 if ok else -1.0
    if question.kind == QuestionKind.PROCEDURE:
        ok = any(s.code or s.step or _IMPERATIVE_RE.match(s.text) or "`" in s.text for s in chosen)
        return 1.0 if ok else -1.0
    return 0.0


# ---------------------------------------------------------------------------------------------------------------
# Scoring and selection
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    relevance: float
    coverage: float  # IDF-weighted share of the question's words the sentence holds (headings not counted)
    sentence: Sentence
    features: dict[str, float] = field(default_factory=dict, compare=False)  # what the ranker saw


# The sentence ranker's inputs, each computed in `_features`; its weights are fitted by bench/fit_quote_ranker.py on
# which candidates hold an expected answer (QuoteSettings.ranker).
RANKER_FEATURES = (
    "relevance",
    "top",
    "slot",
    "strength",
    "lexical",
    "heading_coverage",
    "kind",
    "code",
    "step",
    "table",
    "label",
    "words",
    "first",
    "introduction",
    "fragment",
    "navigation",
    "furniture",
    "anaphoric",
    "value",
    "inline_code",
    "anchors",
)


def _features(
    s: Sentence, form: _Form, base: float, best: float, top: bool, question: Question, chunks, strengths, headings
) -> dict[str, float]:
    text = s.text
    terms = set(question.terms)
    context = s.terms | headings[s.slot]
    anchors = question.anchors
    lowered = s.rendered().lower()
    return {
        "relevance": base / best if best > 0 else 0.0,
        "top": float(top),
        "slot": float(min(s.slot, 9)),
        "strength": strengths[s.slot],
        "lexical": float(chunks[s.slot][1].lexical_score is not None),
        "heading_coverage": len(terms & context) / len(terms) if terms else 0.0,
        "kind": answer_type(s, [s], question, chunks),
        "code": float(s.code),
        "step": float(s.step),
        "table": float(bool(s.header)),
        "label": float(s.label),
        "words": math.log1p(len(text.split())),
        "first": float(s.index == 0),
        "introduction": float(form.introduction),
        "fragment": float(form.fragment),
        "navigation": float(form.navigation),
        "furniture": float(form.furniture),
        "anaphoric": float(not s.code and is_anaphoric(text)),
        "value": float(bool(values(text))),
        "inline_code": float("`" in text),
        "anchors": sum(_anchor_present(a, lowered, s.terms) for a in anchors) / len(anchors) if anchors else 1.0,
    }


def rank_score(features: dict[str, float], ranker: Ranker | None) -> float:
    """The ranker's probability that a candidate holds the answer, or (no ranker) the hand-weighed relevance."""
    if ranker is None:
        return features["relevance"]
    z = ranker.intercept + sum(ranker.weights.get(name, 0.0) * value for name, value in features.items())
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@dataclass(frozen=True)
class Ranker:
    """The fitted sentence ranker: weights over RANKER_FEATURES (raw values) and an intercept."""

    weights: dict[str, float]
    intercept: float


def score(
    question: Question, chunks: Sequence[tuple[int, ScoredChunk]], *, code: bool, ranker: Ranker | None = None
) -> list[Scored]:
    """Every candidate with its relevance, best first (ties: passage order, then position).

    The hand-weighed relevance — IDF-weighted coverage of the question (headings counting in part), times what the
    question's kind wants and what the sentence's form allows, times its passage's strength — is one input of the
    fitted ranker, whose probability that the candidate holds the answer is the relevance candidates are chosen by."""
    sentences = [s for s in candidates(chunks, code=code) if s.code or not is_asking(s.text)]
    prose = [s for s in sentences if not s.code]
    terms = set(question.terms)
    if not prose or not terms:
        return []
    idf = _local_idf(prose, terms)
    headings = [_headings(c) for _, c in chunks]
    strengths = _strengths(chunks)
    hand = []
    for s in sentences:
        own = _coverage(terms, s.terms, idf)
        context = headings[s.slot] | (frozenset(content_terms(s.header)) if s.header else frozenset())
        with_heading = _coverage(terms, s.terms | context, idf)
        base = (1 - HEADING_SHARE) * own + HEADING_SHARE * with_heading
        form = _Form.of(s)
        factor = 1.0 if s.code else _kind_factor(s, question, chunks[s.slot][1], chunks) * _form_factor(form, question)
        hand.append((base * factor * (0.5 + 0.5 * strengths[s.slot]), own, s, form))
    best = max(relevance for relevance, *_ in hand)
    leader = max(range(len(hand)), key=lambda i: (hand[i][0], -hand[i][2].slot, -hand[i][2].start))
    out = []
    for i, (relevance, own, s, form) in enumerate(hand):
        features = _features(s, form, relevance, best, i == leader, question, chunks, strengths, headings)
        out.append(Scored(round(rank_score(features, ranker), 12), round(own, 12), s, features))
    out.sort(key=lambda item: (-item.relevance, item.sentence.slot, item.sentence.start))
    return out


def select(
    question: Question,
    chunks: Sequence[tuple[int, ScoredChunk]],
    scored: Sequence[Scored],
    limit: int,
    *,
    ranked: bool = False,
    skip: Callable[[Sentence], bool] | None = None,
    follows: Callable[[Sentence], bool] | None = None,
) -> tuple[list[Sentence], list[Sentence], list[Sentence]]:
    """(chosen sentences, relevant ones left over, code blocks worth quoting), best first: blocks that cover the
    question well or that the ranker ranks first, and for "how do I" the ranker's best block near the top.

    Sentences at least RELATIVE_CUTOFF as relevant as the best one, near-duplicates and lead-ins ("Run this:")
    dropped; when the first is a table row holding what the question names (`MAX_TURNS_REACHED`), another row of
    its table must hold it too (the rows around it are about other codes or settings), and no row is taken when the
    words the question names of its first cell are strictly fewer than, and among, another row's (`chunk_size` for
    "the default chunk size", not `chunk_overlap`; see `_named_rows`). A sentence that points back
    ("They …") joins only right after its predecessor, which must share a question word unless the sentence is the
    best candidate and holds what the question's kind wants (a value for "how fast"); a navigation sentence ("See …
    for …") only when no other sentence is taken. Should nothing else remain, the best pointing-back sentence is
    quoted after all, with its predecessor when there is room.
    `skip`: what an earlier part of the question quoted, passed over here; `follows`: the last thing it quoted, which
    a sentence pointing back may follow."""
    question_terms = set(question.terms)
    chosen: list[Sentence] = []
    rest: list[Sentence] = []
    blocks: list[Sentence] = []
    dangling: list[Sentence] = []
    navigation: list[Sentence] = []
    best = next((item.relevance for item in scored if not item.sentence.code), 0.0)
    quoted = skip or (lambda sentence: False)
    quoted_last = follows or (lambda sentence: False)

    def duplicate(sentence: Sentence) -> bool:
        return any(
            jaccard(sentence.terms, c.terms) >= REDUNDANCY_JACCARD
            or _copies(sentence, c)
            or sentence.overlaps(c)  # inside a label line or list item taken whole, around one, or sharing a cell
            for c in chosen
        )

    def holds_anchor(sentence: Sentence) -> bool:  # names what the question names (`MAX_TURNS_REACHED`, 417)
        text = sentence.text.lower()
        return any(_anchor_present(anchor, text, set(sentence.terms)) for anchor in question.anchors)

    def taken(sentence: Sentence) -> bool:  # here, or last by the part before: "It …" may follow that
        return any(c.key == sentence.key for c in chosen) or quoted_last(sentence)

    def taken_before(heads: list[Sentence], sentence: Sentence) -> bool:
        before = predecessor(heads[0] if heads else sentence, chunks)
        return before is not None and taken(before)

    named_row = _named_rows(scored, question_terms, chunks, RELATIVE_CUTOFF * best)
    if question.kind == QuestionKind.LIST:
        table = _listing_table(scored, chunks, question_terms)
        if table is not None and not quoted(table):
            chosen.append(table)
    for item in scored:
        sentence = item.sentence
        if item.coverage <= 0 and not sentence.code:
            continue
        if item.relevance < RELATIVE_CUTOFF * best:
            break
        if quoted(sentence):
            continue  # quoted already (by an earlier part of the question)
        if sentence.code:
            if question.expects in _MEASURES and item.features.get("kind", 0.0) < 0:
                continue  # "how often …", "how many …": a block without an interval or a number doesn't say it
            if item.coverage >= CODE_MIN_COVERAGE or (ranked and item.relevance >= best):  # the ranker's pick
                blocks.append(sentence)
            continue
        if sentence.header and question.kind == QuestionKind.PROCEDURE and (chosen or blocks):
            rest.append(sentence)  # a table describes; a procedure is told in sentences, steps and commands
            continue
        if sentence.header and question.kind == QuestionKind.LIST and not chosen:
            table = whole_table(sentence, chunks)
            if table is not None and not quoted(table):  # else its rows, one by one
                chosen.append(table)
                continue
        if sentence.leads_in:
            # "Run this:" says nothing without what follows: quoted only with the code block it introduces, or for
            # "which … are there" and "how do I" with the list it introduces ("The available convertors are:").
            follows_it = block_after(sentence, chunks) is not None or (
                # "which … are there", "how do I", or any question whose best candidate announces a list ("Every
                # Starlette application automatically includes two pieces of middleware by default:")
                (question.kind in (QuestionKind.LIST, QuestionKind.PROCEDURE) or item.relevance >= best)
                and bool(list_after(sentence, chunks, 1))
            )
            # For "what is X?" / "what does X do?" the best candidate, a lead-in that says what X is or does,
            # answers it whatever it introduces ("`citewise doctor` reads the index … and reports where they
            # disagree:" above a table).
            about_it = question.kind == QuestionKind.DEFINITION and bool(question.subject) and item.relevance >= best
            follows_it = follows_it or (about_it and describes(sentence.text, question.subject or ""))
            if follows_it and len(chosen) < limit and not taken(sentence) and not duplicate(sentence):
                chosen.append(sentence)
            continue
        if taken(sentence) or duplicate(sentence):
            continue
        if (
            chosen
            and _same_table(chosen[0], sentence, chunks)
            and holds_anchor(chosen[0])
            and not holds_anchor(sentence)
        ):
            continue  # the row of another code or setting than the one the question names, whose row leads
        if sentence.header and any(
            _named_words(sentence, question_terms) < other for other in named_row.get(_table(sentence, chunks), ())
        ):
            continue  # another row of its table is the one the question names by its first cell (`chunk_size`)
        if is_navigation(sentence.text):
            navigation.append(sentence)
            continue
        if is_anaphoric(sentence.text):
            heads, anchored = antecedents(sentence, chunks, taken, limit)
            if any(quoted(h) for h in heads):
                dangling.append(sentence)  # what it points back to was quoted by an earlier part, further up
                continue
            if not anchored or not (
                not heads
                or taken_before(heads, sentence)
                or any(h.terms & question_terms for h in heads)
                # the best candidate, holding what the question's kind wants ("This enables reads of IceDB in 15-100
                # nanoseconds" for "how fast is IceDB?"): quoted after what it points back to, whatever that says
                or (item.relevance >= best and item.features.get("kind", 0.0) > 0)
            ):
                dangling.append(sentence)
                continue
            if len(chosen) + len(heads) + 1 > limit or any(duplicate(h) for h in heads):
                dangling.append(sentence)
                continue
            chosen += [*heads, sentence]
            continue
        if len(chosen) < limit:
            chosen.append(sentence)
        else:
            rest.append(sentence)
    if not chosen:  # a pointer elsewhere beats nothing ...
        for sentence in navigation:
            if len(chosen) < limit and not duplicate(sentence):
                chosen.append(sentence)
    if not chosen and dangling:  # ... and so does a sentence that points back, best with what it points back to
        sentence = dangling[0]
        heads, _ = antecedents(sentence, chunks, taken, limit)
        heads = [h for h in heads if not is_navigation(h.text)]
        heads = heads[max(0, len(heads) - (limit - 1)) :] if limit > 1 else []
        chosen += [*heads, sentence]
    if ranked and question.kind == QuestionKind.PROCEDURE and not blocks:
        # "How do I …": the command is the answer even when it repeats no word of the question (`--home` for
        # "separate indexes for two products"): the ranker's best block, when among its first `limit` candidates.
        # Added after the sentences are chosen, so it changes none of them (nor the decision's evidence).
        for item in scored[:limit]:
            if (
                item.sentence.code
                and (item.coverage > 0 or _command_sized(item.sentence))
                and item.relevance >= RELATIVE_CUTOFF * best
                and not quoted(item.sentence)
            ):
                blocks.append(item.sentence)
                break
    return chosen, rest, blocks


def _command_sized(block: Sentence) -> bool:
    """Whether a code block is short enough to be a command or two (`citewise ingest docs/ --home ./b`), not a
    program, which says nothing about a question none of whose words it holds."""
    return sum(1 for line in block.text.splitlines()[1:-1] if line.strip()) <= COMMAND_MAX_LINES


def _listing_table(scored: Sequence[Scored], chunks, question_terms: set[str]) -> Sentence | None:
    """For a "which … are supported" question: the table whose own section heading names most of the question's words
    (at least half; "Supported file types" for "What file types can I ingest?", not the page title every section
    shares) and is short enough to quote whole, else the table in the best candidate's section when that candidate
    and its headings cover half the question. Its rows seldom repeat the
    question's words — the heading holds them — so they rank below any prose sentence that does ("Any other
    extension fails …"), or below a row of another table that does (`--glob` | "the supported types"), and neither
    must push the listing itself out of the answer."""
    terms = frozenset(question_terms)
    named: list[tuple[float, int, Sentence]] = []
    for i, item in enumerate(scored):  # the table under a heading that names most of what is asked
        if item.sentence.header and terms:
            cover = len(terms & _own_heading(chunks[item.sentence.slot][1])) / len(terms)
            if cover >= LISTING_HEADING_COVERAGE:
                named.append((-cover, i, item.sentence))
    for _, _, row in sorted(named, key=lambda entry: entry[:2]):
        table = whole_table(row, chunks)
        if table is not None:  # else too long to quote whole
            return table
    lead = next((item for item in scored if not item.sentence.code), None)
    if lead is None or lead.features.get("heading_coverage", 0.0) < LISTING_HEADING_COVERAGE:
        return None
    section = chunks[lead.sentence.slot][1].section
    for item in scored:  # a long section is cut into several passages: its table may stand in another one
        if item.sentence.header and chunks[item.sentence.slot][1].section == section:
            return whole_table(item.sentence, chunks)
    return None


_THERE_RE = re.compile(r"^(?:is|are)\s+there\b", re.I)
_NAME_OF_RE = re.compile(r"^what(?:'s|\s+is|\s+are)\s+the\s+names?\s+of\b", re.I)
_NUMBER_RE = re.compile(r"(?<![\w.])\d")


def _asks_for_a_name(question: Question) -> bool:
    return (
        question.kind in (QuestionKind.ENTITY, QuestionKind.LIST)
        or question.expects in ("name", "name_or_value")
        or bool(question.kind == QuestionKind.YES_NO and _THERE_RE.match(question.focus))
        or bool(_NAME_OF_RE.match(question.focus))
    )


def _titled(sentence: Sentence, chunks, question: Question, corpus: CorpusStats | None) -> Sentence:
    """`sentence` with the name of its section before it, when the question asks for a name ("Which package deploys
    to AWS Lambda?") and the sentence describes the thing its section is named after without naming it: a page of
    plugins or integrations gives each one a heading ("Mangum") and a line about it ("Serverless ASGI adapter for
    AWS Lambda & API Gateway."). The name must be short and rare in the corpus (a thing's name, not "Usage")."""
    if sentence.code or sentence.block or sentence.label or sentence.title or corpus is None or not corpus.chunks:
        return sentence
    name = (chunks[sentence.slot][1].chapter or "").rsplit(" > ", 1)[-1].strip().strip("`*_ ")
    words = content_terms(name)
    if not name or not words or len(name.split()) > 4 or re.search(r"[.!?:;,`*_\[\]]", name):
        return sentence  # a phrase, or markup inside the name: not a thing's plain name
    if name.lower() in sentence.text.lower() or name.lower() in question.focus.lower():
        return sentence
    if "`" in sentence.text or _NUMBER_RE.search(link_words(sentence.text)):
        return sentence  # it states a value ("listens on port 7433", "in the `X-Token` header"): that is the answer
    if any(_term_df(w, corpus) > max(2, RARE_SHARE * corpus.chunks) for w in words):
        return sentence
    return replace(sentence, title=name)


def _named(chosen: list[Sentence], chunks, question: Question, corpus: CorpusStats | None) -> list[Sentence]:
    """For a question that asks for a name, the name of each passage's section before its first quoted sentence."""
    if not _asks_for_a_name(question):
        return chosen
    first = {}
    for s in sorted(chosen, key=lambda s: s.start, reverse=True):
        first[s.slot] = s.key
    return [_titled(s, chunks, question, corpus) if first[s.slot] == s.key else s for s in chosen]


def _lead_with_answer(chosen: list[Sentence], question: Question, chunks) -> list[Sentence]:
    """For a value or definition question, the sentence that holds the value (defines the subject) first: the lead
    the decision's signals read."""
    if question.kind == QuestionKind.VALUE:
        holder = next((s for s in chosen if not s.code and _new_values(s.text, question)), None)
    elif question.kind == QuestionKind.DEFINITION and question.subject:
        holder = next((s for s in chosen if not s.code and defines(s.text, question.subject)), None)
    else:
        holder = None
    if holder is None or holder is chosen[0]:
        return chosen
    return [holder, *[s for s in chosen if s is not holder]]


def _chosen_chain(sentence: Sentence, chosen: Sequence[Sentence], chunks) -> list[Sentence]:
    """The chosen sentences `sentence` points back through, in reading order: its antecedents, counted back from the
    nearest while each is among `chosen` (none when it doesn't point back)."""
    if sentence.code or not is_anaphoric(sentence.text):
        return []
    heads, _ = antecedents(sentence, chunks, lambda s: False, len(chosen))
    by_key = {s.key: s for s in chosen}
    chain: list[Sentence] = []
    for head in reversed(heads):
        if head.key not in by_key:
            break
        chain.insert(0, by_key[head.key])
    return chain


def _with_list(chosen: list[Sentence], chunks, limit: int) -> list[Sentence]:
    """For "which … are there" and "how do I", the items of the list a chosen sentence says follows ("The available
    convertors are:", "`UploadFile` has the following methods."), in order right after it: they are the answer the
    sentence only announces. The chosen sentences ranked below it make room; never more than `limit` in all. A
    lead-in ending in ":" with no room left for an item is dropped (alone it says nothing), and when it was all that
    was chosen, its first items are quoted instead."""
    for i, sentence in enumerate(chosen):
        items = list_after(sentence, chunks, limit)
        items = [it for it in items if not any(it.overlaps(c) or it.key == c.key for c in chosen)]
        if not items:
            continue
        # Announced by the end of its paragraph ("… via 3rd party libraries. These libraries all have guides …:"):
        # the rest of the paragraph comes before the items, the announcing sentence with them.
        bridge = [] if announces_list(sentence) else _rest_of_paragraph(sentence, items[0], chunks)
        if any(b.key == c.key for b in bridge for c in chosen[i + 1 :]):
            continue  # the announcing sentence is chosen itself, further down: the list goes with it
        bridge = [b for b in bridge if not any(b.key == c.key for c in chosen[: i + 1])]
        room = limit - (i + 1) - len(bridge)
        if room <= 0:
            if not sentence.leads_in:
                return chosen
            others = [c for c in chosen if c is not sentence]
            return others or items[:limit]  # alone, the lead-in gives way to the list it announces
        items = items[:room]
        keys = {b.key for b in bridge}
        after = [c for c in chosen[i + 1 :] if c.key not in keys and not any(c.overlaps(it) for it in items)]
        return [*chosen[: i + 1], *bridge, *items, *after][:limit]
    return chosen


def _rest_of_paragraph(sentence: Sentence, first_item: Sentence, chunks) -> list[Sentence]:
    """The sentences between `sentence` and the first item of the list its paragraph announces, in order."""
    return [
        s
        for s in candidates_in(chunks, sentence.slot)
        if not s.code and not s.step and s.start >= sentence.end and s.end <= first_item.start
    ]


def _steps(top: Sentence, chosen: list[Sentence], chunks, limit: int) -> list[Sentence]:
    """The list items after a chosen step of a procedure, in order, while there is room (a procedure is quoted as
    its steps, not as the one step most like the question)."""
    if not top.step:
        return []
    following = [s for s in candidates_in(chunks, top.slot) if s.step and s.start > top.start]  # reading order
    out: list[Sentence] = []
    previous_end = top.end
    text = chunks[top.slot][1].text
    for s in following:
        if s.start < previous_end or any(s.overlaps(c) for c in [*chosen, *out]):
            continue  # a sentence of an item quoted whole, or an item around a sentence already quoted
        if len(chosen) + len(out) >= limit:
            break
        between = text[previous_end : s.start]
        if re.search(r"^\s*#|```|~~~", between, re.M) or between.count("\n\n") > 1:
            break
        if any(s.text.strip() == c.text.strip() for c in chosen):
            break  # the same item quoted from an overlapping passage
        out.append(Sentence(top.slot, top.n, s.start, s.end, s.text, s.terms, index=s.index, step=True))
        previous_end = s.end
    return out


def _introducing(block: Sentence, chunks) -> Sentence | None:
    """The sentence right before a code block in its passage, when only a short label or nothing lies between and it
    is no heading: what the block does ("To keep two indexes, give each its own data directory:"). Not the last item
    of a bulleted list about other things ("- **Methods.** A method an endpoint does not take is `405`." over an
    `export …RATE_LIMIT…` line), on the marker's line or a wrapped one: such an item introduces the block only when
    it ends with ":" or shares a word with it. A numbered item is a step, and the block under it is how it is done."""
    text = chunks[block.slot][1].text
    before = [s for s in candidates_in(chunks, block.slot) if not s.code and not s.header and s.end <= block.start]
    if not before:
        return None
    last = before[-1]
    between = text[last.end : block.start]
    if len(between.split()) >= 4 or re.search(r"^\s*#", between, re.M) or is_fragment(last):
        return None
    marker = item_marker(text, last.start)
    bullet = marker is not None and not marker[0].isdigit()
    if bullet and not last.leads_in and not last.terms & block.terms:
        return None
    return Sentence(block.slot, block.n, last.start, last.end, last.text, last.terms, index=last.index, step=last.step)


def _code_block(chosen, blocks, chunks, question: Question, relevance=None) -> Sentence | None:
    """The one code block worth quoting beside the chosen sentences: the best of `blocks` (see `select`), else the
    block right after a chosen sentence that carries on its subject — both only from a passage the answer quotes
    prose from; for "how do I …", else the best of `blocks` wherever it is (the command is the answer). A block the
    ranker ranks above the lead sentence is quoted wherever it is; for "how do I …" a block of the lead sentence's
    passage (the best of `blocks` there, else the one right under it) comes before one of another passage."""
    if relevance and blocks and relevance.get(blocks[0].key, 0.0) > relevance.get(chosen[0].key, 1.0):
        return blocks[0]
    for sentence in chosen:  # a lead-in ("…, or use another port:") comes with the block it introduces
        if sentence.leads_in:
            block = block_after(sentence, chunks)
            if block is not None:
                return block
    if question.kind == QuestionKind.PROCEDURE and not chosen[0].block:
        # "How do I …": a block worth quoting from the lead sentence's own passage, else the one right under it,
        # before a block of another passage the answer also quotes ("Alternatively you might want to redirect …" →
        # its `redirect=` example, not the 403 one under "By default 403 responses will be returned …").
        own = next((b for b in blocks if b.slot == chosen[0].slot), None) or block_after(chosen[0], chunks)
        if own is not None:
            return own
    quoted = {s.slot for s in chosen}
    for block in blocks:
        if block.slot in quoted:
            return block
    terms = set(question.terms)
    for sentence in chosen:
        block = block_after(sentence, chunks)
        if block is None:
            continue
        if (sentence.terms - terms) & block.terms or question.kind == QuestionKind.PROCEDURE:
            return block
    if question.kind == QuestionKind.PROCEDURE and blocks:
        return blocks[0]
    return None


# ---------------------------------------------------------------------------------------------------------------
# The evidence's signals
# ---------------------------------------------------------------------------------------------------------------


def _copies(sentence: Sentence, other: Sentence) -> bool:
    """Whether one's words are the other's, or all of them inside the other's, links read as their text: the same
    sentence on two pages, once with "See [Guide](…)" more."""
    a, b = _plain(sentence.text), _plain(other.text)
    return a == b or (min(len(a), len(b)) >= 20 and (a in b or b in a))


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", link_words(text).lower()).split())


def _same_table(row: Sentence, other: Sentence, chunks: Sequence[tuple[int, ScoredChunk]]) -> bool:
    """Whether both are rows of one table (a table the chunker split repeats its header in each passage)."""
    return bool(row.header) and _table(row, chunks) == _table(other, chunks)


def _table(row: Sentence, chunks: Sequence[tuple[int, ScoredChunk]]) -> tuple[str, str, str]:
    chunk = chunks[row.slot][1]
    return (chunk.doc_id, chunk.chapter or "", row.header)


def _row_key(row: Sentence) -> frozenset[str]:
    """The content terms of a table row's first cell, which names what the row is about (`chunk_size`, "Mainnet",
    "Chain ID" in a table turned on its side); an identifier by its parts only (chunk, size)."""
    if row.label:  # a flattened table's row: a cell a line
        first = row.text.strip().split("\n", 1)[0]
    else:
        first = re.split(r"(?<!\\)\|", row.text.strip().removeprefix("|"), maxsplit=1)[0]
    terms = content_terms(first)
    return frozenset(t for t in terms if not re.search(r"[_.]", t)) or frozenset(terms)


def _named_words(row: Sentence, question_terms: set[str]) -> frozenset[str]:
    """The words of a row's first cell the question holds, when it names the cell: all of its words, or at least two
    and half of them ("the default chunk size" names `chunk_size`; "when the API key is missing" does not name
    "Missing index"). Empty when it doesn't."""
    key = _row_key(row)
    held = key & question_terms
    return held if key and (len(held) == len(key) or (len(held) >= 2 and 2 * len(held) >= len(key))) else frozenset()


def _named_rows(
    scored: Sequence[Scored], question_terms: set[str], chunks: Sequence[tuple[int, ScoredChunk]], floor: float
) -> dict[tuple[str, str, str], list[frozenset[str]]]:
    """For each table among the candidates worth quoting (relevance at least `floor`, sharing a word with the
    question), what the question names of each row's first cell (`_named_words`). A row whose named words another
    row's strictly include describes something else: "What is the default chunk size?" names {chunk, size} of
    `chunk_size` and nothing of `chunk_overlap` or `commit_every`; "the defaults of timeout and max_retries" names
    both rows, neither more than the other."""
    named: dict[tuple[str, str, str], list[frozenset[str]]] = {}
    for item in scored:
        if item.sentence.header and item.relevance >= floor and item.coverage > 0:
            named.setdefault(_table(item.sentence, chunks), []).append(_named_words(item.sentence, question_terms))
    return named


def _word_name(anchor: str) -> str | None:
    """For an anchor that is one capitalised common English word ("Word", "Go", "Playground"), that word in lower case:
    the question capitalises it to name something. None for any other anchor."""
    if not _WORD_NAME_RE.fullmatch(anchor) or not is_english(anchor.lower()):
        return None
    return anchor.lower()


def _inflected(a: str, b: str) -> bool:
    """Whether two lower-case words are one word, singular or plural: "cookie"/"cookies", "alias"/"aliases",
    "policy"/"policies", "tag"/"tags". Inflection only, where a stemmer would also take "expressions" for "express"."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    if long == short + "es":  # "buses", "aliases", "boxes"; not "planes" of "plan", "goes" of "go"
        return short.endswith(("s", "x", "z", "ch", "sh"))
    return long == short + "s" or (short.endswith("y") and long == short[:-1] + "ies")


def _names(texts: Sequence[str], word: str) -> bool:
    """Whether passages name the common-word name `word` (lower case): a capitalised word or one in capitals that is
    it, singular or plural ("Policies" for "Policy", "TAGS" for "Tag"); or, in code, a command it starts, as a tool's
    name is typed (`brew install`, `$ go build`): the word, then an argument."""
    command = re.compile(rf"\s*(?:\$\s+)?{re.escape(word)}\s+[\w.-]")
    for text in texts:
        if any(_inflected(w.lower(), word) for w in _CAPITALISED_RE.findall(text)):
            return True
        code = [m.group(1) for m in _INLINE_CODE_RE.finditer(text)] + fenced_lines(text)
        if any(command.match(line) for line in code):
            return True
    return False


def _asks_for_address(anchor: str, question: str) -> bool:
    """Whether the anchor is "URL" naming the kind of value asked for ("What is the faucet URL?"), not a thing the
    docs must name: not written as code (`URL`) nor followed by "class", "object" or "type" ("the URL class")."""
    if anchor.lower() not in _ADDRESS_ANCHORS:
        return False
    word = re.escape(anchor)
    return not re.search(
        rf"`{word}`|\b{word}\s+(?:class|classes|object|objects|type|types|instance|datastructure)\b", question
    )


def _anchor_present(anchor: str, evidence: str, evidence_terms: set[str]) -> bool:
    """Whether `evidence` (lower case) names `anchor`: in any case, with its punctuation left out (`max_turns` for
    MAX-TURNS) or by all its words' stems."""
    if anchor.lower() in evidence:
        return True
    key = compact(anchor)
    if len(key) >= 3 and key in re.sub(r"[^0-9a-z]+", "", evidence):
        return True
    words = content_terms(anchor)
    return bool(words) and words <= evidence_terms


def _holding_anchors(
    question: Question, chunks: Sequence[tuple[int, ScoredChunk]], corpus: CorpusStats | None
) -> list[tuple[int, ScoredChunk]]:
    """Only the passages that hold every anchor of the question, when any does: a question about enclosure 417 is
    not answered with sentences about enclosures 234 and 186, however similar. When none does, all of them (the
    decision then refuses for the missing anchor)."""
    if not question.anchors:
        return list(chunks)
    holding = [pair for i, pair in enumerate(chunks) if not missing_anchors(question, chunks, {i}, corpus)]
    return holding or list(chunks)


def _own_title(chunk: ScoredChunk) -> str:
    """A passage's title, unless it only repeats the file name: a page with no heading of its own is titled by its
    file ("Words.md" → "Words"), which names nothing."""
    words = re.findall(r"[a-z0-9]+", (chunk.title or "").lower())
    return "" if words == re.findall(r"[a-z0-9]+", PurePosixPath(chunk.filename).stem.lower()) else chunk.title or ""


def missing_anchors(
    question: Question, chunks: Sequence[tuple[int, ScoredChunk]], slots: set[int], corpus: CorpusStats | None
) -> tuple[str, ...]:
    """The question's anchors that none of the evidence passages (text, title, headings, file name) holds; a
    capitalised common word ("Word") must be named as a name (`_names`). An anchor most of the corpus holds (the
    product's name) is the corpus's topic, not the question's: not required; nor is such a word inside a longer name
    ("Starlette's Jinja2" asks for Jinja2 in a corpus about Starlette)."""
    if not question.anchors:
        return ()
    texts = []
    for slot in sorted(slots):
        chunk = chunks[slot][1]
        texts.append("\n".join(p for p in (chunk.title, chunk.chapter, chunk.filename, chunk.text) if p))
    evidence = "\n".join(texts).lower()
    evidence_terms = content_terms(evidence)
    bodies = [
        "\n".join(p for p in (_own_title(c), c.chapter, c.text) if p) for c in (chunks[s][1] for s in sorted(slots))
    ]
    missing = []
    for anchor in question.anchors:
        word = _word_name(anchor)
        if _names(bodies, word) if word is not None else _anchor_present(anchor, evidence, evidence_terms):
            continue
        if _asks_for_address(anchor, question.text) and _WEB_ADDRESS_RE.search(evidence):
            continue  # "What is the faucet URL?": "Faucet <https://…>" holds it
        if corpus is not None and corpus.chunks:
            words = list(content_terms(anchor)) or [compact(anchor)]
            if word is None:
                held, share = evidence_terms, COMMON_ANCHOR_SHARE
            else:  # the corpus counts words, not names: a common word is the docs' topic only in many chunks
                held, share = set(), NAME_TOPIC_SHARE
            common = max(COMMON_ANCHOR_MIN_CHUNKS, share * corpus.chunks)
            if all(w in held or _term_df(w, corpus) >= common for w in words):
                continue
        missing.append(anchor)
    return tuple(missing)


def signals(
    question: Question,
    chunks: Sequence[tuple[int, ScoredChunk]],
    chosen: Sequence[Sentence],
    best_coverage: float,
    corpus: CorpusStats | None,
    profile: Profile | None,
    ranker_best: float = 0.0,
) -> Signals:
    terms = set(question.terms)
    prose = [s for s in candidates(chunks) if not is_asking(s.text)]
    local = _local_idf(prose, terms) if prose else {t: 1.0 for t in terms}
    idf = _corpus_idf(terms, corpus, local)
    slots = {s.slot for s in chosen}
    lead = chosen[0]
    top_slot = lead.slot
    evidence: set[str] = set()
    for s in chosen:
        evidence |= s.terms
    for slot in slots:
        evidence |= _headings(chunks[slot][1])
    around_lead = set(lead.terms) | _headings(chunks[top_slot][1])
    scale = math.log(1 + corpus.chunks) if corpus is not None and corpus.chunks else max(idf.values(), default=1.0)
    missing = max((idf[t] for t in terms - around_lead), default=0.0) / (scale or 1.0)
    negation = float(question.negated and not _NEGATED_RE.search(lead.text))
    if corpus is not None and corpus.chunks:
        rare = {t for t in terms if 0 < _term_df(t, corpus) <= max(2, RARE_SHARE * corpus.chunks)}
    else:
        rare = {t for t in terms if local.get(t, 0) >= max(local.values(), default=0)}
    lead_terms = set(lead.terms)
    rare_lead = len(rare & lead_terms) / len(rare) if rare else 1.0
    lead_text = lead.rendered().lower()
    anchors_lead = (
        sum(_anchor_present(a, lead_text, lead_terms) for a in question.anchors) / len(question.anchors)
        if question.anchors
        else 1.0
    )
    factoid = question.expects in FACTOID_EXPECTS
    unknown = 0.0
    if corpus is not None and corpus.chunks:
        total = math.fsum(idf.values()) or 1.0
        unknown = math.fsum(w for t, w in idf.items() if _term_df(t, corpus) == 0) / total
    dense = [c.dense_score for _, c in chunks if c.dense_score is not None]
    dense_best = max(dense) if dense else 0.0
    margin = z = 0.0
    if profile is not None and len(profile.dense) >= 3:
        others = list(profile.dense[1:])
        mean = sum(others) / len(others)
        std = math.sqrt(sum((v - mean) ** 2 for v in others) / len(others)) or 1e-3
        margin = dense_best - mean
        z = max(-5.0, min(10.0, margin / std))
    agreement = 0.0
    if profile is not None and chunks:
        top_id = chunks[top_slot][1].chunk_id
        agreement = float(top_id in profile.dense_top[:3] and top_id in profile.lexical_top[:3])
    return Signals(
        coverage=round(_coverage(terms, evidence, idf), 6),
        coverage_best=round(_coverage(terms, around_lead, idf), 6),
        coverage_sentence=round(best_coverage, 6),
        coverage_heading=round(_coverage(terms, set(_headings(chunks[top_slot][1])), idf), 6),
        missing_weight=round(min(1.0, missing), 6),
        rare_lead=round(rare_lead, 6),
        anchors_lead=round(anchors_lead, 6),
        unknown=round(unknown, 6),
        dense_best=round(dense_best, 6),
        dense_margin=round(margin, 6),
        dense_z=round(z, 6),
        agreement=agreement,
        answer_type=answer_type(lead, chosen, question, chunks),
        negation=negation,
        terms=round(math.log1p(len(terms)), 6),
        factoid=float(factoid),
        factoid_dense=round(float(factoid) * dense_best, 6),
        procedure=float(question.kind == QuestionKind.PROCEDURE),
        ranker_best=round(ranker_best, 6),
        missing_anchors=missing_anchors(question, chunks, slots, corpus),
    )


# ---------------------------------------------------------------------------------------------------------------
# Composing
# ---------------------------------------------------------------------------------------------------------------

Decider = Callable[[Signals], Verdict]


def _key_point(sentence: Sentence) -> str:
    """A quote on one bullet line: a label line as its one table row ("| Chain ID | 5031 | 50312 |")."""
    if sentence.title:
        return sentence.rendered()
    return label_row(sentence.text) if sentence.label else sentence.text


def _topic(question: Question, chunk: ScoredChunk) -> str:
    if chunk.chapter:
        return chunk.chapter.split(" > ")[-1].strip()
    if chunk.title:
        return chunk.title.strip()
    topic = " ".join(question.text.split()).rstrip("?.! ")
    return (topic[:1].upper() + topic[1:])[:80] or "Answer"


def _why_sentence(top, chosen, rest, chunks, max_sentences: int) -> Sentence | None:
    """The sentence for "Why It Matters": the next relevant one not already a key point, else the sentence after
    (or before) the best one in its chunk. None when max_sentences leaves no room."""
    if max_sentences <= 1:
        return None
    if rest:
        return rest[0]
    neighbours = [
        s
        for s in candidates_in(chunks, top.slot)
        if not any(s.overlaps(c) for c in chosen) and not is_navigation(s.text)
    ]
    after = [s for s in neighbours if s.start > top.start]
    pick = after[0] if after else (neighbours[-1] if neighbours else None)
    if pick is None:
        return None
    return Sentence(top.slot, top.n, pick.start, pick.end, pick.text, pick.terms)


def compose(
    question: Question,
    chunks: Sequence[tuple[int, ScoredChunk]],
    *,
    decider: Decider,
    max_sentences: int = 4,
    style: AnswerStyle | str = AnswerStyle.DEFAULT,
    corpus: CorpusStats | None = None,
    profile: Profile | None = None,
    ranker: Ranker | None = None,
    already: Sequence[Quoted] = (),
    follows: Sequence[Quoted] = (),
) -> Composed:
    """Answer `question` with verbatim sentences of `chunks` ((citation number, chunk) pairs, best first), or
    refuse. `decider` turns the evidence's `Signals` into a verdict (`citewise.quote.decide`). `already`: what an
    earlier part of the same question quoted; chosen again, it is not quoted twice (it still counts as evidence, and
    a part whose every quote is already there is answered with no text of its own). `follows`: the last thing the part
    before quoted, right above this part's text — what a sentence opening "It …" may point back to."""
    style = AnswerStyle(style)
    if not chunks:
        return _refuse("No passages were found for the question.")
    chunks = _holding_anchors(question, chunks, corpus)
    structured = style == AnswerStyle.STRUCTURED
    scored = score(question, chunks, code=not structured, ranker=ranker)
    prose = [item for item in scored if not item.sentence.code]
    best_coverage = max((item.coverage for item in prose), default=0.0)  # the ranker may lead with another one
    if best_coverage <= 0:
        return _refuse("No sentence of the closest passages shares the question's words.")
    limit = max(1, max_sentences - 1) if structured and max_sentences > 1 else max_sentences
    chosen, rest, blocks = select(question, chunks, scored, limit, ranked=ranker is not None)
    if not chosen:
        return _refuse("The only relevant sentences introduce material the passages don't include.")
    chosen = _named(_lead_with_answer(chosen, question, chunks), chunks, question, corpus)
    top = chosen[0]
    prose_chosen = [s for s in chosen if not s.block]
    pointers = (
        list(dict.fromkeys(t for s in prose_chosen for t in link_targets(s.text)))
        if prose_chosen and all(is_navigation(s.text) for s in prose_chosen)
        else []
    )
    evidence = signals(question, chunks, chosen, best_coverage, corpus, profile, scored[0].relevance)
    if _missing_value(question, chosen, blocks, chunks, scored, structured=structured, pointers=pointers):
        evidence = replace(evidence, missing_value=str(question.expects))
    verdict = decider(evidence)
    if not verdict.answer:
        return _refuse(verdict.reason or "The evidence is too weak.", evidence, verdict.probability)

    if already:
        # An earlier part quoted some of this evidence: quote what else answers this part, if anything does.
        again, rest_again, blocks_again = select(
            question,
            chunks,
            scored,
            limit,
            ranked=ranker is not None,
            skip=lambda s: _quoted_before(s, chunks, already),
            follows=lambda s: _quoted_before(s, chunks, follows),
        )
        if again:
            chosen = _named(_lead_with_answer(again, question, chunks), chunks, question, corpus)
            top, rest, blocks = chosen[0], rest_again, blocks_again
    if question.kind in (QuestionKind.PROCEDURE, QuestionKind.LIST) or (
        chosen[0].leads_in and list_after(chosen[0], chunks, 1)
    ):
        chosen = _with_list(chosen, chunks, limit)
        chosen += _steps(top, chosen, chunks, limit)
    if not structured:
        relevance = {item.sentence.key: item.relevance for item in scored}
        block = _code_block(chosen, blocks, chunks, question, relevance)
        if block and all(block.key != s.key for s in chosen):
            if relevance.get(block.key, 0.0) > relevance.get(chosen[0].key, 1.0):
                # The command is the answer: it leads, after the sentence that introduces it when there is one.
                intro = _introducing(block, chunks)
                chosen = [*([intro] if intro and not any(intro.overlaps(s) for s in chosen) else []), block, *chosen]
            else:
                chosen.append(block)
    # Passages in the order of their best quote (the best sentence's passage first), each in reading order; for a
    # value or a definition the sentence holding it leads.
    rank = {}
    for i, s in enumerate(chosen):
        rank.setdefault(s.slot, i)
    lead = chosen[0] if question.kind in (QuestionKind.VALUE, QuestionKind.DEFINITION) else None
    ordered = sorted(chosen, key=lambda s: (rank[s.slot], s.start))
    if lead is not None:
        group = [*_chosen_chain(lead, chosen, chunks), lead]  # "This enables …" after what "This" means
        keys = {s.key for s in group}
        ordered = [*group, *[s for s in ordered if s.key not in keys]]
    ordered = _unquoted(ordered, chunks, already, follows)
    quoted = [_span(s, chunks) for s in ordered]
    if not ordered:
        text, order, pointers = "", [], []
    elif structured:
        why = _why_sentence(top, chosen, rest, chunks, max_sentences)
        if why is not None and _quoted_before(why, chunks, already):
            why = None
        if why is not None:
            quoted.append(_span(why, chunks))
        lines = [f"## {_topic(question, chunks[top.slot][1])}", "", "### Key Points", ""]
        lines += [f"- {_key_point(s)} [{s.n}]" for s in ordered]
        lines += ["", "### Why It Matters", ""]
        lines += [f"{why.text} [{why.n}]"] if why else []
        text = "\n".join(lines).rstrip()
        order = [s.n for s in ordered] + ([why.n] if why else [])
    else:
        paragraphs: list[str] = []
        line: list[str] = []
        previous: Sentence | None = None
        for s in ordered:
            if previous is not None and (s.slot != previous.slot or s.block or previous.block) and line:
                paragraphs.append(" ".join(line))
                line = []
            if s.block:  # a code block or table stands alone, its marker on the line after it; after a blank
                # line under a table, which would take the line for one more row of its own
                paragraphs.append(f"{s.rendered()}\n{chr(10) if s.header else ''}[{s.n}]")
            elif s.step:
                line.append(f"- {s.rendered()} [{s.n}]") if not line else line.append(f"\n- {s.rendered()} [{s.n}]")
            else:
                line.append(f"{s.rendered()} [{s.n}]")
            previous = s
        paragraphs += [" ".join(line)] if line else []
        text = "\n\n".join(p.replace(" \n- ", "\n- ") for p in paragraphs)
        order = [s.n for s in ordered]
    return Composed(
        text=text,
        used=list(dict.fromkeys(order)),
        refused=False,
        reason=None,
        signals=evidence,
        probability=verdict.probability,
        kind=question.kind,
        pointers=pointers,
        quoted=quoted,
    )
