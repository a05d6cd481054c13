"""What a question asks for, read from its wording alone: its kind, its subject, the anchors an answer must hold,
and its parts when it asks several things at once.

- **kind**: a definition ("what is X"), a procedure ("how do I …"), a value ("what is the default …", "which
  port", "how many", "when"), yes/no, a list, a reason ("why"), an entity ("who", "where"), or general. Quote mode
  picks the sentence that answers that kind, not merely the most similar one.
- **anchors**: what the question hinges on and the evidence must name as written — identifiers (`--prune`,
  `CITEWISE_API_KEYS`, `/api/agent/stream`), numbers, versions, dates, quoted strings and names ("enclosure 417",
  "the 2022 Citrus Bowl"). A passage about the same topic that lacks one does not answer the question.
- **parts**: "What is X and how do I Y?" is two questions; each is searched and answered (or reported missing) on
  its own.

Patterns, not a model: cheap, deterministic and testable; English wording only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from citewise.text import SENTENCE_END_RE, STOPWORDS, content_terms, content_words, identifiers


class QuestionKind(StrEnum):
    DEFINITION = "definition"
    PROCEDURE = "procedure"
    VALUE = "value"
    YES_NO = "yes_no"
    LIST = "list"
    REASON = "reason"
    ENTITY = "entity"
    GENERAL = "general"


_AUX = r"(?:is|are|was|were|can|could|do|does|did|should|will|would|has|have|had|may|might|must|shall)"
_VALUE_NOUNS = (
    r"default|defaults|maximum|minimum|max|min|limit|limits|size|number|count|port|url|uri|address|id|identifier|"
    r"version|value|price|cost|fee|fees|rate|timeout|path|endpoint|name|filename|location|directory|folder|"
    r"duration|length|amount|percentage|ratio|threshold|capacity|speed|latency|throughput|date|year|time|"
    r"deadline|frequency|interval|period|unit|format|extension|key|code|command|flag|option|setting|variable|"
    r"chain\s*id|tps|gas|supply|score|temperature|population|height|distance|weight|age|total"
)
_PROCEDURE_RE = re.compile(
    r"^(?:how\s+(?:do|can|could|should|would|to|must|may|might)\b(?:\s+(?:i|we|you|one|they|users?))?"
    r"|how\s+(?:is|are)\s+\w+(?:\s+\w+)?\s+(?:done|configured|set|installed|enabled|created|deployed|used)\b"
    r"|what\s+(?:are\s+)?(?:the\s+)?steps\b|steps\s+to\b|(?:is\s+there\s+)?(?:a\s+)?way\s+to\b"
    r"|what\s+(?:command|commands|code)\b|which\s+(?:command|commands)\b"
    r"|(?:install|configure|set\s*up|setup|enable|disable|create|add|remove|delete|run|deploy|connect|change|"
    r"use|get|update|upgrade|migrate|start|stop|restart|build|write|call|send|query|fetch|register|verify|"
    r"reset|rotate|generate|import|export|integrate|bridge|stake|mint|transfer|ingest|index|serve)\b)",
    re.I,
)
# "Which path parameter convertors come built in?", "What headers does it add?": the noun asked about is plural (not
# "status", "class", "address"), so the answer is a list, whatever value noun ("path") qualifies it. Not past "of"
# ("What percentage of validators must …" asks a value) nor a condition ("What happens when keys are …").
_PLURAL_HEAD_RE = re.compile(
    r"^(?:which|what)\s+(?:(?!(?:of|when|if|whenever|once|after|before|while|happens?|happened)\b)[\w-]+\s+){0,3}?"
    r"([a-z]+(?<![sui])s)\s+"
    r"(?:are|were|come|ship|exist|does|do|did|can|could|will|should|must)\b",
    re.I,
)
# "key" is a value (an API key) but also an adjective: "What are the key innovations …?" asks for a list
_NOT_KEY_ADJECTIVE = r"(?!(?<=key)\s+(?!(?:does|goes|has|is|was|lets|makes|gives|uses|needs)\b)[a-z]+[^s\W]s\b)"
_VALUE_RE = re.compile(
    rf"^(?:how\s+(?:many|much|long|often|big|large|fast|old|far|high|low|quickly|soon)\b"
    rf"|when\b|what\s+(?:year|date|day|time|month|port|version|percentage|number)\b"
    rf"|(?:what|which)(?:'s|\s+is|\s+are|\s+was|\s+were)?\s+(?:the\s+|a\s+|an\s+|its\s+|their\s+)?"
    rf"(?:[\w-]+\s+){{0,4}}?(?:{_VALUE_NOUNS})\b{_NOT_KEY_ADJECTIVE}"
    rf"|which\s+(?:[\w-]+\s+){{0,2}}?(?:{_VALUE_NOUNS})\b{_NOT_KEY_ADJECTIVE})",
    re.I,
)
_DEFINITION_RE = re.compile(
    r"^(?:what(?:'s|\s+is|\s+are|\s+was|\s+were)\s+(?P<subject>.+?)"
    r"|what\s+(?:does|do)\s+(?P<subject2>.+?)\s+(?:mean|stand\s+for|do|refer\s+to)(?:\s+(?:in|for|on|with)\s+.+?)?"
    r"|(?:define|definition\s+of|meaning\s+of|explain)\s+(?P<subject3>.+?)"
    r"|what\s+is\s+meant\s+by\s+(?P<subject4>.+?))\s*[?.!]*$",
    re.I,
)
# "What is the testnet token called?"; not "What is returned when the handler is called?" (a clause, and a passive)
_CALLED = (
    r"^(?:what|how)(?:['’]s|\s+is|\s+are|\s+was|\s+were)\s+"
    r"(?!(?:.*\s)?(?:when|whenever|if|once|after|before|while|which|that|where|is|are|was|were|be|been|by)\s)"
    r"\S.*?\s+(?:called|named|known\s+as)\s*[?.!]*$"
)
_CALLED_RE = re.compile(_CALLED, re.I)
_WHAT_DOES_RE = re.compile(
    r"^what\s+(?:does|do)\s+(.+?)\s+(?:mean|stand\s+for|do|refer\s+to)(?:\s+(?:in|for|on|with)\s+.+?)?\s*[?.!]*$", re.I
)
_LIST_RE = re.compile(
    r"^(?:(?:what|which)\s+(?:are|were)\s+(?:the\s+|some\s+)?(?:\w+\s+){0,3}?"
    r"(?:types|kinds|options|ways|modes|features|components|steps|tools|formats|methods|benefits|advantages|"
    r"differences|requirements|properties|parts|ones|[a-z]+s)\b|list\b|name\s+(?:the|all|some)\b"
    r"|(?:what|which)\s+(?!(?:is|are|was|were|does|do|did|can|could|should|will|would)\b)(?:\w+\s+)?\w+s\s+"
    r"(?:are|exist|does|do|can)\b)",
    re.I,
)
_ENTITY_RE = re.compile(
    r"^(?:who|whom|whose|where|which\s+(?:company|team|person|country|city|organi[sz]ation))\b", re.I
)
_YES_NO_RE = re.compile(rf"^{_AUX}\s+(?!there\s+a\s+way)", re.I)
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
# "When a user lacks the scopes, what status …", "If I delete a file, do I …": a condition before the question itself,
# which is what says the question's kind ("When" here asks for no date). Not "When was …", "If so, …" stays whole.
_CONDITION_RE = re.compile(
    rf"^{_CONDITION}\s+"
    rf"(?!(?:is|are|was|were|do|does|did|can|could|will|would|should|has|have|had|so)\b)[^?,;:]{{1,160}},\s+"
    rf"(?=(?:{_PREPOSITION}\s+(?:which|what|whom|whose)|{_INTERROGATIVE})\b)",
    re.I,
)
# "Since which release …", "In which file …", "To whom …": the question word after its preposition. Not an idiom
# that asks no value ("To what extent …", "For what reason …", "In what order …").
_PREPOSITION_RE = re.compile(
    rf"^{_PREPOSITION}\s+(?=(?:which|whom|whose)\b|how\s+(?:many|much|long|often)\b|"
    r"what\s+(?!(?:extent|reason|purpose|way|ways|order|sense|degree|end|point)\b))",
    re.I,
)
# "… and how do I …", "…, and what is …", "…; where …": a second question joined to the first.
# After a comma, a question mark or a semicolon the second question may open with its preposition ("…, and over how
# many months does it vest?", "…; in which file is it set?"), when a question follows: its verb before its subject
# ("does it", "is the key"). "…, in which section of the file?" only narrows the first question, and "…, after which
# cached entries are evicted?" is a relative clause; after a bare "and" that is more often one question's own words.
_ASKED = r"(?:it|i|we|you|they|he|she|this|that|these|those|there|the|a|an|my|your|its|their|our)"
_PART_SPLIT_RE = re.compile(
    rf"(?:\?\s+|[,;]\s*(?:and\s+|also\s+)?)"
    rf"(?={_INTERROGATIVE}\b|{_PREPOSITION}\s+(?:how|which|what|whom|whose)\s+[^?,;]*?\b{_AUX}\s+{_ASKED}\b)"
    rf"|(?:\s+and\s+(?:also\s+)?|\s+also\s+)(?={_INTERROGATIVE}\b)",
    re.I,
)
_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w.])")
_QUOTED_RE = re.compile(r"[\"“‘`]([^\"“”‘’`\n]{2,80})[\"”’`]")
# Capitalised words that start no sentence and are no question word: names ("Citrus Bowl", "IceDB", "Hardhat").
_NAME_RE = re.compile(r"(?<![.!?:]\s)(?<!^)\b([A-Z][\w'’-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'’-]*)*)")
_POSSESSIVE_END_RE = re.compile(r"['’]s?$")
_NOT_NAMES = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "ok", "okay", "yes", "no", "please", "thanks", "hi", "hello", "faq", "q", "a"}
)


@dataclass(frozen=True)
class Question:
    """One question (or one part of a multi-part question), analysed."""

    text: str  # as asked (this part of it)
    focus: str  # without the conversation around it ("I'm new here.", "Quick question:")
    kind: QuestionKind
    subject: str | None  # what a definition question asks about ("quote mode")
    anchors: tuple[str, ...]  # identifiers, numbers, quoted strings and names the evidence must hold
    terms: frozenset[str]  # content-word stems of the focus
    expects: str | None = None  # what the answer must state: date, number, duration, name, value (see `expects`)
    negated: bool = False  # "… not …", "never", "n't": asks about an exception

    @property
    def wants_value(self) -> bool:
        return self.kind == QuestionKind.VALUE


def question_focus(question: str) -> str:
    """The question itself without the conversation around it: of several sentences the ones that ask ("I'm new
    here. How do I …?" → "How do I …?"), then without a short leading clause before the question word ("According
    to the user guide, how …" → "how …"; a condition, "If I delete a file, how …", stays: it is part of the
    question). Returns `question` unchanged when nothing is to strip."""
    parts = [p for p in SENTENCE_END_RE.split(question.strip()) if p.strip()]
    asking = [p for p in parts if p.rstrip().endswith("?")]
    focus = " ".join(asking) if asking and len(asking) < len(parts) else question.strip()
    stripped = _LEAD_RE.sub("", focus)  # "So if I delete a file, how …": the condition is then seen as one
    stripped = _LEAD_CLAUSE_RE.sub("", stripped, count=1)
    return stripped if content_terms(stripped) else focus


def classify(focus: str) -> tuple[QuestionKind, str | None]:
    """The question's kind and, for a definition, its subject."""
    text = " ".join(focus.split()).strip()
    if re.match(r"^why\b", text, re.I):
        return QuestionKind.REASON, None
    if _ENTITY_RE.match(text):
        return QuestionKind.ENTITY, None
    if _PROCEDURE_RE.match(text):
        return QuestionKind.PROCEDURE, None
    if _CALLED_RE.match(text):
        return QuestionKind.VALUE, None  # "What is the testnet token called?": its name, not what the token is
    does = _WHAT_DOES_RE.match(text)  # "what does the --prune flag do": what it is, not a value
    if does:
        return QuestionKind.DEFINITION, re.sub(r"^(?:the|a|an)\s+", "", does.group(1).strip(" `*\"'"), flags=re.I)
    plural = _PLURAL_HEAD_RE.match(text)
    if plural and not re.fullmatch(rf"(?:{_VALUE_NOUNS})", plural.group(1), re.I):
        return QuestionKind.LIST, None  # "Which path parameter convertors come built in?": not a path's value
    if _VALUE_RE.match(text):
        return QuestionKind.VALUE, None
    if _LIST_RE.match(text):
        return QuestionKind.LIST, None
    definition = _DEFINITION_RE.match(text)
    if definition:
        subject = next(g for g in definition.groups() if g)
        subject = re.sub(r"^(?:the|a|an)\s+", "", subject.strip(" `*\"'"), flags=re.I)
        if 0 < len(content_terms(subject)) <= 5:
            return QuestionKind.DEFINITION, subject
    if _YES_NO_RE.match(text):
        return QuestionKind.YES_NO, None
    if not re.search(r"\?$", text) and not re.match(_INTERROGATIVE, text, re.I):
        # Keywords instead of a question: "somi total supply", "thirdweb cli deploy command", "quote mode".
        if re.search(r"\b(?:command|commands|install|setup|deploy|how)\b", text, re.I):
            return QuestionKind.PROCEDURE, None
        if re.search(rf"\b(?:{_VALUE_NOUNS})\b", text, re.I):
            return QuestionKind.VALUE, None
        if re.search(r"\b(?:meaning|mean|means|definition)\b", text, re.I):
            subject = re.sub(r"\b(?:meaning|mean|means|definition|of)\b", "", text, flags=re.I).strip(" ?.!`*\"'")
            return QuestionKind.DEFINITION, subject or None
        if len(content_terms(text)) <= 3:
            return QuestionKind.DEFINITION, text.strip(" ?.!`*\"'")  # a bare term: "quote mode", "IceDB"
    return QuestionKind.GENERAL, None


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
    for match in _NAME_RE.finditer("" if title_case else focus):  # "How Do I Change The Port": no names
        if match.start(1) == 0:
            continue
        name = _POSSESSIVE_END_RE.sub("", match.group(1)).strip("'’-")  # "Bruno Mars's" names Bruno Mars
        if not name or name.lower() in _NOT_NAMES or name.lower() in STOPWORDS or not content_words(name):
            continue
        found.setdefault(name, None)
    # A name inside a longer anchor ("API" in "CITEWISE_API_KEYS") is not an anchor of its own.
    anchors = list(found)
    return tuple(a for a in anchors if not any(a != b and a in b for b in anchors))


_PRONOUN_RE = re.compile(r"\b(it|its|them|they|their|this|that|these|those|one)\b", re.I)


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


_EXPECTS = (
    (
        "date",
        re.compile(
            r"^(?:when|since\s+when|what\s+(?:year|date|day|month|time|century|decade)|in\s+what\s+year|"
            r"which\s+year)\b",
            re.I,
        ),
    ),
    ("duration", re.compile(r"^how\s+(?:long|often|frequently|soon|quickly)\b", re.I)),
    (
        "number",
        re.compile(
            r"^(?:how\s+(?:many|much|big|large|fast|old|far|high|low|tall|deep|heavy)|what\s+(?:percentage|number|amount|size)|what\s+(?:is|was|are)\s+the\s+(?:number|population|size|amount|percentage|total))\b",
            re.I,
        ),
    ),
    ("location", re.compile(r"^(?:where)\b", re.I)),
    (
        "name",
        re.compile(
            r"^(?:who|whom|whose|which\s+(?:company|team|person|country|city|state|organi[sz]ation|university|band|player|author|actor|singer))\b"
            rf"|{_CALLED}",
            re.I,
        ),
    ),
)
_WHICH_NOUN_RE = re.compile(
    r"^(?:which|what)\s+(?!(?:is|are|was|were|does|do|did|can|could|should|will|would|has|have|had|happens?|kind|kinds|type|types|way|ways)\b)[a-z][\w-]*\b",
    re.I,
)
_NEGATION_RE = re.compile(r"\b(?:not|never|no|none|without|except|n't|cannot|neither|nor)\b|n't\b", re.I)


def expects(focus: str, kind: QuestionKind) -> str | None:
    """What kind of statement answers the question: a date ("when …"), a number ("how many …"), a duration ("how
    long …"), a name ("who …", "where …"), or any value (other value questions); None when nothing in particular."""
    text = " ".join(focus.split())
    for name, pattern in _EXPECTS:
        if pattern.match(text):
            return name
    if kind == QuestionKind.VALUE:
        return "value"
    if _WHICH_NOUN_RE.match(text) and kind not in (QuestionKind.PROCEDURE, QuestionKind.LIST):
        return "name_or_value"  # "Which developer made …", "What company …": a name or a value
    return None


def analyse(question: str) -> Question:
    focus = question_focus(question)
    # The kind from the question itself ("what status …", "which release …"); its words from all of it.
    asking = _PREPOSITION_RE.sub("", _CONDITION_RE.sub("", focus, count=1), count=1)
    kind, subject = classify(asking)
    return Question(
        text=question,
        focus=focus,
        kind=kind,
        subject=subject,
        anchors=anchors_of(focus),
        terms=frozenset(content_terms(focus)),
        expects=expects(asking, kind),
        negated=bool(_NEGATION_RE.search(focus)),
    )
