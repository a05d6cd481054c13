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
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from citewise.errors import ValidationError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.store import Hit, VectorStore, build_where
from citewise.types import RetrievalMode, ScoredChunk, SearchResult

MAX_QUERY_CHARS = 10_000
MAX_SELECTED_TEXT_CHARS = 10_000


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[Hit]], k: int = 60, weights: Sequence[float] | None = None
) -> list[Hit]:
    """Fuse ranked lists: score = Σ weight / (k + rank). A fused hit keeps the dense/lexical scores it was seen with."""
    weights = weights if weights is not None else [1.0] * len(ranked_lists)
    fused: dict[str, Hit] = {}
    best: dict[str, int] = {}
    for weight, ranked in zip(weights, ranked_lists, strict=True):
        for rank, hit in enumerate(ranked, 1):
            entry = fused.get(hit.chunk_id)
            if entry is None:
                entry = fused[hit.chunk_id] = Hit(hit.chunk_id, score=0.0)
                best[hit.chunk_id] = rank
            entry.score += weight / (k + rank)
            best[hit.chunk_id] = min(best[hit.chunk_id], rank)
            entry.dense = hit.dense if hit.dense is not None else entry.dense
            entry.lexical = hit.lexical if hit.lexical is not None else entry.lexical
    return sorted(fused.values(), key=lambda h: (-h.score, best[h.chunk_id], h.chunk_id))


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
        # One worker: the BM25 query runs while this thread embeds the query (both release the GIL).
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citewise-bm25")

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
            return self._cache[key].model_copy(update={"cached": True}, deep=True)  # callers may edit their copy

        result = self._gate(
            self.kb.store, query, mode, top_k, self._rank(self.kb.store, query, self._depth(top_k), mode, where)
        )
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
        hits = self._rank(self.kb.store, query, limit, _mode(mode, self.settings.mode), build_where(owner, filters))
        return self._materialize(self.kb.store, hits)

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

    def _rank(self, store: VectorStore, query: str, limit: int, mode: RetrievalMode, where: str | None) -> list[Hit]:
        persistent = store is self.kb.store
        if persistent and self.kb.manifest is None:
            return []  # nothing was ever ingested: don't load a model to search nothing
        if mode == RetrievalMode.LEXICAL:
            hits = store.lexical(query, limit, where)
            for hit in hits:
                hit.score = hit.lexical
            return hits
        lexical = None
        if mode == RetrievalMode.HYBRID:
            lexical = self._pool.submit(store.lexical, query, limit, where, with_vectors=True)
        # The manifest-checked path for the index on disk; the in-memory store has no manifest to check against.
        vector = self.kb.embed_query(query) if persistent else self.kb.embedder.embed_query(query)
        dense = store.dense(vector, limit, where)
        for hit in dense:
            hit.score = hit.dense
        if lexical is None:
            return dense
        lexical_hits = lexical.result()
        if lexical_hits:  # every candidate needs its cosine for the gate: one matrix product for all BM25 hits
            cosines = np.vstack([h.vector for h in lexical_hits]) @ vector
            for hit, cosine in zip(lexical_hits, cosines, strict=True):
                hit.dense, hit.vector = float(cosine), None
        return reciprocal_rank_fusion(
            [dense, lexical_hits], k=self.settings.rrf_k, weights=[1.0, self.settings.lexical_weight]
        )

    def _gate(self, store: VectorStore, query: str, mode: RetrievalMode, top_k: int, ranked: list[Hit]) -> SearchResult:
        if mode != RetrievalMode.LEXICAL:
            floor = self.settings.min_score
            ranked = [h for h in ranked if h.dense is not None and h.dense >= floor]
        chunks = self._materialize(store, ranked[:top_k])
        return SearchResult(query=query, mode=mode, chunks=chunks, empty=not chunks)

    @staticmethod
    def _materialize(store: VectorStore, hits: list[Hit]) -> list[ScoredChunk]:
        rows = store.fetch([h.chunk_id for h in hits])
        return [
            ScoredChunk(**rows[h.chunk_id].model_dump(), score=h.score, dense_score=h.dense, lexical_score=h.lexical)
            for h in hits
            if h.chunk_id in rows  # a chunk deleted by a concurrent ingest between the two phases is dropped
        ]

    def _search_selected(self, query: str, top_k: int, mode: RetrievalMode, text: str) -> SearchResult:
        """Search only inside `text`: chunked and indexed in memory for this call, never written anywhere."""
        from citewise.index.lancedb_store import LanceStore
        from citewise.ingest.loaders import parse_plain_text
        from citewise.ingest.pipeline import make_chunks
        from citewise.types import make_doc_id

        if not isinstance(text, str) or not text.strip():
            raise ValidationError("selected_text cannot be empty")
        if len(text) > MAX_SELECTED_TEXT_CHARS:
            raise ValidationError(f"selected_text is {len(text)} characters; the limit is {MAX_SELECTED_TEXT_CHARS}")
        doc = parse_plain_text(text, source="selected-text", filename="selected text", title="Selected text")
        doc_id = make_doc_id("selected-text:" + hashlib.sha256(text.encode()).hexdigest())
        chunks = make_chunks(doc, self.kb.settings.ingest, doc_id=doc_id, filename="selected text")
        store = LanceStore.ephemeral()
        store.replace_documents([doc_id], chunks, self.kb.embedder.embed_documents([c.text for c in chunks]))
        store.optimize()
        ranked = self._rank(store, query, self._depth(top_k), mode, None)
        return self._gate(store, query, mode, top_k, ranked)
