"""The chunker: sizes, overlap, atomic code/tables, sections and pages."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from citewise.ingest.chunking import ChunkDraft, chunk_blocks
from citewise.ingest.loaders import load_file
from citewise.types import Block, BlockKind

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
WORD = re.compile(r"w\d{4}")


def numbered_words(count: int, start: int = 0) -> str:
    """A paragraph of unique words w0000 w0001 ... with a sentence end every 12 words: positions are checkable."""
    words = [f"w{i:04d}" + ("." if i % 12 == 11 else "") for i in range(start, start + count)]
    return " ".join(words)


def word_numbers(text: str) -> list[int]:
    return [int(w[1:]) for w in WORD.findall(text)]


def chunk(blocks, *, size=300, overlap=60, max_block=600) -> list[ChunkDraft]:
    return chunk_blocks(blocks, chunk_size=size, chunk_overlap=overlap, max_block_chars=max_block)


def code_block(lines: int, language: str = "python") -> str:
    return f"```{language}\n" + "\n".join(f"value_{i:03d} = compute({i})" for i in range(lines)) + "\n```"


# -- long text ---------------------------------------------------------------------------------------------------
def test_long_paragraph_is_split_within_size_on_word_boundaries_with_overlap():
    drafts = chunk([Block(text=numbered_words(300))], size=300, overlap=60)
    assert len(drafts) > 5
    for draft in drafts:
        # No tolerance needed: cuts are chosen at or before the limit, never after it.
        assert len(draft.text) <= 300
        # Whole words only: every token is a complete numbered word (a cut mid-word would leave "w01" or "0123").
        assert all(re.fullmatch(r"w\d{4}\.?", token) for token in draft.text.split())
    for before, after in itertools.pairwise(drafts):
        first, last = word_numbers(after.text), word_numbers(before.text)
        shared = [n for n in first if n <= last[-1]]
        assert shared, "consecutive pieces of one paragraph must overlap"
        assert shared == list(range(first[0], last[-1] + 1))  # the overlap is the tail of the previous piece
        assert len(" ".join(f"w{n:04d}" for n in shared)) <= 60 + 2  # ~chunk_overlap (+ sentence dots)
        # Nothing lost: the next piece continues right after the previous one.
        assert first[0] <= last[-1] + 1
    assert sorted({n for d in drafts for n in word_numbers(d.text)}) == list(range(300))


def test_long_paragraph_prefers_sentence_ends_and_is_not_chopped_into_crumbs():
    drafts = chunk([Block(text=numbered_words(300))], size=300, overlap=60)
    for draft in drafts[:-1]:
        assert draft.text.endswith(".")  # a sentence end was available in every window
        assert len(draft.text) >= 150  # boundaries are only taken in the second half of the window


def test_an_early_paragraph_break_does_not_make_a_crumb():
    intro = "This introduction explains, in one short paragraph, what the list of numbered words below is for."
    text = intro + "\n\n" + " ".join(f"w{i:04d}" for i in range(200))  # no later sentence or paragraph end
    drafts = chunk([Block(text=text)], size=300, overlap=60)
    assert len(drafts[0].text) >= 250  # filled up to the last word boundary, not cut after the introduction


def test_without_overlap_pieces_partition_the_text():
    drafts = chunk([Block(text=numbered_words(200))], size=250, overlap=0)
    numbers = [n for d in drafts for n in word_numbers(d.text)]
    assert numbers == list(range(200))


def test_inline_code_spans_and_links_are_never_cut():
    # No sentence ends, so the only boundaries are spaces, many of them inside the spans; names of varying length
    # move the cut and overlap windows around so they land inside spans often.
    sentence = (
        "run `orbitron queue create --name {name} --retention 7d` and open [the page of queue {name}]"
        "(https://x.example/{name})"
    )
    text = " then ".join(sentence.format(name="q" * (i % 9 + 1) + str(i)) for i in range(40))
    drafts = chunk([Block(text=text)], size=300, overlap=60)
    assert len(drafts) > 3
    for draft in drafts:
        assert draft.text.count("`") % 2 == 0, draft.text
        assert draft.text.count("[") == draft.text.count("](") == draft.text.count(")"), draft.text


def test_a_word_longer_than_the_chunk_is_cut_because_there_is_no_boundary():
    token = "x" * 700
    drafts = chunk([Block(text=token)], size=300, overlap=60)
    assert all(len(d.text) <= 300 for d in drafts)
    assert "".join(d.text for d in drafts) == token


# -- packing -----------------------------------------------------------------------------------------------------
def test_small_blocks_of_one_section_are_packed_together():
    blocks = [Block(text=f"Paragraph number {i} about queues.", headings=("Guide",)) for i in range(6)]
    drafts = chunk(blocks, size=300, overlap=60)
    assert len(drafts) == 1
    assert drafts[0].text == "\n\n".join(b.text for b in blocks)
    assert drafts[0].headings == ("Guide",)


def test_next_packed_chunk_starts_with_overlap_of_the_previous_text():
    blocks = [Block(text=numbered_words(20, start=100 * i), headings=("S",)) for i in range(5)]
    drafts = chunk(blocks, size=300, overlap=60)
    assert len(drafts) >= 2
    for before, after in itertools.pairwise(drafts):
        first, last = word_numbers(after.text), word_numbers(before.text)
        assert first[0] in last  # starts inside the previous chunk's tail ...
        assert first[: first.index(last[-1]) + 1] == last[last.index(first[0]) :]  # ... and repeats it in order
        assert len(after.text) <= 300


def test_code_and_tables_stay_whole_even_when_longer_than_chunk_size():
    code = code_block(20)  # ~560 chars: over chunk_size, under max_block_chars
    table = "| key | value |\n| --- | --- |\n" + "\n".join(f"| setting_{i:02d} | {i * 7} |" for i in range(20))
    blocks = [
        Block(text="Before the code.", headings=("S",)),
        Block(kind=BlockKind.CODE, text=code, headings=("S",)),
        Block(kind=BlockKind.TABLE, text=table, headings=("S",)),
        Block(text="After the table.", headings=("S",)),
    ]
    drafts = chunk(blocks, size=300, overlap=60, max_block=1000)
    assert len(code) > 300 and len(table) > 300
    assert sum(code in d.text for d in drafts) == 1
    assert sum(table in d.text for d in drafts) == 1
    # No chunk holds a partial code block or table (e.g. as overlap).
    for draft in drafts:
        assert ("value_000" in draft.text) == (code in draft.text)
        assert ("setting_00" in draft.text) == (table in draft.text)


def test_chunk_after_a_code_block_gets_no_partial_code_as_overlap():
    blocks = [
        Block(kind=BlockKind.CODE, text=code_block(8), headings=("S",)),
        Block(text=numbered_words(40), headings=("S",)),
    ]
    drafts = chunk(blocks, size=300, overlap=60)
    assert drafts[0].text == code_block(8)
    assert all("value_" not in d.text for d in drafts[1:])


def test_oversize_code_block_is_split_on_lines_with_balanced_fences():
    code = code_block(60)
    drafts = chunk([Block(kind=BlockKind.CODE, text=code)], size=300, overlap=60, max_block=600)
    assert len(drafts) > 1
    original_lines = code.split("\n")[1:-1]
    body_lines = []
    for draft in drafts:
        lines = draft.text.split("\n")
        assert lines[0] == "```python" and lines[-1] == "```"
        assert len(draft.text) <= 600
        assert all(line in original_lines for line in lines[1:-1])  # whole lines only
        body_lines += lines[1:-1]
    assert body_lines == original_lines  # every line exactly once, in order (no overlap inside code)


def test_oversize_table_is_split_on_rows_repeating_the_header():
    header = "| setting | default |\n| --- | --- |"
    rows = [f"| option_{i:03d} | {i * 3}s |" for i in range(60)]
    drafts = chunk([Block(kind=BlockKind.TABLE, text=header + "\n" + "\n".join(rows))], max_block=500)
    assert len(drafts) > 1
    seen = []
    for draft in drafts:
        assert draft.text.startswith(header + "\n")
        assert len(draft.text) <= 500
        seen += draft.text.split("\n")[2:]
    assert seen == rows


# -- sections and pages ------------------------------------------------------------------------------------------
def test_no_chunk_spans_two_heading_paths():
    blocks = [
        Block(text="alpha-one", headings=("A",)),
        Block(text="alpha-two", headings=("A", "A1")),
        Block(text="alpha-three", headings=("A",)),
        Block(text="beta-one", headings=("B",)),
    ]
    drafts = chunk(blocks)
    assert [(d.headings, d.text) for d in drafts] == [
        (("A",), "alpha-one"),
        (("A", "A1"), "alpha-two"),
        (("A",), "alpha-three"),
        (("B",), "beta-one"),
    ]


def test_no_chunk_spans_two_pages_and_pages_are_kept():
    blocks = [
        Block(text="first page text", page=1),
        Block(text="more first page text", page=1),
        Block(text="second page text", page=2),
    ]
    drafts = chunk(blocks)
    assert [(d.page, d.text) for d in drafts] == [
        (1, "first page text\n\nmore first page text"),
        (2, "second page text"),
    ]


def test_no_overlap_is_carried_across_a_section_change():
    blocks = [Block(text=numbered_words(60), headings=("A",)), Block(text="Fresh section.", headings=("B",))]
    drafts = chunk(blocks, size=300, overlap=60)
    assert drafts[-1] == ChunkDraft(text="Fresh section.", headings=("B",), page=None)


def test_corpus_documents_chunk_within_their_sections_and_pages():
    for path in sorted(p for p in CORPUS.rglob("*") if p.is_file()):
        doc = load_file(path, source=path.name)
        drafts = chunk_blocks(doc.blocks, chunk_size=200, chunk_overlap=40, max_block_chars=500)
        locations = {(b.headings, b.page) for b in doc.blocks}
        for draft in drafts:
            assert (draft.headings, draft.page) in locations, path.name
            assert draft.text.strip() == draft.text and draft.text, path.name
            assert draft.text.count("```") % 2 == 0, (path.name, draft.text)  # fences always balanced
        code_blocks = [b.text for b in doc.blocks if b.kind != BlockKind.TEXT and len(b.text) <= 500]
        for block in code_blocks:
            assert any(block in d.text for d in drafts), (path.name, block)


# -- edge cases --------------------------------------------------------------------------------------------------
def test_empty_and_whitespace_blocks_make_no_chunks():
    blocks = [Block(text=""), Block(text="  \n\t"), Block(kind=BlockKind.CODE, text="\n\n")]
    assert chunk(blocks) == []
    assert chunk([]) == []


def test_chunking_is_deterministic():
    doc = load_file(CORPUS / "guide" / "getting-started.md", source="g")
    runs = [chunk_blocks(doc.blocks, chunk_size=200, chunk_overlap=40, max_block_chars=500) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0]) > 5


@pytest.mark.parametrize(("size", "overlap"), [(300, 150), (300, -1), (0, 0)])
def test_invalid_sizes_are_rejected(size, overlap):
    with pytest.raises(ValueError):
        chunk_blocks([Block(text="x")], chunk_size=size, chunk_overlap=overlap, max_block_chars=500)


# -- answer units ---------------------------------------------------------------------------------------------------
def test_every_chunk_carries_units_and_none_starts_in_its_overlap():
    """A chunk's units are kept at ingest: each sentence of a long section is a unit of exactly one chunk (the one it
    starts in after that chunk's overlap), so quote mode never quotes half a sentence the chunker repeated."""
    from citewise.ingest.chunking import make_chunks
    from citewise.settings import IngestSettings
    from citewise.types import ParsedDocument

    sentences = [f"Sentence {i:03d} tells the reader one more thing about the daemon." for i in range(60)]
    doc = ParsedDocument(source="a.md", filename="a.md", blocks=[Block(text=" ".join(sentences), headings=("A",))])
    chunks = make_chunks(doc, IngestSettings(chunk_size=400, chunk_overlap=120), doc_id="d", filename="a.md")
    assert len(chunks) > 3
    quoted = [c.text[a:b] for c in chunks for a, b, kind in c.units]
    assert all(kind == "sentence" for c in chunks for _, _, kind in c.units)
    assert quoted == sentences  # each whole, once, in order
