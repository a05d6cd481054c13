"""Quote mode: an answer made only of verbatim sentences from the retrieved chunks, no model involved.

Cheap and deterministic by construction — the same question over the same chunks gives the same text:

1. each chunk is cut into sentences, markdown-aware (headings, code fences, tables and MDX/HTML tag lines are not
   prose; list items are sentences of their own), every sentence kept as a [start, end) span of the chunk's text
   so what is quoted is exactly what the document says;
2. each sentence is scored by how much of the question's content it covers — content words (stopwords and
   request phrasing such as "according to the docs" removed, light stemming), weighted by IDF over the candidate
   sentences; of the whole question or of its focus without conversational clauses ("I'm new here."), whichever
   is covered better — times the chunk's retrieval similarity. A question word that no passage holds and the
   whole corpus hardly does (asked of the full-text index: "Kubernetes" in a guide that never names it) weighs
   three times as much: it is likely what the question is about;
3. the best sentences are picked, near-duplicates dropped, and put back in reading order (chunk, then position),
   each followed by its `[n]`; at most one code block joins them, from a passage they are quoted from. A sentence
   that points back ("They apply to …") comes only right after the sentence it points back to, and a pointer
   elsewhere ("See [X](x.md) for …") only when nothing else is quoted.

It refuses — `REFUSAL_TEXT`, `refused=True` and a reason — when the best chunk's cosine similarity is below
`min_score`, or when no sentence covers at least `min_overlap` of the question's weighted content words, a bar
lowered by `dense_trade` per unit of cosine above `min_score` down to a floor. They were calibrated on ClapNQ
(bench/calibrate_refusal.py, bench/results/refusal_calibration.json). IDF over the whole corpus instead of the
candidate sentences was measured there too and lost (refusal F1 0.72 against 0.77, both without the coverage
floor): what tells an unanswerable question apart is the words the retrieved passages lack, however common they
are elsewhere. Weighing down words found in most chunks (a product's name) lost as well (0.759 against 0.761, one
Somnia docs answer fewer); weighing up the question's words the corpus lacks won (0.775 against 0.763).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from citewise.types import REFUSAL_TEXT, AnswerStyle, ScoredChunk

# Calibrated together with settings.agent.quote_min_score by bench/calibrate_refusal.py: ClapNQ refusal F1, on
# condition that answerable documentation questions are still answered (bench/results/refusal_calibration.json).
DEFAULT_MIN_OVERLAP = 0.40
DEFAULT_MIN_SCORE = 0.44
# Coverage the best sentence needs drops by this much per unit of cosine the best passage has above min_score:
# a passage the embedder finds very close needs less lexical proof (ClapNQ refusal F1 0.729 → 0.761 at an equal
# Somnia docs answer rate; bench/results/refusal_calibration.json, "dense_trade") ...
DEFAULT_DENSE_TRADE = 0.5
# ... but never below the fixed bar used before the trade, so a close passage can't make a question answerable that
# shares one weak word with it ("How do I configure Kubernetes autoscaling?" over embedding docs at cosine 0.76 and
# "the configured model"). The gate thus only ever refuses more than before, filler aside: on ClapNQ 15 more
# unanswerable questions, no more answerable ones. Without the floor F1 would be 0.767.
DEFAULT_COVERAGE_FLOOR = 0.30
# A sentence joins the answer when it is at least this fraction as relevant as the best one.
RELATIVE_CUTOFF = 0.5
# Two sentences sharing this much of their content words say the same thing; the weaker one is dropped.
REDUNDANCY_JACCARD = 0.6
MIN_SENTENCE_WORDS = 4
# A sentence that opens by pointing back ("They apply to …", "This means …", "In that case …") says nothing on its
# own: it is quoted only right after the sentence it points back to (its predecessor in the same passage, with no
# heading or code between), which joins it when it shares a word with the question; otherwise the dangling sentence
# is left out. Only when nothing else is left is it quoted anyway, with its predecessor when there is room.
_ANAPHORIC_RE = re.compile(
    r"^[\"'“‘(\[*_]*(?:(?:they|it|its|it's|this|these|those|that|that's|such|both|them|their|he|she|his|her)\b"
    r"|in (?:that|this|such|either|both) cases?\b|the (?:latter|former|above)\b)",
    re.I,
)
# A sentence that only points elsewhere ("See [Asking questions](answers.md) for how …", "For more, see …",
# "Read [the guide](x.md) to …") answers nothing: it ranks below every other sentence and is quoted only when no
# other sentence is.
_NAVIGATION_RE = re.compile(
    r"^[\"'“‘(\[*_]*(?:see\b"
    r"|(?:for|to)\b[^.!?]{0,80}?,\s*(?:see|read|refer to)\b"
    r"|(?:read|refer to|check out|visit|go to|head (?:over )?to|continue (?:with|to|reading)|more (?:on|about|in))\b"
    r"(?=[^\n]*(?:\]\(|https?://|\.md\b|\b(?:page|section|chapter)\b)))",
    re.I,
)
# A code block is quoted whole only when it covers at least this much of the question, or when it directly follows
# a quoted sentence (only a label such as "**Fix.**" between): the command the sentence's section gives. Either
# way only from a passage the answer already quotes prose from, so a block never stands in for an explanation
# (a search example whose argument is the question itself covers it fully and answers nothing).
CODE_MIN_COVERAGE = 0.5
# A question word that no passage holds and at most this many chunks of the whole corpus do is likely the subject of
# a question the documentation doesn't cover ("Kubernetes"): a chunk about it would have been retrieved, BM25
# weighing so rare a word the most. It weighs UNSUPPORTED_WEIGHT times its IDF in the coverage gate rather than
# refusing outright: in a small corpus everyday words are that rare too, and a paraphrase ("a fixed number of
# threads" for "twelve threads") must not sink an otherwise covered question. Measured on ClapNQ refusal F1 (the
# Somnia docs answer rate unchanged throughout): 0.763 without, 0.775 at weight 3, 0.785 refusing outright; words in
# no chunk at all (0) instead of at most one: lower (bench/results/refusal_calibration.json, "unsupported_words").
SCARCE_MAX_CHUNKS = 1
UNSUPPORTED_WEIGHT = 3.0
# Below this many chunks most everyday words occur at most once, so a rare word says nothing about the question:
# the agent does no lookup (the test fixture docs, ~20 chunks, would lose "a fixed number of threads").
SCARCE_MIN_CORPUS_CHUNKS = 100
# A question word shorter than this is never looked up in the corpus: it is seldom what a question is about, and
# the full-text index drops many such words as stop words ("won", "ll"), so it would report them missing.
MIN_LOOKUP_CHARS = 4
MAX_LOOKUP_CHARS = 40  # the full-text index's longest token

_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
few for from further get gets got had hadn't has hasn't have haven't having he her here hers herself him
himself his how i if in into is isn't it it's its itself just let me more most mustn't my myself no nor not
now of off on once only or other ought our ours ourselves out over own same shan't she should shouldn't so
some such than that that's the their theirs them themselves then there there's these they this those
through to too under until up upon us very was wasn't we were weren't what what's when where which while who
whom whose why will with won't would wouldn't you your yours yourself yourselves
tell explain describe please know want need like one ones thing things way ways much many make makes
made use used using get give gives given say says said name named called call anyone someone something
often exactly actually
you've you're you'd you'll we're we've we'd they're they've they'd dont doesnt didnt isnt arent wasnt werent
havent hasnt hadnt cant couldnt wouldnt shouldnt wont whats thats theres youre youve
"""
# How people phrase a request to a documentation assistant, not what they ask about: a word like "according" or
# "guide" occurs in no passage, so it would weigh the most in the coverage of every retrieved sentence and sink it.
_PHRASING_TEXT = """
according docs doc documentation guide manual question questions quick answer answers hi hello hey thanks thank
wondering curious i'm i've i'd i'll im ive
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split()) | frozenset(_PHRASING_TEXT.split())


class QuoteAnswer(BaseModel):
    text: str
    used: list[int] = Field(default_factory=list)  # citation numbers in the order they appear in `text`
    refused: bool = False
    reason: str | None = None


# ---------------------------------------------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?(?:[_.][a-z0-9]+)*")
_SUFFIXES = (
    ("ational", "ate"), ("ations", "at"), ("ation", "at"), ("ization", "iz"), ("ements", "e"), ("ement", "e"),
    ("ments", ""), ("ment", ""), ("nesses", ""), ("ness", ""), ("ings", ""), ("ing", ""), ("ities", ""),
    ("ity", ""), ("ies", "y"), ("ied", "y"), ("sses", "ss"), ("edly", ""), ("ed", ""), ("ers", ""), ("er", ""),
    ("ly", ""), ("es", ""), ("s", ""),
)  # fmt: skip


def stem(word: str) -> str:
    """A light, deterministic stemmer: enough that "configure", "configured" and "configuration" meet."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    if not word.isalpha() or len(word) <= 3:
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word.endswith("ss")):
            word = word[: -len(suffix)] + replacement
            break
    if word.endswith(("tion", "sion")) and len(word) > 6:
        word = word[:-3]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word[:7]


_INTERROGATIVE = (
    r"(?:how|what|what's|which|where|when|why|who|whom|whose|is|are|was|were|can|could|do|does|did|should|"
    r"would|will|may|must|has|have|had|shall|tell|explain|describe|show|list|give)"
)
# "Quick question:" / "According to the user guide," / "In Citewise," before the question word itself.
_LEAD_CLAUSE_RE = re.compile(rf"^[^,:;?]{{1,60}}[,:;]\s+(?={_INTERROGATIVE}\b)", re.I)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=\S)")


def question_focus(question: str) -> str:
    """The question itself without the conversation around it: of several sentences the ones that ask ("I'm new
    here. How do I …?" → "How do I …?"), then without a short leading clause before the question word ("According
    to the user guide, how …" → "how …"). Returns `question` unchanged when nothing is to strip."""
    parts = [p for p in _SENTENCE_END_RE.split(question.strip()) if p.strip()]
    asking = [p for p in parts if p.rstrip().endswith("?")]
    focus = " ".join(asking) if asking and len(asking) < len(parts) else question.strip()
    stripped = _LEAD_CLAUSE_RE.sub("", focus, count=1)
    return stripped if content_terms(stripped) else focus


def content_words(text: str) -> dict[str, str]:
    """{stem: the word as first written} for the content words of `text`; identifiers count whole and by their
    parts."""
    words: dict[str, str] = {}
    for token in _TOKEN_RE.findall(text.lower()):
        parts = re.split(r"[_.]", token) if re.search(r"[_.]", token) else []
        if len(parts) > 1 and not token.replace(".", "").isdigit():
            words.setdefault(token, token)
        for part in parts or [token]:
            if part and part not in STOPWORDS and (len(part) > 1 or part.isdigit()):
                words.setdefault(stem(part), part)
    return words


def content_terms(text: str) -> set[str]:
    """Stems of the content words of `text`; identifiers count whole and by their parts."""
    return set(content_words(text))


# ---------------------------------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_SKIP_LINE_RE = re.compile(
    r"^\s*(?:#{1,6}\s|\||[=\-~^*_]{3,}\s*$|<[^>]*>\s*$|</|\{/\*|import\s|export\s|\.\.\s+\w+::|:\w+:)"
)
_LIST_ITEM_RE = re.compile(r"^(\s*(?:[-*+•]|\d+[.)])\s+|\s*>\s+)")
_BOUNDARY_RE = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[`*_]?[A-Z0-9])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "dr.", "mr.", "mrs.", "ms.", "no.", "fig.", "st.")
# Whole words only: "films." and "first." end a sentence although they end with "ms." and "st.".
_ABBREVIATION_RE = re.compile(r"(?:^|[^a-z])(?:" + "|".join(map(re.escape, _ABBREVIATIONS)) + r")$", re.I)
_EDGE_TAG_RE = re.compile(r"^(?:\s*<[^<>]*>)+|(?:<[^<>]*>\s*)+$")


@dataclass(frozen=True)
class Sentence:
    slot: int  # position of its chunk in the input list
    n: int  # citation number of its chunk
    start: int
    end: int
    text: str
    terms: frozenset[str]
    code: bool = False  # a whole fenced code block, quoted as is


def _paragraphs(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of prose paragraphs and list items; skips headings, code, tables and tag lines."""
    spans: list[tuple[int, int]] = []
    current: list[int] | None = None
    in_fence = False
    pos = 0
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            current = None
            continue
        if in_fence or not line.strip() or _SKIP_LINE_RE.match(line):
            current = None
            continue
        item = _LIST_ITEM_RE.match(line)
        if item:
            current = [start + item.end(), end]
            spans.append(current)  # type: ignore[arg-type]
            continue
        if current is None:
            current = [start + len(line) - len(line.lstrip()), end]
            spans.append(current)  # type: ignore[arg-type]
        else:
            current[1] = end
    return [(s, e) for s, e in spans if e > s]


def split_sentences(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of the sentences of `text` (markdown-aware); `text[start:end]` is the sentence."""
    spans: list[tuple[int, int]] = []
    for p_start, p_end in _paragraphs(text):
        paragraph = text[p_start:p_end]
        cut = 0
        for match in _BOUNDARY_RE.finditer(paragraph):
            before = paragraph[cut : match.start()].rstrip("\"'”’)]")
            if _ABBREVIATION_RE.search(before) or re.search(r"(?:^|\s)[A-Z]\.$", before):
                continue  # "e.g. Foo", "J. Smith": not a sentence end
            spans.append((p_start + cut, p_start + match.start()))
            cut = match.end()
        spans.append((p_start + cut, p_end))
    out = []
    for start, end in spans:
        segment = text[start:end]
        tags = _EDGE_TAG_RE.match(segment)
        if tags:
            start += tags.end()
        tail = _EDGE_TAG_RE.search(text[start:end])
        if tail and tail.end() == end - start:
            end = start + tail.start()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            out.append((start, end))
    return out


def code_blocks(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of the closed fenced code blocks of `text`, fences included."""
    spans = []
    for match in re.finditer(r"^[ \t]*((```|~~~)[^\n]*\n.*?^[ \t]*\2)[ \t]*$", text, re.S | re.M):
        spans.append((match.start(1), match.end(1)))
    return spans


def _continues_previous_chunk(text: str) -> bool:
    """A chunk's first sentence that starts in lower case or on punctuation is the tail of a sentence cut by the
    chunk overlap ("words, it refuses."), not a sentence of its own."""
    first = text.lstrip()[:1]
    return bool(first) and (first.islower() or first in ",;:)]}.")


def _candidates(chunks: Sequence[tuple[int, ScoredChunk]], *, code: bool = False) -> list[Sentence]:
    sentences = []
    for slot, (n, chunk) in enumerate(chunks):
        for index, (start, end) in enumerate(split_sentences(chunk.text)):
            text = chunk.text[start:end]
            if len(text.split()) < MIN_SENTENCE_WORDS:
                continue
            if index == 0 and chunk.chunk_index > 0 and _continues_previous_chunk(text):
                continue  # the chunker's overlap began mid-sentence: quoting it would quote half a sentence
            sentences.append(Sentence(slot, n, start, end, text, frozenset(content_terms(text))))
        if code:
            for start, end in code_blocks(chunk.text):
                text = chunk.text[start:end]
                sentences.append(Sentence(slot, n, start, end, text, frozenset(content_terms(text)), code=True))
    return sentences


# ---------------------------------------------------------------------------------------------------------------
# Scoring and composing
# ---------------------------------------------------------------------------------------------------------------


def _chunk_weights(chunks: Sequence[tuple[int, ScoredChunk]]) -> list[float]:
    """Each chunk's retrieval strength in [0, 1]: its cosine when known, else its fused score relative to the best."""
    dense = [c.dense_score for _, c in chunks]
    if all(d is not None for d in dense):
        return [min(1.0, max(0.0, float(d))) for d in dense]  # type: ignore[arg-type]
    best = max((c.score for _, c in chunks), default=0.0) or 1.0
    return [max(0.0, c.score / best) for _, c in chunks]


def _idf(sentences: Sequence[Sentence], terms: set[str]) -> dict[str, float]:
    # Smoothed so that with a handful of sentences one missing question word doesn't outweigh all the others.
    n = len(sentences)
    return {t: math.log(1 + (n + 1) / (sum(t in s.terms for s in sentences) + 1)) for t in sorted(terms)}


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


# How many chunks of the indexed corpus hold a word; counting past SCARCE_MAX_CHUNKS + 1 is not needed (the agent
# asks the full-text index with that limit).
CorpusFrequency = Callable[[str], int]


def unsupported_words(
    question: str,
    chunks: Sequence[tuple[int, ScoredChunk]],
    corpus_frequency: CorpusFrequency,
    *,
    max_chunks: int = SCARCE_MAX_CHUNKS,
) -> dict[str, str]:
    """The question's content words that no passage holds and at most `max_chunks` chunks of the corpus do,
    as {stem: word} in question order: likely the subject of a question the documentation doesn't cover
    ("Kubernetes" in a guide that never names it), or a paraphrase. Only words missing from the passages are looked
    up."""
    evidence: set[str] = set()
    for _, c in chunks:
        evidence |= content_terms("\n".join(part for part in (c.title, c.chapter, c.text) if part))
    unsupported: dict[str, str] = {}
    for term, written in content_words(question_focus(question)).items():
        word = re.sub(r"['’].*$", "", written)  # "snicket's" is looked up as "snicket"
        if term in evidence or word in STOPWORDS or stem(word) in STOPWORDS:  # "owned" is "own" to the index
            continue
        if not MIN_LOOKUP_CHARS <= len(word) <= MAX_LOOKUP_CHARS and not any(ch.isdigit() for ch in word):
            continue
        if corpus_frequency(word) <= max_chunks:
            unsupported[term] = word
    return unsupported


def _refuse(reason: str) -> QuoteAnswer:
    return QuoteAnswer(text=REFUSAL_TEXT, used=[], refused=True, reason=reason)


def score_sentences(
    question: str,
    chunks: Sequence[tuple[int, ScoredChunk]],
    *,
    code: bool = False,
    unsupported: Collection[str] = (),
    unsupported_weight: float = UNSUPPORTED_WEIGHT,
) -> list[tuple[float, float, Sentence]]:
    """(relevance, coverage, sentence) for every candidate sentence, best first (ties: chunk order, position).

    coverage = IDF-weighted share of the question's content words the sentence contains (IDF over the prose
    sentences, times `unsupported_weight` for the `unsupported` terms); relevance = coverage × (0.5 + 0.5 × the
    chunk's retrieval strength). With `code`, whole fenced code blocks are candidates too."""
    sentences = _candidates(chunks, code=code)
    question_terms = content_terms(question)
    focus_terms = content_terms(question_focus(question))
    prose = [s for s in sentences if not s.code]
    if not prose or not question_terms:
        return []
    idf = _idf(prose, question_terms)
    idf = {t: w * (unsupported_weight if t in unsupported else 1.0) for t, w in idf.items()}
    # Coverage of the whole question or of its focus, whichever is higher: the words of a conversational clause
    # around the question ("I'm new here.") can't lower it, and when the clause does find support it still counts.
    totals = [(terms, sum(idf[t] for t in terms)) for terms in (question_terms, focus_terms) if terms]
    weights = _chunk_weights(chunks)
    scored = []
    for s in sentences:
        coverage = max(sum(idf[t] for t in terms & s.terms) / total for terms, total in totals)
        scored.append((round(coverage * (0.5 + 0.5 * weights[s.slot]), 12), round(coverage, 12), s))
    scored.sort(key=lambda item: (-item[0], item[2].slot, item[2].start))
    return scored


def required_coverage(
    best_dense: float | None,
    min_score: float,
    min_overlap: float,
    dense_trade: float = DEFAULT_DENSE_TRADE,
    coverage_floor: float = DEFAULT_COVERAGE_FLOOR,
) -> float:
    """The coverage the best sentence needs: `min_overlap` at the similarity bar, less `dense_trade` per unit of
    cosine above it, never below `coverage_floor` (no relief without a cosine: lexical retrieval)."""
    if best_dense is None:
        return min_overlap
    relieved = min_overlap - dense_trade * max(0.0, best_dense - min_score)
    return max(min(coverage_floor, min_overlap), relieved)


def _topic(question: str, chunk: ScoredChunk) -> str:
    if chunk.chapter:
        return chunk.chapter.split(" > ")[-1].strip()
    if chunk.title:
        return chunk.title.strip()
    topic = " ".join(question.split()).rstrip("?.! ")
    return (topic[:1].upper() + topic[1:])[:80] or "Answer"


def compose_quote_answer(
    question: str,
    chunks: list[tuple[int, ScoredChunk]],
    *,
    max_sentences: int = 4,
    min_score: float = DEFAULT_MIN_SCORE,
    style: AnswerStyle | str = AnswerStyle.DEFAULT,
    min_overlap: float = DEFAULT_MIN_OVERLAP,
    dense_trade: float = DEFAULT_DENSE_TRADE,
    coverage_floor: float = DEFAULT_COVERAGE_FLOOR,
    corpus_frequency: CorpusFrequency | None = None,
    unsupported_weight: float = UNSUPPORTED_WEIGHT,
) -> QuoteAnswer:
    """Answer `question` with verbatim sentences of `chunks` ((citation number, chunk) pairs, best first), or refuse.

    `min_score` gates on the best chunk's cosine similarity (skipped when no chunk has one: lexical retrieval);
    `min_overlap` on the best sentence's coverage of the question's content words, lowered by `dense_trade` per
    unit of cosine the best chunk has above `min_score`, down to `coverage_floor` (see `required_coverage`).
    With `corpus_frequency`, a content word of the question that no passage holds and the corpus hardly does
    weighs `unsupported_weight` times as much in that coverage (`unsupported_words`). At most `max_sentences`
    sentences, plus one code block in the default style.
    """
    style = AnswerStyle(style)
    if not chunks:
        return _refuse("No passages were retrieved for the question.")
    dense = [c.dense_score for _, c in chunks if c.dense_score is not None]
    if dense and max(dense) < min_score:
        return _refuse(
            f"The best passage's similarity to the question ({max(dense):.2f}) is below the quote-mode "
            f"threshold ({min_score:.2f})."
        )
    unsupported = unsupported_words(question, chunks, corpus_frequency) if corpus_frequency else {}
    structured = style == AnswerStyle.STRUCTURED
    scored = score_sentences(
        question, chunks, code=not structured, unsupported=unsupported, unsupported_weight=unsupported_weight
    )
    prose = [item for item in scored if not item[2].code]
    if not prose:
        return _refuse("The retrieved passages hold no sentence to quote for this question.")
    best_relevance, best_coverage, _ = prose[0]  # the gate is calibrated on prose sentences
    needed = required_coverage(max(dense) if dense else None, min_score, min_overlap, dense_trade, coverage_floor)
    if best_coverage < needed or best_coverage <= 0:
        missing = f"; no passage mentions {', '.join(map(repr, unsupported.values()))}" if unsupported else ""
        return _refuse(
            f"No retrieved sentence shares enough of the question's content ({best_coverage:.2f} of "
            f"{needed:.2f} needed{missing})."
        )

    limit = max(1, max_sentences - 1) if structured and max_sentences > 1 else max_sentences
    chosen, rest, blocks = _select(question, chunks, scored, best_relevance, limit)
    if not chosen:
        return _refuse("The only relevant sentences introduce material the passages don't include.")
    top = chosen[0]
    if not structured:
        block = _code_block(chosen, blocks, chunks, content_terms(question))
        chosen += [block] if block else []
    chosen.sort(key=lambda s: (s.slot, s.start))

    if style == AnswerStyle.STRUCTURED:
        why = _why_sentence(top, chosen, rest, chunks, max_sentences)
        lines = [f"## {_topic(question, chunks[top.slot][1])}", "", "### Key Points", ""]
        lines += [f"- {s.text} [{s.n}]" for s in chosen]
        lines += ["", "### Why It Matters", ""]
        lines += [f"{why.text} [{why.n}]"] if why else []
        text = "\n".join(lines).rstrip()
        order = [s.n for s in chosen] + ([why.n] if why else [])
    else:
        paragraphs: list[str] = []
        for slot in dict.fromkeys(s.slot for s in chosen):
            line: list[str] = []
            for s in (s for s in chosen if s.slot == slot):
                if s.code:  # a block stands alone, its marker on the line after the closing fence
                    paragraphs += [" ".join(line)] if line else []
                    paragraphs.append(f"{s.text}\n[{s.n}]")
                    line = []
                else:
                    line.append(f"{s.text} [{s.n}]")
            paragraphs += [" ".join(line)] if line else []
        text = "\n\n".join(paragraphs)
        order = [s.n for s in chosen]
    return QuoteAnswer(text=text, used=list(dict.fromkeys(order)), refused=False, reason=None)


def is_anaphoric(text: str) -> bool:
    """Whether a sentence opens by pointing back at what came before ("They …", "This means …", "In that case …")."""
    return bool(_ANAPHORIC_RE.match(text))


def is_navigation(text: str) -> bool:
    """Whether a sentence only points elsewhere ("See [X](x.md) for …", "For more, see …", "Read [X](x.md) to …")."""
    return bool(_NAVIGATION_RE.match(text))


def _predecessor(sentence: Sentence, chunks: Sequence[tuple[int, ScoredChunk]]) -> Sentence | None:
    """The sentence right before `sentence` in its passage, if nothing but a paragraph break lies between (a heading
    or a code block between means the pointing-back has no antecedent to quote)."""
    text = chunks[sentence.slot][1].text
    before = [(start, end) for start, end in split_sentences(text) if end <= sentence.start]
    if not before:
        return None
    start, end = before[-1]
    between = text[end : sentence.start]
    if _FENCE_RE.search(between) or re.search(r"^\s*(?:#{1,6}\s|```|~~~)", between, re.M):
        return None
    words = text[start:end]
    return Sentence(sentence.slot, sentence.n, start, end, words, frozenset(content_terms(words)))


def _antecedents(
    sentence: Sentence,
    chunks: Sequence[tuple[int, ScoredChunk]],
    taken: Callable[[Sentence], bool],
    limit: int,
) -> tuple[list[Sentence], bool]:
    """The sentences `sentence` points back through, in reading order, up to the first that doesn't point back
    ("Dilip Joshi is an actor. He has appeared in … He plays Jethalal …") or that is already `taken`, at most
    `limit` of them; and whether the chain is anchored there (False: it runs into a heading, a code block, the
    passage's start or the limit first)."""
    heads: list[Sentence] = []
    current = sentence
    while is_anaphoric(current.text):
        before = _predecessor(current, chunks)
        if before is None or len(heads) >= limit:
            return heads, False
        if taken(before):
            return heads, True
        heads.insert(0, before)
        current = before
    return heads, True


def _select(
    question: str,
    chunks: Sequence[tuple[int, ScoredChunk]],
    scored: Sequence[tuple[float, float, Sentence]],
    best_relevance: float,
    limit: int,
) -> tuple[list[Sentence], list[Sentence], list[Sentence]]:
    """(chosen sentences, relevant ones left over, code blocks that cover the question well), best first.

    Sentences at least RELATIVE_CUTOFF as relevant as the best one, near-duplicates and lead-ins ("Run this:")
    dropped. A sentence that points back ("They …") joins only right after its predecessor, which must share a
    question word (then both are taken, if there is room for both); a navigation sentence ("See … for …") only when
    no other sentence is taken. Should nothing else remain, the best pointing-back sentence is quoted after all,
    with its predecessor when there is room: selection never turns an answer into a refusal."""
    question_terms = content_terms(question) | content_terms(question_focus(question))
    chosen: list[Sentence] = []
    rest: list[Sentence] = []
    blocks: list[Sentence] = []
    dangling: list[Sentence] = []
    navigation: list[Sentence] = []

    def duplicate(sentence: Sentence) -> bool:
        return any(
            _jaccard(sentence.terms, c.terms) >= REDUNDANCY_JACCARD or sentence.text.strip() == c.text.strip()
            for c in chosen
        )

    def taken(sentence: Sentence) -> bool:
        return any(c.slot == sentence.slot and c.start == sentence.start for c in chosen)

    def taken_before(heads: list[Sentence], sentence: Sentence) -> bool:
        before = _predecessor(heads[0] if heads else sentence, chunks)
        return before is not None and taken(before)

    for relevance, coverage, sentence in scored:
        if coverage <= 0 or relevance < RELATIVE_CUTOFF * best_relevance:
            break
        if sentence.code:
            if coverage >= CODE_MIN_COVERAGE:
                blocks.append(sentence)
            continue
        if sentence.text.rstrip("*_ ").endswith(":"):
            continue  # "Run this:" says nothing without what follows
        if taken(sentence) or duplicate(sentence):
            continue
        if is_navigation(sentence.text):
            navigation.append(sentence)
            continue
        if is_anaphoric(sentence.text):
            heads, anchored = _antecedents(sentence, chunks, taken, limit)
            if not anchored or not (taken_before(heads, sentence) or any(h.terms & question_terms for h in heads)):
                dangling.append(sentence)  # what it points back to is missing or off the question
                continue
            if len(chosen) + len(heads) + 1 > limit:
                dangling.append(sentence)  # not in `rest`: "Why It Matters" must not open with "They"
                continue
            if any(duplicate(h) for h in heads):
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
        heads, _ = _antecedents(sentence, chunks, taken, limit)
        heads = [h for h in heads if not is_navigation(h.text)]
        heads = heads[max(0, len(heads) - (limit - 1)) :] if limit > 1 else []
        chosen += [*heads, sentence]
    return chosen, rest, blocks


def _code_block(
    chosen: list[Sentence],
    blocks: list[Sentence],
    chunks: Sequence[tuple[int, ScoredChunk]],
    question_terms: set[str],
) -> Sentence | None:
    """The one code block worth quoting beside the chosen sentences, if any: the best block that covers the
    question well, else the block that directly follows a chosen sentence and carries on its own subject (shares
    a word with it that the question doesn't have: "… until you prune them." and `--prune`) — both only from a
    passage the answer quotes prose from."""
    quoted = {s.slot for s in chosen}
    for block in blocks:
        if block.slot in quoted:
            return block
    for sentence in chosen:
        text = chunks[sentence.slot][1].text
        after = [(start, end) for start, end in code_blocks(text) if start >= sentence.end]
        if not after:
            continue
        start, end = after[0]
        between = text[sentence.end : start]
        if len(between.split()) >= MIN_SENTENCE_WORDS or re.search(r"^\s*#", between, re.M):
            continue  # more than a label like "**Fix.**" between the sentence and the block
        block = text[start:end]
        terms = frozenset(content_terms(block))
        if (sentence.terms - question_terms) & terms:
            return Sentence(sentence.slot, sentence.n, start, end, block, terms, code=True)
    return None


def _why_sentence(
    top: Sentence,
    chosen: list[Sentence],
    rest: list[Sentence],
    chunks: Sequence[tuple[int, ScoredChunk]],
    max_sentences: int,
) -> Sentence | None:
    """The sentence for "Why It Matters": the next relevant one not already a key point, else the sentence after
    (or before) the best one in its chunk. None when max_sentences leaves no room."""
    if max_sentences <= 1:
        return None
    if rest:
        return rest[0]
    taken = {(s.slot, s.start) for s in chosen}
    neighbours = [
        s for s in _candidates([chunks[top.slot]]) if (top.slot, s.start) not in taken and not is_navigation(s.text)
    ]
    after = [s for s in neighbours if s.start > top.start]
    pick = after[0] if after else (neighbours[-1] if neighbours else None)
    if pick is None:
        return None
    return Sentence(top.slot, top.n, pick.start, pick.end, pick.text, pick.terms)
