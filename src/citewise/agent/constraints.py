"""What the question itself demands of the run, read from its wording before anything is retrieved.

"Do separate searches for each topic", "open at least two sources", "quote the exact error message", "use the
newest dated document", "include sections Summary and Steps", "say 'Insufficient documentation' if ...": users put
process requirements in the prompt, and the validator holds the answer to them. Detection is by patterns, not by
a model, so it is cheap, deterministic and testable; what a pattern misses is simply not enforced.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "a": 1, "an": 1, "single": 1, "both": 2, "a couple of": 2, "a few": 3, "several": 3,
}  # fmt: skip
_COUNT = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten|both|several|a few|a couple of)"
_QUOTE_CHARS = "\"'“”‘’`"
_QUOTED = r"[\"“‘'`]([^\"“”‘’'`\n]{2,80})[\"”’'`]"


class Constraints(BaseModel):
    """Requirements stated in the question. Defaults mean "nothing asked beyond the usual"."""

    min_searches: int = Field(1, ge=0, description="search_docs calls the run must make.")
    search_topics: list[str] = Field(default_factory=list, description="Topics to search for separately.")
    min_opened: int = Field(0, ge=0, description="Sources the run must open with open_citation.")
    exact_quote: bool = Field(False, description="The answer must quote the docs verbatim.")
    quote_targets: list[str] = Field(default_factory=list, description="What to quote (e.g. 'error message').")
    newest_dated_rule: bool = Field(False, description="On conflicting sources, the newest dated one wins.")
    required_sections: list[str] = Field(default_factory=list, description="Section headings the answer must have.")
    insufficiency_phrase: str | None = Field(
        None, description="Exact words to use when the docs don't hold the answer (e.g. 'Insufficient documentation')."
    )

    @property
    def any(self) -> bool:
        """True when the question asked for anything beyond the defaults."""
        return self != Constraints()


def _count(word: str) -> int:
    word = word.lower().strip()
    return int(word) if word.isdigit() else _NUMBER_WORDS.get(word, 1)


def _split_list(text: str) -> list[str]:
    """ "A, B, and 'C'" → ["A", "B", "C"]."""
    text = re.split(
        r"[.;:?!\n]|\b(?:then|so that|before|after|in your answer|to answer|if)\b"
        r"|(?:,\s*|\s+)and\s+(?:say|open|quote|search|write|respond|reply|cite|state)\b",
        text,
        flags=re.I,
    )[0]
    parts = re.split(r"\s*,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\s*/\s*", text)
    items = []
    for part in parts:
        part = part.strip().strip(_QUOTE_CHARS + "*").strip()
        part = re.sub(r"^(?:the|a|an)\s+", "", part, flags=re.I)
        if part and len(part) <= 60:
            items.append(part)
    return items


def _searches(q: str, c: Constraints) -> None:
    topics: list[str] = []
    separate = False
    # "search for X and Y separately", "search separately for X and Y"
    m = re.search(
        r"\bsearch(?:es)?\s+(?:the docs\s+)?(?:separately\s+)?(?:for|on|about)\s+(.+?)\s+separately\b", q, re.I
    )
    m = m or re.search(r"\bsearch(?:es)?\s+separately\s+(?:for|on|about)\s+([^.;?!\n]+)", q, re.I)
    if m:
        separate, topics = True, _split_list(m.group(1))
    # "separate searches for each topic: A, B", "separate searches for A and B", "one search per topic"
    m = re.search(r"\b(?:separate|individual|distinct)\s+searches?\b(?:\s+(?:for|on|about)\s+([^.;?!\n]+))?", q, re.I)
    m = m or re.search(r"\bone\s+search\s+(?:per|for each)\s+(\w+)", q, re.I)
    if m:
        separate = True
        tail = (m.group(1) or "").strip()
        each = re.match(
            r"(?:each|every|both|all)\s+(?:of\s+(?:the\s+)?)?(?:(?:topic|subject|question|part|item|term)s?)?\s*:?\s*",
            tail,
            re.I,
        )
        listed = tail[each.end() :] if each else tail
        if listed:
            topics = topics or _split_list(listed)
    if separate:
        c.search_topics = topics
        c.min_searches = max(c.min_searches, len(topics), 2)
    # "at least three searches", "run 2 searches", "do two separate searches"
    m = re.search(
        rf"\b(?:at least|minimum of|min\.?|run|do|make|perform|use)\s+{_COUNT}\s+"
        r"(?:separate\s+|different\s+)?searches\b",
        q,
        re.I,
    )
    if m:
        c.min_searches = max(c.min_searches, _count(m.group(1)))


def _opened(q: str, c: Constraints) -> None:
    m = re.search(
        rf"\bopen(?:ing)?\s+(?:at least\s+|a minimum of\s+)?(?:the\s+)?(?:top\s+|first\s+)?{_COUNT}\s+"
        r"(?:of\s+the\s+)?(?:different\s+|separate\s+|distinct\s+)?(?:citations?|sources?|documents?|docs|chunks?|"
        r"results?|pages?|passages?)\b",
        q,
        re.I,
    )
    if m:
        c.min_opened = max(c.min_opened, _count(m.group(1)))
    elif re.search(r"\bopen\s+(?:the\s+|each\s+|every\s+)?(?:citation|source|document|chunk)s?\b", q, re.I):
        c.min_opened = max(c.min_opened, 1)


def _quotes(q: str, c: Constraints) -> None:
    m = re.search(
        r"\b(?:quote|cite|copy|give|show|reproduce)\s+(?:me\s+)?(?:the\s+)?(?:exact|precise|literal|verbatim)\s+"
        r"([^.;?!,\n]+)",
        q,
        re.I,
    )
    if m or re.search(
        r"\b(?:verbatim|word[- ]for[- ]word|exact (?:wording|words|text|quote)|quote (?:it|them|the docs?|directly))\b",
        q,
        re.I,
    ):
        c.exact_quote = True
    if m:
        target = re.split(r"\s+(?:from|in|of the docs|that|which|for|when|if)\b", m.group(1), maxsplit=1, flags=re.I)[0]
        target = target.strip().strip(_QUOTE_CHARS)
        if target and target.lower() not in ("text", "words", "wording", "quote"):
            c.quote_targets.append(target)
    if c.exact_quote:
        for literal in re.findall(_QUOTED, q):
            if literal.lower() != (c.insufficiency_phrase or "").lower():
                c.quote_targets.append(literal)


def _newest(q: str, c: Constraints) -> None:
    if re.search(
        r"\b(?:newest|most recent|latest|most recently (?:dated|updated))\b[^.?!\n]{0,40}"
        r"\b(?:dated\s+)?(?:document|doc|source|page|version|date)s?\b",
        q,
        re.I,
    ) or re.search(r"\b(?:prefer|trust|use|go with)\s+the\s+(?:newer|newest|later|latest)\b", q, re.I):
        c.newest_dated_rule = True


def _sections(q: str, c: Constraints) -> None:
    m = re.search(
        r"\b(?:include|with|add|use|have|contain(?:ing)?|organi[sz]e\s+(?:it\s+)?(?:in|into))\s+"
        r"(?:the\s+)?(?:following\s+)?(?:(?:\w+|\d+)\s+)?(?:sections?|headings?|headers?)\s*(?:called|named|titled)?\s*:?\s*"
        r"(.+?)(?:[.;?!\n]|$)",
        q,
        re.I,
    )
    if m:
        c.required_sections = _split_list(m.group(1))
        return
    # "include a 'Summary' section", "with a Limitations section"
    found = re.findall(
        rf"\b(?:include|with|add|have)\s+(?:a|an|the)\s+(?:{_QUOTED}|([A-Z][\w -]{{1,30}}?))\s+(?:section|heading)\b", q
    )
    c.required_sections = [a or b for a, b in found]


def _insufficiency(q: str, c: Constraints) -> None:
    m = re.search(
        r"\b(?:say|write|respond with|reply with|answer with|state|output|return|print|use the phrase)\s*:?\s*"
        + _QUOTED,
        q,
        re.I,
    )
    if m:
        c.insufficiency_phrase = m.group(1).strip()
        return
    m = re.search(
        r"\b(?:say|write|state|respond with|reply with)\s+(insufficient documentation|not documented)\b", q, re.I
    )
    if m:
        c.insufficiency_phrase = m.group(1)[0].upper() + m.group(1)[1:]


def analyze_constraints(question: str) -> Constraints:
    """The constraints a question states; `Constraints()` when it states none."""
    c = Constraints()
    q = " ".join(question.split())
    _searches(q, c)
    _opened(q, c)
    _insufficiency(q, c)
    _quotes(q, c)
    _newest(q, c)
    _sections(q, c)
    return c
