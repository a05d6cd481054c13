"""The one home of words and sentences: identifiers kept whole, their compact index forms."""

from __future__ import annotations

import pytest

from citewise.text import compact, identifier_tokens, identifiers


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("run citewise ingest docs/ --prune", ["docs/", "--prune"]),
        ("set CITEWISE_API_KEYS and MAX_TURNS_REACHED", ["CITEWISE_API_KEYS", "MAX_TURNS_REACHED"]),
        ("stream from /api/agent/stream", ["/api/agent/stream"]),
        ("upgrade to v1.2.3 or 0.40", ["v1.2.3", "0.40"]),
        ("error ORB-404, E1234 at 0x5031", ["ORB-404", "E1234", "0x5031"]),
        ("set ingest.chunk_size, e.g. to 800.", ["ingest.chunk_size", "800"]),
        ("IceDB and LanceDB, camelCase", ["IceDB", "LanceDB", "camelCase"]),
        ("a real-time page, nothing here", []),
    ],
)
def test_identifiers_are_found_whole(text, found):
    assert [t for t in identifiers(text) if t != "docs/"] == [t for t in found if t != "docs/"]


def test_compact_forms():
    assert compact("CITEWISE_API_KEYS") == "citewiseapikeys"
    assert compact("--prune") == "prune"
    assert compact("/api/agent/stream") == "apiagentstream"
    # Only identifiers of several parts get a compact token of their own: one word is already a token.
    assert identifier_tokens("Use --prune and CITEWISE_API_KEYS with ingest.chunk_size") == [
        "citewiseapikeys",
        "ingestchunksize",
    ]


# -- answer units ----------------------------------------------------------------------------------------------------
from citewise.text import answer_units, chunk_units, leading_overlap  # noqa: E402

UNIT_TEXT = """Run the daemon once. It listens on port 7433.

- a short item
- another item: `x`

| Setting | Default |
| --- | --- |
| port | 7433 |
| workers | 4 |

Install it with:

```bash
pip install orbitron
```
## Next
Final words here."""


def test_answer_units_are_sentences_items_rows_and_code_blocks():
    units = answer_units(UNIT_TEXT)
    got = [(kind, UNIT_TEXT[a:b]) for a, b, kind in units]
    assert got == [
        ("sentence", "Run the daemon once."),
        ("sentence", "It listens on port 7433."),
        ("item", "a short item"),
        ("item", "another item: `x`"),
        ("row", "| port | 7433 |"),
        ("row", "| workers | 4 |"),
        ("sentence", "Install it with:"),
        ("code", "```bash\npip install orbitron\n```"),
        ("sentence", "Final words here."),
    ]  # the heading and the table's header are context, never units


def test_a_long_list_item_is_cut_into_its_sentences():
    item = "- " + " ".join(f"Sentence number {i} says one thing here." for i in range(12))
    units = answer_units(item)
    assert {kind for _, _, kind in units} == {"sentence"} and len(units) == 12


def test_no_unit_starts_inside_the_chunkers_overlap():
    previous = "The first part. The daemon keeps its journal under the state folder for a week."
    text = "keeps its journal under the state folder for a week. Then it rotates the journal."
    overlap = leading_overlap(previous, text, 150)
    assert text[:overlap] == "keeps its journal under the state folder for a week."
    assert [text[a:b] for a, b, _ in chunk_units(text, previous, 150)] == ["Then it rotates the journal."]
    # A short coincidence (a fence, one word) is no overlap: the chunk's first unit stays.
    assert leading_overlap("see the code\n```", "```bash\nls\n```", 150) == 0
    assert chunk_units(text, None, 150)[0][0] == 0
