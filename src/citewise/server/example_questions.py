"""Example questions for the landing page, made from the headings of the docs the caller may see.

A heading already names what a section answers; turned into a question it shows a new reader what to ask:

    "Removing deleted files"        → "How do I remove deleted files?"  (an -ing verb first)
    "Install the server"            → "How do I install the server?"    (an instruction)
    "How to rotate keys"            → "How do I rotate keys?"
    "Why was my question refused?"  → as it is                          (the docs' own question)
    "Exit reasons"                  → "What are exit reasons?"          (a subject)

Headings that name no topic ("Overview", "Next steps"), that are code, paths or lists, that are too long, or that
read as a symptom ("Search still returns deleted files") are left out; a page's own title (a top-level heading) only
when it reads as a task or a question. The choice is deterministic: the same index
gives the same questions, preferring tasks, one per document first, in an order fixed by each question's hash (not
the alphabet, which would always pick "Adding …").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from citewise.ingest.anchors import strip_custom_id
from citewise.text import STOPWORDS, content_words, english_count, is_english, stem

EXAMPLES = 3
TASK, QUESTION, SUBJECT = 0, 1, 2  # the order they are offered in: a task is what most readers came to do
MAX_WORDS = 8
MAX_CHARS = 70

# Headings that name no topic of their own.
GENERIC = frozenset(
    {
        "overview", "introduction", "intro", "summary", "contents", "table of contents", "see also", "next steps",
        "read next", "what's next", "related", "references", "reference", "notes", "note", "faq", "faqs", "examples",
        "example", "changelog", "changes", "license", "appendix", "glossary", "index", "home", "about", "background",
        "on this page", "in this page", "further reading", "more", "usage", "other", "misc", "miscellaneous", "tips",
        "warning", "caution", "important", "todo", "prerequisites", "requirements",
    }
)  # fmt: skip
# Verbs a heading gives as an instruction ("Install the server", "Rotate a key").
IMPERATIVES = frozenset(
    {
        "add", "allow", "ask", "avoid", "back", "build", "change", "check", "choose", "clean", "configure",
        "connect", "create", "debug", "delete", "deploy", "disable", "embed", "enable", "export", "find", "fix",
        "get", "give", "import", "index", "ingest", "install", "keep", "limit", "list", "load", "make", "migrate",
        "monitor", "move", "open", "pick", "pin", "protect", "publish", "rate", "read", "reduce", "remove",
        "rename", "replace", "reset", "restrict", "rotate", "run", "scale", "search", "secure", "serve", "set",
        "share", "speed", "start", "stop", "store", "switch", "sync", "test", "track", "tune", "turn", "undo",
        "update", "upgrade", "upload", "use", "verify", "watch", "write",
    }
)  # fmt: skip
_NOT_A_TOPIC = re.compile(r"[`/\\=(){}\[\]<>|$#@*,;]|--|^\W|\d+\.\d+")  # code, paths, versions, lists
_NUMBERING = re.compile(r"^(?:(?:step|part|chapter)\s+)?\d+[.):]?\s+", re.I)
_HOW_TO = re.compile(r"^how\s+to\s+", re.I)
_OBJECT_STARTS = frozenset(
    {"a", "an", "the", "your", "my", "this", "that", "these", "those", "it", "them", "each", "every", "all", "one",
     "up", "down", "out", "off", "on", "in", "with", "to", "from", "back", "more", "less", "new", "old"}
)  # fmt: skip
_YOUR = re.compile(r"\b(?:your|yours|yourself)\b", re.I)  # the reader asks: "set up my server"
_MINE = {"your": "my", "yours": "mine", "yourself": "myself"}
_AND_ING = re.compile(r"\b(and|or)\s+(\w{2,}ing)\b")  # "Backing up and restoring": back up and restore
_ASKING = frozenset({"what", "why", "how", "when", "where", "which", "who", "can", "does", "do", "is", "are", "should"})
_AUX = frozenset({"is", "are", "was", "were", "do", "does", "did", "can", "could", "should", "will", "would", "to"})


def example_questions(sections: Iterable[tuple[str, str]], count: int = EXAMPLES) -> list[str]:
    """Up to `count` questions from (doc_id, heading path) pairs (`Retriever.sections`): tasks, then the docs' own
    questions, then subjects; one per document before a second from any; within a kind, in the order of each
    question's hash. A task or question with fewer than two content words is too vague to offer."""
    made: dict[str, tuple[int, str, str]] = {}  # question → (rank, its hash, doc_id)
    seen: set[str] = set()
    for doc_id, chapter in sections:
        path = [h for h in (chapter or "").split(" > ") if h.strip()]
        if not path:
            continue
        phrased = heading_question(path[-1])
        if phrased is None:
            continue
        question, rank = phrased
        if rank != SUBJECT and len(content_words(question)) < 2:
            continue  # "What is logged?", "How do I upgrade?": too vague to show what the docs answer
        if len(path) == 1 and rank == SUBJECT:
            continue  # a page's title as a subject ("Configuration"): what is configuration? asks nothing
        key = question.casefold()
        if key not in seen:
            seen.add(key)
            made[question] = (rank, hashlib.sha256(key.encode()).hexdigest(), doc_id)
    ordered = sorted(made, key=lambda q: made[q][:2])
    chosen: list[str] = []
    used_docs: set[str] = set()
    for question in ordered:  # first one question per document, then any
        if made[question][2] not in used_docs and len(chosen) < count:
            chosen.append(question)
            used_docs.add(made[question][2])
    for question in ordered:
        if len(chosen) >= count:
            break
        if question not in chosen:
            chosen.append(question)
    return sorted(chosen, key=lambda q: made[q][:2])


def heading_question(heading: str) -> tuple[str, int] | None:
    """(the question a heading asks, its kind: TASK, QUESTION or SUBJECT), or None for a heading that names no topic,
    or names it too vaguely to ask about."""
    text = " ".join(strip_custom_id(heading).split()).strip(" :.-–—")
    text = _NUMBERING.sub("", text)
    if not text or len(text) > MAX_CHARS or len(text.split()) > MAX_WORDS or text.casefold() in GENERIC:
        return None
    if text.endswith("?"):
        return (text[0].upper() + text[1:], QUESTION) if len(text.split()) >= 3 else None
    if _NOT_A_TOPIC.search(text):
        return None
    how_to = _HOW_TO.match(text)
    if how_to:
        rest = _YOUR.sub(lambda m: _MINE[m.group().lower()], text[how_to.end() :])
        return (f"How do I {_lower_first(rest)}?", TASK) if rest else None
    words = text.lower().split()
    if words[0] in _ASKING:  # "What is logged" asks, unpunctuated; "How quote mode decides" only names a topic
        return (text[0].upper() + text[1:] + "?", QUESTION) if len(words) >= 3 and words[1] in _AUX else None
    first, _, rest = text.partition(" ")
    verb = base_form(first.lower()) if first.lower().endswith("ing") and len(first) > 4 else None
    if verb is None and first.lower() in IMPERATIVES:
        # An instruction names what it acts on: "Install Citewise", "Rotate the key", "Set up TLS". "Rate limits",
        # "Search still returns deleted files", "Install": a thing, a symptom, or too little to ask about.
        after = rest.split(" ", 1)[0]
        if not after or not (after.lower() in _OBJECT_STARTS or after[0].isupper()):
            return None
        verb = first.lower()
    if verb is not None and rest:
        rest = _AND_ING.sub(lambda m: f"{m.group(1)} {base_form(m.group(2).lower()) or m.group(2)}", rest)
        return f"How do I {verb} {_YOUR.sub(lambda m: _MINE[m.group().lower()], rest)}?", TASK
    if not any(w.lower() not in STOPWORDS for w in re.findall(r"[\w'’-]+", text)):
        return None
    last = words[-1]
    plural = len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is", "ics"))
    return f"What {'are' if plural else 'is'} {_lower_first(text)}?", SUBJECT


def base_form(gerund: str) -> str | None:
    """The verb an -ing word is made of ("removing" → "remove", "running" → "run", "adding" → "add", "using" →
    "use"), when the English word list knows it; None otherwise ("morning", "string": no verb the list gives)."""
    root = gerund[:-3]
    if len(root) < 2:
        return None
    if root[-1] == root[-2] and root[-1] not in "aeiou":  # "running": run; "adding": add is a word itself
        for candidate in (root, root[:-1]):
            if is_english(candidate):
                return candidate
        return None
    words = [c for c in (root, root + "e") if is_english(c)]
    # "using": us or use? the one with the -ing word's stem; "changing": chang or change? the more common one.
    same = [c for c in words if stem(c) == stem(gerund)] or words
    return max(same, key=english_count) if same else None


def _lower_first(text: str) -> str:
    """`text` with its first word in lower case when it is an ordinary word ("Sessions" → "sessions"); a name or an
    acronym ("Citewise", "API keys", "PostgreSQL") stays as written."""
    first, _, rest = text.partition(" ")
    if first[1:] != first[1:].lower() or not is_english(first.lower()):
        return text
    return first.lower() + (" " + rest if rest else "")
