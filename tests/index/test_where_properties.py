"""Property-based tests (Hypothesis) of `store.build_where`, the only builder of filter expressions: whatever the
caller puts in filter values, the expression is evaluated by each real engine — LanceDB, and PostgreSQL through
PostgresStore's own lookups (fetch and the vector search, which put the filter into parameterised queries) — as
exact matches inside the caller's owner scope: no value escapes its literal, no row of another owner comes back, and
bad owners or fields are refused."""

from __future__ import annotations

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from citewise.errors import ValidationError
from citewise.index.postgres_store import PostgresStore
from citewise.index.store import FILTERABLE_FIELDS, build_where
from citewise.state.database import Database
from citewise.types import OWNER_RE, PUBLIC_OWNER, Chunk

OWNERS = [PUBLIC_OWNER, "alice", "bob", "eve@example.com"]
HOSTILE = ["x' OR '1'='1", "' OR owner = 'bob", "a''b", "it's", "\\'; DROP TABLE chunks; --", "%", "_", "é ü 中文"]
# Text as a caller may send it: any Unicode but lone surrogates (refused earlier, at the request's edge), and but
# NUL, which has a test of its own below (PostgreSQL ends a query's text at it).
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
PROPERTY = settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", params=["lancedb", "postgres"])
def table(request, tmp_path_factory):
    """Rows for every owner × every hostile title, plus a page number (the columns a filter may name), in one engine;
    what is given back runs a filter there and returns the rows it admits."""
    if request.param == "lancedb":
        rows = [
            {"chunk_id": f"{o}-{i}", "owner": o, "title": t, "filename": f"{i}.md", "page": i, **_blank()}
            for o in OWNERS
            for i, t in enumerate(HOSTILE)
        ]
        db = lancedb.connect(tmp_path_factory.mktemp("where-db"))
        lance = db.create_table("chunks", pa.Table.from_pylist(rows))
        yield lambda where: lance.search().where(where).limit(10_000).to_list()
        return
    chunks = [
        Chunk(
            chunk_id=f"{o}-{i}",
            doc_id=f"{o}-{i}",
            chunk_index=0,
            text="-",
            filename=f"{i}.md",
            title=t,
            page=i,
            owner=o,
        )
        for o in OWNERS
        for i, t in enumerate(HOSTILE)
    ]
    vectors = np.random.default_rng(7).normal(size=(len(chunks), 8)).astype(np.float32)
    db = Database(request.getfixturevalue("postgres").create_database())
    store = PostgresStore(db)
    store.replace_documents([c.doc_id for c in chunks], chunks, vectors)
    ids = [c.chunk_id for c in chunks]

    def run(where: str) -> list[dict]:
        found = store.fetch(ids, where)
        nearest = store.dense(vectors[0], len(ids), where)
        assert {hit.chunk_id for hit in nearest} == set(found)  # the search applies the very same filter
        return [chunk.model_dump() for chunk in found.values()]

    yield run
    db.close()


def _blank() -> dict:
    return {f: "" for f in FILTERABLE_FIELDS if f not in ("title", "filename", "page")}


def rows(table, where: str) -> list[dict]:
    return table(where)


@PROPERTY
@given(owner=st.sampled_from([None, *OWNERS, "mallory"]), title=st.one_of(st.sampled_from(HOSTILE), TEXT))
def test_values_stay_literals_and_owners_stay_scoped(table, owner, title):
    where = build_where(owner, {"title": title})
    found = rows(table, where)
    allowed = {PUBLIC_OWNER} if owner in (None, PUBLIC_OWNER) else {PUBLIC_OWNER, owner}
    assert {r["owner"] for r in found} <= allowed
    assert all(r["title"] == title for r in found)
    expected = sum(1 for o in OWNERS if o in allowed) if title in HOSTILE else 0
    assert len(found) == expected


@PROPERTY
@given(
    owner=st.sampled_from([None, *OWNERS]),
    names=st.lists(st.one_of(TEXT, st.sampled_from([f"{i}.md" for i in range(len(HOSTILE))])), min_size=1, max_size=4),
    pages=st.lists(st.integers(-5, 50), min_size=1, max_size=4),
)
def test_several_values_and_fields_only_narrow_the_scope(table, owner, names, pages):
    found = rows(table, build_where(owner, {"filename": names, "page": pages}))
    allowed = {PUBLIC_OWNER} if owner in (None, PUBLIC_OWNER) else {PUBLIC_OWNER, owner}
    for row in found:
        assert row["owner"] in allowed and row["filename"] in names and row["page"] in pages
    expected = {
        (o, i) for o in OWNERS if o in allowed for i in range(len(HOSTILE)) if f"{i}.md" in names and i in pages
    }
    assert {(r["owner"], r["page"]) for r in found} == expected


@pytest.mark.parametrize("value", ["\x00", "guide\x00' OR owner = 'bob"])
def test_a_nul_in_a_filter_value_matches_nothing(table, value):
    # PostgreSQL ends a query's text at a NUL: left in, the literal would be unterminated and the query fail.
    assert rows(table, build_where("alice", {"title": value})) == []
    assert rows(table, build_where("alice", {"title": [value, "it's"]})) == rows(
        table, build_where("alice", {"title": "it's"})
    )


@PROPERTY
@given(owner=TEXT)
def test_invalid_owners_are_refused(owner):
    assume(not OWNER_RE.match(owner))
    with pytest.raises(ValidationError):
        build_where(owner)


@PROPERTY
@given(field=TEXT, value=TEXT)
def test_only_listed_fields_can_be_filtered(field, value):
    assume(field not in FILTERABLE_FIELDS)
    with pytest.raises(ValidationError):
        build_where("alice", {field: value})
