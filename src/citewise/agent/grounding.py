"""Turning an answer's `[n]` markers into `Citation`s that can't lie, and the other facts an `Answer` carries.

- `strip_rag_metadata`: removes retrieval plumbing a model sometimes echoes ("Source: chunk_…", "Chunk ID: …",
  "Similarity score: 0.83", "doc_id=…", "(score: 0.8)").
- `ground`: keeps only markers that point at a source of the run, renumbers them 1..k in order of first appearance,
  and fills each `Citation` from its chunk, with the character spans of the text the answer quotes from it.
- `find_conflicts`: retrieved chunks of different documents that give one setting different values.
- `determinism`: sha256 fingerprints of a run's input and output.

Markers and metadata inside code (fenced blocks, inline backticks) are never touched: `items[0]` is code, not a
citation.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from citewise.text import FENCED_BLOCK, claim_sentences
from citewise.types import Citation, ConflictInfo, ConflictValue, Determinism, ScoredChunk

SNIPPET_CHARS = 240
_CODE_BRACKET = "\x01"
_GONE = "\x00"  # stands where a marker pointing nowhere was, until the gap it leaves is closed
NEWEST_RULE = "newest dated document"

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
        parts = [claim] if span else claim_sentences(claim)
        for part in parts:
            part_span = span if span else (find_span(chunk_text, part) if len(part) >= MIN_QUOTED_SPAN else None)
            if part_span:
                spans.append(part_span)
                first_sentence = first_sentence or chunk_text[part_span[0] : part_span[1]]
    for quote in quoted_strings(answer):
        span = find_span(chunk_text, quote)
        if span:
            spans.append(span)
    return sorted(set(spans)), first_sentence


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= SNIPPET_CHARS:
        return text
    cut = text.rfind(" ", 0, SNIPPET_CHARS)
    return text[: cut if cut > SNIPPET_CHARS // 2 else SNIPPET_CHARS].rstrip(" ,;:") + "…"


# ---------------------------------------------------------------------------------------------------------------
# ground
# ---------------------------------------------------------------------------------------------------------------


def ground(text: str, sources: Mapping[int, ScoredChunk]) -> tuple[str, list[Citation]]:
    """Final answer text and its citations.

    Markers pointing at no source are removed (a hallucinated `[7]` never reaches the user); the rest are
    renumbered 1..k by first appearance, and repeats side by side (`[2][2]`) collapse to one.
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
        own = [claim for n, claim in claims if n == new]
        spans, sentence = _quote_spans(chunk.text, final, own)
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
                quote_spans=spans,
            )
        )
    return final, citations


# ---------------------------------------------------------------------------------------------------------------
# Conflicts
# ---------------------------------------------------------------------------------------------------------------

_KEY = r"[A-Za-z_][A-Za-z0-9_]*(?:[.\-][A-Za-z0-9_]+)*"
_SCALAR = (
    r"-?\d+(?:\.\d+)*(?:\s?(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|"
    r"kb|mb|gb|tb|kib|mib|gib|%|percent))?(?![\w.])"
    r"|true|false|yes|no|on|off|enabled|disabled|none|null"
)
# `worker_threads = 12`, `max_retries: 5` — the key must look like a setting (has _ or ., or is backticked).
_ASSIGN_RE = re.compile(
    rf"(?:`(?P<bkey>{_KEY})`|(?<![\w.\-])(?P<key>{_KEY}))\s*(?:=|:)\s*`?(?P<value>\"[^\"\n]{{1,40}}\"|'[^'\n]{{1,40}}'|"
    rf"(?:{_SCALAR})|[\w./-]+)`?",
    re.I,
)
# Start of a line in config style: `timeout: 30s` — plain keys allowed, but only scalar values.
_LINE_RE = re.compile(
    rf"^[ \t]*(?:[-*][ \t]+)?(?P<key>[a-z][a-z0-9_.\-]*)[ \t]*[:=][ \t]*(?P<value>{_SCALAR})[ \t]*$", re.I | re.M
)
# "The `timeout` setting defaults to 30 seconds", "max_retries defaults to 5", "the default port is 7433".
_DEFAULTS_RE = re.compile(
    rf"(?:`(?P<bkey>{_KEY})`|(?P<key>{_KEY}))(?:\s+(?:setting|option|parameter|field|flag|variable|value))?"
    rf"\s+(?:defaults\s+to|is\s+set\s+to\s+(?:\S+\s+)?by\s+default|has\s+a\s+default\s+(?:value\s+)?of)\s+"
    rf"`?(?P<value>{_SCALAR}|\"[^\"\n]{{1,40}}\")`?",
    re.I,
)
# "The default port is 7433", "the default visibility timeout is 30 seconds": numbers and booleans only.
_DEFAULT_IS_RE = re.compile(
    rf"\bthe\s+default\s+(?P<key>[a-z][a-z_-]*(?:\s+[a-z][a-z_-]*){{0,2}})\s+(?:is|was|of)\s+"
    rf"(?:now\s+|still\s+)?\**`?(?P<value>{_SCALAR})`?\**",
    re.I,
)
_UNITS = {
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "min", "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d", "percent": "%",
}  # fmt: skip
_BOOLS = {"true": "true", "yes": "true", "on": "true", "enabled": "true",
          "false": "false", "no": "false", "off": "false", "disabled": "false"}  # fmt: skip


def _normalise_value(value: str) -> str:
    value = value.strip().strip("`\"'").rstrip(".,;").strip().lower()
    if value in _BOOLS:
        return _BOOLS[value]
    match = re.fullmatch(r"(-?\d+(?:\.\d+)*)\s?([a-z%]+)?", value)
    if match:
        number, unit = match.groups()
        return number + (_UNITS.get(unit, unit) if unit else "")
    return value


def _is_setting_key(key: str) -> bool:
    return "_" in key or "." in key.strip(".") or (key.isupper() and len(key) >= 3)


def _table_pairs(text: str) -> Iterable[tuple[str, str]]:
    """(key, default) from markdown tables whose header has a Default/Value column."""
    lines = text.split("\n")
    for i, line in enumerate(lines[:-1]):
        if not line.lstrip().startswith("|") or not re.match(r"^\s*\|?\s*:?-{2,}", lines[i + 1]):
            continue
        header = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        col = next((j for j, h in enumerate(header) if h in ("default", "default value", "value")), None)
        if col is None or col == 0:
            continue
        for row in lines[i + 2 :]:
            if not row.lstrip().startswith("|"):
                break
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            if len(cells) > col:
                key = cells[0].strip("`* ")
                if re.fullmatch(_KEY, key) and re.fullmatch(rf"`?(?:{_SCALAR}|[\w./-]+)`?", cells[col], re.I):
                    yield key, cells[col]


def _key_values(text: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for match in _ASSIGN_RE.finditer(text):
        key = match.group("bkey") or match.group("key")
        if match.group("bkey") or _is_setting_key(key):
            pairs.append((key, match.group("value")))
    for match in _LINE_RE.finditer(text):
        pairs.append((match.group("key"), match.group("value")))
    for match in _DEFAULTS_RE.finditer(text):
        key = match.group("bkey") or match.group("key")
        if match.group("bkey") or _is_setting_key(key):
            pairs.append((key, match.group("value")))
    for match in _DEFAULT_IS_RE.finditer(text):
        pairs.append((match.group("key").lower(), match.group("value")))
    pairs.extend(_table_pairs(text))
    return [(k, v) for k, v in pairs if not re.fullmatch(r"https?|ftp|mailto", k, re.I)]


def find_conflicts(chunks: Sequence[ScoredChunk], *, newest_rule: bool = False) -> list[ConflictInfo]:
    """Settings that different documents among `chunks` give different values.

    Conservative on purpose: only setting-shaped keys (`snake_case`, dotted, backticked, config lines, tables with
    a Default column, "the default <thing> is <number>") with short values count, values are compared after
    normalising units and booleans ("30 seconds" = "30s", "on" = "true"), and differences inside one document are
    not conflicts. With `newest_rule` the value of the newest dated document wins (no winner when the newest date
    itself disagrees).
    """
    by_key: dict[str, dict[tuple[str, str], ConflictValue]] = {}
    subjects: dict[str, str] = {}
    for chunk in chunks:
        for key, raw in _key_values(chunk.text):
            norm_key = key.lower().replace("-", "_")
            subjects.setdefault(norm_key, key)
            value = _normalise_value(raw)
            entry = (chunk.doc_id, value)
            if value and entry not in by_key.setdefault(norm_key, {}):
                by_key[norm_key][entry] = ConflictValue(
                    value=raw.strip().strip("`").rstrip(".,;"),
                    chunk_id=chunk.chunk_id,
                    doc_id=chunk.doc_id,
                    filename=chunk.filename,
                    date=chunk.modified,
                )
    conflicts: list[ConflictInfo] = []
    for norm_key, entries in by_key.items():
        docs_by_value: dict[str, set[str]] = {}
        for doc_id, value in entries:
            docs_by_value.setdefault(value, set()).add(doc_id)
        if len(docs_by_value) < 2 or len({doc for doc, _ in entries}) < 2:
            continue
        values = list(entries.values())
        info = ConflictInfo(subject=subjects[norm_key], values=values)
        if newest_rule:
            dated = [(v.date, norm) for (_, norm), v in entries.items() if v.date]
            if dated:
                newest = max(date for date, _ in dated)
                winners = {norm for date, norm in dated if date == newest}
                if len(winners) == 1:
                    winner = winners.pop()
                    info.resolved_value = next(v.value for (_, norm), v in entries.items() if norm == winner)
                    info.rule = NEWEST_RULE
        conflicts.append(info)
    return conflicts


# ---------------------------------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------------------------------


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def determinism(
    input_payload: Mapping[str, Any], answer_text: str, citations: Sequence[Citation], exit_reason: Any
) -> Determinism:
    """sha256 of the canonical JSON of the run's input (question, options, index version, model settings) and of its
    output (answer text, citations, exit reason): two runs that should be identical have equal hashes."""
    output = {
        "answer": answer_text,
        "citations": [c.model_dump(mode="json") for c in citations],
        "exit_reason": str(exit_reason),
    }
    return Determinism(
        input_hash=hashlib.sha256(_canonical(dict(input_payload))).hexdigest(),
        output_hash=hashlib.sha256(_canonical(output)).hexdigest(),
    )
