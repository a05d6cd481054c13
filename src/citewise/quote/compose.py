"""From the reader's scores to the quoted answer: the best unit, with what it needs to stand.

The reader scores every answer unit of the passages read (`reader.Scores`: the unit's log-odds against "this passage
doesn't answer"). The answer is the best unit, then every other unit scored close to it (within
`QuoteSettings.relative_cut` of the best, and above `QuoteSettings.min_unit_score`), up to `max_sentences` — and each
chosen unit brings what it needs to be read right:

- a code block, table row or list item, the sentence that introduces it ("Run this:") — `lead_in`;
- a sentence that announces a list or a code block ("… supports three backends:"), what it announces — `announced`;
- a sentence that opens by pointing back ("It is …", "This means …"), the sentence it points back to — `antecedent`;
- a sentence, the next one when it negates or qualifies it ("However, …", "This is not supported.") — `qualifier`.

Each of these is a rule `QuoteSettings.rules` can switch off: bench/fit_quote_decision.py measures what each one is
worth beside the model, and BENCHMARKS.md shows it. Nothing here re-reads a passage's text for structure: the units
were made at ingest (`Chunk.units`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from citewise.quote.reader import heading_line
from citewise.settings import QUOTE_RULES
from citewise.text import chunk_units, content_terms
from citewise.types import AnswerStyle, ScoredChunk

RULES = QUOTE_RULES  # what QuoteSettings.rules may name: the composition rules below and the anchor guard
LIST_LIMIT = 8  # items of an announced list (or rows of a table) quoted before "… and N more"

_ANAPHORIC_RE = re.compile(
    r"^[\"'“‘(\[*_]*(?:(?:it|its|it's|this|these|those|that|that's|such|both|them|their|they)\b"
    r"|in (?:that|this|such|either|both) cases?\b|the (?:latter|former|above)\b)",
    re.I,
)
_QUALIFIER_RE = re.compile(
    r"^[\"'“‘(\[*_]*(?:however|but|note|unless|except|otherwise|although|only|instead|this is not|it is not|that is not"
    r"|this does not|it does not|this doesn't|it doesn't|this isn't|it isn't|neither|nor)\b",
    re.I,
)
_ITEM_MARKER_RE = re.compile(r"(?m)^\s*(?:[-*+•]|\d+[.)])\s+")
_TABLE_LINE_RE = re.compile(r"(?m)^[ \t]*\|.*$")  # a pipe table's line (its header and separator: not units)
_NEGATION_RE = re.compile(r"\b(?:not|never|no longer|cannot|unsupported|n't)\b|n't\b", re.I)


@dataclass(frozen=True)
class Passage:
    """One passage read for a question: its citation number and its chunk (text, heading path, answer units)."""

    n: int
    chunk: ScoredChunk

    @property
    def units(self) -> tuple[tuple[int, int, str], ...]:
        """The chunk's units as ingest stored them; a chunk made without them (one built by hand, a selection) gets
        them here by the same rule. An index of an older format never gets this far (`require_current`)."""
        if self.chunk.units is None:
            return chunk_units(self.chunk.text, None, 0)
        return self.chunk.units


@dataclass(frozen=True)
class Candidate:
    """One unit of one passage, scored: `reader` is the reader's log-odds that it answers (against "no answer"),
    `score` that combined with the evidence beside it (`unit_features`, `Ranker`) — what the answer is chosen by."""

    slot: int  # the passage's position among those read (0: the best search result)
    n: int  # its citation number
    index: int  # the unit's position among its passage's units
    start: int
    end: int
    kind: str
    score: float
    reader: float = 0.0

    @property
    def key(self) -> tuple[int, int]:
        return (self.slot, self.index)


# What the ranker weighs beside the reader's score: where the unit's passage ranked in the search, how much of the
# question the unit (and its heading path) holds, and its kind.
UNIT_FEATURES = ("reader", "reader_gap", "first", "slot", "covered", "covered_unit", "anchors", "code", "row", "item")


@dataclass(frozen=True)
class Ranker:
    """A logistic model over `UNIT_FEATURES` (fitted by bench/fit_quote_ranker.py): a unit's log-odds that it holds
    the answer. Without weights it is the reader's score alone."""

    weights: dict[str, float]
    intercept: float = 0.0

    def score(self, values: dict[str, float]) -> float:
        if not self.weights:
            return values["reader"]
        return self.intercept + sum(self.weights.get(name, 0.0) * value for name, value in values.items())


def unit_features(
    passages: Sequence[Passage],
    scores: Sequence[Sequence[float | None]],
    terms: frozenset[str],
    anchors: tuple[str, ...],
) -> list[tuple[int, int, dict[str, float]]]:
    """(slot, unit index, features) of every scored unit."""
    out = []
    for slot, (passage, unit_scores) in enumerate(zip(passages, scores, strict=True)):
        present = [s for s in unit_scores if s is not None]
        if not present:
            continue
        best = max(present)
        heading = content_terms(heading_line(passage.chunk.title, passage.chunk.chapter))
        for index, (unit, score) in enumerate(zip(passage.units, unit_scores, strict=True)):
            if score is None:
                continue
            text = text_of(passage, unit)
            held = content_terms(text)
            lower = text.lower()
            out.append(
                (
                    slot,
                    index,
                    {
                        "reader": score,
                        "reader_gap": score - best,
                        "first": 1.0 if slot == 0 else 0.0,
                        "slot": float(slot),
                        "covered": len(terms & (held | heading)) / len(terms) if terms else 1.0,
                        "covered_unit": len(terms & held) / len(terms) if terms else 1.0,
                        "anchors": sum(1 for a in anchors if a.lower() in lower) / len(anchors) if anchors else 1.0,
                        "code": 1.0 if unit[2] == "code" else 0.0,
                        "row": 1.0 if unit[2] == "row" else 0.0,
                        "item": 1.0 if unit[2] == "item" else 0.0,
                    },
                )
            )
    return out


def candidates(
    passages: Sequence[Passage],
    scores: Sequence[Sequence[float | None]],
    *,
    terms: frozenset[str] = frozenset(),
    anchors: tuple[str, ...] = (),
    ranker: Ranker | None = None,
) -> list[Candidate]:
    """Every scored unit, best first by the ranker's score (the reader's alone without one); ties keep reading order
    (passage, then unit), so the order is stable."""
    ranker = ranker or Ranker({})
    out = []
    for slot, index, values in unit_features(passages, scores, terms, anchors):
        start, end, kind = passages[slot].units[index]
        score = round(ranker.score(values), 4)
        out.append(Candidate(slot, passages[slot].n, index, start, end, kind, score, values["reader"]))
    return sorted(out, key=lambda c: (-c.score, c.slot, c.index))


def text_of(passage: Passage, unit: tuple[int, int, str]) -> str:
    return passage.chunk.text[unit[0] : unit[1]]


def _leads_in(text: str) -> bool:
    return text.rstrip("*_ ").endswith(":")


def _adjacent(passage: Passage, a: int, b: int) -> bool:
    """Whether units a < b of one passage follow each other with nothing but white space between them (a blank line
    may: a lead-in stands its own paragraph above its list; a heading may not). A table's header lines may stand
    between a unit and the table's first row, not between two rows: those are two tables."""
    units = passage.units
    between = passage.chunk.text[units[a][1] : units[b][0]]
    if units[b][2] == "row" and units[a][2] != "row":
        between = _TABLE_LINE_RE.sub("", between)
    return not _ITEM_MARKER_RE.sub("", between).strip()


def _same_paragraph(passage: Passage, a: int, b: int) -> bool:
    units = passage.units
    between = passage.chunk.text[units[a][1] : units[b][0]]
    return "\n" not in between.strip("\n ") and "\n\n" not in between and not between.strip()


def _what_it_needs(
    c: Candidate, passage: Passage, rules: frozenset[str], lead: bool = False
) -> tuple[list[int], list[int], int]:
    """(units before it, units after it, how many announced units were left out) that `c` needs to stand. `lead`:
    `c` is the answer's best unit, so a list item brings its whole list when a sentence announces it (the answer is
    the list, not one item of it) and the list is short enough to quote whole."""
    units = passage.units
    before: list[int] = []
    after: list[int] = []
    left_out = 0
    i = c.index
    text = text_of(passage, units[i])
    if "lead_in" in rules and units[i][2] in ("code", "row", "item") and i > 0:
        # a row or an item belongs to its table or list: its lead-in stands above the first one
        extent = _extent(passage, i) if units[i][2] in ("row", "item") else range(i, i + 1)
        first = extent.start
        if first > 0 and _leads_in(text_of(passage, units[first - 1])) and _adjacent(passage, first - 1, first):
            before.append(first - 1)
            if lead and units[i][2] == "item" and "announced" in rules and len(extent) <= LIST_LIMIT:
                after += [j for j in extent if j != i]
    if "announced" in rules and _leads_in(text) and i + 1 < len(units) and _adjacent(passage, i, i + 1):
        kind = units[i + 1][2]
        if kind == "code":
            after.append(i + 1)
        elif kind in ("item", "row"):
            announced = _extent(passage, i + 1)  # the list or table, not the next one on the page
            after += list(announced[:LIST_LIMIT])
            left_out = max(0, len(announced) - LIST_LIMIT)
        else:
            after.append(i + 1)
    if (
        "antecedent" in rules
        and i > 0
        and units[i][2] == units[i - 1][2] == "sentence"
        and _ANAPHORIC_RE.match(text)
        and _same_paragraph(passage, i - 1, i)
    ):
        before.append(i - 1)
    if "qualifier" in rules and units[i][2] in ("sentence", "item") and i + 1 < len(units):
        following = text_of(passage, units[i + 1])
        qualifies = _QUALIFIER_RE.match(following) or (
            _ANAPHORIC_RE.match(following) and _NEGATION_RE.search(following)
        )
        if qualifies and units[i + 1][2] == "sentence" and _same_paragraph(passage, i, i + 1):
            after.append(i + 1)
    return sorted(set(before)), sorted(set(after) - set(before) - {i}), left_out


@dataclass(frozen=True)
class Chosen:
    slot: int
    index: int
    role: str  # "answer" (scored as one), "context" (what an answer needs to stand), or "why" (structured style)
    group: int = 0  # the rank of the answer it belongs to (0: the best unit and what it needs)


def choose(
    ranked: Sequence[Candidate],
    passages: Sequence[Passage],
    *,
    max_units: int,
    relative_cut: float,
    min_score: float,
    rules: frozenset[str],
    skip: frozenset[tuple[int, int]] = frozenset(),
) -> tuple[list[Chosen], dict[tuple[int, int], int]]:
    """The units to quote: the best one, the others scored within `relative_cut` of it (and above `min_score`), each
    with what it needs to stand; at most `max_units` scored ones, and never the same words twice. `skip`: (chunk
    slot, unit index) already quoted by an earlier part. Returns them and, per announcing unit, how many announced
    units were left out."""
    if not ranked:
        return [], {}
    best = ranked[0].score
    chosen: dict[tuple[int, int], Chosen] = {}
    left_out: dict[tuple[int, int], int] = {}
    shown: set[str] = set()  # the text of every unit chosen, so the same words are never quoted twice
    counted: set[tuple[int, int]] = set()  # units of a list or table quoted in part: its "… and N more" counts them
    answers = 0

    def words(slot: int, index: int) -> str:
        return " ".join(text_of(passages[slot], passages[slot].units[index]).split())

    for c in ranked:
        if answers >= max_units or (answers and (c.score < best - relative_cut or c.score < min_score)):
            break
        if c.key in chosen or c.key in skip or c.key in counted or words(c.slot, c.index) in shown:
            continue  # a command two pages show alike is quoted from the better-ranked one only
        passage = passages[c.slot]
        before, after, dropped = _what_it_needs(c, passage, rules, lead=not answers)
        introduces = [i for i in after if (c.slot, i) not in chosen and words(c.slot, i) not in shown]
        if answers and not introduces and _leads_in(words(c.slot, c.index)):
            continue  # a sentence whose block isn't quoted here ("Run this:") would end the answer on a colon
        group = answers
        chosen[c.key] = Chosen(c.slot, c.index, "answer", group)
        shown.add(words(c.slot, c.index))
        answers += 1
        for i in before + after:
            if (c.slot, i) not in chosen and words(c.slot, i) not in shown:
                chosen[(c.slot, i)] = Chosen(c.slot, i, "context", group)
                shown.add(words(c.slot, i))
        if dropped and after:
            left_out[(c.slot, after[-1])] = dropped
            counted.update((c.slot, i) for i in _extent(passage, after[-1]) if (c.slot, i) not in chosen)
    return [v for k, v in chosen.items() if k not in skip], left_out


def order(chosen: Sequence[Chosen], ranked: Sequence[Candidate]) -> list[Chosen]:
    """Answer first: passages in the order of their best chosen unit (the answer's passage first); inside a passage,
    reading order from where its best group (that unit with what it needs) begins, then what it chose above that,
    still in reading order (a troubleshooting page's "Fix" before its "Symptom", when the fix is what answers)."""
    score = {c.key: c.score for c in ranked}
    first: dict[int, float] = {}
    for c in chosen:
        if c.role == "answer":
            first[c.slot] = max(first.get(c.slot, -1e9), score.get((c.slot, c.index), -1e9))
    lead: dict[int, int] = {}  # per passage, the best group it holds
    for c in chosen:
        if c.role == "answer":
            lead[c.slot] = min(lead.get(c.slot, c.group), c.group)
    start = {slot: min(c.index for c in chosen if c.slot == slot and c.group == g) for slot, g in lead.items()}
    return sorted(chosen, key=lambda c: (-first.get(c.slot, -1e9), c.slot, c.index < start.get(c.slot, 0), c.index))


def _extent(passage: Passage, index: int) -> range:
    """The units of the table a row belongs to, or of the list an item belongs to: the run of units of its kind
    around it with nothing but white space (and list markers) between them."""
    units, kind = passage.units, passage.units[index][2]
    first = last = index
    while first > 0 and units[first - 1][2] == kind and _adjacent(passage, first - 1, first):
        first -= 1
    while last + 1 < len(units) and units[last + 1][2] == kind and _adjacent(passage, last, last + 1):
        last += 1
    return range(first, last + 1)


def _table_header(passage: Passage, row: tuple[int, int, str]) -> str:
    """The header and separator lines of the table a row belongs to (the two lines above its first body row)."""
    text = passage.chunk.text
    lines_before = text[: row[0]].splitlines()
    header: list[str] = []
    for line in reversed(lines_before):
        if not line.strip().startswith("|"):
            break
        header.insert(0, line)
    return "\n".join(header[:2]) if len(header) >= 2 else ""


def render(
    ordered: Sequence[Chosen],
    passages: Sequence[Passage],
    *,
    style: AnswerStyle,
    left_out: dict[tuple[int, int], int],
    topic: str = "",
    why: Chosen | None = None,
) -> tuple[str, list[int], list[tuple[int, int, int]]]:
    """The answer's text, the citation numbers in order, and what it quotes as (citation number, start, end).
    Structured: the chosen units as key points, and `why` (the best unit not chosen) under "Why It Matters"."""
    quotes = [(passages[c.slot].n, *passages[c.slot].units[c.index][:2]) for c in ordered]
    if style == AnswerStyle.STRUCTURED:

        def point(c: Chosen) -> str:
            passage = passages[c.slot]
            unit = passage.units[c.index]
            body = text_of(passage, unit)
            return f"{body}\n[{passage.n}]" if unit[2] == "code" else f"{' '.join(body.split())} [{passage.n}]"

        lines = [f"## {topic}" if topic else "## Answer", "", "### Key Points", ""]
        lines += [point(c) if passages[c.slot].units[c.index][2] == "code" else f"- {point(c)}" for c in ordered]
        lines += ["", "### Why It Matters", ""]
        if why is not None:
            lines.append(point(why))
            quotes.append((passages[why.slot].n, *passages[why.slot].units[why.index][:2]))
        used = list(dict.fromkeys(n for n, _, _ in quotes))
        return "\n".join(lines).rstrip(), used, quotes
    used = list(dict.fromkeys(n for n, _, _ in quotes))
    # One citation mark per source and group: a sentence run ends with its [n]; a code block, list or table that a
    # quoted sentence of its passage introduces ("Add `--prune`: [1]") is covered by that mark (the agent's
    # validator reads a block the same way); one that stands alone gets its own, once, after it.
    blocks: list[str] = []
    line: list[str] = []
    previous: Chosen | None = None
    structure: tuple[int, str, bool] | None = None  # (slot, kind, covered) of the list or table being quoted
    header_of: str = ""
    shown: list[int] = []  # the units of that list or table quoted
    counted = False  # whether "… and N more" was said for it already (what a sentence announces, cut at LIST_LIMIT)

    def close() -> None:
        """End the sentence run (with its mark), or the list or table: with its mark unless a lead-in covers it, and
        "… and N more in the source [n]" when part of it is quoted (a list or table comes whole or says so)."""
        nonlocal structure, counted
        if line:
            blocks.append(" ".join(line) + f" [{passages[previous.slot].n}]" if previous else " ".join(line))
            line.clear()
        if structure is not None:
            slot, kind, covered = structure
            n = passages[slot].n
            missing = len(set(_extent(passages[slot], shown[0])) - set(shown))
            if missing and not counted:
                blocks.append(f"… and {missing} more in the source [{n}]")
            elif not covered:
                blocks[-1] += f" [{n}]" if kind == "item" else f"\n\n[{n}]"
            structure, counted = None, False
            shown.clear()

    def introduced(c: Chosen) -> bool:
        """Whether the unit before `c` in the answer is a sentence of its passage that introduces it."""
        if previous is None or previous.slot != c.slot or previous.index >= c.index:
            return False
        passage = passages[c.slot]
        unit = passage.units[previous.index]
        return unit[2] == "sentence" and _leads_in(text_of(passage, unit))

    for c in ordered:
        passage = passages[c.slot]
        unit = passage.units[c.index]
        body = text_of(passage, unit)
        continues = (
            previous is not None
            and previous.slot == c.slot
            and previous.index < c.index
            and unit[2] == passage.units[previous.index][2]
        )
        # a row or an item continues the table or list quoted just before it only inside its extent: two tables
        # alike in one passage stay two
        same_run = continues and unit[2] in ("row", "item") and c.index in _extent(passage, previous.index)
        if unit[2] == "sentence":
            if not (continues and _same_paragraph(passage, previous.index, c.index)):
                close()
            line.append(" ".join(body.split()))
        elif unit[2] == "code":
            covered = introduced(c)
            close()
            blocks.append(body if covered else f"{body}\n[{passage.n}]")
        elif unit[2] == "row":
            header = _table_header(passage, unit)
            if same_run and structure is not None and structure[1] == "row" and header == header_of:
                blocks[-1] += f"\n{body}"
            else:
                covered = introduced(c)
                close()
                blocks.append(f"{header}\n{body}" if header else body)
                structure, header_of = (c.slot, "row", covered), header
            shown.append(c.index)
        else:  # a list item
            item = f"- {' '.join(body.split())}"
            if same_run and structure is not None and structure[1] == "item":
                blocks[-1] += "\n" + item
            else:
                covered = introduced(c)
                close()
                blocks.append(item)
                structure = (c.slot, "item", covered)
            shown.append(c.index)
        more = left_out.get((c.slot, c.index))
        previous = c
        if more:
            counted = True
            close()
            blocks.append(f"… and {more} more in the source [{passage.n}]")
    close()
    return "\n\n".join(blocks), used, quotes
