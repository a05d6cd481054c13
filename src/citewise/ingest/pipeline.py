"""Ingestion: files (or in-memory documents) → chunks → vectors → the index, incrementally and crash-safely.

- A file whose bytes, owner and ingest settings are unchanged since it was last INDEXED is skipped before it is
  even parsed; when nothing needs embedding the embedding model is never loaded.
- A changed file is re-chunked; chunks whose content hash is already stored reuse their vector, so editing one
  paragraph re-embeds about one chunk. The document's chunks are then replaced in one atomic commit.
- A file that cannot be read or parsed is recorded FAILED with the reason and the rest of the batch goes on.
- Registry rows turn INDEXED only after their chunks are committed, so after a kill -9 the index serves the last
  committed state and the next run redoes exactly the unfinished documents.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import numpy as np
from pydantic import BaseModel, Field

from citewise.errors import ConfigError, IngestError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.lancedb_store import search_text
from citewise.index.registry import now_iso
from citewise.index.store import validate_owner
from citewise.ingest.chunking import chunk_blocks
from citewise.ingest.loaders import SUPPORTED_SUFFIXES, load_file
from citewise.settings import IngestSettings
from citewise.types import PUBLIC_OWNER, Chunk, DocStatus, DocumentRecord, ParsedDocument, make_chunk_id, make_doc_id

# Folders nobody means to ingest; skipping them keeps `citewise ingest .` sane.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".citewise"})

Progress = Callable[[str, int, int], None]  # (stage, done, total)

_TEXTS_PER_CALL = 256  # per embedder call: enough texts to sort by length into batches, still frequent progress


class IngestFailure(BaseModel):
    source: str
    error: str


class IngestReport(BaseModel):
    seen: int = 0
    indexed: int = 0  # documents (re)written this run
    unchanged: int = 0
    failed: int = 0
    pruned: int = 0
    chunks_total: int = 0  # chunks of the documents written this run
    chunks_embedded: int = 0  # of those, how many needed the embedding model
    chunks_reused: int = 0  # of those, how many reused a stored vector
    elapsed_s: float = 0.0
    failures: list[IngestFailure] = Field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.indexed or self.pruned or self.failed)


@dataclass
class _Job:
    doc_id: str
    source: str
    path: str
    filename: str
    module: str
    file_hash: str
    load: Callable[[], ParsedDocument]
    mtime_iso: str | None = None
    relative: str = ""


@dataclass
class _Ready:
    job: _Job
    title: str
    chunks: list[Chunk]
    vectors: list[np.ndarray | None] = field(default_factory=list)


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    return h.hexdigest()


def discover(paths: Sequence[Path], globs: Sequence[str]) -> list[tuple[Path, Path]]:
    """(root, file) pairs for every supported file under `paths`, sorted, each file once."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ConfigError(f"No such file or directory: {', '.join(missing)}")
    found: dict[Path, Path] = {}
    for given in paths:
        given = given.resolve()
        if given.is_file():
            found.setdefault(given, given.parent)
            continue
        for pattern in globs:
            for file in given.glob(pattern):
                rel_parts = file.relative_to(given).parts[:-1]
                if file.is_file() and not any(p in SKIP_DIRS or p.startswith(".") for p in rel_parts):
                    found.setdefault(file.resolve(), given)
    return sorted(((root, file) for file, root in found.items()), key=lambda rf: str(rf[1]))


def make_chunks(
    doc: ParsedDocument,
    ingest: IngestSettings,
    *,
    doc_id: str,
    filename: str,
    module: str = "",
    source_url: str | None = None,
    modified: str | None = None,
    owner: str = PUBLIC_OWNER,
) -> list[Chunk]:
    """A parsed document's chunks with ids, metadata and content hashes: the one place chunks are made."""
    drafts = chunk_blocks(
        doc.blocks,
        chunk_size=ingest.chunk_size,
        chunk_overlap=ingest.chunk_overlap,
        max_block_chars=ingest.max_block_chars,
    )
    chunks = []
    for index, draft in enumerate(drafts):
        chunk = Chunk(
            chunk_id=make_chunk_id(doc_id, index),
            doc_id=doc_id,
            chunk_index=index,
            text=draft.text,
            filename=filename,
            source_url=source_url,
            module=module,
            chapter=" > ".join(draft.headings),
            title=doc.title,
            page=draft.page,
            modified=modified,
            owner=owner,
        )
        chunk.content_hash = _digest(search_text(chunk))
        chunks.append(chunk)
    return chunks


def _source_url(base_url: str | None, relative: str) -> str | None:
    if not base_url:
        return None
    rel = PurePosixPath(relative)
    if rel.suffix.lower() in {".md", ".mdx", ".markdown", ".rst"}:
        rel = rel.with_suffix("")
    return base_url.rstrip("/") + "/" + str(rel)


class Ingestor:
    def __init__(self, kb: KnowledgeBase, *, owner: str = PUBLIC_OWNER, progress: Progress | None = None) -> None:
        self.kb = kb
        self.settings = kb.settings
        self.owner = validate_owner(owner) or PUBLIC_OWNER
        self.progress = progress or (lambda stage, done, total: None)
        self._fingerprint = self.settings.ingest_fingerprint()
        self._known: set[str] = set()  # doc ids the registry had when this run started

    # -- entry points ------------------------------------------------------------------------------------------
    def ingest_paths(
        self, paths: Sequence[Path], *, prune: bool = False, globs: Sequence[str] | None = None
    ) -> IngestReport:
        started = datetime.now(UTC)
        patterns = globs or self.settings.ingest.globs
        files = discover(paths, patterns)
        if not files and not prune:  # with --prune an emptied folder is legitimate: everything under it goes
            raise ConfigError(
                f"No files to ingest under {', '.join(str(p) for p in paths)} (patterns: {', '.join(patterns)}). "
                f"Supported types: {', '.join(sorted(SUPPORTED_SUFFIXES))}."
            )
        jobs = [self._file_job(root, file) for root, file in files]
        report = self._run(jobs)
        if prune:
            roots = [p.resolve() for p in paths]
            report.pruned = self._prune(roots, keep={j.doc_id for j in jobs})
        return self._finish(report, started)

    def ingest_documents(self, docs: Iterable[ParsedDocument]) -> IngestReport:
        """Index documents that exist only in memory (BEIR corpora, API uploads already parsed)."""
        started = datetime.now(UTC)
        jobs = []
        for doc in docs:
            content = "\n".join(b.text for b in doc.blocks)
            jobs.append(
                _Job(
                    doc_id=make_doc_id(doc.source),
                    source=doc.source,
                    path="",
                    filename=doc.filename,
                    module="",
                    file_hash=_digest(doc.title, content, self._fingerprint, self.owner),
                    load=lambda doc=doc: doc,
                    mtime_iso=doc.date,
                    relative=doc.source,
                )
            )
        return self._finish(self._run(jobs), started)

    # -- steps -------------------------------------------------------------------------------------------------
    def _file_job(self, root: Path, file: Path) -> _Job:
        relative = file.relative_to(root).as_posix()
        stat = file.stat()
        source = file.as_posix()
        limit = int(self.settings.ingest.max_file_mb * 1024 * 1024)

        def load() -> ParsedDocument:
            if stat.st_size > limit:
                raise IngestError(
                    f"{file.name}: {stat.st_size / 1048576:.1f} MB is over the {self.settings.ingest.max_file_mb:g} MB "
                    "limit (ingest.max_file_mb)"
                )
            return load_file(file, source=source)

        # Hash the bytes, not the mtime: a touched-but-identical file is unchanged. Oversized files hash by stat.
        content = file.read_bytes() if stat.st_size <= limit else f"{stat.st_size}:{stat.st_mtime_ns}".encode()
        parts = PurePosixPath(relative).parts
        return _Job(
            doc_id=make_doc_id(source),
            source=source,
            path=source,
            filename=file.name,
            module=parts[0] if len(parts) > 1 else "",
            file_hash=_digest(content, self._fingerprint, self.owner),
            load=load,
            mtime_iso=datetime.fromtimestamp(stat.st_mtime, UTC).date().isoformat(),
            relative=relative,
        )

    def _run(self, jobs: list[_Job]) -> IngestReport:
        report = IngestReport(seen=len(jobs))
        registry = self.kb.registry
        records = {r.doc_id: r for r in registry.list()}  # one query, not one per file
        # Only documents the registry knows can have stored chunks (vectors to reuse, rows to delete): new ones
        # skip those lookups, which scan the table.
        self._known = set(records)
        todo = []
        for job in jobs:
            known = records.get(job.doc_id)
            if known and known.status == DocStatus.INDEXED and known.file_hash == job.file_hash:
                report.unchanged += 1
            else:
                todo.append(job)
        if not todo:
            return report

        registry.upsert(self._record(job, DocStatus.PENDING) for job in todo)
        batch: list[_Ready] = []
        pending_chunks = 0
        for done, job in enumerate(todo, 1):
            self.progress("parse", done, len(todo))
            try:
                ready = self._prepare(job)
            except IngestError as exc:
                self._fail(job, str(exc), report)
                continue
            except Exception as exc:  # a parser bug must not sink the batch; the message still says which file
                self._fail(job, f"{job.filename}: unexpected {type(exc).__name__}: {exc}", report)
                continue
            batch.append(ready)
            pending_chunks += sum(v is None for v in ready.vectors)
            if pending_chunks >= self.settings.ingest.commit_every:
                self._commit(batch, report)
                batch, pending_chunks = [], 0
        self._commit(batch, report)
        return report

    def _prepare(self, job: _Job) -> _Ready:
        doc = job.load()
        ingest = self.settings.ingest
        chunks = make_chunks(
            doc,
            ingest,
            doc_id=job.doc_id,
            filename=job.filename,
            module=job.module,
            source_url=doc.source_url or _source_url(ingest.base_url, job.relative),
            modified=doc.date or job.mtime_iso,
            owner=self.owner,
        )
        if not chunks:
            raise IngestError(f"{job.filename}: no text to index")
        known = self.kb.store.vectors_by_hash([job.doc_id]) if job.doc_id in self._known else {}
        return _Ready(job=job, title=doc.title, chunks=chunks, vectors=[known.get(c.content_hash) for c in chunks])

    def _commit(self, batch: list[_Ready], report: IngestReport) -> None:
        if not batch:
            return
        missing = [(r, i, search_text(r.chunks[i])) for r in batch for i, v in enumerate(r.vectors) if v is None]
        # A batch of texts costs its longest member times its size, so the embedder sorts what it is given by
        # length. Handing it only one model batch at a time would leave nothing to sort: give it several, of
        # roughly similar length (characters here; it sorts by tokens within), and report progress per call.
        missing.sort(key=lambda item: len(item[2]))
        size = max(_TEXTS_PER_CALL, self.settings.ingest.embed_batch_size)
        for start in range(0, len(missing), size):
            part = missing[start : start + size]
            vectors = self.kb.embed_documents([text for _, _, text in part])
            for (ready, i, _), vector in zip(part, vectors, strict=True):
                ready.vectors[i] = vector
            report.chunks_embedded += len(part)
            self.progress("embed", report.chunks_embedded, report.chunks_embedded + len(missing) - start - len(part))
        chunks = [c for r in batch for c in r.chunks]
        report.chunks_total += len(chunks)
        report.chunks_reused += len(chunks) - len(missing)
        self.kb.store.replace_documents(
            [r.job.doc_id for r in batch], chunks, np.vstack([v for r in batch for v in r.vectors])
        )
        self.kb.registry.upsert(
            self._record(r.job, DocStatus.INDEXED, title=r.title, chunk_count=len(r.chunks)) for r in batch
        )
        report.indexed += len(batch)

    def _fail(self, job: _Job, error: str, report: IngestReport) -> None:
        report.failed += 1
        report.failures.append(IngestFailure(source=job.source, error=error))
        if job.doc_id in self._known:  # stale chunks of a file that is now broken must not keep answering
            self.kb.store.delete_documents([job.doc_id])
        self.kb.registry.upsert([self._record(job, DocStatus.FAILED, error=error)])

    def _prune(self, roots: list[Path], keep: set[str]) -> int:
        gone = []
        for record in self.kb.registry.list(owner=self.owner):
            if not record.path or record.doc_id in keep:
                continue
            path = Path(record.path)
            under = any(path == root or root in path.parents for root in roots)
            if under and not path.exists():
                gone.append(record.doc_id)
        if gone:
            if self.kb.manifest:
                self.kb.store.delete_documents(gone)
            self.kb.registry.delete(gone)
        return len(gone)

    def _finish(self, report: IngestReport, started: datetime) -> IngestReport:
        if report.changed:
            self.progress("optimize", 0, 1)
            if self.kb.manifest:
                self.kb.store.optimize()
            self.kb.bump_version()
            self.progress("optimize", 1, 1)
        report.elapsed_s = round((datetime.now(UTC) - started).total_seconds(), 3)
        return report

    def _record(self, job: _Job, status: DocStatus, **extra) -> DocumentRecord:
        return DocumentRecord(
            doc_id=job.doc_id,
            source=job.source,
            path=job.path,
            filename=job.filename,
            owner=self.owner,
            status=status,
            file_hash=job.file_hash if status == DocStatus.INDEXED else "",
            updated_at=now_iso(),
            **extra,
        )


def remove_document(kb: KnowledgeBase, doc_id: str) -> DocumentRecord:
    record = kb.registry.get(doc_id)
    if record is None:
        raise ConfigError(f"No document with id {doc_id!r}. `citewise docs list` shows the ids.")
    if kb.manifest:
        kb.store.delete_documents([doc_id])
    kb.registry.delete([doc_id])
    kb.bump_version()
    return record


__all__ = ["SUPPORTED_SUFFIXES", "IngestReport", "Ingestor", "discover", "remove_document"]
