"""Hybrid retrieval: dense (cosine) + lexical (BM25), fused by reciprocal rank fusion, owner-scoped, cached.

Fusion is done here rather than by LanceDB's hybrid query because the minimum-score gate needs every candidate's
cosine similarity (LanceDB's hybrid results carry none for lexical-only hits), and because ties must break the
same way on every run (by best single-list rank, then chunk id) for answers to be deterministic.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from citewise.errors import ValidationError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.store import VectorStore, build_where
from citewise.types import RetrievalMode, ScoredChunk, SearchResult

MAX_QUERY_CHARS = 10_000
MAX_SELECTED_TEXT_CHARS = 10_000


def reciprocal_rank_fusion(ranked_lists: Sequence[Sequence[ScoredChunk]], k: int = 60) -> list[ScoredChunk]:
    """Fuse ranked lists: score = Σ 1/(k + rank). Each fused chunk keeps the dense/lexical scores it was seen with."""
    fused: dict[str, dict] = {}
    for ranked in ranked_lists:
        for rank, chunk in enumerate(ranked, 1):
            entry = fused.setdefault(
                chunk.chunk_id, {"chunk": chunk, "score": 0.0, "best": rank, "dense": None, "lex": None}
            )
            entry["score"] += 1.0 / (k + rank)
            entry["best"] = min(entry["best"], rank)
            if chunk.dense_score is not None:
                entry["dense"] = chunk.dense_score
            if chunk.lexical_score is not None:
                entry["lex"] = chunk.lexical_score
    order = sorted(fused.values(), key=lambda e: (-e["score"], e["best"], e["chunk"].chunk_id))
    return [
        e["chunk"].model_copy(update={"score": e["score"], "dense_score": e["dense"], "lexical_score": e["lex"]})
        for e in order
    ]


def _mode(mode: RetrievalMode | str | None, default: RetrievalMode) -> RetrievalMode:
    if mode is None:
        return default
    try:
        return RetrievalMode(mode)
    except ValueError:
        raise ValidationError(f"Unknown retrieval mode {mode!r}; use one of: hybrid, dense, lexical") from None


class Retriever:
    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.settings = kb.settings.retrieval
        self._cache: OrderedDict[str, SearchResult] = OrderedDict()
        self._cache_version = -1

    # -- public API --------------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        top_k: int | None = None,
        *,
        owner: str | None = None,
        mode: RetrievalMode | str | None = None,
        filters: Mapping[str, object] | None = None,
        selected_text: str | None = None,
    ) -> SearchResult:
        """The top chunks for `query` that pass the minimum score, best first; `empty` when none does."""
        query = self._validate_query(query)
        top_k = self.settings.top_k if top_k is None else top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= self.settings.max_top_k:
            raise ValidationError(f"top_k must be an integer from 1 to {self.settings.max_top_k}, got {top_k!r}")
        mode = _mode(mode, self.settings.mode)
        if selected_text is not None:
            return self._search_selected(query, top_k, mode, selected_text)
        where = build_where(owner, filters)  # validates owner and filters before anything else happens

        version = self.kb.version
        if version != self._cache_version:
            self._cache.clear()
            self._cache_version = version
        key = self._cache_key(query, top_k, owner, mode, filters, version)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key].model_copy(update={"cached": True})

        result = self._gate(query, mode, top_k, self._rank(self.kb.store, query, self._depth(top_k), mode, where))
        if not result.empty and self.settings.cache_size:
            self._cache[key] = result
            while len(self._cache) > self.settings.cache_size:
                self._cache.popitem(last=False)
        return result

    def rank(
        self,
        query: str,
        limit: int,
        *,
        mode: RetrievalMode | str | None = None,
        owner: str | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> list[ScoredChunk]:
        """Raw ranking to any depth, ungated and uncached: for evaluation, not for answering."""
        query = self._validate_query(query)
        return self._rank(self.kb.store, query, limit, _mode(mode, self.settings.mode), build_where(owner, filters))

    def clear_cache(self) -> None:
        self._cache.clear()

    # -- internals ---------------------------------------------------------------------------------------------
    @staticmethod
    def _validate_query(query: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("Query cannot be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise ValidationError(f"Query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
        return query.strip()

    def _depth(self, top_k: int) -> int:
        # Fetch more than asked: chunks below the minimum score are dropped after fusion, not before.
        return max(top_k, self.settings.candidates)

    def _cache_key(self, query, top_k, owner, mode, filters, version) -> str:
        payload = {
            "q": query,
            "k": top_k,
            "owner": owner,
            "mode": str(mode),
            "filters": {
                k: sorted(map(str, v)) if isinstance(v, list | tuple | set) else str(v)
                for k, v in (filters or {}).items()
            },
            "settings": self.settings.model_dump(mode="json"),
            "embeddings": self.kb.settings.embeddings,
            "version": version,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def _rank(
        self, store: VectorStore, query: str, limit: int, mode: RetrievalMode, where: str | None
    ) -> list[ScoredChunk]:
        persistent = store is self.kb.store
        if persistent and self.kb.manifest is None:
            return []  # nothing was ever ingested: don't load a model to search nothing
        if mode == RetrievalMode.LEXICAL:
            return store.lexical(query, limit, where, None)
        # The manifest-checked path for the index on disk; the in-memory store has no manifest to check against.
        vector = self.kb.embed_query(query) if persistent else self.kb.embedder.embed_query(query)
        dense = store.dense(vector, limit, where)
        if mode == RetrievalMode.DENSE:
            return dense
        lexical = store.lexical(query, limit, where, vector)
        return reciprocal_rank_fusion([dense, lexical], k=self.settings.rrf_k)

    def _gate(self, query: str, mode: RetrievalMode, top_k: int, ranked: list[ScoredChunk]) -> SearchResult:
        if mode != RetrievalMode.LEXICAL:
            floor = self.settings.min_score
            ranked = [c for c in ranked if c.dense_score is not None and c.dense_score >= floor]
        chunks = ranked[:top_k]
        return SearchResult(query=query, mode=mode, chunks=chunks, empty=not chunks)

    def _search_selected(self, query: str, top_k: int, mode: RetrievalMode, text: str) -> SearchResult:
        """Search only inside `text`: chunked and indexed in memory for this call, never written anywhere."""
        from citewise.index.lancedb_store import LanceStore
        from citewise.ingest.chunking import chunk_blocks
        from citewise.ingest.loaders import parse_plain_text
        from citewise.types import Chunk, make_chunk_id, make_doc_id

        if not isinstance(text, str) or not text.strip():
            raise ValidationError("selected_text cannot be empty")
        if len(text) > MAX_SELECTED_TEXT_CHARS:
            raise ValidationError(f"selected_text is {len(text)} characters; the limit is {MAX_SELECTED_TEXT_CHARS}")
        ingest = self.kb.settings.ingest
        doc = parse_plain_text(text, source="selected-text", filename="selected text", title="Selected text")
        doc_id = make_doc_id("selected-text:" + hashlib.sha256(text.encode()).hexdigest())
        drafts = chunk_blocks(
            doc.blocks,
            chunk_size=ingest.chunk_size,
            chunk_overlap=ingest.chunk_overlap,
            max_block_chars=ingest.max_block_chars,
        )
        chunks = [
            Chunk(
                chunk_id=make_chunk_id(doc_id, i),
                doc_id=doc_id,
                chunk_index=i,
                text=d.text,
                filename="selected text",
                chapter=" > ".join(d.headings),
            )
            for i, d in enumerate(drafts)
        ]
        store = LanceStore.ephemeral()
        store.replace_documents([doc_id], chunks, self.kb.embedder.embed_documents([c.text for c in chunks]))
        store.optimize()
        ranked = self._rank(store, query, self._depth(top_k), mode, None)
        return self._gate(query, mode, top_k, ranked)
