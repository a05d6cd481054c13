"""What a question hinges on, read from its wording alone: its focus, its anchors, and its parts.

- **focus**: the question without the conversation around it ("I'm new here. How do I …?" → "How do I …?").
- **anchors**: what the question names exactly and the docs must hold as written — identifiers (`--prune`,
  `CITEWISE_API_KEYS`, `/api/agent/stream`), numbers and versions, quoted strings and names ("enclosure 417", "the
  2022 Citrus Bowl"). A passage about the same topic that never names one does not answer the question: the reader
  scores meaning, and a swapped name means much the same to it (`decide.missing_anchors`).
- **parts**: "What is X and how do I Y?" is two questions; each is searched and answered (or reported missing) on
  its own.

Which sentence answers is the reader's call (`citewise.quote.reader`), not a pattern's: there are no question kinds
here any more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from citewise.text import SENTENCE_END_RE, STOPWORDS, content_terms, content_words, identifiers

_AUX = r"(?:is|are|was|were|can|could|do|does|did|should|will|would|has|have|had|may|might|must|shall)"
_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w.])")
_QUOTED_RE = re.compile(r"[\"“‘`]([^\"“”‘’`\n]{2,80})[\"”’`]")
# Capitalised words that start no sentence and are no question word: names ("Citrus Bowl", "IceDB", "Hardhat").
_NAME_RE = re.compile(r"(?<![.!?:]\s)(?<!^)\b([A-Z][\w'’-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'’-]*)*)")
_POSSESSIVE_END_RE = re.compile(r"['’]s?$")
_NOT_NAMES = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "ok", "okay", "yes", "no", "please", "thanks", "hi", "hello", "faq", "q", "a"}
)
_LEAD_RE = re.compile(
    r"^(?:(?:hi|hello|hey|thanks|please|quick\s+question|question|so|ok|okay|also|and|but)[\s,:!-]+)+", re.I
)
_INTERROGATIVE = (
    r"(?:how|what|what's|which|where|when|why|who|whom|whose|is|are|was|were|can|could|do|does|did|should|"
    r"would|will|may|must|has|have|had|shall|tell|explain|describe|show|list|give)"
)
_PREPOSITION = r"(?:since|in|on|at|from|to|for|by|with|under|over|within|until|before|after|during|as\s+of)"
_CONDITION = r"(?:when|whenever|if|once|after|before|while|unless)"  # the words a condition opens with
# "Quick question:" / "According to the user guide," / "In Citewise," before the question word itself. Not a
# condition ("If I delete a file, how …"): its words are part of what is asked.
_LEAD_CLAUSE_RE = re.compile(rf"^(?!{_CONDITION}\b)[^,:;?]{{1,60}}[,:;]\s+(?={_INTERROGATIVE}\b)", re.I)
# "When a user lacks the scopes, what status …": a condition before the question itself. "When was …" stays whole.
_CONDITION_RE = re.compile(
    rf"^{_CONDITION}\s+"
    rf"(?!(?:is|are|was|were|do|does|did|can|could|will|would|should|has|have|had|so)\b)[^?,;:]{{1,160}},\s+"
    rf"(?=(?:{_PREPOSITION}\s+(?:which|what|whom|whose)|{_INTERROGATIVE})\b)",
    re.I,
)
# "… and how do I …", "…, and what is …", "…; where …": a second question joined to the first. After a comma, a
# question mark or a semicolon the second question may open with its preposition ("…, and over how many months does
# it vest?") when a question follows (its verb before its subject); "…, in which section of the file?" only narrows
# the first question.
_ASKED = r"(?:it|i|we|you|they|he|she|this|that|these|those|there|the|a|an|my|your|its|their|our)"
_PART_SPLIT_RE = re.compile(
    rf"(?:\?\s+|[,;]\s*(?:and\s+|also\s+)?)"
    rf"(?={_INTERROGATIVE}\b|{_PREPOSITION}\s+(?:how|which|what|whom|whose)\s+[^?,;]*?\b{_AUX}\s+{_ASKED}\b)"
    rf"|(?:\s+and\s+(?:also\s+)?|\s+also\s+)(?={_INTERROGATIVE}\b)",
    re.I,
)
_PRONOUN_RE = re.compile(r"\b(it|its|them|they|their|this|that|these|those|one)\b", re.I)


@dataclass(frozen=True)
class Question:
    """One question (or one part of a multi-part question), analysed."""

    text: str  # as asked (this part of it)
    focus: str  # without the conversation around it ("I'm new here.", "Quick question:")
    anchors: tuple[str, ...]  # identifiers, numbers, quoted strings and names the evidence must hold
    terms: frozenset[str]  # content-word stems of the focus


def question_focus(question: str) -> str:
    """The question itself without the conversation around it: of several sentences the ones that ask ("I'm new
    here. How do I …?" → "How do I …?"), then without a short leading clause before the question word ("According
    to the user guide, how …" → "how …"; a condition, "If I delete a file, how …", stays: it is part of the
    question). Returns `question` unchanged when nothing is to strip."""
    parts = [p for p in SENTENCE_END_RE.split(question.strip()) if p.strip()]
    asking = [p for p in parts if p.rstrip().endswith("?")]
    focus = " ".join(asking) if asking and len(asking) < len(parts) else question.strip()
    stripped = _LEAD_RE.sub("", focus)
    stripped = _LEAD_CLAUSE_RE.sub("", stripped, count=1)
    return stripped if content_terms(stripped) else focus


def anchors_of(text: str) -> tuple[str, ...]:
    """What `text` names exactly and an answer's evidence must hold: identifiers, numbers, quoted strings and
    capitalised names (not the first word, not "I"), in order, without repeats."""
    found: dict[str, None] = {}
    for quoted in _QUOTED_RE.findall(text):
        if content_terms(quoted):
            found.setdefault(quoted.strip(), None)
    for token in identifiers(text):
        found.setdefault(token, None)
    for number in _NUMBER_RE.findall(text):
        found.setdefault(number, None)
    focus = text.strip()
    words = re.findall(r"[A-Za-z][\w'’-]*", focus)
    # Title Case ("How Do I Change The Port") capitalises stop words too: then capitals name nothing.
    title_case = any(w[0].isupper() and w.lower() in STOPWORDS and w != "I" for w in words[1:])
    for match in _NAME_RE.finditer("" if title_case else focus):
        if match.start(1) == 0:
            continue
        name = _POSSESSIVE_END_RE.sub("", match.group(1)).strip("'’-")  # "Bruno Mars's" names Bruno Mars
        if not name or name.lower() in _NOT_NAMES or name.lower() in STOPWORDS or not content_words(name):
            continue
        found.setdefault(name, None)
    # A name inside a longer anchor ("API" in "CITEWISE_API_KEYS") is not an anchor of its own.
    anchors = list(found)
    return tuple(a for a in anchors if not any(a != b and a in b for b in anchors))


def split_parts(question: str) -> list[str]:
    """The questions a multi-part question asks, in order ("What is X and how do I Y?" → ["What is X", "how do I
    Y?"]). A later part that points back ("… and how do I change it?") gets the words of the part before it
    ("how do I change it (default port)?"); a part with no content word of its own keeps the question whole."""
    focus = question_focus(question)
    condition = _CONDITION_RE.match(focus)  # "When a user lacks X, what …": one question, its condition first
    head = condition.group(0) if condition else ""
    pieces = [p.strip(" ,;") for p in _PART_SPLIT_RE.split(focus[len(head) :]) if p and p.strip(" ,;")]
    if head and pieces:
        pieces[0] = head + pieces[0]
    if len(pieces) < 2 or any(not content_terms(_PRONOUN_RE.sub("", p)) and not _PRONOUN_RE.search(p) for p in pieces):
        return [question.strip()]
    if not content_terms(pieces[0]):
        return [question.strip()]
    parts = [pieces[0]]
    for piece in pieces[1:4]:
        if _PRONOUN_RE.search(piece):
            words = " ".join(content_words(parts[-1]).values())
            piece = f"{piece.rstrip(' ?.!')} ({words})?"
        parts.append(piece)
    return parts


def analyse(question: str) -> Question:
    focus = question_focus(question)
    return Question(text=question, focus=focus, anchors=anchors_of(focus), terms=frozenset(content_terms(focus)))
