"""The gate before an answer leaves the agent: citations, the question's constraints, and grounded claims.

Grounded claims is a general check, not a list of suspicious words: every *checkable* term of the answer — code
(fenced lines, inline backticks), commands (`$ …`), CLI flags, identifiers (snake_case, camelCase, dotted names,
CONSTANTS, calls with `()`), error codes, URLs, numbers with two or more digits / decimals / versions / units,
and "quoted strings" — must occur in the text of the run's sources (case-insensitive, whitespace-normalised;
numbers as whole tokens, so "80" is not found inside "8000"). Ordinary words are never checked. Terms the user's
own question contains are allowed: repeating the question is not inventing.

Every error is one short sentence the model can act on; the agent sends them back in a reprompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, Field

from citewise.agent.constraints import Constraints
from citewise.agent.grounding import (
    MARKER_RE,
    cited_numbers,
    claims_before_markers,
    find_span,
    quoted_strings,
    split_code,
)
from citewise.text import FENCED_BLOCK_RE, claim_sentences, content_terms
from citewise.types import REFUSAL_TEXT, ScoredChunk

MAX_ERRORS = 8
MIN_VERBATIM_CHARS = 20  # shorter "claims" ("Port 7433") are checked term by term instead
# Support: a cited sentence's content words (stems, not stop words; code aside) that its cited passage — or the
# question — holds. Below MIN_SUPPORT it is not what the passage says. Sentences with fewer than MIN_SUPPORT_TERMS
# content words are not judged (too little to tell a paraphrase from an invention). Chosen on the fitted docs sets
# with the scripted models of bench/bench_agent.py: faithful and paraphrased answers (every sentence of theirs came
# from a passage) against invented sentences with nothing checkable in them; see BENCHMARKS.md "Agent harness".
MIN_SUPPORT = 0.5
MIN_SUPPORT_TERMS = 4


class ValidationResult(BaseModel):
    ok: bool
    errors: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# Term extraction
# ---------------------------------------------------------------------------------------------------------------

_INLINE_CODE_RE = re.compile(r"(`+)([^`\n]+?)\1")
_URL_RE = re.compile(r"\b(?:https?|ftp)://[^\s<>()\[\]\"'`]+", re.I)
_PATH_RE = re.compile(r"(?<![\w/~.])~?/[\w.@-]+(?:/[\w.@-]+)+/?")  # /var/lib/orbitron, ~/.config/x
_PROMPT_RE = re.compile(r"^[ \t]*(?:[-*][ \t]+)?\$[ \t]+(\S.*)$", re.M)
_COMMENT_RE = re.compile(r"^\s*(?:#|//|--\s|/\*|\*|;|<!--)")
_FLAG_RE = re.compile(r"(?<![\w\-/.])(--[A-Za-z][\w-]*|-[A-Za-z]{1,2})(?=[\s=,.;:)\]]|$)")
# Most specific first: each match is masked before the next pattern runs, so `client.ack()` is one term.
_IDENT_RES = [
    re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)+(?:\(\))?(?![\w])"),  # dotted.names, file.ext
    re.compile(r"\b[A-Z]{2,}-\d+\b"),  # error codes: ORB-404
    re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?:\(\))?(?![\w])"),  # snake_case, SCREAMING_CASE
    re.compile(r"\b[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+(?:\(\))?(?![\w])"),  # camelCase
    re.compile(r"\b[A-Za-z_]\w*\(\)"),  # call()
]
_NUMBER_RE = re.compile(
    r"(?<![\w.])(v?)(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)*)(\s?(?:ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hrs?|"
    r"hours?|d|days?|kb|mb|gb|tb|kib|mib|gib|%|x|px|k))?(?![\w])",
    re.I,
)
_ABBREVIATION_RE = re.compile(r"^(?:[a-z]\.)+[a-z]?$|^(?:etc|vs|approx)\.", re.I)
_NUMBER_WORDS = {
    2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
    11: "eleven", 12: "twelve", 15: "fifteen", 20: "twenty", 30: "thirty", 60: "sixty", 100: "hundred",
}  # fmt: skip


class Term(BaseModel):
    kind: str  # code | command | flag | identifier | path | url | number | quote
    text: str


def _code_lines(block: str) -> Iterable[str]:
    for line in block.split("\n"):
        line = re.sub(r"^\s*(?:\$|>>>|\.\.\.|>|#(?=\s))\s+", "", line).strip()
        if len(re.sub(r"\W", "", line)) < 3 or _COMMENT_RE.match(line):
            continue
        yield line


def extract_terms(text: str) -> list[Term]:
    """The checkable terms of an answer, in order, de-duplicated. Citation markers are not terms."""
    terms: list[Term] = []
    for match in FENCED_BLOCK_RE.finditer(text):
        terms.extend(Term(kind="code", text=line) for line in _code_lines(match.group("body")))
    prose_parts: list[str] = []
    for is_code, seg in split_code(text):
        if is_code:
            inline = _INLINE_CODE_RE.fullmatch(seg)
            if inline and len(inline.group(2).strip()) >= 2:
                terms.append(Term(kind="code", text=inline.group(2).strip()))
            prose_parts.append(" ")
        else:
            prose_parts.append(seg)
    prose = MARKER_RE.sub(" ", "".join(prose_parts))

    for match in _PROMPT_RE.finditer(prose):
        terms.append(Term(kind="command", text=match.group(1).strip()))
    prose = _PROMPT_RE.sub(" ", prose)
    for quote in quoted_strings(prose):
        terms.append(Term(kind="quote", text=quote))
    for match in _URL_RE.finditer(prose):
        terms.append(Term(kind="url", text=match.group(0).rstrip(".,;:!?")))
    prose = _URL_RE.sub(" ", prose)
    for match in _PATH_RE.finditer(prose):
        terms.append(Term(kind="path", text=match.group(0).rstrip(".,;:!?")))
    prose = _PATH_RE.sub(" ", prose)
    for match in _FLAG_RE.finditer(prose):
        terms.append(Term(kind="flag", text=match.group(1)))
    for pattern in _IDENT_RES:
        for match in pattern.finditer(prose):
            ident = match.group(0)
            if not _ABBREVIATION_RE.match(ident):
                terms.append(Term(kind="identifier", text=ident))
        prose = pattern.sub(lambda m: " " * len(m.group(0)), prose)
    for match in _NUMBER_RE.finditer(prose):
        prefix, number, unit = match.groups()
        if prefix or unit or "." in number or len(number.replace(",", "")) >= 2:
            terms.append(Term(kind="number", text=number))
    seen: set[tuple[str, str]] = set()
    unique = []
    for term in terms:
        key = (term.kind, term.text.lower())
        if key not in seen:
            seen.add(key)
            unique.append(term)
    return unique


# ---------------------------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class _Haystack:
    def __init__(self, texts: Iterable[str]) -> None:
        self.text = _norm("\n".join(texts))
        self.squashed = re.sub(r"\s+", "", self.text)
        self.numbers = {n.replace(",", "") for n in re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)*", self.text)}
        self.numbers |= {n for n in re.findall(r"\d+(?:\.\d+)*", self.text)}

    def contains(self, term: Term) -> bool:
        needle = _norm(term.text)
        if term.kind == "number":
            number = needle.replace(",", "")
            if number in self.numbers:
                return True
            word = _NUMBER_WORDS.get(int(number)) if number.isdigit() and len(number) < 6 else None
            return bool(word and re.search(rf"\b{word}\b", self.text))
        if term.kind in ("identifier", "flag"):
            needle = needle.removesuffix("()")
            return re.search(rf"(?<![\w-]){re.escape(needle)}(?![\w])", self.text) is not None
        if needle in self.text:
            return True
        if term.kind in ("code", "command"):
            if re.sub(r"\s+", "", needle) in self.squashed:
                return True
            # <placeholder> and ... in an answer's command stand for whatever the docs put there
            parts = re.split(r"<[^<>\s]+>|\.\.\.|…", needle)
            if len(parts) > 1:
                pattern = r"\S+".join(re.escape(p) for p in parts)
                return re.search(pattern, self.text) is not None
        if term.kind == "quote":
            stripped = needle.strip(".,;:!? ")
            return stripped in self.text
        return False


def _describe(term: Term) -> str:
    if term.kind == "number":
        return f"The number {term.text} does not appear in any source; use the value the source gives or remove it."
    if term.kind == "url":
        return f"The URL {term.text} does not appear in any source; remove it."
    if term.kind == "path":
        return f"The path {term.text} does not appear in any source; remove it or search for it."
    if term.kind == "quote":
        return f'"{term.text}" does not appear in any source; quote the source exactly or drop the quotation marks.'
    if term.kind == "flag":
        return f"The flag `{term.text}` does not appear in any source; remove it or search for it."
    shown = term.text if len(term.text) <= 80 else term.text[:77] + "..."
    return f"`{shown}` does not appear in any source; remove it or search for it."


# ---------------------------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------------------------

_INSUFFICIENT_RE = re.compile(
    r"\b(?:documentation|docs|sources?|passages?|context|retrieved text)\s+(?:do|does|did)\s*(?:n't|not)\s+"
    r"(?:contain|cover|say|mention|describe|document|specify|include|explain|state|answer)"
    r"|not (?:enough|sufficient) information|\binsufficient\b|\bnot documented\b|\bno information (?:about|on)\b",
    re.I,
)


def _ranges(keys: Iterable[int]) -> str:
    keys = sorted(keys)
    if not keys:
        return "none: there are no sources yet, search first"
    if keys == list(range(keys[0], keys[-1] + 1)) and len(keys) > 1:
        return f"[{keys[0]}]-[{keys[-1]}]"
    return ", ".join(f"[{k}]" for k in keys)


def _heading_present(text: str, section: str) -> bool:
    title = re.escape(section.strip())
    return bool(
        re.search(rf"^\s*#{{1,6}}\s*{title}\s*:?\s*#*\s*$", text, re.I | re.M)
        or re.search(rf"^\s*(?:\*\*|__){title}:?(?:\*\*|__)\s*:?", text, re.I | re.M)
        or re.search(rf"^\s*{title}\s*:", text, re.I | re.M)
    )


def _verbatim_parts(text: str, sources: Mapping[int, ScoredChunk]) -> list[str]:
    """The claims (or sentences of claims) directly before a marker that the cited source contains verbatim."""
    parts: list[str] = []
    for n, claim in claims_before_markers(text):
        chunk = sources.get(n)
        if chunk is None or len(claim) < MIN_VERBATIM_CHARS:
            continue
        if find_span(chunk.text, claim):
            parts.append(claim)
            continue
        for sentence in claim_sentences(claim):
            if len(sentence) >= MIN_VERBATIM_CHARS and find_span(chunk.text, sentence):
                parts.append(sentence)
    return parts


def _without(text: str, parts: list[str]) -> str:
    """`text` with each part blanked out once (same length, so nothing else moves)."""
    for part in parts:
        start = text.find(part)
        if start >= 0:
            text = text[:start] + re.sub(r"[^\n]", " ", part) + text[start + len(part) :]
    return text


def _prose_terms(sentence: str) -> set[str]:
    prose = "".join(" " if is_code else seg for is_code, seg in split_code(sentence))
    return content_terms(MARKER_RE.sub(" ", prose))


def _short(sentence: str) -> str:
    sentence = " ".join(sentence.split())
    return sentence if len(sentence) <= 80 else sentence[:77] + "..."


def _support_errors(
    text: str, sources: Mapping[int, ScoredChunk], question: str | None, reported: Iterable[str] = ()
) -> list[str]:
    """Each cited sentence must be what its cited passage says: written in it, or most of its content words in it.
    A sentence written in (or supported by) another passage of the run is cited wrong; one no passage supports is
    an invention the term check can't see (it has no number, name or code). Prose after the last citation is held
    to any passage. A sentence holding a term already `reported` (not in any source) is not judged twice."""
    errors: list[str] = []
    reported = [r.lower() for r in reported]
    texts = {n: " ".join((c.text, c.title, c.chapter)) for n, c in sources.items()}
    terms_of = {n: content_terms(t) for n, t in texts.items()}
    asked = content_terms(question) if question else set()

    def share(terms: set[str], n: int) -> float:
        return len(terms & (terms_of[n] | asked)) / len(terms)

    claims = [(n, claim) for n, claim in claims_before_markers(text) if n in sources]
    blanked = "".join(re.sub(r"[^\n]", " ", seg) if is_code else seg for is_code, seg in split_code(text))
    last = list(MARKER_RE.finditer(blanked))  # the last citation outside code (same offsets as `text`)
    tail = text[last[-1].end() :] if last else ""
    if tail.strip() and not _INSUFFICIENT_RE.search(tail):
        claims.append((0, tail.strip()))
    # A code block belongs to the citation of the lead-in before it ("Run this [2]:" then the block).
    squashed = {n: re.sub(r"\s+", "", c.text) for n, c in sources.items()}
    for block in FENCED_BLOCK_RE.finditer(text):
        before = list(MARKER_RE.finditer(blanked, 0, block.start()))
        n = int(before[-1].group(1)) if before else 0
        code = re.sub(r"\s+", "", block.group("body"))
        if n not in sources or len(code) < MIN_VERBATIM_CHARS or code in squashed[n]:
            continue
        holding = [m for m in sources if code in squashed[m]]
        if holding:
            errors.append(f"The code block after [{n}] comes from [{holding[0]}]; cite [{holding[0]}] before it.")
    for n, claim in claims:
        claim = FENCED_BLOCK_RE.sub(" ", claim)  # code is the code block check's and the term check's
        for sentence in claim_sentences(claim):
            sentence = sentence.strip()
            if len(sentence) < MIN_VERBATIM_CHARS or _INSUFFICIENT_RE.search(sentence):
                continue
            if any(r in sentence.lower() for r in reported):
                continue
            if n and find_span(sources[n].text, sentence):
                continue
            written = [m for m in sources if m != n and find_span(sources[m].text, sentence)]
            if written:
                if n:
                    errors.append(
                        f'"{_short(sentence)}" is cited [{n}] but comes from [{written[0]}]; cite [{written[0]}].'
                    )
                continue
            terms = _prose_terms(sentence)
            if len(terms) < MIN_SUPPORT_TERMS or (n and share(terms, n) >= MIN_SUPPORT):
                continue
            best = max(sources, key=lambda m: (share(terms, m), -m))
            if share(terms, best) >= MIN_SUPPORT and best != n:
                where = f"is cited [{n}] but" if n else "cites no source;"
                errors.append(f'"{_short(sentence)}" {where} [{best}] is the passage that says it; cite [{best}].')
            elif n:
                errors.append(
                    f'"{_short(sentence)}" is not what [{n}] says; state only what the passages say, in their terms.'
                )
            else:
                errors.append(f'"{_short(sentence)}" cites no source and no passage says it; remove it.')
    return errors


def validate_answer(
    text: str,
    *,
    sources: Mapping[int, ScoredChunk],
    opened: set[str],
    searches: int,
    constraints: Constraints,
    question: str | None = None,
    require_citation: bool = True,
    check_support: bool = True,
) -> ValidationResult:
    """Check `text` against the run's sources and the question's constraints.

    `sources` maps citation numbers to the chunks retrieved or opened in the run, `opened` holds the chunk_ids
    opened with open_citation. Exact quotes must appear in an opened chunk (in any source when nothing was
    opened). An answer that says the docs are insufficient needs no citation, but must use the question's
    insufficiency phrase when it gave one. `question` lets the answer repeat the user's own terms. `check_support`:
    whether the answer's terms must occur in the passages and each cited sentence and code block must be what its
    cited passage says — off for quote mode, whose units are the passages' own words by construction (its spans, not
    its marks, say where each comes from; its own "… and 19 more in the source" is no claim).
    """
    errors: list[str] = []
    stripped = text.strip()
    if not stripped:
        return ValidationResult(
            ok=False, errors=["The answer is empty; answer from the sources or say what is missing."]
        )

    # 1. citations
    numbers = cited_numbers(text)
    for n in dict.fromkeys(numbers):
        if n not in sources:
            errors.append(f"Citation [{n}] does not refer to a retrieved source; cite only {_ranges(sources)}.")
    valid = [n for n in numbers if n in sources]
    insufficient = REFUSAL_TEXT.lower() in stripped.lower() or bool(_INSUFFICIENT_RE.search(stripped))
    phrase = constraints.insufficiency_phrase
    if phrase and phrase.lower() in stripped.lower():
        insufficient = True
    if require_citation and not valid and not insufficient:
        errors.append("The answer cites no source; end each claim with the [n] of the source it comes from.")

    # 2. constraints
    if searches < constraints.min_searches:
        topics = f" (one each for: {', '.join(constraints.search_topics)})" if constraints.search_topics else ""
        errors.append(
            f"The question asks for at least {constraints.min_searches} searches{topics}; only {searches} done. "
            "Run search_docs before answering."
        )
    if len(opened) < constraints.min_opened:
        errors.append(
            f"The question asks to open at least {constraints.min_opened} sources; {len(opened)} opened. "
            "Use open_citation on the most relevant results."
        )
    verbatim = _verbatim_parts(text, sources)
    unquoted = _without(text, verbatim)  # what is left once the verbatim passages are set aside
    if constraints.exact_quote:
        pool = [c for c in sources.values() if c.chunk_id in opened] or list(sources.values())
        quotes = quoted_strings(unquoted) + [
            line.lstrip("> ").strip() for line in unquoted.split("\n") if line.lstrip().startswith(">")
        ]
        quotes = [MARKER_RE.sub("", q).strip() for q in quotes if MARKER_RE.sub("", q).strip()]
        if not quotes and not verbatim:
            errors.append('The question asks for an exact quote; copy the words from an opened source in "quotes".')
        for quote in quotes:
            if not any(chunk.text.find(quote) >= 0 or find_span(chunk.text, quote) for chunk in pool):
                where = "an opened source" if any(c.chunk_id in opened for c in sources.values()) else "any source"
                errors.append(f'The quote "{quote[:80]}" is not verbatim in {where}; copy it exactly.')
    if phrase and insufficient and phrase.lower() not in stripped.lower():
        errors.append(f'The question asks you to say "{phrase}" when the docs are insufficient; include it exactly.')
    for section in constraints.required_sections:
        if not _heading_present(text, section):
            errors.append(f'Add a section headed "{section}"; the question asks for it.')

    # 3. grounded claims. What the answer quotes verbatim from the source it cites is grounded by definition, and
    # is not picked apart: a source's own odd quoting (``like this'') would otherwise look like code or a quote.
    haystack = _Haystack(part for c in sources.values() for part in (c.text, c.title, c.chapter, c.filename))
    allowed = _Haystack([question]) if question else None
    unknown: list[str] = []
    for term in extract_terms(unquoted) if check_support else ():  # quote mode's units are the passages' words
        if haystack.contains(term) or (allowed is not None and allowed.contains(term)):
            continue
        if phrase and term.kind == "quote" and term.text.strip().lower() == phrase.lower():
            continue
        errors.append(_describe(term))
        unknown.append(term.text)

    if check_support and (not insufficient or valid):
        errors.extend(_support_errors(text, sources, question, unknown))

    errors = list(dict.fromkeys(errors))
    if len(errors) > MAX_ERRORS:
        errors = [*errors[:MAX_ERRORS], f"...and {len(errors) - MAX_ERRORS} more problems of the same kinds."]
    return ValidationResult(ok=not errors, errors=errors)
