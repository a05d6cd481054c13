"""Words and sentences of documentation text: the one home of tokens, stems, stop words, identifiers, sentence
spans, code fences and which words are common English, for every module that reads text (quote mode, retrieval's
query preparation and spelling correction, the validator, the question log).

Everything here is cheap and deterministic: regular expressions, the English Snowball stemmer (PyStemmer, in C) and
a fixed English word list (pyspellchecker's, read once), so the same text always yields the same words on every
machine.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable

import Stemmer

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------------------
# Stop words
# ---------------------------------------------------------------------------------------------------------------

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

# ---------------------------------------------------------------------------------------------------------------
# Tokens and stems
# ---------------------------------------------------------------------------------------------------------------

TOKEN_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?(?:[_.][a-z0-9]+)*")
# One Snowball stemmer per thread: a PyStemmer object keeps state between calls and is not thread-safe.
_STEMMERS = threading.local()


def stem(word: str) -> str:
    """The English Snowball stem of a word ("configure", "configured", "configuration" → "configur"; "file",
    "files", "filing" → "file"), lower-case; words of three letters or fewer and words with digits stay as they are."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    if not word.isalpha() or len(word) <= 3:
        return word
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = Stemmer.Stemmer("english")
    return stemmer.stemWord(word)


def words(text: str) -> list[str]:
    """Lower-case word tokens of `text`, identifiers (`chunk_size`, `v1.2`) kept whole."""
    return TOKEN_RE.findall(text.lower())


def content_words(text: str) -> dict[str, str]:
    """{stem: the word as first written} for the content words of `text`; identifiers count whole and by their
    parts."""
    found: dict[str, str] = {}
    for token in words(text):
        parts = re.split(r"[_.]", token) if re.search(r"[_.]", token) else []
        if len(parts) > 1 and not token.replace(".", "").isdigit():
            found.setdefault(token, token)
        for part in parts or [token]:
            if part and part not in STOPWORDS and (len(part) > 1 or part.isdigit()):
                found.setdefault(stem(part), part)
    return found


def content_terms(text: str) -> set[str]:
    """Stems of the content words of `text`; identifiers count whole and by their parts."""
    return set(content_words(text))


# ---------------------------------------------------------------------------------------------------------------
# Identifiers: what a question names exactly and the docs must hold as written
# ---------------------------------------------------------------------------------------------------------------

# A flag (`--prune`, `-k`), an environment variable or constant (`CITEWISE_API_KEYS`, `MAX_TURNS_REACHED`), a
# dotted or snake_case name (`ingest.chunk_size`, `search_top_k`), a URL path (`/api/agent/stream`), a version
# (`v1.2.3`, `0.40`), or a code with letters and digits (`ORB-404`, `E1234`, `0x5031`).
IDENTIFIER_RE = re.compile(
    r"(?<![\w/.-])(?:"
    r"--?[A-Za-z][\w-]*"  # flags
    r"|/[\w.{}-]+(?:/[\w.{}-]+)+/?"  # paths and routes
    r"|[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+"  # dotted names (module.attr, ingest.chunk_size)
    r"|v?\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?"  # versions and decimals
    r"|[A-Za-z]+-\d[\w-]*"  # codes such as ORB-404
    r"|[A-Za-z]*\d[\w-]*"  # anything with a digit: codes, ids, numbers
    r"|[A-Za-z][A-Za-z0-9]*_[\w]*"  # snake_case / SCREAMING_CASE
    r"|[a-z]+[A-Z][A-Za-z0-9]*"  # camelCase
    r"|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*"  # PascalCase with an inner capital (IceDB, LanceDB)
    r")(?![\w/-])"
)


def identifiers(text: str) -> list[str]:
    """The identifiers `text` names, as written, in order, without repeats (trailing sentence dots dropped)."""
    out: dict[str, None] = {}
    for match in IDENTIFIER_RE.finditer(text):
        token = match.group(0).rstrip(".")
        if re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]?", token):
            continue  # "e.g", "i.e": abbreviations, not dotted names
        if (len(token) >= 2 and not token.isalpha()) or _looks_like_name(token):
            out.setdefault(token, None)
    return list(out)


def _looks_like_name(token: str) -> bool:
    return bool(re.fullmatch(r"[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*", token))


def compact(identifier: str) -> str:
    """The single index token an identifier becomes (`CITEWISE_API_KEYS` → `citewiseapikeys`, `--prune` →
    `prune`, `/api/agent/stream` → `apiagentstream`): a full-text tokenizer that splits on punctuation would
    otherwise only see its parts, anywhere in a passage."""
    return re.sub(r"[^0-9a-z]+", "", identifier.lower())


def identifier_tokens(text: str) -> list[str]:
    """Compact forms of the multi-part identifiers in `text` (single words need none), for the full-text index."""
    out: dict[str, None] = {}
    for token in identifiers(text):
        parts = [p for p in re.split(r"[^0-9A-Za-z]+", token) if p]
        joined = compact(token)
        if len(parts) > 1 and 3 <= len(joined) <= 40:
            out.setdefault(joined, None)
    return list(out)


# ---------------------------------------------------------------------------------------------------------------
# Sentences and code fences
# ---------------------------------------------------------------------------------------------------------------

FENCE_RE = re.compile(r"^\s*(```|~~~)")
# A fenced code block, closed or running to the end of the text (an answer cut short); group "body" is its code.
FENCED_BLOCK = r"^[ \t]*(?P<fence>```|~~~)[^\n]*\n(?P<body>.*?)(?:^[ \t]*(?P=fence)[ \t]*$|\Z)"
FENCED_BLOCK_RE = re.compile(FENCED_BLOCK, re.S | re.M)
_SKIP_LINE_RE = re.compile(
    r"^\s*(?:#{1,6}\s|\||[=\-~^*_]{3,}\s*$|<(?![A-Za-z][A-Za-z0-9+.-]*:)[^>]*>\s*$|</|\{/\*|import\s|export\s|\.\.\s+\w+::"
    r"|:\w+:)"
)  # headings, tables, rules, lines of HTML tags (not a markdown autolink, "<https://rpc.example/>"), MDX, directives
LIST_ITEM_RE = re.compile(r"^(\s*(?:[-*+•]|\d+[.)])\s+|\s*>\s+)")
_BOUNDARY_RE = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[`*_]?[A-Z0-9])")
# A list run into a paragraph (a scraped page's "1\." markers): the number opens the item, it ends no sentence
_INLINE_ENUMERATOR_RE = re.compile(r"^\s*\d{1,2}\.$|:\s+1\.$")  # "…: 1." opens it, "2." alone goes on
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "dr.", "mr.", "mrs.", "ms.", "no.", "fig.", "st.")
# Whole words only: "films." and "first." end a sentence although they end with "ms." and "st.".
_ABBREVIATION_RE = re.compile(r"(?:^|[^a-z])(?:" + "|".join(map(re.escape, _ABBREVIATIONS)) + r")$", re.I)
# HTML tags at a sentence's edges ("<br>", "</details>"), not markdown autolinks ("<https://rpc.example/>"): a URL
# alone on its line is a value worth quoting.
_EDGE_TAG_RE = re.compile(
    r"^(?:\s*<(?![A-Za-z][A-Za-z0-9+.-]*:)[^<>]*>)+|(?:<(?![A-Za-z][A-Za-z0-9+.-]*:)[^<>]*>\s*)+$"
)
SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=\S)")  # a question's sentences: anything may follow
# Inside one claim of an answer, only what can start a sentence counts (a capital, digit, quote, bracket, code):
# "see cfg.ini. then restart" stays one claim.
CLAIM_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[A-Z0-9`])")


def claim_sentences(claim: str) -> list[str]:
    """The sentences of one claim of an answer (the prose before its `[n]`)."""
    return CLAIM_SENTENCE_END_RE.split(claim)


def paragraphs(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of prose paragraphs and list items; skips headings, code, tables and tag lines."""
    spans: list[list[int]] = []
    current: list[int] | None = None
    in_fence = False
    pos = 0
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        if FENCE_RE.match(line):
            in_fence = not in_fence
            current = None
            continue
        if in_fence or not line.strip() or _SKIP_LINE_RE.match(line):
            current = None
            continue
        item = LIST_ITEM_RE.match(line)
        if item:
            current = [start + item.end(), end]
            spans.append(current)
            continue
        if current is None:
            current = [start + len(line) - len(line.lstrip()), end]
            spans.append(current)
        else:
            current[1] = end
    return [(s, e) for s, e in spans if e > s]


def split_sentences(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of the sentences of `text` (markdown-aware); `text[start:end]` is the sentence."""
    spans: list[tuple[int, int]] = []
    for p_start, p_end in paragraphs(text):
        paragraph = text[p_start:p_end]
        cut = 0
        for match in _BOUNDARY_RE.finditer(paragraph):
            before = paragraph[cut : match.start()].rstrip("\"'”’)]")
            if _ABBREVIATION_RE.search(before) or re.search(r"(?:^|\s)[A-Z]\.$", before):
                continue  # "e.g. Foo", "J. Smith": not a sentence end
            if _INLINE_ENUMERATOR_RE.search(before):
                continue  # "… mechanics of DEXs: 1. How pools keep reserves. 2. How …": a list run into the text
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


_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")


def code_blocks(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of the closed fenced code blocks of `text`, fences included."""
    spans = []
    for match in re.finditer(r"^[ \t]*((```|~~~)[^\n]*\n.*?^[ \t]*\2)[ \t]*$", text, re.S | re.M):
        spans.append((match.start(1), match.end(1)))
    return spans


def fenced_lines(text: str) -> list[str]:
    """The lines inside the fenced code blocks of `text`: a fence of three or more backticks or tildes closes only on
    a fence of the same character at least as long (a ```` block may hold a ``` one), and an unclosed block runs to
    the text's end. (`code_blocks` pairs fences by a pattern instead, and would close a ```` block on a ``` line.)"""
    lines, fence = [], ""
    for line in text.splitlines():
        marker = _FENCE_RE.match(line)
        if fence:
            closing = marker and not marker.group(2).strip() and len(marker.group(1)) >= len(fence)
            if closing and marker.group(1)[0] == fence[0]:
                fence = ""
            else:
                lines.append(line)
        elif marker and not (marker.group(1)[0] == "`" and "`" in marker.group(2)):  # "```ls``` lists": inline code
            fence = marker.group(1)
    return lines


def jaccard(a: Iterable[str], b: Iterable[str], *, empty: float = 1.0) -> float:
    """|a ∩ b| / |a ∪ b|; `empty` for two empty sets (alike for quote mode's sentences, unrelated for the gap
    report's questions)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else empty


# ---------------------------------------------------------------------------------------------------------------
# Common English words
# ---------------------------------------------------------------------------------------------------------------

_ENGLISH: dict[str, int] | None = None
_ENGLISH_LOCK = threading.Lock()
ENGLISH_SHORT_CHARS = 4
ENGLISH_MIN_COUNT = 100  # the word list's floor (50) holds rare words and typos alike ("instal", "thru", "sett")
ENGLISH_MIN_COUNT_SHORT = 1000  # for words under ENGLISH_SHORT_CHARS letters: "two", "hit" are words, "wat" is not


def english_count(word: str) -> int:
    """How often an English word list counts `word` (lower-case), 0 for none or below ENGLISH_MIN_COUNT:
    pyspellchecker's list (about 160,000 words with their frequency in subtitles and Wikipedia; the 47,000 counted
    at least ENGLISH_MIN_COUNT times are kept), read on first use (about 0.1 s). When it can't be read, every count
    is 0 (spelling correction may then correct real words, and quote mode reads no capitalised word as a common
    one) and that is logged once."""
    global _ENGLISH
    if _ENGLISH is None:
        with _ENGLISH_LOCK:
            if _ENGLISH is None:
                try:
                    import gzip
                    from importlib.resources import files

                    raw = files("spellchecker").joinpath("resources", "en.json.gz").read_bytes()
                    counts = json.loads(gzip.decompress(raw))
                    _ENGLISH = {w: c for w, c in counts.items() if c >= ENGLISH_MIN_COUNT}
                except Exception as exc:  # a missing or broken package must not fail a search or an answer
                    log.warning(
                        "English word list unreadable (%s): spelling correction may correct real words, and quote "
                        "mode reads no capitalised word as a name",
                        exc,
                    )
                    _ENGLISH = {}
    return _ENGLISH.get(word, 0)


def is_english(word: str) -> bool:
    """Whether `word` (lower-case) is a common enough English word that it is no typo, whatever the docs hold.

    Spelling correction only corrects words that are none: a question about what the docs don't cover ("Is there a
    Helm chart?", "Does it support flash loans?", "What is the main site?") is full of real words the docs never
    use, and turning them into the nearest words the docs do use ("help chat", "loan", "min size") answers another
    question. Quote mode reads such a word capitalised in a question ("Word", "Playground") as a name."""
    return english_count(word) >= (ENGLISH_MIN_COUNT_SHORT if len(word) < ENGLISH_SHORT_CHARS else ENGLISH_MIN_COUNT)


# ---------------------------------------------------------------------------------------------------------------
# Answer units: what quote mode may quote, kept per chunk from ingest on
# ---------------------------------------------------------------------------------------------------------------

# A unit is ((start, end), kind) over a chunk's text. Kinds: a sentence of prose, a whole list item (a short one; a
# long item is cut into its sentences), a body row of a table (its header lines are context, quoted above it) and a
# whole fenced code block. Headings, table headers, rules and tag lines are context only: the reader sees them, it
# never quotes them.
UNIT_KINDS = ("sentence", "item", "row", "code")
MAX_ITEM_WORDS = 60
_TABLE_LINE_RE = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_TABLE_RULE_LINE_RE = re.compile(r"^[ \t]*\|?[ \t:]*-{3,}[ \t:]*(?:\|[ \t:]*-{3,}[ \t:]*)*\|?[ \t]*$")
_ITEM_LINE_RE = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_UNIT_WORD_RE = re.compile(r"\w")


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in text.splitlines(keepends=True):
        spans.append((pos, pos + len(line.rstrip("\r\n"))))
        pos += len(line)
    return spans


def answer_units(text: str, *, overlap: int = 0) -> tuple[tuple[int, int, str], ...]:
    """The units of a chunk's text, in reading order: (start, end, kind) with `text[start:end]` the unit. `overlap`:
    how many leading characters repeat the chunk before (the chunker's overlap, which may start mid-sentence): no unit
    starts inside them — they are context, and the chunk before quotes them whole."""
    units: list[tuple[int, int, str]] = []
    taken: list[tuple[int, int]] = []  # code blocks and table lines: not prose
    lines = _line_spans(text)
    i = 0
    while i < len(lines):
        start, end = lines[i]
        line = text[start:end]
        fence = _FENCE_RE.match(line)
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            marker, j = fence.group(1), i + 1
            while j < len(lines):
                closing = _FENCE_RE.match(text[lines[j][0] : lines[j][1]])
                same = closing and closing.group(1)[0] == marker[0] and len(closing.group(1)) >= len(marker)
                if same and not closing.group(2).strip():
                    break
                j += 1
            last = lines[min(j, len(lines) - 1)][1]
            units.append((start, last, "code"))
            taken.append((start, last))
            i = j + 1
            continue
        if _TABLE_LINE_RE.match(line):
            j = i
            while j < len(lines) and _TABLE_LINE_RE.match(text[lines[j][0] : lines[j][1]]):
                j += 1
            body = i + 2 if i + 1 < j and _TABLE_RULE_LINE_RE.match(text[lines[i + 1][0] : lines[i + 1][1]]) else i
            for k in range(body, j):
                if not _TABLE_RULE_LINE_RE.match(text[lines[k][0] : lines[k][1]]):
                    units.append((lines[k][0], lines[k][1], "row"))
            taken.append((start, lines[j - 1][1]))
            i = j
            continue
        i += 1
    for p_start, p_end in paragraphs(text):
        if any(a <= p_start < b for a, b in taken):
            continue
        line_start = text.rfind("\n", 0, p_start) + 1
        item = bool(_ITEM_LINE_RE.match(text[line_start:p_end]))
        if item and len(text[p_start:p_end].split()) <= MAX_ITEM_WORDS:
            units.append((p_start, p_end, "item"))
            continue
        for s_start, s_end in split_sentences(text[p_start:p_end]):
            units.append((p_start + s_start, p_start + s_end, "sentence"))
    units = [u for u in units if u[0] >= overlap and _UNIT_WORD_RE.search(text[u[0] : u[1]])]
    return tuple(sorted(units))


MIN_OVERLAP = 16  # shorter, a repeat is a coincidence (a code fence, a word), not the chunker's overlap


def leading_overlap(previous: str, text: str, limit: int) -> int:
    """How many leading characters of `text` repeat the end of `previous` (the chunker's overlap between two chunks
    of one section), at most `limit`: for units of chunks whose overlap was not recorded (an index written before
    units were stored)."""
    for size in range(min(limit, len(previous), len(text)), MIN_OVERLAP - 1, -1):
        whole_words = (size == len(text) or text[size].isspace()) and (
            size == len(previous) or previous[-size - 1].isspace()
        )
        if whole_words and previous.endswith(text[:size]):
            return size
    return 0


def chunk_units(text: str, previous: str | None, overlap: int) -> tuple[tuple[int, int, str], ...]:
    """A chunk's answer units. `previous`: the text of the chunk before it in the same section, whose end its start
    repeats by up to `overlap` characters (the chunker's overlap, which may begin mid-sentence: no unit starts inside
    it, the chunk before quotes it whole). Ingest and the upgrade of an older index both call this, so both keep the
    same units."""
    skip = leading_overlap(previous, text, overlap) if previous else 0
    return answer_units(text, overlap=skip)
