"""The chunker: a document's `Block`s → `ChunkDraft`s sized for retrieval, without breaking the document's structure.

Hand-written because it works on our `Block` kinds, which generic text splitters (LangChain's included) do not
know: they see one string, so they cut through code blocks and tables and merge text across sections. The rules:

1. A chunk never spans two heading paths or two PDF pages, so its `chapter` and `page` are exact.
2. Within a section, consecutive blocks are packed into chunks of up to `chunk_size` characters.
3. CODE and TABLE blocks are atomic. Only one longer than `max_block_chars` is split, on line boundaries, with
   every piece re-fenced (code) or re-headed (table) so each reads on its own.
4. A TEXT block longer than `chunk_size` is split at the best boundary before the limit (paragraph, line,
   sentence, word — never inside a word or an inline code span), and each piece repeats up to `chunk_overlap`
   characters of the previous one, starting at a word.
5. A chunk that follows another in the same section starts with the overlap of the previous chunk's trailing
   TEXT; a code block or table is never repeated in part.

Chunks made only of text never exceed `chunk_size`; a chunk holding a code block or table may, up to
`max_block_chars`. The output is a pure function of the input. `iter_chunks` / `make_chunks` turn the drafts into
`Chunk`s: deterministic ids, the document's metadata, and the content hash that lets a re-ingest reuse vectors.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby

from citewise.index.store import search_text
from citewise.settings import IngestSettings
from citewise.text import chunk_units
from citewise.types import PUBLIC_OWNER, Block, BlockKind, Chunk, ParsedDocument, make_chunk_id


@dataclass(frozen=True)
class ChunkDraft:
    """A chunk's text and location, before ids and document metadata are attached (pipeline.py does that)."""

    text: str
    headings: tuple[str, ...]
    page: int | None


@dataclass(frozen=True)
class _Piece:
    kind: BlockKind
    text: str
    overlapped: bool = False  # starts with overlap from the piece before it (a split TEXT block)


_SEPARATOR = "\n\n"
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")
_PROTECTED = re.compile(r"(`+)[^`\n]+?\1|\[[^\]\n]*\]\([^)\s]*\)")  # inline code and markdown links
_BOUNDARIES = (  # preferred split points, best first; each matches the whitespace a chunk may end before
    re.compile(r"\n\s*\n"),
    re.compile(r"\n"),
    re.compile(r"(?<=[.!?:;])[\"')\]]?\s+"),
    re.compile(r"\s+"),
)


def chunk_blocks(
    blocks: Sequence[Block], *, chunk_size: int, chunk_overlap: int, max_block_chars: int
) -> list[ChunkDraft]:
    return list(
        iter_chunk_drafts(blocks, chunk_size=chunk_size, chunk_overlap=chunk_overlap, max_block_chars=max_block_chars)
    )


def iter_chunk_drafts(
    blocks: Iterable[Block], *, chunk_size: int, chunk_overlap: int, max_block_chars: int
) -> Iterator[ChunkDraft]:
    """`chunk_blocks`, one section at a time: a very large document never has all its drafts in memory at once."""
    if chunk_size <= 0 or max_block_chars <= 0:
        raise ValueError("chunk_size and max_block_chars must be positive")
    if not 0 <= chunk_overlap < chunk_size // 2:
        raise ValueError(f"chunk_overlap ({chunk_overlap}) must be in [0, chunk_size // 2) (chunk_size={chunk_size})")
    for (headings, page), section in groupby(blocks, key=lambda block: (block.headings, block.page)):
        pieces = [piece for block in section for piece in _pieces(block, chunk_size, chunk_overlap, max_block_chars)]
        for text in _pack(pieces, chunk_size, chunk_overlap):
            yield ChunkDraft(text, headings, page)


def _pieces(block: Block, chunk_size: int, overlap: int, max_block_chars: int) -> list[_Piece]:
    if block.kind == BlockKind.TEXT:
        text = block.text.strip()
        if not text:
            return []
        parts = _split_text(text, chunk_size, overlap)
        return [_Piece(BlockKind.TEXT, part, overlapped=i > 0 and overlap > 0) for i, part in enumerate(parts)]
    text = block.text.strip("\n")
    if not text.strip():
        return []
    if len(text) <= max_block_chars:
        return [_Piece(block.kind, text)]
    splitter = _split_code if block.kind == BlockKind.CODE else _split_table
    return [_Piece(block.kind, part) for part in splitter(text, max_block_chars)]


def _pack(pieces: Sequence[_Piece], chunk_size: int, overlap: int) -> list[str]:
    chunks: list[str] = []
    current: list[_Piece] = []

    def size(parts: Sequence[str]) -> int:
        return sum(map(len, parts)) + len(_SEPARATOR) * max(len(parts) - 1, 0)

    for piece in pieces:
        if current and size([p.text for p in current] + [piece.text]) <= chunk_size:
            current.append(piece)
            continue
        if current:
            chunks.append(_SEPARATOR.join(p.text for p in current))
            # A continuation of a split TEXT block already starts with its overlap.
            lead = "" if piece.overlapped else _trailing_overlap(current, overlap, chunk_size - len(piece.text) - 2)
            current = [_Piece(BlockKind.TEXT, lead)] if lead else []
        current.append(piece)
    if current:
        chunks.append(_SEPARATOR.join(p.text for p in current))
    return [chunk for chunk in chunks if chunk.strip()]


def _trailing_overlap(previous: Sequence[_Piece], overlap: int, room: int) -> str:
    """The last `overlap` characters (at most `room`) of the trailing TEXT pieces, starting at a word."""
    trailing: list[str] = []
    for piece in reversed(previous):
        if piece.kind != BlockKind.TEXT:
            break
        trailing.insert(0, piece.text)
    text = _SEPARATOR.join(trailing)
    budget = min(overlap, room)
    if not text or budget <= 0:
        return ""
    return text[_overlap_start(text, len(text), budget, _protected_spans(text)) :].strip()


# -- splitting one long TEXT block --------------------------------------------------------------------------------
def _split_text(text: str, size: int, overlap: int) -> list[str]:
    """Split `text` into pieces of at most `size` characters, each repeating ~`overlap` characters of the last."""
    protected = _protected_spans(text)
    pieces: list[str] = []
    start = 0
    while len(text) - start > size:
        cut = _cut_point(text, start, size, overlap, protected)
        pieces.append(text[start:cut].strip())
        next_start = _overlap_start(text, cut, overlap, protected)
        start = next_start if next_start > start else cut
        while start < len(text) and text[start].isspace():
            start += 1
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return [piece for piece in pieces if piece]


def _protected_spans(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in _PROTECTED.finditer(text)]


def _inside(position: int, spans: Sequence[tuple[int, int]]) -> bool:
    index = bisect.bisect_right(spans, (position, float("inf"))) - 1
    return index >= 0 and spans[index][0] < position < spans[index][1]


def _cut_point(text: str, start: int, size: int, overlap: int, protected: Sequence[tuple[int, int]]) -> int:
    """Where the piece starting at `start` ends: the best boundary in the second half of its window, else the last
    word boundary that still leaves the piece longer than the overlap (so splitting always makes progress)."""
    end = start + size
    half = start + max(size // 2, overlap + 1)
    attempts = [(boundary, half) for boundary in _BOUNDARIES] + [(_BOUNDARIES[-1], start + overlap + 1)]
    for boundary, earliest in attempts:
        for position in reversed([m.start() for m in boundary.finditer(text, earliest, end + 1)]):
            if not _inside(position, protected):
                return position
    # One "word" longer than the window (a URL, a hash): there is no boundary to respect, so cut at the limit.
    return end


def _overlap_start(text: str, end: int, overlap: int, protected: Sequence[tuple[int, int]]) -> int:
    """Index of the first word that starts within the `overlap` characters before `end` (or `end`: no overlap)."""
    if overlap <= 0:
        return end
    for match in re.finditer(r"\s+", text[max(0, end - overlap - 1) : end]):
        position = max(0, end - overlap - 1) + match.end()
        if position < end and not _inside(position, protected) and position >= end - overlap:
            return position
    return end


# -- splitting an oversize CODE or TABLE block ---------------------------------------------------------------------
def _split_code(text: str, limit: int) -> list[str]:
    lines = text.split("\n")
    fence = _FENCE.match(lines[0])
    if fence and len(lines) >= 2 and lines[-1].strip().startswith(fence.group(1)[0] * len(fence.group(1))):
        opener, closer, body = lines[0], lines[-1], lines[1:-1]
        budget = limit - len(opener) - len(closer) - 2
        return ["\n".join([opener, *group, closer]) for group in _pack_lines(body, budget)]
    return ["\n".join(group) for group in _pack_lines(lines, limit)]


def _split_table(text: str, limit: int) -> list[str]:
    lines = text.split("\n")
    if len(lines) > 2 and _TABLE_RULE.match(lines[1]):
        header, rows = lines[:2], lines[2:]
        budget = limit - len(header[0]) - len(header[1]) - 2
        return ["\n".join([*header, *group]) for group in _pack_lines(rows, budget)]
    return ["\n".join(group) for group in _pack_lines(lines, limit)]


def _pack_lines(lines: Sequence[str], budget: int) -> list[list[str]]:
    """Group lines into runs of at most `budget` characters (newlines included).

    A single line longer than the budget leaves no line boundary to use, so only then is a line cut.
    """
    budget = max(budget, 80)  # a header or fence nearly as long as the limit must not starve the content
    groups: list[list[str]] = []
    current: list[str] = []
    used = 0
    for line in lines:
        for part in [line[i : i + budget] for i in range(0, len(line), budget)] or [""]:
            cost = len(part) + (1 if current else 0)
            if current and used + cost > budget:
                groups.append(current)
                current, used, cost = [], 0, len(part)
            current.append(part)
            used += cost
    if current:
        groups.append(current)
    return [group for group in groups if any(line.strip() for line in group)]


# -- chunks: drafts with ids, metadata and content hashes ---------------------------------------------------------


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    return h.hexdigest()


def make_chunks(
    doc: ParsedDocument,
    ingest: IngestSettings,
    *,
    doc_id: str,
    filename: str,
    module: str = "",
    source_url: str | None = None,
    modified: str | None = None,
    owner: str = PUBLIC_OWNER,
) -> list[Chunk]:
    """A parsed document's chunks with ids, metadata and content hashes."""
    return list(
        iter_chunks(
            doc, ingest, doc_id=doc_id, filename=filename, module=module, source_url=source_url, modified=modified,
            owner=owner,
        )
    )  # fmt: skip


def iter_chunks(
    doc: ParsedDocument,
    ingest: IngestSettings,
    *,
    doc_id: str,
    filename: str,
    module: str = "",
    source_url: str | None = None,
    modified: str | None = None,
    owner: str = PUBLIC_OWNER,
) -> Iterator[Chunk]:
    """The one place chunks are made, one at a time: a 50 MB document is never all chunks in memory. Each carries
    its answer units (`chunk_units`)."""
    drafts = iter_chunk_drafts(
        doc.blocks,
        chunk_size=ingest.chunk_size,
        chunk_overlap=ingest.chunk_overlap,
        max_block_chars=ingest.max_block_chars,
    )
    previous: ChunkDraft | None = None
    for index, draft in enumerate(drafts):
        before = previous.text if previous is not None and previous.headings == draft.headings else None
        previous = draft
        chunk = Chunk(
            chunk_id=make_chunk_id(doc_id, index),
            doc_id=doc_id,
            chunk_index=index,
            text=draft.text,
            filename=filename,
            source_url=section_url(source_url, doc.anchors, draft.headings),
            module=module,
            chapter=" > ".join(draft.headings),
            title=doc.title,
            page=draft.page,
            modified=modified,
            owner=owner,
            units=chunk_units(draft.text, before, ingest.chunk_overlap),
        )
        chunk.content_hash = digest(search_text(chunk))
        yield chunk


def section_url(url: str | None, anchors: dict[str, str], headings: tuple[str, ...]) -> str | None:
    """The document's URL deep-linked to the nearest heading above a chunk that has an anchor (innermost first)."""
    if not url or not anchors:
        return url
    for depth in range(len(headings), 0, -1):
        fragment = anchors.get(" > ".join(headings[:depth]))
        if fragment:
            return url.split("#", 1)[0] + "#" + fragment
    return url
