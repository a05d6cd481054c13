"""A follow-up made whole: what an elliptic message asks, read with the questions of the conversation before it.

"How do I enable payload encryption?", then "Is it enabled by default?": searched as it stands, the second question
looks for "enabled by default" and finds whatever the docs say about defaults — character encodings, say. So before
the run's first search, a message that leans on the conversation is read with the question before it:

- **pronoun**: it points back ("How do I change it?", "Does it need a restart?", "Where is that configured?",
  "What happens to a longer one?") and names little of its own (an "it" that points nowhere, "Is it possible to …",
  "How long does it take to …", is not one);
- **ellipsis**: it continues the question before ("What about PDFs?", "And the overlap?", "And on macOS?", "What if
  my password has special characters?");
- **bare**: it names no topic at all ("What's the default?", "What's the size limit?", "How do I install?");
- **fragment**: a few words and no question ("Only the outdated ones?", "On Windows?").

Anything else is self-contained and passes unchanged: a question that names its own topic is not rewritten because
a conversation came before it.

The standalone question is the follow-up with what the earlier question was about: its words in brackets after the
follow-up ("How do I change it (default chunk size)?" — the form `citewise.quote.split_parts` gives a part that
points back), or, for an ellipsis, the earlier question with the new words put in place of the old ("What is the
default chunk size?" + "And the overlap?" → "What is the default overlap size?"; "… cache on Linux?" + "And on
macOS?" → "… cache on macOS?"). An earlier question that was itself a follow-up is read whole first, so a chain of them
keeps its topic. Only the user's questions are read, not the answers: what the user asked about is in their words.

Pure and deterministic (the same conversation always gives the same question): no model, no index. Quote mode
searches and answers the standalone question; agent mode's first search looks for it, and the model still reads the
whole conversation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from citewise.quote.question import anchors_of, question_focus, split_parts
from citewise.text import IDENTIFIER_RE, content_terms, stem


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


MAX_TURNS = 6  # the earlier questions read (the newest ones)
MAX_WORDS = 14  # a longer message states its own question
MAX_TERMS_POINTING = 3  # a message with "it" may name this many topic words of its own and still lean back
MAX_TERMS_DEMONSTRATIVE = 2  # "that", "this": as many (they are often conjunctions and relatives)
MAX_FRAGMENT_WORDS = 4

# Words that ask about a topic without naming one: "Is it enabled by default?" names nothing the docs are about.
_GENERIC_WORDS = """
    default defaults enable enabled disable disabled turn turned change changed set setting settings configure
    configured configuration config option options value values work works working mean means need needs needed
    require requires required support supported supports install installed installing uninstall remove removed
    delete deleted add added run running start stop restart happen happens happened possible safe limit limits
    maximum max minimum min example examples show see find found check version versions type types kind list
    difference different instead else true false better best recommended recommend allow allowed update upgrade fix
    undo reset revert affect affects purpose reason cost fast faster slow long longer big bigger large larger small
    smaller time take takes first last next again later still always never automatically manually other another
    same both either too enough right wrong good bad ok okay keep kept store stored live lives located location
    size text raise increase decrease lower higher look looks choice instead happen available also only
"""
_GENERIC = frozenset(stem(w) for w in _GENERIC_WORDS.split())
# Of those, the words that only ask, never what a question is about ("remove" in "How do I remove a document?" is).
_ASKING = frozenset(
    stem(w)
    for w in _set(
        "default defaults live lives located location long longer take takes happen happens happened mean means work "
        "works need needs example examples kind type types difference different possible good bad best better right "
        "wrong time first last next still also only too enough same other another instead ok okay true false look "
        "looks find found see show check keep kept store stored available choice"
    )
)
_INTERROGATIVE = _set(
    "how what what's whats which where when why who whom whose is are was were can could do does did should would "
    "will may might must has have had shall tell explain describe show list give"
)
_PREPOSITIONS = _set("on in for with without under from at by during after before inside outside via over")
_DETERMINERS = _set("the a an")
_STRONG = _set("it its they them their theirs")
_DEMONSTRATIVE = _set("this that these those")
_ONE = _set("one ones")
_SUBORDINATORS = _set("before after when whenever if until once while because unless")
_QUOTED_RE = re.compile(r"[\"“‘`][^\"“”‘’`\n]{2,80}[\"”’`]")
_JOINERS = _set("and also or plus")
# "that"/"this" before a subject is a conjunction ("How do I know that the index is current?").
_SUBJECTS = _set("the a an i you we it they he she there my your our its their his her this that")
# An "it" that points nowhere: "Is it possible to …", "It's safe to …", "How long does it take …", "Does it matter …".
_EXPLETIVE_RE = re.compile(
    r"\b(?:(?:is|was|isn['’]t|wasn['’]t|would|will|does)\s+it|it['’]s|it\s+is|it\s+was)\s+"
    r"(?:\w+\s+){0,2}?(?:possible|safe|ok|okay|necessary|required|recommended|true|better|best|allowed|advisable|"
    r"worth|enough|easy|hard|faster|slower)\s+(?:to|that|if|whether)\b"
    r"|\bhow\s+long\s+(?:does|did|will|would)\s+it\s+take\b|\bdoes\s+it\s+matter\b",
    re.I,
)
# What a continuation opens with: "What about X?", "And X?", "What if X?".
_OPENER_RE = re.compile(
    r"^\s*(?:(?:and|so|ok|okay|also|then)[\s,]+)*"
    r"(?P<opener>what\s+about|how\s+about|what\s+if|same\s+(?:for|with)|and|also|or|plus)\b[\s,:]*(?P<rest>.*)$",
    re.I | re.S,
)
_WORD_RE = re.compile(r"[A-Za-z0-9][\w'’-]*")
_END = ".?!,;: \t\n"


@dataclass(frozen=True)
class Standalone:
    """What a message asks, made whole."""

    question: str  # the standalone question: the message itself unless it is a follow-up
    asked: str  # the message as asked
    followup: bool = False  # False: it stands on its own (question == asked)
    reason: str = ""  # pronoun | ellipsis | bare | fragment
    from_turns: tuple[str, ...] = ()  # the earlier questions it was read with, as asked, oldest first


def standalone(message: str, earlier: Sequence[str]) -> Standalone:
    """`message` made whole with the earlier questions of its conversation (oldest first; answers not included).
    Returns it unchanged when it stands on its own or nothing came before it."""
    context: Standalone | None = None
    for question in earlier[-MAX_TURNS:]:
        if content_terms(question):  # a greeting or an empty turn names nothing to lean on
            context = _read(question, context)
    return _read(message, context)


def _read(message: str, context: Standalone | None) -> Standalone:
    if context is None:
        return Standalone(message, message)
    reason = elliptic(message)
    if not reason:
        return Standalone(message, message)
    question = _rewrite(message, context.question, reason)
    if question == message:
        return Standalone(message, message)
    return Standalone(question, message, True, reason, (*context.from_turns, context.asked))


def elliptic(message: str) -> str:
    """Why `message` leans on the question before it ("pronoun", "ellipsis", "bare", "fragment"), or "" when it
    stands on its own."""
    text = " ".join(message.split())
    words = _WORD_RE.findall(text)
    if not words or len(words) > MAX_WORDS:
        return ""
    own = content_terms(text) - _GENERIC
    named = bool(anchors_of(text))
    opener = _OPENER_RE.match(text)
    rest = _WORD_RE.findall(opener.group("rest")) if opener else []
    # "And how do I delete a queue?" is a question of its own; "And which PyTorch?" continues one.
    if rest and (
        opener.group("opener").lower() not in _JOINERS or rest[0].lower() not in _INTERROGATIVE or len(rest) <= 3
    ):
        return "ellipsis"
    if len(split_parts(text)) > 1:
        return ""  # "What's the default port and how do I change it?": its parts point at each other
    pointing = _pointing(text)
    if pointing == "strong" and len(own) <= MAX_TERMS_POINTING:
        return "pronoun"
    if pointing == "demonstrative" and len(own) <= MAX_TERMS_DEMONSTRATIVE:
        return "pronoun"
    if not own and not named:
        return "bare"
    code = any(len(m.group(0)) > 1 for m in IDENTIFIER_RE.finditer(text)) or _QUOTED_RE.search(text)
    if len(words) <= MAX_FRAGMENT_WORDS and words[0].lower() not in _INTERROGATIVE and len(own) <= 1 and not code:
        return "fragment"  # "On Windows?", "Only the outdated ones?"
    return ""


def _pointing(text: str) -> str:
    """Whether the message points out of itself: "strong" when it holds a pronoun that does ("it", "its", "they",
    "them", "their", "one" standing for a thing), else "demonstrative" for a "that"/"this" that may ("Which setting
    controls that?"), else "". Not one that points nowhere ("Is it possible to …"), nor one whose thing the message
    names before it: an identifier or a quoted name ("I get MissingExtraError. How do I fix it?"), or a word before
    a clause it opens ("How long are jobs kept before they are deleted?")."""
    cleared = _EXPLETIVE_RE.sub(lambda m: " " * len(m.group(0)), text)
    named = [m.start() for m in IDENTIFIER_RE.finditer(text) if len(m.group(0)) > 1]
    named += [m.start() for m in _QUOTED_RE.finditer(text)]
    tokens = [(m.start(), m.group(0).lower()) for m in _WORD_RE.finditer(cleared)]
    found = ""
    for i, (start, token) in enumerate(tokens):
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if token in _STRONG or (token in _ONE and _stands_alone(following)):
            kind = "strong"
        elif token in _DEMONSTRATIVE and following not in _SUBJECTS:
            kind = "demonstrative"
        else:
            continue
        if any(n < start for n in named):
            continue
        before = [t for _, t in tokens[:i]]
        if before and before[-1] in _SUBORDINATORS and any(content_terms(t) - _GENERIC for t in before):
            continue
        if kind == "strong":
            return kind
        found = kind
    return found


def _stands_alone(following: str) -> bool:
    """Whether "one" followed by this stands for a thing ("… doesn't send one?", "the structured one look like"):
    not "one of", nor a number before its noun ("for one command")."""
    return following != "of" and not (content_terms(following) - _GENERIC)


# ---------------------------------------------------------------------------------------------------------------
# The standalone question
# ---------------------------------------------------------------------------------------------------------------


def _rewrite(message: str, context: str, reason: str) -> str:
    text = " ".join(message.split())
    earlier = " ".join(question_focus(context).split())
    if reason == "ellipsis":
        opener = _OPENER_RE.match(text)
        assert opener is not None
        if opener.group("opener").lower() not in ("what if",):
            continued = _continue(earlier, opener.group("rest").strip(_END))
            if continued:
                return continued
    elif reason == "fragment":
        continued = _continue(earlier, text.strip(_END))
        if continued:
            return continued
    return _with_topic(text, earlier)


def _with_topic(text: str, earlier: str) -> str:
    """The message with the earlier question's topic in brackets: "How do I change it (chunk size)?"."""
    have = content_terms(text)
    words = [w for w in topic_words(earlier) if not (content_terms(w) <= have)]
    if not words:
        return text
    return f"{text.rstrip(_END)} ({' '.join(words)})?"


def _continue(earlier: str, rest: str) -> str:
    """The earlier question asked again of what the continuation names, or "" when it has no place for it:

    - a phrase with the same preposition takes the old one's place ("… on Linux?" + "on macOS" → "… on macOS?"),
      a phrase with another is added ("… per question?" + "with the docuchat profile");
    - "which X" takes the place of the earlier "which …" ("Which Python version …?" + "which PyTorch" → "Which
      PyTorch version …?");
    - a noun phrase takes the place of the earlier one after an article or a word such as "default" ("What is the
      default chunk size?" + "the overlap" → "What is the default overlap size?"), a name the place of a name
      ("How do I answer with OpenAI?" + "Ollama" → "How do I answer with Ollama?")."""
    words = _WORD_RE.findall(rest)
    if not words:
        return ""
    body = earlier.rstrip(_END)
    first = words[0].lower()
    if first in _PREPOSITIONS:
        rest = first + rest[len(first) :]  # "On Windows?" continues a question: "… on Windows?"
        same = re.search(rf"\b{first}\s+[^,;:?!]*?(?=$|[,;:?!]|\s(?:{'|'.join(sorted(_PREPOSITIONS))})\s)", body, re.I)
        if same:
            return f"{body[: same.start()]}{rest}{body[same.end() :]}?"
        return f"{body} {rest}?"
    which = first in _WHICH
    phrase = re.sub(r"^(?:which|what|whose)\s+", "", rest, flags=re.I) if which else rest
    if not content_terms(phrase):
        return ""
    name = _is_name(phrase)
    spans = list(_WORD_RE.finditer(body))
    topical = [bool(content_terms(m.group(0)) - _GENERIC) for m in spans]
    i = 0
    while i < len(spans):
        if not topical[i]:
            i += 1
            continue
        end = i
        while end + 1 < len(spans) and topical[end + 1]:
            end += 1
        before = spans[i - 1].group(0).lower() if i else ""
        run = body[spans[i].start() : spans[end].end()]
        if which:
            fits = before in _WHICH
        else:
            fits = before in _SLOT_BEFORE or (name and before in _PREPOSITIONS and _is_name(run))
        if fits:
            start = spans[i].start()
            if before in ("a", "an"):  # "register a custom filter" + "context processors": its own article
                start = spans[i - 1].start()
            elif before in _SLOT_BEFORE:
                phrase = re.sub(r"^(?:the|a|an)\s+", "", phrase, flags=re.I)
            return f"{body[:start]}{phrase}{body[spans[end].end() :]}?"
        i = end + 1
    return ""


def _is_name(phrase: str) -> bool:
    """A name: written with a capital or as an identifier ("Ollama", "PostgreSQL", "--zsh")."""
    words = [w for w in _WORD_RE.findall(phrase) if w.lower() not in _DETERMINERS]
    return bool(words) and (words[0][0].isupper() or bool(IDENTIFIER_RE.fullmatch(phrase.strip())))


_WHICH = _set("which what whose")
# Words after which a noun phrase starts: its place, for the noun phrase a continuation names.
_SLOT_BEFORE = _set("the a an my your our its their default maximum minimum largest smallest new old")


def topic_words(question: str) -> list[str]:
    """What a question is about, as written, in order: its runs of content words, identifiers whole, but not a word
    alone that only asks ("How long does exporting the embedding model take?" → exporting, embedding, model; "What
    is the default chunk size?" → default, chunk, size; "How do I remove a document?" → remove, document). A
    question that names nothing else gives its content words."""
    runs: list[list[str]] = [[]]
    taken: list[tuple[int, int]] = []
    for match in IDENTIFIER_RE.finditer(question):
        if len(match.group(0).rstrip(".")) > 1 and content_terms(match.group(0)):
            taken.append(match.span())
    for match in _WORD_RE.finditer(question):
        inside = next((s for s in taken if s[0] <= match.start() < s[1]), None)
        word = question[inside[0] : inside[1]].rstrip(".") if inside else match.group(0).strip("'’-")
        if runs[-1] and runs[-1][-1] == word:
            continue  # the rest of an identifier already taken whole
        if content_terms(word):
            runs[-1].append(word)
        elif runs[-1]:
            runs.append([])
    out: dict[str, None] = {}
    for run in runs:
        if len(run) > 1 or (run and not content_terms(run[0]) <= _ASKING):  # "default", "live" alone only ask
            for word in run:
                out.setdefault(word, None)
    if not out:
        for run in runs:
            for word in run:
                out.setdefault(word, None)
    return list(out)
