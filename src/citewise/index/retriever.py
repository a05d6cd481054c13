"""Hybrid retrieval: dense (cosine) + lexical (BM25), fused by reciprocal rank fusion, owner-scoped, cached.

Fusion is done here rather than by LanceDB's hybrid query because the minimum-score gate needs every candidate's
cosine similarity (LanceDB's hybrid results carry none for lexical-only hits), and because ties must break the
same way on every run (by best single-list rank, then chunk id) for answers to be deterministic.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from citewise.errors import RetrievalError, ValidationError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.store import Hit, VectorStore, build_where, dense_scores
from citewise.index.vocabulary import VocabularyView
from citewise.text import identifier_tokens
from citewise.types import Chunk, Owner, RankingProfile, RetrievalMode, ScoredChunk, SearchResult

MAX_QUERY_CHARS = 10_000


# A word: letters, with an apostrophe inside ("aren't", "ledgr's"); not the tail of a contraction ("t" of "aren't")
# nor glued to digits or underscores (`int8`). A quote before it ("'retreival'") is no apostrophe.
_WORD_RE = re.compile(r"(?<!\w)(?<!\w['’])[A-Za-z]+(?:['’][A-Za-z]+)*(?!\w)(?!['’]\w)")
_OPENERS = "\"'“‘(*_`"  # what may stand between a sentence's end and its first word
MIN_CORRECTED_MIXED_CASE = 8  # a shorter word with a capital inside is an acronym or a name ("OAuth", "wSTT")


def _starts_sentence(query: str, start: int) -> bool:
    """Whether the word at `start` opens a sentence: only quotes or markup between it and the query's start, a line
    break, or a full stop, question mark, exclamation mark or colon with a space after it."""
    i = start
    while i > 0 and query[i - 1] in _OPENERS:
        i -= 1
    if i == 0 or query[i - 1] == "\n":
        return True
    j = i
    while j > 0 and query[j - 1] in " \t":
        j -= 1
    return j < i and (j == 0 or query[j - 1] in ".!?:\n")


def _correctable(query: str) -> list[str]:
    """The words of `query` spelling correction may look at: not a contraction ("aren't"; a possessive counts
    without its "'s"), not part of a word with digits (`int8`, `MultiCallV3`), not an acronym or a short name with
    capitals inside ("APY", "vLLM", "OAuth"), and not a capitalised word inside a sentence ("the Pyth price feed", "a
    Helm chart"): names the docs don't hold are what the question is about. A long identifier with a typo
    ("RedirectRespone") is still corrected. A name that opens the question, or is typed in lower case, can't be
    told from a word this way ("pyth price feed" is corrected to "path" when the docs say "path")."""
    out = []
    for match in _WORD_RE.finditer(query):
        word = match.group(0)
        if word[-2:] in ("'s", "’s"):
            word = word[:-2]
        if "'" in word or "’" in word:
            continue
        if any(c.isupper() for c in word[1:]) and len(word) < MIN_CORRECTED_MIXED_CASE:
            continue
        if word[0].isupper() and word[1:].islower() and not _starts_sentence(query, match.start()):
            continue
        out.append(word)
    return out


def apply_corrections(text: str, corrections: dict[str, str]) -> str:
    """`text` with the misspelled words a search corrected replaced the same way (the query itself, and the parts of
    a question quote mode analyses)."""
    if not corrections:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, corrections)) + r")\b")
    return pattern.sub(lambda m: corrections[m.group(1)], text)


@dataclass(frozen=True, slots=True)
class PreparedQuery:
    """A query as searched: `corrected` is embedded, `lexical` goes to the full-text index."""

    text: str  # as asked
    corrected: str  # misspelled words replaced by the index words they most likely mean
    lexical: str  # `corrected` plus the compact form of each identifier it names
    corrections: dict[str, str]  # word as asked → word searched


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


def keep_within(ranked: list[Hit], chunk_id: str, within: int) -> list[Hit]:
    """`ranked` with `chunk_id` moved up to position `within` (1-based) when it ranks below it: the BM25 list's best
    chunk, which fusion can bury under passages that only the vector search liked — a table or a list of values
    ("Chain ID / 5031") holds the question's exact words and embeds poorly. The first result is never displaced,
    everything else keeps its order, and the moved hit takes the score of the one it now stands before, so scores
    still read best first."""
    if within < 2:
        return ranked
    at = next((i for i, h in enumerate(ranked) if h.chunk_id == chunk_id), None)
    if at is None or at < within:
        return ranked
    moved = ranked[at]
    moved.score = ranked[within - 1].score
    return [*ranked[: within - 1], moved, *ranked[within - 1 : at], *ranked[at + 1 :]]


PROFILE_DEPTH = 20
SECTIONS_CACHED = 64  # owners whose sections are kept (example questions), until the index changes


def _profile(dense: Sequence[Hit], lexical: Sequence[Hit]) -> RankingProfile:
    return RankingProfile(
        dense=[round(h.dense, 6) for h in dense[:PROFILE_DEPTH] if h.dense is not None],
        dense_top=[h.chunk_id for h in dense[:3]],
        lexical_top=[h.chunk_id for h in lexical[:3]],
    )


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
        self._sections: OrderedDict[str, list[tuple[str, str]]] = OrderedDict()  # owner id → its sections
        self._sections_version = -1
        self._sections_lock = threading.Lock()
        # One worker: the BM25 query runs while this thread embeds the query (both release the GIL).
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citewise-bm25")

    # -- public API --------------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        top_k: int | None = None,
        *,
        owner: Owner | str | None = None,
        mode: RetrievalMode | str | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> SearchResult:
        """The top chunks for `query` that pass the minimum score, best first; `empty` when none does. Only chunks
        `owner` may see are searched (no owner: public ones)."""
        query = self._validate_query(query)
        top_k = self._top_k(top_k)
        mode = _mode(mode, self.settings.mode)
        owner = Owner.of(owner)
        where = build_where(owner, filters)  # validates the filters before anything else happens

        version = self.kb.version
        if self.kb.manifest is None:  # nothing was ever ingested: no model to load, no store to open (or create)
            return SearchResult(query=query, mode=mode, chunks=[], empty=True)
        if version != self._cache_version:
            self._cache.clear()
            self._cache_version = version
        key = self._cache_key(query, top_k, owner, mode, filters, version)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key].model_copy(update={"cached": True}, deep=True)  # callers may edit their copy

        prepared = self.prepare(query, owner)
        ranked, profile = self._rank(self.kb.store, prepared, self._depth(top_k), mode, where)
        result = self._gate(self.kb.store, query, mode, top_k, ranked)
        result.corrections = dict(prepared.corrections)
        result.profile = profile
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
        owner: Owner | str | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> list[ScoredChunk]:
        """Raw ranking to any depth, ungated and uncached: for evaluation, not for answering."""
        query = self._validate_query(query)
        where = build_where(owner, filters)
        hits, _ = self._rank(self.kb.store, self.prepare(query, owner), limit, _mode(mode, self.settings.mode), where)
        return self._materialize(self.kb.store, hits)

    def prepare(self, query: str, owner: Owner | str | None = None) -> PreparedQuery:
        """The query as it is searched: words the index has never seen replaced by the index word they most likely
        misspell (see `citewise.index.vocabulary`), and, for the full-text side, the compact form of every
        identifier it names. Nothing changes for a query of known words."""
        if self.kb.manifest is None:
            return PreparedQuery(query, query, query, {})
        view = self.kb.vocabulary.view(owner)
        corrections: dict[str, str] = {}
        for word in dict.fromkeys(_correctable(query)):
            fixed = view.correct(word)
            if fixed is not None:
                corrections[word] = fixed
        corrected = apply_corrections(query, corrections)
        lexical = " ".join([corrected, *identifier_tokens(corrected)])
        return PreparedQuery(query, corrected, lexical, corrections)

    def vocabulary(self, owner: Owner | str | None = None) -> VocabularyView | None:
        """The words of the documents `owner` sees with their chunk counts (quote mode weighs words by them), or None
        when the index holds none or can't be read right now: then quote mode weighs words by the passages alone."""
        if self.kb.manifest is None:
            return None
        try:
            return self.kb.vocabulary.view(owner)
        except (RetrievalError, OSError):
            return None

    def revisions(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """doc_id → the Git commit each document was read at, for those synced from a Git source (citations carry
        it)."""
        return self.kb.registry.revisions(doc_ids)

    def open(self, chunk_id: str, *, owner: Owner | str | None = None, doc_id: str | None = None) -> Chunk | None:
        """One chunk by id (and document, when given), if `owner` may see it. A chunk of another owner and a chunk
        that does not exist look the same from outside: None, no hint that it exists. The owner rule is applied
        inside the store's lookup (`build_where`), so the row of someone else's chunk is never read."""
        where = build_where(Owner.of(owner), {"doc_id": doc_id} if doc_id else None)
        self.kb.version  # noqa: B018 - picks up an index another process created or changed since the last lookup
        if self.kb.manifest is None:
            return None  # nothing was ever ingested
        return self.kb.store.fetch([chunk_id], where).get(chunk_id)

    def document(self, doc_id: str, owner: Owner | str | None = None) -> list[Chunk]:
        """Every chunk of one document, in order, if `owner` may see it; [] for another owner's document and for one
        that does not exist alike. As in `open`, the owner rule is part of the store's query (`build_where`)."""
        where = build_where(Owner.of(owner), {"doc_id": doc_id})
        self.kb.version  # noqa: B018 - picks up an index another process created or changed since the last lookup
        if self.kb.manifest is None:
            return []
        return sorted(self.kb.store.chunks(where), key=lambda c: c.chunk_index)

    def sections(self, owner: Owner | str | None = None) -> list[tuple[str, str]]:
        """(doc_id, heading path) of every section `owner` may see, in document order: what example questions are
        made of. The owner rule is part of the store's query; kept per owner until the index changes."""
        owner = Owner.of(owner)
        version = self.kb.version
        if self.kb.manifest is None:
            return []
        with self._sections_lock:
            if self._sections_version != version:
                self._sections.clear()
                self._sections_version = version
            found = self._sections.get(owner.id)
        if found is None:
            found = self.kb.store.sections(build_where(owner))
            with self._sections_lock:
                self._sections[owner.id] = found
                while len(self._sections) > SECTIONS_CACHED:
                    self._sections.popitem(last=False)
        return found

    def search_in(
        self, store: VectorStore, query: str, top_k: int | None = None, *, mode: RetrievalMode | str | None = None
    ) -> SearchResult:
        """`search` over another store than the index — a scratch store holding one text (the selected-text search,
        `citewise.ingest.selection`): the same ranking and gate, no owner scope, no spelling, no cache."""
        query = self._validate_query(query)
        top_k = self._top_k(top_k)
        mode = _mode(mode, self.settings.mode)
        prepared = PreparedQuery(query, query, " ".join([query, *identifier_tokens(query)]), {})
        ranked, profile = self._rank(store, prepared, self._depth(top_k), mode, None)
        result = self._gate(store, query, mode, top_k, ranked)
        result.profile = profile
        return result

    # -- internals ---------------------------------------------------------------------------------------------
    @staticmethod
    def _validate_query(query: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("Query cannot be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise ValidationError(f"Query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
        return query.strip()

    def _top_k(self, top_k: int | None) -> int:
        top_k = self.settings.top_k if top_k is None else top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= self.settings.max_top_k:
            raise ValidationError(f"top_k must be an integer from 1 to {self.settings.max_top_k}, got {top_k!r}")
        return top_k

    def _depth(self, top_k: int) -> int:
        # Fetch more than asked: chunks below the minimum score are dropped after fusion, not before.
        return max(top_k, self.settings.candidates)

    def _cache_key(self, query, top_k, owner, mode, filters, version) -> str:
        payload = {
            "q": query,
            "k": top_k,
            "owner": owner.id,
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
        self, store: VectorStore, query: PreparedQuery, limit: int, mode: RetrievalMode, where: str | None
    ) -> tuple[list[Hit], RankingProfile]:
        """The fused ranking, and the profile of the lists it was fused from (what quote mode weighs the best
        passage against)."""
        persistent = store is self.kb.store
        if persistent and self.kb.manifest is None:
            return [], RankingProfile()  # nothing was ever ingested: don't load a model to search nothing
        if mode == RetrievalMode.LEXICAL:
            hits = store.lexical(query.lexical, limit, where)
            for hit in hits:
                hit.score = hit.lexical
            return hits, _profile([], hits)
        lexical = None
        if mode == RetrievalMode.HYBRID:
            lexical = self._pool.submit(store.lexical, query.lexical, limit, where, with_vectors=True)
        # The manifest-checked path for the index on disk; the in-memory store has no manifest to check against.
        text = query.corrected
        vector = self.kb.embed_query(text) if persistent else self.kb.embedder.embed_query(text)
        dense = store.dense(vector, limit, where)
        for hit in dense:
            hit.score = hit.dense
        if lexical is None:
            return dense, _profile(dense, [])
        lexical_hits = lexical.result()
        if lexical_hits:  # every candidate needs its dense score for the gate: one matrix product for all BM25 hits
            cosines = np.vstack([h.vector for h in lexical_hits]) @ vector
            scores = dense_scores(cosines, [h.sentences for h in lexical_hits], vector)
            for hit, score in zip(lexical_hits, scores, strict=True):
                hit.dense, hit.vector, hit.sentences = score, None, None
        fused = reciprocal_rank_fusion(
            [dense, lexical_hits], k=self.settings.rrf_k, weights=[1.0, self.settings.lexical_weight]
        )
        if lexical_hits:
            fused = keep_within(fused, lexical_hits[0].chunk_id, self.settings.lexical_best_within)
        return fused, _profile(dense, lexical_hits)

    def _gate(self, store: VectorStore, query: str, mode: RetrievalMode, top_k: int, ranked: list[Hit]) -> SearchResult:
        if mode != RetrievalMode.LEXICAL:
            # A passage the full-text side matched too needs less cosine: a short question ("how do I change the
            # port") is far from every passage in vector space, while its words find the right one.
            floor, matched = self.settings.min_score, self.settings.min_score_matched
            ranked = [
                h for h in ranked if h.dense is not None and h.dense >= (matched if h.lexical is not None else floor)
            ]
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
