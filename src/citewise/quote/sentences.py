"""The candidate quotes of a set of passages: sentences (markdown-aware, kept as [start, end) spans of the chunk's
text so what is quoted is exactly what the document says) and whole fenced code blocks, with what a selection
needs to know about each — its words, whether it points back ("They …") or elsewhere ("See [X](x.md) …"), whether
it holds a value (a number, a URL, inline code), whether it defines something.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from citewise.text import FENCE_RE, code_blocks, content_terms, paragraphs, split_sentences
from citewise.types import ScoredChunk

MIN_SENTENCE_WORDS = 4
MAX_ITEM_SENTENCES = 4  # a list item of at most this many sentences ...
MAX_ITEM_WORDS = 60  # ... and words is also a candidate whole

# A sentence that opens by pointing back ("They apply to …", "This means …", "In that case …") says nothing on its
# own: it is quoted only right after the sentence it points back to.
_ANAPHORIC_RE = re.compile(
    r"^[\"'“‘(\[*_]*(?:(?:they|it|its|it's|this|these|those|that|that's|such|both|them|their|he|she|his|her)\b"
    r"|in (?:that|this|such|either|both) cases?\b|the (?:latter|former|above)\b"
    r"|defaults? to\b)",  # "Defaults to `9`." in an option's description: the default of what came before
    re.I,
)
# A sentence that only points elsewhere ("See [Asking questions](answers.md) for how …", "For more, see …",
# "Read [the guide](x.md) to …") answers nothing by itself.
_NAVIGATION_RE = re.compile(
    r"^[\"'“‘(\[*_]*(?:see\b"
    r"|(?:for|to)\b[^.!?]{0,80}?,\s*(?:see|read|refer to)\b"
    r"|(?:read|refer to|check out|visit|go to|head (?:over )?to|continue (?:with|to|reading)|more (?:on|about|in))\b"
    r"(?=[^\n]*(?:\]\(|https?://|\.md\b|\b(?:page|section|chapter)\b)))",
    re.I,
)
# A question in the docs (a FAQ's "Q:" line, a rhetorical "Why does this matter?") asks, it doesn't answer.
_ASKING_RE = re.compile(r"^[\"'“‘(\[*_]*(?:q|question)\s*[:.)]|\?[\"'”’)*_]*$", re.I)
# A FAQ's answer label ("A: Yes, …", "**A:** …", "**A**: …", "Answer: …"): not part of what the answer says, so a
# quote starts after it. Markup around the label must close inside it ("**A: No.**" keeps its label: cut, the quote
# would end in an unmatched "**").
_ANSWER_LABEL_RE = re.compile(
    r"(?:(?P<mark>[*_]{1,2})(?:A|Answer|ANSWER)(?:(?P=mark)\s*:|\s*:(?P=mark))|(?:A|Answer|ANSWER)\s*:)[ \t]+(?=\S)"
)
_LINK_TARGET_RE = re.compile(r"\]\(([^)#\s]+\.(?:md|mdx|html?|rst|txt))(?:#[^)]*)?\)")
# Values a "what is the default / which port / how many / when" question wants: numbers (not list ordinals), inline
# code, URLs, hex addresses, quantities in words.
_VALUE_RE = re.compile(
    r"`[^`\n]+`|https?://\S+|\b0x[0-9a-f]{4,}\b|(?<![\w.])\d+(?:[.,:]\d+)*(?:\s*(?:%|ms|s|kb|mb|gb|tb|k|m|x))?\b"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|billion|dozen|half|once|twice|daily|weekly|monthly|hourly|annually|yearly)\b"
    r"|\b(?:january|february|march|april|may|june|july|august|september|october|november|december)\b"
    r"|\b(?:true|false|enabled|disabled|on|off|none|null)\b",
    re.I,
)
_DEFINES_RE = (
    r"(?:is|are|was|were|means|refers to|stands for|describes|denotes|lets|allows|provides|acts as|serves as|"
    r"occurs when|happens when|consists of|represents|enables|performs|returns|creates|takes)"
)


@dataclass(frozen=True)
class Sentence:
    slot: int  # position of its chunk in the input list
    n: int  # citation number of its chunk
    start: int
    end: int
    text: str
    terms: frozenset[str]
    code: bool = False  # a whole fenced code block, quoted as is
    index: int = 0  # position among its chunk's sentences (reading order)
    step: bool = False  # a list item ("- …", "1. …"): a step of a procedure or an item of a list
    header: str = ""  # a table row: its table's header and separator lines, quoted above it
    label: bool = False  # a short label line with the short value lines under it ("Chain ID / 5031 / 50312"); with
    # a header, a row of a flattened table, quoted as a markdown table row under it
    title: str = ""  # the name of the section it describes, quoted before it ("**Mangum**: Serverless ASGI adapter …")

    @property
    def block(self) -> bool:
        """Quoted as a block of its own (a code block or a table row), not inside a paragraph."""
        return self.code or bool(self.header)

    def rendered(self) -> str:
        if self.title:
            return f"**{self.title}**: {self.text}"
        if self.label and self.header:
            return f"{self.header}\n{label_row(self.text)}"
        return f"{self.header}\n{self.text}" if self.header else self.text

    @property
    def leads_in(self) -> bool:
        """Whether it ends with ":" (markup aside): "Run this:" says what follows, and nothing without it."""
        return self.text.rstrip("*_ ").endswith(":")

    @property
    def key(self) -> tuple[int, int, int]:
        """Its span in its passage: a whole list item and its first sentence are two candidates (starting alike, or
        the sentence after an emphasis marker the item opens)."""
        return (self.slot, self.start, self.end)

    def overlaps(self, other: Sentence) -> bool:
        """Whether the two quote any of the same text (a sentence inside a list item quoted whole)."""
        return self.slot == other.slot and self.start < other.end and other.start < self.end


def is_anaphoric(text: str) -> bool:
    """Whether a sentence opens by pointing back at what came before ("They …", "This means …", "In that case …")."""
    return bool(_ANAPHORIC_RE.match(text))


def is_navigation(text: str) -> bool:
    """Whether a sentence only points elsewhere ("See [X](x.md) for …", "For more, see …", "Read [X](x.md) to …")."""
    return bool(_NAVIGATION_RE.match(text))


def is_asking(text: str) -> bool:
    """Whether a sentence is itself a question (a FAQ's "Q:" line, a rhetorical question): it answers nothing."""
    return bool(_ASKING_RE.search(text.strip()))


def link_targets(text: str) -> list[str]:
    """File names a sentence links to ("[Asking questions](answers.md)" → "answers.md")."""
    return [target.rsplit("/", 1)[-1] for target in _LINK_TARGET_RE.findall(text)]


def values(text: str) -> list[str]:
    """The values a sentence states (numbers, inline code, URLs, addresses, quantities and dates in words)."""
    return [m.group(0) for m in _VALUE_RE.finditer(text)]


def subject_opening(subject: str, *, possessive: bool = False) -> str | None:
    """The pattern of a lower-cased sentence's start that names `subject`: quotes, markup and an article (with
    `possessive`, also a name's "Starlette's") before it, markup or punctuation between its words, markup after it.
    None when the subject has no word."""
    words = [re.escape(w) for w in re.findall(r"[\w'-]+", subject.lower())]
    if not words:
        return None
    owner = r"(?:\w+['’]s\s+)?" if possessive else ""
    name = r"[\s`*_\"'()-]*".join(words)
    return rf"^[\s>*_`\"'“]*(?:(?:the|a|an)\s+)?{owner}[`*_\"'“]*{name}[`*_\"'”]*"


def defines(text: str, subject: str) -> bool:
    """Whether a sentence defines `subject`: it opens with the subject (an article, markup or a name in front
    allowed) followed by "is/are/means/…", or "subject: …" / "subject — …", or with the subject in bold, the way
    documentation introduces a term ("**Quote mode** (the default) needs no language model."). Not when the verb is
    a passive naming who stands behind the subject ("Somnia is supported by …", "X is maintained by …"): that says
    who, not what ("A job is defined by a YAML file" still defines)."""
    start = subject_opening(subject, possessive=True)
    if start is None:
        return False
    lowered = text.lower()
    opening = rf"{start}(?:s)?"
    between = r"(?:\s*\([^)]*\))?(?:,[^,]{0,60},)?\s*"
    if re.match(rf"{opening}{between}(?:is|are|was|were)\s+{_BACKED_BY}", lowered):
        return False
    if re.match(rf"{opening}{between}(?:{_DEFINES_RE}\b|[:—–-]\s)", lowered):
        return True
    # In bold, on the sentence's own line, then words about it: not a bold line above a paragraph, not a list of names
    bold = r"[\s`_\"'()-]*".join(re.escape(w) for w in re.findall(r"[\w'-]+", subject.lower()))
    after = r"(?:[ \t]*\([^)\n]*\))?[ \t]+(?!and\b|or\b|vs\.?\b|versus\b)[a-z]"
    return bool(re.match(rf"^[ \t>]*(?:\*\*|__)`?{bold}`?(?:s)?(?:\*\*|__){after}", lowered))


def describes(text: str, subject: str) -> bool:
    """Whether a sentence says what `subject` is or does: it defines it (`defines`), or opens with it and a verb in
    the present ("`citewise doctor` reads the index and the registry and reports where they disagree:")."""
    if defines(text, subject):
        return True
    opening = subject_opening(subject)
    if opening is None:
        return False
    # A verb with words after it, not a plural noun ("Orbitron doctor flags:") nor one before a verb ("… errors
    # include:", "… keys are listed below:")
    verb = (
        r"(?:also\s+|only\s+|then\s+)?[a-z]*[a-rt-z]s\s+"
        r"(?!(?:are|is|were|was|include|includes|have|has|can|will|must|may)\b)[^\s:]"
    )
    return bool(re.match(rf"{opening}(?:\s*\([^)]*\))?\s+{verb}", text.lower()))


# "X is supported by …", "X was (originally) developed and maintained by …": who is behind the subject, not what it is
_BACKED_BY = (
    r"(?:(?:\w+ly|also|now|still|being|jointly)\s+){0,2}(?:supported|maintained|developed|built|created|written|backed|funded|sponsored|owned|"
    r"operated|used|run|made|led|founded|incubated|powered|audited|designed|published|released|authored|hosted|"
    r"managed|governed|trusted|adopted)(?:\s+and\s+\w+)?\s+by\b"
)


def _cut_head(chunk: ScoredChunk, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether the chunk's first sentence is the tail of a sentence cut by the chunk overlap ("words, it refuses."):
    it starts in lower case or on punctuation, in a chunk after a document's first. Never quoted, nor taken for what
    a later sentence points back to."""
    if chunk.chunk_index == 0 or not spans:
        return False
    first = chunk.text[spans[0][0] : spans[0][1]].lstrip()[:1]
    return bool(first) and (first.islower() or first in ",;:)]}.")


def _is_list_item(text: str, start: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    return bool(re.match(r"\s*(?:[-*+•]|\d+[.)])\s+", text[line_start : start + 1]))


def item_marker(text: str, pos: int) -> str | None:
    """The marker ("-", "*", "1.") of the list item the text at `pos` belongs to, read on its first line, which may
    be a line or more above (a wrapped item); None outside a list item."""
    line_start = text.rfind("\n", 0, pos) + 1
    while True:
        marker = _ITEM_START_RE.match(text, line_start)
        if marker:
            return marker.group(0).strip()
        if line_start == 0:
            return None
        above = text.rfind("\n", 0, line_start - 1) + 1
        if not text[above:line_start].strip():
            return None  # a blank line: the paragraph starts below it, and it is no item
        line_start = above


_TABLE_ROW_RE = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_TABLE_RULE_RE = re.compile(r"^[ \t]*\|?[ \t:]*-{3,}[ \t:]*(?:\|[ \t:]*-{3,}[ \t:]*)*\|?[ \t]*$")
_IDENTIFIER_HINT_RE = re.compile(r"[`_/.:@#]|\d")
# Two or three capitalised words and a full stop, alone on a line ("Deploy Contract."): a heading that lost its markup
# on the way to text. Its full stop would make it a short line worth quoting (an identifier hint, see `_short_value`).
_HEADING_LINE_RE = re.compile(r"[A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+){1,2}\.")


def table_rows(text: str) -> list[tuple[int, int, str]]:
    """(start, end, header) of every body row of the markdown tables in `text`; header is the table's first line and
    its separator line, verbatim."""
    rows: list[tuple[int, int, str]] = []
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    i = 0
    while i + 2 < len(lines):
        if _TABLE_ROW_RE.match(lines[i]) and _TABLE_RULE_RE.match(lines[i + 1]):
            header = lines[i].rstrip("\r\n") + "\n" + lines[i + 1].rstrip("\r\n")
            j = i + 2
            while j < len(lines) and _TABLE_ROW_RE.match(lines[j]):
                end = offsets[j] + len(lines[j].rstrip("\r\n"))
                rows.append((offsets[j], end, header))
                j += 1
            i = j
        else:
            i += 1
    return rows


def whole_table(row: Sentence, chunks: Sequence[tuple[int, ScoredChunk]], max_rows: int = 12) -> Sentence | None:
    """The whole table a row belongs to (header and every body row), if it has at most `max_rows` rows: what a "which
    … are there" question wants when the answer is a table."""
    text = chunks[row.slot][1].text
    rows = [(start, end) for start, end, header in table_rows(text) if header == row.header]
    mine = [r for r in rows if r[0] <= row.start <= r[1]]
    if not mine or len(rows) > max_rows:
        return None
    # rows of one table are contiguous: from the first row after this table's header to the last
    same = [r for r in rows if abs(r[0] - row.start) < 10_000]
    start, end = same[0][0], same[-1][1]
    body = text[start:end]
    terms = frozenset(content_terms(body))
    return Sentence(row.slot, row.n, start, end, body, terms, index=-1, header=row.header)


# Words that are a value only with nothing but a few words about the setting beside them ("On", "Off (default)",
# "Enabled by default", "true, false"): among other words they are mostly prose ("Contracts on Somnia", "none of
# them").
_WORD_VALUES = frozenset({"on", "off", "none", "null", "true", "false", "enabled", "disabled"})
_BESIDE_WORD_VALUES = frozenset({"default", "by", "recommended", "or", "and", "the", "is"})


def _short_value(text: str) -> bool:
    """A short line worth quoting although it is no full sentence: it states a value or names an identifier."""
    if _IDENTIFIER_HINT_RE.search(text):
        return True
    found = [v.lower() for v in values(text)]
    if any(v not in _WORD_VALUES for v in found):
        return True
    words = re.findall(r"[a-z]+", text.lower())
    return bool(found) and all(w in _WORD_VALUES or w in _BESIDE_WORD_VALUES for w in words)


_IMAGE_ONLY_RE = re.compile(r"^\s*(?:!\[[^\]\n]*\]\([^)\n]*\)\s*)+$")  # a title may follow the URL
# A caption set in italics alone: "_Diagram showing the difference between …_", "*Figure 2: The write path.*"
_CAPTION_RE = re.compile(
    r"^\s*([*_])(?:(?:figure|diagram|image|screenshot|illustration|chart|picture|photo)\b|fig\.)[^\n]*\1\s*$", re.I
)
_LINK_RE = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)|<https?://[^>\s]*>|https?://\S+")
_WORD_RE = re.compile(r"[A-Za-z]{2,}")


def link_words(text: str) -> str:
    """`text` with each link replaced by its words and every URL dropped: what it says, not where it points."""
    return re.sub(r"https?://\S+", " ", _LINK_RE.sub(lambda m: m.group(1) or " ", text))


def _pure_value(text: str) -> bool:
    """A line that is only a value: a number, an address, a link or a URL, no words besides ("5031",
    "[0x0000…da032](https://explorer…)"): what a label line names, never a label itself."""
    return not _WORD_RE.search(re.sub(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{16,}\b", " ", link_words(text), flags=re.I))


def is_link_trail(text: str) -> bool:
    """Page furniture a scraped site leaves in the text: breadcrumbs and "Previous / Next" links — a line made of
    links, with hardly a word outside them ("[PreviousDAO UI Tutorial](/a)[NextSecurity 101](/b)")."""
    links = list(_LINK_RE.finditer(text))
    if len(links) < 2 or _pure_value(text):
        return False  # one link in a short line is a statement ("Use [RainbowKit](…)."), or a value
    outside = _LINK_RE.sub(" ", text)
    return len(_WORD_RE.findall(outside)) <= 2 or sum(m.end() - m.start() for m in links) >= 0.8 * len(text.strip())


# A page's date stamp ("Last updated 2 months ago", "Last updated on Mar 3, 2024 by Ann", "Last update: 2024-05-01"),
# which site generators (GitBook, Docusaurus, MkDocs) print under every page: never what a question asks.
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DATE_STAMP_RE = re.compile(
    r"^[*_]*(?:page\s+)?last\s+(?:updated|update|modified|edited|changed)[*_]*\s*:?[*_]*\s*(?:on\s+|at\s+)?"
    rf"(?:\d|{_MONTH}\s+\d|today\b|yesterday\b|recently\b|(?:an?|\d+|a\s+few)\s+\w+\s+ago\b)",
    re.I,
)


def is_date_stamp(text: str) -> bool:
    """A page's "Last updated …" line (see `_DATE_STAMP_RE`), short as such a stamp is."""
    return len(text.split()) <= 12 and bool(_DATE_STAMP_RE.match(text.strip()))


def is_furniture(text: str) -> bool:
    """Page furniture a site generator leaves in the text: a trail of links, a page's date stamp, a picture on a
    line of its own (its markup says nothing quoted as text), or the caption under one ("_Diagram showing …_"):
    it describes a picture the answer can't show."""
    return is_link_trail(text) or is_date_stamp(text) or bool(_IMAGE_ONLY_RE.match(text) or _CAPTION_RE.match(text))


def _heading_line(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` is a whole line of its own that reads as a heading (`_HEADING_LINE_RE`): not a list
    item's text ("1. Connect Wallet."), nor a FAQ's answer after its "A:"."""
    line = _line(text, start).strip()
    return line == text[start:end].strip() and bool(_HEADING_LINE_RE.fullmatch(line))


def _line(text: str, pos: int) -> str:
    """The whole line of `text` that `pos` is on (a caption of two sentences is one line)."""
    end = text.find("\n", pos)
    return text[text.rfind("\n", 0, pos) + 1 : len(text) if end < 0 else end]


def is_shouting(text: str) -> bool:
    """A sentence set in capitals (a legal notice's disclaimers): it matches a question's words by sheer length and
    answers none."""
    letters = [ch for ch in text if ch.isalpha()]
    return len(text.split()) >= 8 and sum(ch.isupper() for ch in letters) >= 0.7 * len(letters)


_INTRO_RE = re.compile(
    r"\b(?:this|the following|in this) (?:guide|tutorial|page|section|article|document|walkthrough)\b"
    r"|\byou(?:['’]ll| will) learn\b|\bwe(?:['’]ll| will) (?:walk|show|build|create|integrate|cover|explore|look)\b"
    # ... and its conclusion: "Congratulations! You've successfully deployed …" (either apostrophe)
    r"|^\W*congratulations\b|\byou(?:['’]ve| have) (?:now )?successfully\b",
    re.I,
)


def is_introduction(text: str) -> bool:
    """A sentence about the page rather than its subject ("This guide will teach you how to …", "In this tutorial
    we'll build …", and the tutorial's "Congratulations! You've successfully deployed …"): it names what a question
    asks about and states none of it."""
    return bool(_INTRO_RE.search(text))


def is_fragment(sentence: Sentence) -> bool:
    """A short line that is no sentence, no list item, table row or label with its value: a heading repeated in
    the text ("ERC721 Smart Contract", "Gas Amount"), a button label ("Copy")."""
    text = sentence.text.strip()
    if sentence.code or sentence.step or sentence.header or sentence.label:
        return False
    return len(text.split()) <= 7 and not re.search(r"[.!?:;]['\")\]*_]*$", text) and not values(text)


def _label_runs(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """(start, end, header) of the spans from a short label paragraph ("Chain ID") through the one or two short value
    paragraphs right under it ("5031", "50312"): how definition lists and flattened tables read once converted to
    text. When such runs follow one another under as many short header paragraphs ("Network / Mainnet /
    Testnet"), they are a table's rows, and each run with a cell under every header gets the header (as markdown
    table lines) to be quoted with: "5031" alone doesn't say which network it is the chain ID of."""
    runs: list[list[int]] = []  # indices into spans: the label, then its values
    for i, (start, end) in enumerate(spans):
        label = text[start:end]
        # A label may name a version or an identifier ("EntryPoint v0.7"); a line that is only a value labels nothing.
        if len(label.split()) > 5 or label.rstrip().endswith((".", "!", "?", ":")) or _pure_value(label):
            continue
        if is_furniture(label):
            continue  # "[Previous…](…)[Next…](…)" over "Last updated 2 months ago" labels nothing
        if _is_list_item(text, start):
            continue  # "1. verifies the request," over "2. stores the 3 words,": a list's items, not a label's values
        following: list[int] = []
        for j in range(i + 1, min(i + 3, len(spans))):
            next_start, next_end = spans[j]
            value = text[next_start:next_end]
            between = text[end if not following else spans[following[-1]][1] : next_start]
            if len(value.split()) > 6 or between.count("\n") > 3 or not _short_value(value):
                break
            if _LINK_RE.search(value) and not _pure_value(value):
                break  # a link to a page ("1. [Developer](/developer)", a breadcrumb) is no value; an address is
            if is_furniture(value):
                break  # nor is a page's date stamp, or a picture ("Click on Send Tokens" over a screenshot)
            if _is_list_item(text, next_start):
                break  # nor a list's item ("npm or yarn" over "* Hardhat"): each is quoted as what it is
            if _heading_line(text, next_start, next_end):
                break  # nor a heading that lost its markup ("Smart Contracts" over "Deploy Contract.")
            following.append(j)
        if following:
            runs.append([i, *following])
    headers: dict[int, str] = {}
    header_cells: set[int] = set()
    ends: dict[int, str] = {}  # the last cell of each run -> the header its row was given ("" none)
    k = 0
    while k < len(runs):
        group = [k]
        while group[-1] + 1 < len(runs) and _adjacent(text, spans, runs[group[-1]][-1], runs[group[-1] + 1][0]):
            group.append(group[-1] + 1)
        width = len(runs[k])
        top = runs[k][0] - width  # the first of the `width` cells right above the first row: its header ...
        # ... unless those are a row with no value in it ("Symbol / SOMI / STT") under more such cells: climb over
        # whole rows of cells to the first, and stop at the end of an earlier row.
        while top - width >= 0 and all(
            _adjacent(text, spans, i, i + 1) and _cell(_at(text, spans, i)) and i not in ends
            for i in range(top - width, top)
        ):
            top -= width
        head = list(range(top, top + width))
        header = ""
        if width >= 3 and top >= 0 and all(_adjacent(text, spans, h, h + 1) for h in range(top, runs[k][0])):
            before = top - 1
            if before in ends and _adjacent(text, spans, before, top):
                # The cells above are rows with no value in them right under another row: the same table goes on,
                # under the header it began with.
                header = ends[before] if ends[before].count("---") == width else ""
            elif (
                len(group) >= 2
                # Something that is no cell stands above the header: a row that opens the passage, or that follows
                # a value left from a row cut by the chunking ("…/ <https://…> / Symbol / SOMI / STT"), may be any
                # row of a table whose header is elsewhere.
                and text[: spans[top][0]].strip()
                and not (before >= 0 and _adjacent(text, spans, before, top) and _value_cell(_at(text, spans, before)))
                and all(_header_cell(_at(text, spans, h)) for h in head)
                and all(_cell(_at(text, spans, c)) for g in group for c in runs[g])
            ):
                header = _markdown_row([_at(text, spans, h) for h in head])
                header += "\n|" + " --- |" * width
                header_cells.update(head)
        for g in group:
            if header and len(runs[g]) == width:
                headers[g] = header
            ends[runs[g][-1]] = headers.get(g, "")
        k = group[-1] + 1
    # A header cell is no label: "**Proxy (read-only)** / USDC / USD / 0x4b74…" would pair a column's name with the
    # first row's cells.
    return [
        (spans[cells[0]][0], spans[cells[-1]][1], headers.get(r, ""))
        for r, cells in enumerate(runs)
        if cells[0] not in header_cells
    ]


def _at(text: str, spans: list[tuple[int, int]], i: int) -> str:
    return text[spans[i][0] : spans[i][1]]


def _adjacent(text: str, spans: list[tuple[int, int]], i: int, j: int) -> bool:
    """Span j is the paragraph right after span i: only a paragraph break between them."""
    return j == i + 1 and j < len(spans) and not text[spans[i][1] : spans[j][0]].strip()


def _cell(text: str) -> bool:
    """A table cell, not a sentence: a few words or a value, no full stop."""
    return 0 < len(text.split()) <= 6 and not text.rstrip().endswith((".", "!", "?", ":", ";", ","))


def _value_cell(text: str) -> bool:
    return _cell(text) and _short_value(text)


def _header_cell(text: str) -> bool:
    """A column's name: a cell of at most five words that is no value and no link."""
    return _cell(text) and len(text.split()) <= 5 and not _pure_value(text) and not _LINK_RE.search(text)


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(re.sub(r"(?<!\\)\|", r"\\|", " ".join(c.split())) for c in cells) + " |"


def label_row(text: str) -> str:
    """A label run's paragraphs as one markdown table row ("Chain ID", "5031" → "| Chain ID | 5031 |")."""
    return _markdown_row([cell for cell in re.split(r"\s*\n\s*", text) if cell.strip()])  # a cell is one line


def _whole_items(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans of the short list items of `text` made of several sentences ("`minimum_size` - Do not GZip responses
    smaller than this. Defaults to `500`."): an option's description and its default, a step and its note, are one
    thing to quote, while the sentences alone would split the default from what it is the default of."""
    out = []
    for start, end in paragraphs(text):
        if not _is_list_item(text, start):
            continue
        inside = [s for s in spans if start <= s[0] and s[1] <= end]
        if 2 <= len(inside) <= MAX_ITEM_SENTENCES and len(text[start:end].split()) <= MAX_ITEM_WORDS:
            out.append((inside[0][0], inside[-1][1]))
    return out


def _after_answer_label(text: str, start: int, end: int) -> int:
    """Where the sentence `text[start:end]` starts once a FAQ's answer label before it is left out."""
    label = _ANSWER_LABEL_RE.match(text, start, end)
    return label.end() if label and end - label.end() > 1 else start


def _quoted_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of the sentence `text[start:end]` as quoted: without a FAQ's answer label before it, nor an emphasis
    marker at its edge that only another sentence of its paragraph closes or opens ("**Developers who … STT." of a
    bold paragraph of several sentences; "… machine._"): quoted alone, it would show as a stray "**". A marker the
    sentence closes itself, or that nothing in the paragraph matches (`_id`, `**kwargs`, `*.txt`), is text."""
    start = _after_answer_label(text, start, end)
    paragraph_start = text.rfind("\n\n", 0, start) + 1
    paragraph_end = text.find("\n\n", end)
    paragraph_end = len(text) if paragraph_end < 0 else paragraph_end
    for marker in ("**", "__", "*", "_"):
        size = len(marker)
        if (
            _emphasis(marker, opening=True).match(text, start, end)
            and not _emphasis(marker, opening=False).search(text, start + size, end)
            and _emphasis(marker, opening=False).search(text, end, paragraph_end)
        ):
            start += size
        if (
            end - start > size
            and _emphasis(marker, opening=False).match(text, end - size, end)
            and not _emphasis(marker, opening=True).search(text, start, end - size)
            and _emphasis(marker, opening=True).search(text, paragraph_start, start)
        ):
            end -= size
    return start, end


@functools.cache
def _emphasis(marker: str, *, opening: bool) -> re.Pattern[str]:
    """An emphasis `marker` that opens (before a non-space) or closes (after one). "_" never does inside a word
    (`snake_case`); "*" may ("**SDK**s")."""
    inner = r"\w" if marker[0] == "_" else r"(?!)"  # never matches: "*" may touch a word
    if opening:
        return re.compile(rf"(?<![*_])(?<!{inner}){re.escape(marker)}(?=[^\s*_])")
    return re.compile(rf"(?<=[^\s*_/]){re.escape(marker)}(?![*_])(?!{inner})")


def candidates(chunks: Sequence[tuple[int, ScoredChunk]], *, code: bool = False) -> list[Sentence]:
    """Every quotable sentence of `chunks` ((citation number, chunk) pairs), every short list item of several
    sentences whole, every row of their tables (with its header), every label with its short values under it, and
    with `code` every whole fenced code block; passage by passage, each passage's in reading order (a whole item
    before its own first sentence)."""
    sentences: list[Sentence] = []
    for slot, (n, chunk) in enumerate(chunks):
        first = len(sentences)
        spans = split_sentences(chunk.text)
        cut = _cut_head(chunk, spans)  # the chunker's overlap began mid-sentence: quoting it would quote half of one
        for start, end, header in _label_runs(chunk.text, spans[1:] if cut else spans):
            text = chunk.text[start:end]
            terms = frozenset(content_terms(text))
            sentences.append(Sentence(slot, n, start, end, text, terms, index=-1, header=header, label=True))
        for start, end in _whole_items(chunk.text, spans):
            text = chunk.text[start:end]
            sentences.append(Sentence(slot, n, start, end, text, frozenset(content_terms(text)), index=-1, step=True))
        for start, end, header in table_rows(chunk.text):
            text = chunk.text[start:end]
            sentences.append(
                Sentence(slot, n, start, end, text, frozenset(content_terms(text)), index=-1, header=header)
            )
        for index, (start, end) in enumerate(spans):
            start, end = _quoted_span(chunk.text, start, end)
            text = chunk.text[start:end]
            if len(text.split()) < MIN_SENTENCE_WORDS and not (len(text.split()) >= 2 and _short_value(text)):
                continue
            if _heading_line(chunk.text, start, end):
                continue  # "Deploy Contract.": a heading that lost its markup, over what it names
            if index == 0 and cut:
                continue
            if is_furniture(text) or _CAPTION_RE.match(_line(chunk.text, start)):
                continue  # page furniture (breadcrumbs, "Previous / Next" links, "Last updated …", a caption)
            step = _is_list_item(chunk.text, start)
            sentences.append(
                Sentence(slot, n, start, end, text, frozenset(content_terms(text)), index=index, step=step)
            )
        if code:
            for start, end in code_blocks(chunk.text):
                text = chunk.text[start:end]
                sentences.append(Sentence(slot, n, start, end, text, frozenset(code_terms(text)), code=True))
        sentences[first:] = sorted(sentences[first:], key=lambda s: (s.start, -s.end))
    return sentences


def candidates_in(chunks: Sequence[tuple[int, ScoredChunk]], slot: int, *, code: bool = False) -> list[Sentence]:
    """The candidates of one passage of `chunks`, numbered by its slot there (`candidates` of that passage alone would
    number it 0, and a quote of the third passage would point at the first)."""
    return [replace(s, slot=slot) for s in candidates([chunks[slot]], code=code)]


def predecessor(sentence: Sentence, chunks: Sequence[tuple[int, ScoredChunk]]) -> Sentence | None:
    """The sentence right before `sentence` in its passage, if nothing but a paragraph break lies between (a heading
    or a code block between means the pointing-back has no antecedent to quote)."""
    text = chunks[sentence.slot][1].text
    before = [(start, end) for start, end in split_sentences(text) if end <= sentence.start]
    if not before:
        return None
    start, end = before[-1]
    between = text[end : sentence.start]
    if FENCE_RE.search(between) or re.search(r"^\s*(?:#{1,6}\s|```|~~~)", between, re.M):
        return None
    if len(before) == 1 and _cut_head(chunks[sentence.slot][1], before):
        return None  # the tail of a sentence the chunk overlap cut ("mode first reads what the question asks:")
    if _heading_line(text, start, end):
        return None  # a heading that lost its markup ("Deploy Contract."): as good as a heading between
    start, end = _quoted_span(text, start, end)  # the same span as its candidate, so it is seen as taken
    words = text[start:end]
    return Sentence(sentence.slot, sentence.n, start, end, words, frozenset(content_terms(words)))


def antecedents(
    sentence: Sentence,
    chunks: Sequence[tuple[int, ScoredChunk]],
    taken: Callable[[Sentence], bool],
    limit: int,
) -> tuple[list[Sentence], bool]:
    """The sentences `sentence` points back through, in reading order, up to the first that doesn't point back
    ("Dilip Joshi is an actor. He has appeared in … He plays Jethalal …") or that is already `taken`, at most
    `limit` of them; and whether the chain is anchored there (False: it runs into a heading, a code block, the
    passage's start or the limit first). A FAQ's question line anchors the chain without being quoted: the answer
    line's "It" points back to the question the reader asked."""
    heads: list[Sentence] = []
    current = sentence
    while is_anaphoric(current.text):
        before = predecessor(current, chunks)
        if before is None or len(heads) >= limit:
            return heads, False
        if taken(before) or is_asking(before.text):  # a FAQ's question: "It does, since 3.0." answers the reader's
            return heads, True
        heads.insert(0, before)
        current = before
    return heads, True


_QUOTED_ARGUMENT_RE = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'")


def code_terms(block: str) -> set[str]:
    """The words a code block says, not counting quoted arguments: `search "How do I remove deleted files?"` holds
    the question as data and answers nothing about it."""
    return content_terms(_QUOTED_ARGUMENT_RE.sub(" ", block))


# A sentence that says a list follows: "The available convertors are:", "`UploadFile` has the following `async`
# methods.", "Do the following:", "The steps are as follows."
_INTRODUCES_LIST_RE = re.compile(
    r":[*_`]*\s*$|\bthe following(?:\s+[\w`*-]+){0,3}\s*[.:]?[*_]*\s*$|\bas follows\s*[.:]?[*_]*\s*$", re.I
)
_ITEM_START_RE = re.compile(r"[ \t]*(?:[-*+•]|\d+[.)])[ \t]+")
_SHORT_ITEM_RE = re.compile(r"(?m)^[ \t]*(?:[-*+•]|\d+[.)])[ \t]+(\S(?:[^\n]{0,78}\S)?)[ \t]*$")  # a one-line item


def announces_list(sentence: Sentence) -> bool:
    """Whether the sentence itself says a list follows ("The available convertors are:", "… the following.")."""
    return not sentence.code and bool(_INTRODUCES_LIST_RE.search(sentence.text))


def list_after(sentence: Sentence, chunks: Sequence[tuple[int, ScoredChunk]], limit: int) -> list[Sentence]:
    """The first `limit` items of the list right under `sentence` when it says a list follows (see
    `_INTRODUCES_LIST_RE`; nothing but the rest of its paragraph between, a blank line or none), in order: each item
    whole when it is a candidate whole, else its first sentence. What "Which convertors come built in?" asks, where
    "The available convertors are:" only says where. The paragraph may say it in its last sentence instead: "… via
    3rd party libraries. These libraries all have Starlette-specific guides …:" announces the list under it."""
    if sentence.code or sentence.step or limit <= 0:
        return []
    announces = announces_list(sentence)
    text = chunks[sentence.slot][1].text
    starts = [
        s
        for s in candidates_in(chunks, sentence.slot)
        if s.step
        and s.start >= sentence.end
        and _ITEM_START_RE.fullmatch(text[text.rfind("\n", 0, s.start) + 1 : s.start].rstrip("*_"))
    ]  # where an item begins: its whole, or its first sentence (the rest of a long item is no item of its own)
    # An item too short to be a candidate of its own — a name, a link: "- [Ariadne](…)" under "These libraries …:"
    # — is still an item of the list, its line quoted whole.
    begun = {text.rfind("\n", 0, s.start) + 1 for s in starts}  # the lines a candidate item begins on
    n = chunks[sentence.slot][0]
    for match in _SHORT_ITEM_RE.finditer(text, sentence.end):
        start, end = match.span(1)
        terms = frozenset(content_terms(match.group(1)))
        if match.start() not in begun and terms:
            starts.append(Sentence(sentence.slot, n, start, end, match.group(1), terms, step=True))
    starts.sort(key=lambda s: (s.start, -s.end))
    out: list[Sentence] = []
    previous_end = sentence.end
    for s in starts:
        if s.start < previous_end:
            continue  # the first sentence of an item taken whole
        between = text[previous_end : s.start]
        # Before the item: the rest of the sentence's paragraph ("… methods. They all call …") or of the item before
        # (its wrapped lines, its other sentences), then blank lines or none. A heading, a code block or another
        # paragraph means the list ended (or, before the first item, that it is not the one announced).
        if "\n" not in between or re.search(r"^\s*#|```|~~~", between, re.M):
            break
        if any(block.strip() and not _ITEM_START_RE.match(block) for block in re.split(r"\n[ \t]*\n", between)[1:]):
            break
        if not out and not announces:
            rest = re.split(r"\n[ \t]*\n", between)[0].strip()  # the rest of the sentence's paragraph
            if not rest or not _INTRODUCES_LIST_RE.search(rest):
                break
        out.append(s)
        previous_end = s.end
        if len(out) >= limit:
            break
    return out


def block_after(
    sentence: Sentence, chunks: Sequence[tuple[int, ScoredChunk]], max_gap_words: int = 4
) -> Sentence | None:
    """The fenced code block that directly follows `sentence` in its passage (at most a label such as "**Fix.**"
    or "Run:" between, no heading), if any."""
    text = chunks[sentence.slot][1].text
    after = [(start, end) for start, end in code_blocks(text) if start >= sentence.end]
    if not after:
        return None
    start, end = after[0]
    between = text[sentence.end : start]
    if len(between.split()) >= max_gap_words or re.search(r"^\s*#", between, re.M):
        return None
    block = text[start:end]
    return Sentence(sentence.slot, sentence.n, start, end, block, frozenset(code_terms(block)), code=True)
