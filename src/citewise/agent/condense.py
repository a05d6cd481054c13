"""A long message as a search query: the question it asks, the errors it pastes, the names it mentions.

A question may come with what it is about pasted around it: an error log, a traceback, a config file, up to
`agent.max_question_chars` (10,000) characters. Searched as it is, the paste decides what is found: the embedding
model reads the first few hundred tokens (the log's start, not the question), the full-text index weighs every
timestamp and stack frame, and a search takes at most `MAX_QUERY_CHARS` (cutting there kept the first 1,000
characters, whatever they were). So the run's own searches look for the message condensed, in this order:

1. the sentences that ask (ending in "?", or opening with how/what/why/…), else the prose's first and last sentence;
2. the error lines: the exception a traceback ends with, log lines at ERROR or FATAL, lines that say failed, cannot,
   not found, …, without their timestamps and log prefixes, each error once;
3. the prose sentences around them that name something (an identifier, an error);
4. the commands run (`$ orbitron queue create …`);
5. the identifiers (flags, settings, environment variables, codes, paths: `citewise.text.identifiers`) named
   elsewhere that none of the above holds, the user's own words first, then the most repeated.

A short message (at most SHORT_CHARS characters on at most SHORT_LINES lines) is searched as it is. Only the
searches change: the whole message still goes to the answerer (a model's prompt) and into the run's trace.

Pure and deterministic (the same message always gives the same query), and linear in the message: one pass over
its lines, regular expressions without nested repetition, each applied to one line.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from citewise.text import SENTENCE_END_RE, content_terms, identifiers

SHORT_CHARS = 300  # a message up to this long ...
SHORT_LINES = 3  # ... on up to this many lines is a question as it stands: searched unchanged
QUESTION_CHARS = 400  # the sentences that ask
CONTEXT_CHARS = 240  # prose sentences that name what the question is about
ERROR_LINES, ERROR_CHARS = 3, 200
COMMANDS, COMMAND_CHARS = 2, 150
IDENTIFIERS, IDENTIFIER_CHARS = 12, 240


@dataclass(frozen=True)
class Condensed:
    """What the run's own searches look for in a message."""

    query: str  # the search query, at most `limit` characters
    question: str  # the sentences that ask (what quote mode answers); the query itself when none asks
    condensed: bool  # False: a short message, searched as it is
    errors: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------------------------
# What a line is
# ---------------------------------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^\s*(?:```|~~~)")
_QUOTE_MARK_RE = re.compile(r"^\s*(?:>\s?)+")
# Stack frames and traceback furniture: where an error happened, never what it was.
_FRAME_RE = re.compile(
    r"^\s*(?:File \"[^\"\n]*\", line \d+|at [\w$.<>/\\-]+[(:]|at async |\.\.\. \d+ more\b"
    r"|Traceback \(most recent call last\)|During handling of the above exception"
    r"|The above exception was the direct cause|[\^~]{2,}\s*$|#\d+\s+0x[0-9a-fA-F]+|\d+:\s+0x[0-9a-fA-F]+"
    r"|goroutine \d+ \[|\[\.\.\.\]\s*$)"
)
_COMMAND_RE = re.compile(r"^\s*(?:\$|PS [^>\n]{0,80}>|[A-Za-z]:\\[^>\n]{0,80}>)\s+(?P<command>\S.*)$")
_LEVELS = r"(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|CRIT|SEVERE|PANIC|EMERG|ALERT)"
_TIMESTAMP = (
    r"(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2})"
)
# A line a program wrote: it opens with a time stamp, a level, or a bracketed tag.
_LOG_START_RE = re.compile(rf"^\s*(?:\[?{_TIMESTAMP}|\[?{_LEVELS}\b|\[[^\]\n]{{1,40}}\]\s)")
# What a log line opens with before its message: time stamps, levels, [tags], "host process[pid]:", "level=error".
_LOG_PREFIX_RE = re.compile(
    rf"^(?:\s*(?:\[?{_TIMESTAMP}\]?|\[?{_LEVELS}\]?:?(?=\s|$)|\[[^\]\n]{{1,40}}\]"
    r"|(?:[\w.-]{1,64} )?[\w./-]{1,40}\[\d+\]:|(?:time|ts|level|lvl|logger|caller)=\S+|[|:-](?=\s))(?=\s|$)\s*)+"
)
# An exception's own line: "ValueError: …", "java.lang.IllegalStateException: …", "Caused by: …", "error[E0425]: …".
_EXCEPTION_RE = re.compile(
    r"^\s*(?:Caused by:\s*|Uncaught\s+|Unhandled\s+)?"
    r"(?:(?:[A-Za-z_][\w$]*\.)*[A-Z]\w*(?:Error|Exception|Fault|Failure|Interrupt)\b(?:\s*[:(\[]|\s*$)"
    r"|(?:fatal |npm |internal )?(?:error|panic|fatal)(?:\[\w+\])?!?:\s)",
    re.I,
)
_EXCEPTION_NAME_RE = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Fault|Failure)\b")
_LEVEL_ERROR_RE = re.compile(
    r"\b(?:ERROR|ERR!?|FATAL|CRITICAL|CRIT|SEVERE|PANIC|EMERG|ALERT)\b|\blevel=(?:error|fatal|critical)\b"
    r"|\[(?:error|fatal|crit|critical|emerg|alert)\]"
)
_ERROR_WORD_RE = re.compile(
    r"\b(?:errors?|errno|failed|failure|fails|fatal|cannot|can't|couldn't|could not|unable to|refused|denied"
    r"|not found|no such|timed out|timeout|panic(?:ked)?|exception|segmentation fault|exit (?:code|status) [1-9]\d*"
    r"|non-zero exit|unrecognized|unknown (?:option|flag|command|argument)|invalid|forbidden|unauthori[sz]ed"
    r"|not permitted|aborted|crash(?:es|ed|ing)?)\b",
    re.I,
)
_CONFIG_LINE_RE = re.compile(r"^\s*[\w.\"'-]+\s*[:=]\s*\S*\s*,?$")
_LIST_MARK_RE = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|#{1,6})\s+")
_WORD_RE = re.compile(r"[A-Za-z]{2,}")
_LETTER_RE = re.compile(r"[A-Za-z]")

# A sentence that asks without a question mark: "how do I …", "any idea why …", "I need to know whether …".
_ASKS_RE = re.compile(
    r"^(?:(?:hi|hello|hey|so|ok|okay|and|but|also|thanks)[\s,!-]+)*"
    r"(?:how|what|what's|why|which|where|who|whom|whose|is there|are there|can (?:i|you|we|it|someone|anyone)"
    r"|could|would|should|does|do (?:i|you|we)|did|is (?:it|this|that)|are (?:you|we|they|these|those)"
    r"|any (?:idea|ideas|hint|hints|help|suggestions?|pointers?|clue)|anyone|please|help|tell me|explain)\b",
    re.I,
)
_ASKS_INSIDE_RE = re.compile(
    r"\b(?:how (?:do|can|should|would|could|to|does|is|come)|what (?:is|are|does|do|should|causes|caused|went)"
    r"|why (?:is|are|does|do|did|am|would|it)|(?:want|need|like) to know|wondering|not sure (?:how|what|why|whether|if)"
    r"|(?:no|any) idea (?:how|what|why|whether))\b",
    re.I,
)


def _is_prose(line: str) -> bool:
    """A line a person wrote: mostly letters, a few words, not a config entry, a log line or code."""
    stripped = line.strip()
    if not stripped or line.startswith(("    ", "\t")) or stripped[0] in "{}[]<|":
        return False
    if _LOG_START_RE.match(line) or _CONFIG_LINE_RE.match(line):
        return False
    visible = len(stripped) - stripped.count(" ")
    return len(_WORD_RE.findall(stripped)) >= 3 and len(_LETTER_RE.findall(stripped)) >= 0.6 * visible


def _is_error(line: str) -> bool:
    return bool(_EXCEPTION_RE.match(line) or _LEVEL_ERROR_RE.search(line) or _ERROR_WORD_RE.search(line))


def _message_of(line: str) -> str:
    """A log line's message: without its time stamps, level, tags and pid prefix, spaces collapsed."""
    return " ".join(_LOG_PREFIX_RE.sub("", line).split())


def _asks(sentence: str) -> bool:
    return sentence.endswith("?") or bool(_ASKS_RE.match(sentence) or _ASKS_INSIDE_RE.search(sentence))


def _cut(text: str, limit: int) -> str:
    """`text` at most `limit` characters long, cut at a word's end when it must be cut."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    if not text[limit].isspace() and re.search(r"\s", head):
        head = head.rsplit(None, 1)[0]
    return head.rstrip()


def _error_key(error: str) -> str:
    """The same error written twice (another time, pid, id or count) is one error."""
    return re.sub(r"0x[0-9a-f]+|[0-9a-f]{8,}|\d+", "#", error.lower())


def _noise(token: str) -> bool:
    """An identifier that names nothing the docs would hold: numbers, time stamps, hex, ids, long hashes."""
    alnum = re.sub(r"[^0-9A-Za-z]", "", token)
    if not alnum or len(token) > 60:
        return True
    digits = sum(c.isdigit() for c in alnum)
    if re.fullmatch(r"[A-Za-z]{2,}[-_]?\d{1,6}", token):
        return False  # a code: ORB-404, E1234, HTTP2
    if digits * 2 > len(alnum) or re.fullmatch(r"(?:0x)?[0-9a-fA-F]{8,}", alnum):
        return True
    return bool(re.search(r"\d{4}-\d{2}-\d{2}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}", token))


# ---------------------------------------------------------------------------------------------------------------
# The condenser
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _Read:
    """One pass over a message's lines."""

    paragraphs: list[str]
    errors: list[tuple[str, bool]]  # (the error's message, whether it is an exception's own line)
    commands: list[str]
    other: list[str]  # the lines of code, config and logs that are no error (read for identifiers)


def _read(text: str) -> _Read:
    read = _Read([], [], [], [])
    paragraph: list[str] = []
    fenced = framed = False
    for raw in text.splitlines():
        if _FENCE_RE.match(raw):
            fenced = not fenced
            paragraph = _flush(read, paragraph)
            continue
        line = _QUOTE_MARK_RE.sub("", raw) if not fenced else raw
        source, framed = framed, False  # the code line a Python frame shows is where it failed too, not what
        if not line.strip() or _FRAME_RE.match(line) or (source and line[:1].isspace()):
            framed = line.lstrip().startswith('File "')
            paragraph = _flush(read, paragraph)
            continue
        command = _COMMAND_RE.match(line)
        if command:
            paragraph = _flush(read, paragraph)
            read.commands.append(" ".join(command.group("command").split()))
            continue
        exception = bool(_EXCEPTION_RE.match(line))
        if not fenced and not exception and _is_prose(line):
            paragraph.append(_LIST_MARK_RE.sub("", line).strip())
            continue
        paragraph = _flush(read, paragraph)
        message = _message_of(line)
        if message and _is_error(line):
            read.errors.append((message, exception or bool(_EXCEPTION_NAME_RE.search(message))))
        elif message:
            read.other.append(message)
    _flush(read, paragraph)
    return read


def _flush(read: _Read, paragraph: list[str]) -> list[str]:
    if paragraph:
        read.paragraphs.append(" ".join(paragraph))
    return []


def _sentences(paragraphs: list[str]) -> list[str]:
    return [s.strip() for p in paragraphs for s in SENTENCE_END_RE.split(p) if s.strip()]


def _fit(items: list[str], budget: int, prefer: list[int]) -> list[str]:
    """The items that fit `budget` characters, taken in the order of `prefer` (indexes), kept in their own order."""
    taken: set[int] = set()
    used = 0
    for i in prefer:
        size = len(items[i]) + 1
        if i in taken or (taken and used + size > budget):
            continue
        taken.add(i)
        used += size
    return [_cut(items[i], budget) for i in sorted(taken)]


def _ends_first(n: int) -> list[int]:
    """0..n-1 from both ends inwards, the last first: the question after a paste, then the one before it, …"""
    order: list[int] = []
    low, high = 0, n - 1
    while low <= high:
        order.append(high)
        if low != high:
            order.append(low)
        low, high = low + 1, high - 1
    return order


def condense(message: str, *, limit: int) -> Condensed:
    """What the run's searches look for in `message` (at most `limit` characters): the message itself when it is
    short, else the question, errors, commands and identifiers it holds (see the module's docstring)."""
    text = message.strip()
    lines = [line for line in text.splitlines() if line.strip()]
    if len(text) <= SHORT_CHARS and len(lines) <= SHORT_LINES:
        query = _cut(text, limit)
        return Condensed(query=query, question=query, condensed=False)

    read = _read(text)
    sentences = _sentences(read.paragraphs)
    asking = list(dict.fromkeys(s for s in sentences if _asks(s)))
    # Prose alone (a long question, nothing pasted) keeps the room the paste would have taken.
    budget = QUESTION_CHARS if read.errors or read.commands or read.other else limit
    if asking:
        question = _fit(asking, budget, _ends_first(len(asking)))
    else:  # nothing asks: what the message opens and closes with
        ends = list(dict.fromkeys([sentences[0], sentences[-1]])) if sentences else []
        question = _fit(ends, budget, _ends_first(len(ends)))

    errors = _pick_errors(read.errors)
    written = " ".join([*question, *errors]).lower()
    naming = [
        s
        for s in sentences
        if s not in question and s.lower() not in written and (identifiers(s) or _ERROR_WORD_RE.search(s))
    ]
    context = _fit(naming, CONTEXT_CHARS, list(range(len(naming))))
    commands = [_cut(c, COMMAND_CHARS) for c in list(dict.fromkeys(reversed(read.commands)))[:COMMANDS]][::-1]
    written = " ".join([*question, *errors, *context, *commands]).lower()
    names = _pick_identifiers(sentences, read, written)

    segments = [*question, *errors, *context, *commands]
    if names:
        segments.append(" ".join(names))
    query = _cut("\n".join(segments), limit) or _cut(" ".join(text.split()), limit)
    asked = " ".join(question) if asking else ""
    return Condensed(
        query=query,
        question=asked or query,
        condensed=True,
        errors=tuple(errors),
        commands=tuple(commands),
        identifiers=tuple(names),
    )


def _pick_errors(found: list[tuple[str, bool]]) -> list[str]:
    """At most ERROR_LINES distinct errors, in the message's order: exceptions' own lines first (what a traceback
    ends with), then the last error (the failure itself), then the first (where it started)."""
    distinct: dict[str, tuple[int, str, bool]] = {}
    for i, (error, exception) in enumerate(found):
        key = _error_key(error)
        exception = exception or distinct.get(key, (0, "", False))[2]
        distinct[key] = (i, _cut(error, ERROR_CHARS), exception)  # an error repeated: its last time ended the run
    entries = sorted(distinct.values())
    order = [i for i, entry in enumerate(entries) if entry[2]][::-1] + _ends_first(len(entries))
    chosen: list[int] = []
    for i in order:
        if i not in chosen and len(chosen) < ERROR_LINES:
            chosen.append(i)
    return [entries[i][1] for i in sorted(chosen)]


def _pick_identifiers(sentences: list[str], read: _Read, written: str) -> list[str]:
    """The identifiers the query does not hold yet: those of the user's own sentences first, then those repeated most
    in the pasted lines; numbers, time stamps, hashes and ids are no names."""
    own = [t for s in sentences for t in identifiers(s)]
    pasted = Counter(t for line in [*read.other, *(e for e, _ in read.errors)] for t in identifiers(line))
    first = {t: i for i, t in enumerate(pasted)}  # a Counter keeps the order tokens first came in
    ranked = list(dict.fromkeys([*own, *sorted(pasted, key=lambda t: (-pasted[t], first[t]))]))
    names: list[str] = []
    used = 0
    for token in ranked:
        if len(names) >= IDENTIFIERS or _noise(token) or token.lower() in written or not content_terms(token):
            continue
        if used + len(token) + 1 > IDENTIFIER_CHARS:
            break
        names.append(token)
        used += len(token) + 1
    return names
