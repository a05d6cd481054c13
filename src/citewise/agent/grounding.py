"""Turning an answer's `[n]` markers into `Citation`s that can't lie.

- `strip_rag_metadata`: removes retrieval plumbing a model sometimes echoes ("Source: chunk_…", "Chunk ID: …",
  "Similarity score: 0.83", "doc_id=…", "(score: 0.8)").
- `ground`: keeps only markers that point at a source of the run, renumbers them 1..k in order of first appearance,
  and fills each `Citation` from its chunk, with the character spans of the text the answer quotes from it.

Markers and metadata inside code (fenced blocks, inline backticks) are never touched: `items[0]` is code, not a
citation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from citewise.text import FENCED_BLOCK, claim_sentences
from citewise.types import Citation, ScoredChunk

SNIPPET_CHARS = 240
_CODE_BRACKET = "\x01"
_GONE = "\x00"  # stands where a marker pointing nowhere was, until the gap it leaves is closed

# ---------------------------------------------------------------------------------------------------------------
# Prose vs code
# ---------------------------------------------------------------------------------------------------------------

# Inline code can't hold " [n] ": a source's ``TeX-style quotes'' must not swallow the citations between them.
_CODE_RE = re.compile(
    rf"(?:{FENCED_BLOCK})|(?P<ticks>`+)(?:(?!\s\[\d{{1,4}}\](?:\s|$))[^`\n])+?(?P=ticks)", re.S | re.M
)


def split_code(text: str) -> list[tuple[bool, str]]:
    """`text` as consecutive (is_code, segment) pieces; joined back they give `text` exactly."""
    pieces: list[tuple[bool, str]] = []
    pos = 0
    for match in _CODE_RE.finditer(text):
        if match.start() > pos:
            pieces.append((False, text[pos : match.start()]))
        pieces.append((True, match.group(0)))
        pos = match.end()
    if pos < len(text):
        pieces.append((False, text[pos:]))
    return pieces


def _map_prose(text: str, fn) -> str:
    return "".join(seg if is_code else fn(seg) for is_code, seg in split_code(text))


# ---------------------------------------------------------------------------------------------------------------
# Markers
# ---------------------------------------------------------------------------------------------------------------

MARKER_RE = re.compile(r"\[(\d{1,4})\]")
# Near-misses models write for a citation: [source 3], [Source: 3], [^3], [3, 4], [2-4], [ 3 ], [3†source].
_LOOSE_MARKER_RE = re.compile(
    r"\[\s*(?:\^|(?:sources?|src|ref|doc|chunk|citation)\s*[:#]?\s*)?"
    r"(\d{1,4}(?:\s*(?:[,;]|[-–])\s*\d{1,4})*)\s*(?:†[^\]\n]{0,40})?\]",
    re.I,
)
MAX_RANGE = 10


def _normalise_markers(prose: str) -> str:
    def fix(match: re.Match) -> str:
        if match.start() > 0 and prose[match.start() - 1] == "]" and match.group(0).startswith("[^"):
            return match.group(0)  # "[x][^1]": a link label form, leave it
        numbers: list[int] = []
        for piece in re.split(r"\s*[,;]\s*", match.group(1)):
            bounds = [int(b) for b in re.split(r"\s*[-–]\s*", piece)]
            low, high = bounds[0], bounds[-1]
            # "[2-4]" cites 2, 3 and 4; a reversed or huge range is no citation anyone meant: keep its ends only
            numbers.extend(range(low, high + 1) if 0 <= high - low <= MAX_RANGE else [low, high][: len(bounds)])
        return "".join(f"[{n}]" for n in numbers)

    return _LOOSE_MARKER_RE.sub(fix, prose)


def cited_numbers(text: str) -> list[int]:
    """The `[n]` markers of `text` outside code, normalised, in order (repeats kept)."""
    numbers: list[int] = []
    for is_code, seg in split_code(text):
        if not is_code:
            numbers.extend(int(m) for m in MARKER_RE.findall(_normalise_markers(seg)))
    return numbers


# ---------------------------------------------------------------------------------------------------------------
# RAG metadata
# ---------------------------------------------------------------------------------------------------------------

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_NUM = r"-?\d+(?:\.\d+)?"
_ID_VALUE = rf"(?:{_UUID}|chunk[_-][\w-]+|[\w-]*\d[\w-]*)"
_METADATA_PATTERNS = [
    # "Source: chunk_12", "Source: 6f1c…-…" (a bare "Source: the install guide" is prose and stays)
    rf"\bsources?\s*[:=]\s*\[?(?:chunk[_-][\w-]+|{_UUID})\]?",
    rf"\b(?:chunk|doc|document)[ _-]?id\s*[:=]?\s*`?{_ID_VALUE}`?",
    rf"\b(?:similarity|relevance|cosine|retrieval|rerank|bm25|fused)(?:\s+score)?\s*[:=]\s*{_NUM}",
    rf"\(\s*(?:score|sim)\s*[:=]\s*{_NUM}\s*\)",
    rf"\bscore\s*=\s*{_NUM}",
    r"\bchunk[_-](?:index|idx)\s*[:=]\s*\d+",
]
_METADATA_RE = re.compile("|".join(f"(?:{p})" for p in _METADATA_PATTERNS), re.I)
_LEFTOVER_PUNCT_RE = re.compile(r"^[\s,;|:()\[\]\-–—•*]*$")


def strip_rag_metadata(text: str) -> str:
    """`text` without retrieval plumbing; a line that held nothing else disappears, prose around a fragment stays."""

    def clean(prose: str) -> str:
        out_lines = []
        for line in prose.split("\n"):
            stripped, n = _METADATA_RE.subn("", line)
            if not n:
                out_lines.append(line)
                continue
            if _LEFTOVER_PUNCT_RE.match(stripped):
                continue  # the line was only metadata
            stripped = re.sub(r"\(\s*[,;|]?\s*\)|\[\s*[,;|]?\s*\]", "", stripped)  # "(score: 0.8)" left "()"
            stripped = re.sub(r"\s*[,;|]\s*(?=[,;|)\].!?]|$)", "", stripped)
            stripped = re.sub(r"[ \t]{2,}", " ", stripped)
            stripped = re.sub(r"\s+([.,;:!?])", r"\1", stripped)
            out_lines.append(stripped.rstrip())
        return "\n".join(out_lines)

    cleaned = _map_prose(text, clean)
    return re.sub(r"\n{3,}", "\n\n", cleaned).strip()


# ---------------------------------------------------------------------------------------------------------------
# Spans
# ---------------------------------------------------------------------------------------------------------------


def find_span(haystack: str, needle: str) -> tuple[int, int] | None:
    """[start, end) of `needle` in `haystack`: exact first, then ignoring case and runs of whitespace."""
    needle = needle.strip()
    if not needle:
        return None
    start = haystack.find(needle)
    if start >= 0:
        return start, start + len(needle)
    pattern = r"\s+".join(re.escape(token) for token in needle.split())
    match = re.search(pattern, haystack, re.I)
    return (match.start(), match.end()) if match else None


_QUOTED_RE = re.compile(r"\"([^\"\n]{3,}?)\"|“([^”\n]{3,}?)”|(?<![\w])'([^'\n]{8,}?)'(?![\w])")
_LIST_PREFIX_RE = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|>)\s+")
MIN_QUOTED_SPAN = 12


def quoted_strings(text: str) -> list[str]:
    """Text inside double quotes (straight or curly) or long single-quoted runs, outside code."""
    found: list[str] = []
    for is_code, seg in split_code(text):
        if not is_code:
            for match in _QUOTED_RE.finditer(seg):
                found.append(next(g for g in match.groups() if g is not None).strip())
    return found


def claims_before_markers(text: str) -> list[tuple[int, str]]:
    """(n, claim) for every marker: the prose it closes, back to the previous marker, blank line, list-item start or
    heading. A claim may span lines (a wrapped sentence quoted verbatim keeps its line breaks)."""
    claims: list[tuple[int, str]] = []
    pos = 0
    # Code keeps its text (a quoted sentence may contain `code`) but its brackets can't end a claim.
    text = "".join(seg.replace("[", _CODE_BRACKET) if is_code else seg for is_code, seg in split_code(text))
    for match in MARKER_RE.finditer(text):
        kept: list[str] = []
        for line in reversed(text[pos : match.start()].split("\n")):
            if not line.strip():
                if kept:
                    break
                continue
            if line.lstrip().startswith("#"):
                break
            item = _LIST_PREFIX_RE.match(line)
            kept.append(line[item.end() :] if item else line)
            if item:
                break
        claim = "\n".join(reversed(kept)).strip().replace(_CODE_BRACKET, "[")
        claims.append((int(match.group(1)), claim))
        pos = match.end()
    return claims


def _quote_spans(chunk_text: str, answer: str, own_claims: list[str]) -> tuple[list[tuple[int, int]], str | None]:
    """Spans in the chunk of quoted strings of the answer and of verbatim sentences citing it; plus the first
    verbatim sentence (the snippet in quote mode)."""
    spans: list[tuple[int, int]] = []
    first_sentence = None
    for claim in own_claims:
        if len(claim) < MIN_QUOTED_SPAN:
            continue
        span = find_span(chunk_text, claim)
        rows = [] if span else _table_rows(claim)  # a row is looked for however short its cells are
        parts = [claim] if span else (rows or claim_sentences(_SECTION_LABEL_RE.sub("", claim)))
        for part in parts:
            long_enough = len(part) >= MIN_QUOTED_SPAN or bool(rows)
            part_span = span if span else (find_span(chunk_text, part) if long_enough else None)
            if part_span:
                spans.append(part_span)
                first_sentence = first_sentence or chunk_text[part_span[0] : part_span[1]]
    for quote in quoted_strings(answer):
        span = find_span(chunk_text, quote)
        if span:
            spans.append(span)
    return sorted(set(spans)), first_sentence


# Quote mode may put the name of the section a sentence describes before it ("**Mangum**: Serverless ASGI adapter …");
# the name is the section's heading, not the passage's text, so the sentence is looked for without it.
_SECTION_LABEL_RE = re.compile(r"^\*\*[^\n]{1,80}?\*\*:\s+")
_TABLE_LINE_RE = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_SEPARATOR_RE = re.compile(r"^[\s|:-]+$")


def _table_rows(claim: str) -> list[str]:
    """A quoted table's rows, each as it is written and as the words of its cells: a row quoted under a header that
    stands elsewhere in the passage, or a flattened table (one cell per line in the source) quoted as a markdown
    table, is found row by row."""
    lines = claim.splitlines()
    if not lines or not all(_TABLE_LINE_RE.match(line) for line in lines):
        return []
    rows = []
    for line in reversed(lines):  # the row first, its header after: the row is what the snippet should show
        if _TABLE_SEPARATOR_RE.match(line):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows += [line.strip(), " ".join(c for c in cells if c)]
    return rows


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= SNIPPET_CHARS:
        return text
    cut = text.rfind(" ", 0, SNIPPET_CHARS)
    return text[: cut if cut > SNIPPET_CHARS // 2 else SNIPPET_CHARS].rstrip(" ,;:") + "…"


# ---------------------------------------------------------------------------------------------------------------
# ground
# ---------------------------------------------------------------------------------------------------------------


def ground(
    text: str, sources: Mapping[int, ScoredChunk], *, spans: Mapping[int, list[tuple[int, int]]] | None = None
) -> tuple[str, list[Citation]]:
    """Final answer text and its citations.

    Markers pointing at no source are removed (a hallucinated `[7]` never reaches the user); the rest are
    renumbered 1..k by first appearance, and repeats side by side (`[2][2]`) collapse to one. `spans`: what the
    answer quotes from each source (by its number before renumbering), when the answerer says so (quote mode): used
    as they are; otherwise they are found in the source's text.
    """
    text = strip_rag_metadata(text)
    renumber: dict[int, int] = {}

    def rewrite(prose: str) -> str:
        prose = _normalise_markers(prose)

        def sub(match: re.Match) -> str:
            old = int(match.group(1))
            if old not in sources:
                return _GONE
            renumber.setdefault(old, len(renumber) + 1)
            return f"[{renumber[old]}]"

        prose = MARKER_RE.sub(sub, prose)
        prose = re.sub(r"(\[\d+\])(?:\s*\1)+", r"\1", prose)  # [1][1] → [1]
        # Close the gap a dropped marker leaves, and only that: quoted text keeps its own spacing ("year . Any").
        prose = re.sub(_GONE + r"[ \t]*(?=\[)", "", prose)
        prose = re.sub(r"[ \t]*" + _GONE + r"(?=[ \t]*(?:[.,;:!?)\]]|\n))", "", prose)
        return re.sub(_GONE + r"[ \t]*", "", prose)

    final = _map_prose(text, rewrite).strip()

    claims = claims_before_markers(final)
    citations: list[Citation] = []
    for old, new in renumber.items():
        chunk = sources[old]
        given = sorted(set((spans or {}).get(old) or []))
        if given:
            quoted, sentence = given, chunk.text[given[0][0] : given[0][1]]
        else:
            own = [claim for n, claim in claims if n == new]
            quoted, sentence = _quote_spans(chunk.text, final, own)
        citations.append(
            Citation(
                n=new,
                doc_id=chunk.doc_id,
                chunk_id=chunk.chunk_id,
                chunk_index=chunk.chunk_index,
                filename=chunk.filename,
                source_url=chunk.source_url,
                module=chunk.module,
                chapter=chunk.chapter,
                snippet=_snippet(sentence) if sentence else _snippet(chunk.text),
                score=chunk.score,
                quote_spans=quoted,
            )
        )
    return final, citations
