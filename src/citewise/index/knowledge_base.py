"""One handle on everything under CITEWISE_HOME/index: registry, manifest, vector store and embedder.

Opening it is cheap: the vector engine is opened on first use and the embedding model loads on the first text it
has to embed, so `docs list` or an ingest with nothing new never pay for either. Opening it creates nothing: a
home is created by its first writer (`writing()`), never by a reader.

Two backends behind the same handle: files under CITEWISE_HOME/index (LanceDB, SQLite, JSON; the default), or,
with `store = "postgres"`, one PostgreSQL database shared by every process (citewise.state): the registry,
manifest, vocabulary and version row are tables there, and the write lock is an advisory lock.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np

from citewise.errors import IndexMismatchError, IndexUpgradeNeeded, RetrievalError
from citewise.index.embeddings import Embedder, create_embedder
from citewise.index.registry import INDEX_FORMAT, Manifest, Registry, now_iso
from citewise.index.store import VectorStore, search_text, sentence_spans
from citewise.index.vocabulary import Vocabulary
from citewise.index.write_lock import write_lock
from citewise.settings import Settings
from citewise.text import chunk_units
from citewise.types import Chunk


class KnowledgeBase:
    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.dir: Path = settings.index_dir
        self._db = None
        if settings.uses_postgres:
            from citewise.state.database import database
            from citewise.state.tables import PgRegistry

            self._db = database(settings)
            self.registry: Registry | PgRegistry = PgRegistry(self._db)
        else:
            self.registry = Registry(self.dir / "registry.sqlite3")
        self._manifest_path = self.dir / "manifest.json"
        self._manifest_mtime = -1
        self.manifest: Manifest | None = None
        self._reload_manifest()
        self._embedder = embedder
        self._store: VectorStore | None = None
        self._vocabulary: Vocabulary | None = None
        self._vocabulary_lock = threading.Lock()
        self._writers = threading.local()  # .depth: this thread's nesting of writing(); another thread must lock
        self._seen_version = 0

    # -- lazily built parts ------------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = create_embedder(self.settings)
        return self._embedder

    @property
    def store(self) -> VectorStore:
        if self._store is None:
            if self._db is not None:
                from citewise.index.postgres_store import PostgresStore

                self._store = PostgresStore(self._db, self.settings.postgres)
            else:
                from citewise.index.lancedb_store import LanceStore  # the engine's import is not free either

                self._store = LanceStore(
                    self.dir / "lancedb", ann_index_threshold=self.settings.retrieval.ann_index_threshold
                )
        return self._store

    def scratch_store(self) -> VectorStore:
        """An empty store of the same engine that lives in memory only, for one text searched once (a selection):
        nothing it holds touches the home."""
        from citewise.index.lancedb_store import LanceStore

        return LanceStore.ephemeral()

    @property
    def vocabulary(self) -> Vocabulary:
        """The index's words and their chunk counts (spelling correction, corpus statistics), for the store's current
        version: read from `vocabulary.json` (or the database's vocabulary row) when it was built from this version,
        else rebuilt from the store and saved for the next process (or replica)."""
        version = self.store.version()
        with self._vocabulary_lock:
            vocabulary = self._vocabulary
            if vocabulary is None or vocabulary.version != version:
                vocabulary = self._load_vocabulary(version)
                if vocabulary is None or vocabulary.version != version:
                    vocabulary = Vocabulary.build(self.store.indexed_texts(), version)
                    self._save_vocabulary(vocabulary)
                self._vocabulary = vocabulary
            return vocabulary

    def _load_vocabulary(self, version: int) -> Vocabulary | None:
        if self._db is None:
            return Vocabulary.load(self.dir)
        from citewise.state.tables import load_vocabulary

        payload = load_vocabulary(self._db, version)
        return None if payload is None else Vocabulary.from_payload(payload)

    def _save_vocabulary(self, vocabulary: Vocabulary) -> None:
        if self._db is None:
            vocabulary.save(self.dir)
            return
        from citewise.state.tables import save_vocabulary

        save_vocabulary(self._db, vocabulary.version, vocabulary.payload())

    # -- embedding, checked against the manifest ---------------------------------------------------------------
    def embed_documents(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed_documents(texts)
        self._check_dimension(vectors.shape[1])
        return vectors

    def check_embedder(self) -> None:
        """Raise, before a writer changes anything, what the embedder's first call would (a missing extra, a model
        that is gone); loads nothing. Vendor embedders have nothing to check here."""
        check = getattr(self.embedder, "check", None)
        if check is not None:
            check()

    @property
    def vectors_key(self) -> str:
        """The embedder's `vectors_key` ("" for those whose vectors never changed under the same name)."""
        return str(getattr(self.embedder, "vectors_key", ""))

    def ingest_fingerprint(self) -> str:
        """`Settings.ingest_fingerprint` and the embedder's vectors key: a file is read again, and its chunks
        re-embedded, when either changes."""
        key = self.vectors_key
        fingerprint = self.settings.ingest_fingerprint()
        return fingerprint if not key else hashlib.sha256(f"{fingerprint}\0{key}".encode()).hexdigest()[:16]

    @property
    def pools_sentences(self) -> bool:
        """Whether chunks get sentence vectors (`embed_chunks`): with `ingest.sentence_vectors` on (the default) and
        an embedder that makes them, as the ONNX one does for a mean-pooling model such as the bundled one; torch
        and vendor embedders don't, and their chunks keep their own cosine."""
        return self.settings.ingest.sentence_vectors and bool(getattr(self.embedder, "makes_sentences", False))

    def embed_chunks(self, chunks: list[Chunk], *, scratch: bool = False) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Each chunk's vector (of its `search_text`) and, where the embedder can pool them, its sentences'.
        `scratch`: for a store other than the index (the selected-text search), unchecked against its manifest."""
        texts = [search_text(chunk) for chunk in chunks]
        if self.pools_sentences:
            vectors, sentences = self.embedder.embed_with_sentences(texts, [sentence_spans(c) for c in chunks])
        else:
            vectors, sentences = self.embedder.embed_documents(texts), [None] * len(chunks)
        if not scratch:
            self._check_dimension(vectors.shape[1])
        return vectors, sentences

    def embed_query(self, text: str) -> np.ndarray:
        vector = self.embedder.embed_query(text)
        self._check_dimension(vector.shape[0])
        return vector

    def _check_dimension(self, dim: int) -> None:
        if self.manifest is None and self._db is not None:
            from citewise.state.tables import write_manifest

            # a no-op when another wrote first
            write_manifest(self._db, self.settings.embeddings, dim, now_iso(), INDEX_FORMAT)
            self._reload_manifest()
        if self.manifest is None:
            self.manifest = Manifest(
                format=INDEX_FORMAT, embeddings=self.settings.embeddings, dimension=dim, updated_at=now_iso()
            )
            self.manifest.write(self._manifest_path)
            self._manifest_mtime = self._manifest_path.stat().st_mtime_ns
        else:
            self.manifest.check(self.settings.embeddings, dim)

    # -- the index's format ------------------------------------------------------------------------------------
    @property
    def outdated(self) -> bool:
        """Whether the index was written by an older Citewise and must be upgraded before it answers."""
        # another embedding model is not a format question: the search reports it, where it always has
        with suppress(IndexMismatchError):
            self._reload_manifest()
        if self.manifest is not None and self.manifest.format < INDEX_FORMAT and self._db is not None:
            from citewise.state.tables import read_manifest

            row = read_manifest(self._db)  # another process may have upgraded it since this one read it
            self.manifest.format = row["format"] if row else self.manifest.format
        return self.manifest is not None and self.manifest.format < INDEX_FORMAT

    def require_current(self) -> None:
        """Raise `IndexUpgradeNeeded` (saying what to run) for an index of an older format: nothing is answered from
        half-old data."""
        if self.outdated:
            raise IndexUpgradeNeeded(self.settings.home)

    def upgrade(self) -> int:
        """Bring an index of an older format up to INDEX_FORMAT in place, under the write lock: every chunk without
        answer units gets them, computed from its stored text exactly as ingest computes them (nothing is
        re-embedded). Returns how many chunks were filled; 0 for a current index."""
        with self.writing():
            if not self.outdated:
                return 0
            overlap = self.settings.ingest.chunk_overlap
            filled = self.store.fill_units(lambda chunks: _units_in_order(chunks, overlap))
            assert self.manifest is not None
            self.manifest.format = INDEX_FORMAT
            if self._db is not None:
                from citewise.state.tables import set_manifest_format

                set_manifest_format(self._db, INDEX_FORMAT)
            else:
                self.manifest.write(self._manifest_path)
                self._manifest_mtime = self._manifest_path.stat().st_mtime_ns
            return filled

    # -- writing -----------------------------------------------------------------------------------------------
    @contextmanager
    def writing(
        self,
        *,
        wait_s: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[None]:
        """Hold the home's write lock (see write_lock.py) and start from the index as the last writer left it.

        Every write goes through here: without the lock, two writers each merge against the version they read and
        both insert the same chunks. Nested use in one thread (an ingest's optimise step) does not lock twice; another
        thread using the same handle takes the lock like any other writer."""
        depth = getattr(self._writers, "depth", 0)
        if depth:
            self._writers.depth = depth + 1
            try:
                yield
            finally:
                self._writers.depth -= 1
            return
        wait = self.settings.ingest.write_lock_wait_s if wait_s is None else wait_s
        if self._db is not None:
            from citewise.state.locks import advisory_write_lock

            lock = advisory_write_lock(self._db, wait_s=wait, on_wait=on_wait, cancelled=cancelled)
        else:
            lock = write_lock(self.settings.home, wait_s=wait, on_wait=on_wait, cancelled=cancelled)
        with lock:
            self._reload_manifest()
            if self._store is not None:
                self._store.refresh()  # another writer may have committed since this handle last looked
            self._writers.depth = 1
            try:
                yield
            finally:
                self._writers.depth = 0

    # -- versioning --------------------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The index's own commit number (the LanceDB table version), re-read on every call (about 0.15 ms).

        It changes with every commit, in this process or another, at the moment of the commit: a reader that sees
        new rows sees a new version, even when their writer was killed right after committing them. (A version
        kept in a second file, written after the commit, left servers stale when a kill fell in between.)"""
        self._reload_manifest()
        if self.manifest is None:  # nothing was ever embedded: no index to look at (and none to create)
            return 0
        try:
            self.store.refresh()
            self._seen_version = self.store.version()
        except RetrievalError:
            pass  # unreadable right now: nothing newer can be read either, so the last version seen still holds
        return self._seen_version

    def _reload_manifest(self) -> bool:
        if self._db is not None:
            if self.manifest is not None:  # a manifest never changes once written: model and dimension are fixed
                return False
            from citewise.state.tables import read_manifest

            row = read_manifest(self._db)
            if row is None:
                return False
            self.manifest = Manifest(**row)
            self.manifest.check(self.settings.embeddings)
            return True
        try:
            mtime = self._manifest_path.stat().st_mtime_ns
        except FileNotFoundError:
            return False
        if mtime == self._manifest_mtime:
            return False
        self.manifest = Manifest.read(self._manifest_path)
        self._manifest_mtime = mtime
        if self.manifest is not None:
            self.manifest.check(self.settings.embeddings)
        return True


def _units_in_order(chunks: list[Chunk], overlap: int) -> list[tuple[tuple[int, int, str], ...]]:
    """Each chunk's units, for chunks in document order: a chunk's start may repeat the end of the one before it in
    the same section (the chunker's overlap)."""
    out = []
    previous: Chunk | None = None
    for chunk in chunks:
        before = (
            previous.text
            if previous is not None
            and (previous.doc_id, previous.chunk_index + 1, previous.chapter)
            == (chunk.doc_id, chunk.chunk_index, chunk.chapter)
            else None
        )
        out.append(chunk.units if chunk.units is not None else chunk_units(chunk.text, before, overlap))
        previous = chunk
    return out
