"""Grounding: markers that point nowhere vanish, the rest are renumbered and backed by the chunk they name."""

from __future__ import annotations

from citewise.agent.answer import determinism
from citewise.agent.conflicts import NEWEST_RULE, find_conflicts
from citewise.agent.grounding import cited_numbers, find_span, ground, strip_rag_metadata
from citewise.types import Citation, ExitReason, ScoredChunk, make_chunk_id, make_doc_id


def chunk(text: str, *, doc: str = "guide/install.md", index: int = 0, score: float = 0.5, **extra) -> ScoredChunk:
    doc_id = make_doc_id(doc)
    return ScoredChunk(
        chunk_id=make_chunk_id(doc_id, index),
        doc_id=doc_id,
        chunk_index=index,
        text=text,
        filename=doc.rsplit("/", 1)[-1],
        score=score,
        dense_score=score,
        **extra,
    )


INSTALL = chunk(
    "Orbitron ships as a single daemon. The daemon listens on port 7433 by default and stores its journal under "
    "/var/lib/orbitron.",
    source_url="https://docs.example/install",
    chapter="Install > Linux",
    module="guide",
)
QUEUES = chunk(
    "Queues are created explicitly. Run `orbitron queue create --name emails` to create one.",
    doc="guide/queues.md",
    score=0.4,
)


def test_hallucinated_marker_is_stripped_and_the_rest_renumbered():
    text, citations = ground(
        "Queues are created explicitly [4]. The daemon listens on port 7433 [7][2].", {2: INSTALL, 4: QUEUES}
    )
    assert text == "Queues are created explicitly [1]. The daemon listens on port 7433 [2]."
    assert [c.n for c in citations] == [1, 2]
    assert [c.chunk_id for c in citations] == [QUEUES.chunk_id, INSTALL.chunk_id]
    assert cited_numbers(text) == [1, 2]


def test_citation_fields_come_from_the_chunk():
    _, [citation] = ground("It listens on port 7433 [1].", {1: INSTALL})
    assert citation == Citation(
        n=1,
        doc_id=INSTALL.doc_id,
        chunk_id=INSTALL.chunk_id,
        chunk_index=0,
        filename="install.md",
        source_url="https://docs.example/install",
        module="guide",
        chapter="Install > Linux",
        snippet=" ".join(INSTALL.text.split()),
        score=0.5,
        quote_spans=[],
    )


def test_repeats_collapse_and_numbering_follows_first_appearance():
    text, citations = ground("A [3][3]. B [1]. C [3], again [1].", {1: INSTALL, 3: QUEUES})
    assert text == "A [1]. B [2]. C [1], again [2]."
    assert [(c.n, c.chunk_id) for c in citations] == [(1, QUEUES.chunk_id), (2, INSTALL.chunk_id)]


def test_malformed_markers_are_normalised_or_dropped():
    text, citations = ground("One [source 2]. Two [^1]. Three [1, 2]. Four [Source: 9].", {1: INSTALL, 2: QUEUES})
    assert text == "One [1]. Two [2]. Three [2][1]. Four."
    assert len(citations) == 2


def test_ranges_and_vendor_markers_are_expanded():
    sources = {1: INSTALL, 2: QUEUES, 3: INSTALL.model_copy(update={"chunk_id": "c3"})}
    text, citations = ground("All of it [1-3]. Vendor style [2†source]. Past the end [3–9]. Huge [2-400].", sources)
    assert text == "All of it [1][2][3]. Vendor style [2]. Past the end [3]. Huge [2]."
    assert [c.n for c in citations] == [1, 2, 3]
    assert cited_numbers("Bad [7-8].") == [7, 8]


def test_markers_inside_code_are_not_citations():
    answer = "Read the first item with `items[0]` [1].\n\n```python\nvalue = rows[2]\n```"
    text, citations = ground(answer, {1: INSTALL})
    assert "`items[0]`" in text and "rows[2]" in text
    assert [c.n for c in citations] == [1]


def test_no_markers_means_no_citations():
    assert ground("Nothing cited here.", {1: INSTALL}) == ("Nothing cited here.", [])


def test_quoted_text_gets_a_span_inside_the_chunk():
    _, [citation] = ground('The docs say "listens on port 7433 by default" [1].', {1: INSTALL})
    [(start, end)] = citation.quote_spans
    assert INSTALL.text[start:end] == "listens on port 7433 by default"


def test_verbatim_sentences_get_spans_and_become_the_snippet():
    sentence = "The daemon listens on port 7433 by default and stores its journal under /var/lib/orbitron."
    answer = f"- {sentence} [1]\n- Queues are created explicitly. [2]"
    text, citations = ground(answer, {1: INSTALL, 2: QUEUES})
    assert text == answer
    first, second = citations
    assert [INSTALL.text[s:e] for s, e in first.quote_spans] == [sentence]
    assert first.snippet == sentence
    assert [QUEUES.text[s:e] for s, e in second.quote_spans] == ["Queues are created explicitly."]


def test_spans_the_answerer_gives_are_used_as_they_are_under_the_new_numbers():
    """Quote mode says what it quoted: grounding does not look for it again, it only renumbers."""
    start = QUEUES.text.index("Run `orbitron")
    answer = "Run it like this. [5]\n\nSee the daemon. [2]"
    spans = {5: [(start, len(QUEUES.text))], 2: [(0, 33)]}
    text, (first, second) = ground(answer, {2: INSTALL, 5: QUEUES}, spans=spans)
    assert text == "Run it like this. [1]\n\nSee the daemon. [2]"
    assert first.chunk_id == QUEUES.chunk_id and first.quote_spans == [(start, len(QUEUES.text))]
    assert first.snippet == QUEUES.text[start:]
    assert second.chunk_id == INSTALL.chunk_id and second.quote_spans == [(0, 33)]


def test_paraphrase_gets_no_span():
    _, [citation] = ground("Orbitron's daemon uses port 7433 unless you change it [1].", {1: INSTALL})
    assert citation.quote_spans == []


def test_long_chunk_snippet_is_cut_at_a_word():
    long = chunk("word " * 200)
    _, [citation] = ground("Words [1].", {1: long})
    assert citation.snippet.endswith("…") and len(citation.snippet) <= 241


def test_find_span_tolerates_case_and_whitespace():
    assert find_span("Alpha  beta\ngamma", "alpha beta gamma") == (0, 17)
    assert find_span("Alpha beta", "delta") is None


def test_strip_rag_metadata():
    answer = (
        "The daemon listens on port 7433 [1] (score: 0.83).\n"
        "Source: chunk_0042\n"
        "Chunk ID: 3f2a1b4c-1111-4222-8333-444455556666\n"
        "Similarity score: 0.83\n"
        "Journals live under /var/lib/orbitron, doc_id=3f2a1b4c-1111-4222-8333-444455556666.\n"
        "Source: the installation guide explains the rest."
    )
    assert strip_rag_metadata(answer) == (
        "The daemon listens on port 7433 [1].\n"
        "Journals live under /var/lib/orbitron.\n"
        "Source: the installation guide explains the rest."
    )


def test_strip_rag_metadata_leaves_code_alone():
    answer = "Filter by id:\n\n```python\nkb.fetch(doc_id=doc_id)  # score=0.5\n```"
    assert strip_rag_metadata(answer) == answer


def test_ground_strips_metadata_too():
    text, _ = ground("Port 7433 [1]. Similarity score: 0.91", {1: INSTALL})
    assert text == "Port 7433 [1]."


# -- conflicts ---------------------------------------------------------------------------------------------------

OLD = chunk("Set `visibility_timeout = 30s` for short jobs.", doc="guide/old.md", modified="2023-01-10")
NEW = chunk("The visibility_timeout defaults to 60 seconds since 3.2.", doc="guide/new.md", modified="2024-05-01")
SAME = chunk("visibility_timeout: 30 seconds", doc="guide/other.md", modified="2022-06-01")


def test_conflicting_values_across_documents_are_reported():
    [conflict] = find_conflicts([OLD, NEW], newest_rule=False)
    assert conflict.subject == "visibility_timeout"
    assert [(v.value, v.filename, v.date) for v in conflict.values] == [
        ("30s", "old.md", "2023-01-10"),
        ("60 seconds", "new.md", "2024-05-01"),
    ]
    assert conflict.values[0].chunk_id == OLD.chunk_id and conflict.values[1].doc_id == NEW.doc_id
    assert conflict.resolved_value is None and conflict.rule is None


def test_newest_rule_picks_the_newest_dated_value():
    [conflict] = find_conflicts([NEW, OLD, SAME], newest_rule=True)
    assert conflict.resolved_value == "60 seconds"
    assert conflict.rule == NEWEST_RULE
    assert len(conflict.values) == 3


def test_equal_values_in_other_units_are_not_a_conflict():
    assert find_conflicts([OLD, SAME], newest_rule=True) == []


def test_differences_inside_one_document_are_not_conflicts():
    one = chunk("Use `retries = 3` in staging and `retries = 5` in production.", doc="guide/env.md")
    assert find_conflicts([one], newest_rule=False) == []


def test_unrelated_text_reports_no_conflicts():
    chunks = [
        INSTALL,
        QUEUES,
        chunk("Note: this page is about queues. Version 3.2 added lanes.", doc="a.md", modified="2024-01-01"),
        chunk("Note: read the install page first. Version 3.1 added badges.", doc="b.md", modified="2023-01-01"),
        chunk("See https://example.com/a for details; ratio is 3:1.", doc="c.md"),
        chunk("See https://example.com/b for details; ratio is 4:1.", doc="d.md"),
    ]
    assert find_conflicts(chunks, newest_rule=True) == []


def test_prose_defaults_conflict():
    a = chunk("The daemon listens on port 7433. The default port is **7433**.", doc="a.md", modified="2023-03-01")
    b = chunk("Since 4.0 the default port is 7500 for new installs.", doc="b.md", modified="2024-09-01")
    [conflict] = find_conflicts([a, b], newest_rule=True)
    assert conflict.subject == "port" and conflict.resolved_value == "7500"
    same = chunk("Note that the default port is 7433.", doc="c.md")
    assert find_conflicts([a, same], newest_rule=True) == []


def test_table_defaults_conflict():
    a = chunk("| Setting | Default |\n|---|---|\n| `max_retries` | 5 |", doc="a.md", modified="2024-01-01")
    b = chunk("| Setting | Default |\n|---|---|\n| `max_retries` | 8 |", doc="b.md", modified="2024-02-01")
    [conflict] = find_conflicts([a, b], newest_rule=True)
    assert conflict.subject == "max_retries" and conflict.resolved_value == "8"


# -- determinism -------------------------------------------------------------------------------------------------


def test_determinism_hashes_are_stable_and_sensitive():
    _, citations = ground("Port 7433 [1].", {1: INSTALL})
    payload = {"question": "Which port?", "mode": "extractive", "index_version": 3}
    first = determinism(payload, "Port 7433 [1].", citations, ExitReason.COMPLETED)
    again = determinism(dict(reversed(payload.items())), "Port 7433 [1].", citations, ExitReason.COMPLETED)
    assert first == again
    assert len(first.input_hash) == 64 and len(first.output_hash) == 64
    assert determinism(payload, "Port 7434 [1].", citations, ExitReason.COMPLETED).output_hash != first.output_hash
    assert determinism(payload, "Port 7433 [1].", [], ExitReason.COMPLETED).output_hash != first.output_hash
    assert determinism(payload, "Port 7433 [1].", citations, ExitReason.MAX_TURNS_REACHED) != first
    changed = determinism({**payload, "question": "Which port? "}, "Port 7433 [1].", citations, "COMPLETED")
    assert changed.input_hash != first.input_hash and changed.output_hash == first.output_hash


def test_a_table_row_quoted_under_its_distant_header_is_found_row_by_row():
    source = chunk("| Setting | Default |\n|---|---|\n| `port` | 8000 |\n| `host` | 127.0.0.1 |\n| `workers` | 4 |\n")
    text = "| Setting | Default |\n|---|---|\n| `workers` | 4 |\n[1]"
    _, citations = ground(text, {1: source})
    quoted = [source.text[start:end] for start, end in citations[0].quote_spans]
    assert quoted == ["| Setting | Default |", "| `workers` | 4 |"]
    assert citations[0].snippet.startswith("| `workers` | 4 |")  # the row, not its header
