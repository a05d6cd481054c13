"""Searching only inside a text the user selected: the text is chunked as an ingest would chunk it, embedded and
indexed in a scratch store in memory for this one search, and ranked like the index (`Retriever.search_in`).
Nothing is written to the home.

It lives here, above the index, because it needs both halves: the chunker (ingest) and the ranking (index).
"""

from __future__ import annotations

import hashlib

from citewise.index.retriever import Retriever
from citewise.ingest.chunking import make_chunks
from citewise.ingest.plaintext import parse_plain_text
from citewise.types import RetrievalMode, SearchResult, check_selected_text, make_doc_id

SELECTION_FILENAME = "selected text"


def search_selected(
    retriever: Retriever,
    query: str,
    top_k: int | None = None,
    *,
    text: str,
    mode: RetrievalMode | str | None = None,
) -> SearchResult:
    """The best passages of `text` for `query`, gated by the same minimum score as a search of the index."""
    text = check_selected_text(text)
    kb = retriever.kb
    doc = parse_plain_text(text, source="selected-text", filename=SELECTION_FILENAME, title="Selected text")
    doc_id = make_doc_id("selected-text:" + hashlib.sha256(text.encode()).hexdigest())
    chunks = make_chunks(doc, kb.settings.ingest, doc_id=doc_id, filename=SELECTION_FILENAME)
    store = kb.scratch_store()
    # Embedded as the index's chunks are (headings, sentence vectors), so the same minimum score means the same.
    store.replace_documents([doc_id], chunks, *kb.embed_chunks(chunks, scratch=True))
    store.optimize()
    return retriever.search_in(store, query, top_k, mode=mode)
