"""Ingestion: files (or in-memory documents) → chunks → vectors → the index, incrementally and crash-safely.

- A file whose bytes, owner and ingest settings are unchanged since it was last INDEXED is skipped before it is
  even parsed; when nothing needs embedding the embedding model is never loaded.
- A changed file is re-chunked; chunks whose content hash is already stored reuse their vector, so editing one
  paragraph re-embeds about one chunk. The document's chunks are then replaced in one atomic commit.
- A file that cannot be read or parsed (or vanishes after it was found) is recorded FAILED with the reason and the
  rest of the batch goes on.
- Registry rows turn INDEXED only after their chunks are committed, so after a kill -9 the index serves the last
  committed state and the next run redoes exactly the unfinished documents.
- Chunks are made, embedded and committed in batches of `ingest.commit_every`, a big document's too: memory stays
  bounded by one batch (plus the parsed document) and the first commit lands within seconds. A document split over
  several commits stays PENDING until its last one, which also drops its leftover old chunks.
- Every run holds the home's write lock (`KnowledgeBase.writing`), so two writers never merge the same chunks.
- A document's owner never changes silently, and the home itself is never ingested (see `_check_owners`,
  `_check_paths`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import numpy as np
from pydantic import BaseModel, Field

from citewise.errors import ConfigError, IngestError, ProviderError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.registry import now_iso
from citewise.index.store import search_text
from citewise.ingest.anchors import outline_anchors
from citewise.ingest.chunking import digest, iter_chunks, make_chunks
from citewise.ingest.globs import any_match, asks_for_template, is_theme_template, templates_note
from citewise.ingest.loaders import MARKDOWN_SUFFIXES, SUPPORTED_SUFFIXES, load_file
from citewise.types import (
    PUBLIC_OWNER,
    Chunk,
    DocStatus,
    DocumentRecord,
    Owner,
    ParsedDocument,
    make_doc_id,
)

# Folders nobody means to ingest; skipping them keeps `citewise ingest .` sane.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".citewise"})

Progress = Callable[[str, int, int], None]  # (stage, done, total)

_TEXTS_PER_CALL = 256  # per embedder call: enough texts to sort by length into batches, still frequent progress


class _Interrupted(Exception):
    """`should_stop` said so: the run ends at once, before its next embedding call or commit."""


class IngestFailure(BaseModel):
    source: str
    error: str


class IngestReport(BaseModel):
    seen: int = 0
    indexed: int = 0  # documents (re)written this run
    unchanged: int = 0
    failed: int = 0
    pruned: int = 0
    chunks_total: int = 0  # chunks written this run (those of a document that failed later taken back out)
    chunks_embedded: int = 0  # of those, how many needed the embedding model
    chunks_reused: int = 0  # of those, how many reused a stored vector
    commits: int = 0  # commits to the index (a big document takes several)
    interrupted: bool = False  # stopped early (server shutdown): unfinished documents stay PENDING
    elapsed_s: float = 0.0
    failures: list[IngestFailure] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # paths left out on purpose, with the reason
    templates_skipped: int = 0  # theme and template files a folder walk left out (also a note in `skipped`)
    upgraded: int = 0  # chunks of an index from an older Citewise given their answer units first

    @property
    def changed(self) -> bool:
        return bool(self.indexed or self.pruned or self.failed or self.commits or self.upgraded)


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
    revision: str = ""


@dataclass
class _Doc:
    """A document on its way in: how many of its chunks were made, whether its last one was, and whether any
    were committed yet (then a failure must delete them)."""

    job: _Job
    title: str = ""
    made: int = 0
    complete: bool = False
    committed: bool = False
    failed: bool = False  # by a commit (the provider refused its text): the rest of it is not read
    # Its committed chunks as counted in the report: taken back out if it fails later (its chunks are deleted).
    embedded: int = 0
    reused: int = 0


_Stored = tuple[np.ndarray, "np.ndarray | None"]


@dataclass
class _Batch:
    """Chunks waiting for one commit, possibly from several documents and possibly part of one."""

    docs: list[_Doc] = field(default_factory=list)  # in order of first chunk in this batch
    chunks: list[Chunk] = field(default_factory=list)
    # Each chunk's (vector, sentence vectors) when reused from the store; None until embedded.
    vectors: list[_Stored | None] = field(default_factory=list)

    @property
    def to_embed(self) -> int:
        return sum(v is None for v in self.vectors)

    def add(self, doc: _Doc, chunks: list[Chunk], vectors: list[_Stored | None]) -> None:
        if not self.docs or self.docs[-1] is not doc:
            self.docs.append(doc)
        self.chunks += chunks
        self.vectors += vectors

    def drop(self, doc: _Doc) -> None:
        keep = [i for i, c in enumerate(self.chunks) if c.doc_id != doc.job.doc_id]
        self.chunks = [self.chunks[i] for i in keep]
        self.vectors = [self.vectors[i] for i in keep]
        self.docs = [d for d in self.docs if d is not doc]


def discover(
    paths: Sequence[Path],
    globs: Sequence[str],
    *,
    exclude: Path | None = None,
    skipped: list[str] | None = None,
    ignore: Sequence[str] = (),
    templates: list[str] | None = None,
) -> list[tuple[Path, Path]]:
    """(root, file) pairs for every supported file under `paths`, sorted, each file once. Files under `exclude` (the
    home) are left out, and `skipped` is told so; so are files whose path under their root matches an `ignore`
    glob (a source's --exclude), silently; and theme and template files found in a folder (globs.py), unless a glob
    asks for them, told to `skipped` as one note and listed in `templates`."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ConfigError(f"No such file or directory: {', '.join(missing)}")
    # resolved target → (root, the file as listed under it): a symlinked file keeps the path it has in the tree (its
    # identity, and what the document is called), and a target linked twice is ingested once.
    found: dict[Path, tuple[Path, Path]] = {}
    left_out: dict[Path, str] = {}  # theme and template files: resolved path → the path under its folder
    for given in paths:
        given = given.resolve()
        if given.is_file():
            found.setdefault(given, (given.parent, given))
            continue
        # A tree that contains the home leaves it out; a folder inside the home was allowed on purpose (uploads).
        leave_out = exclude if exclude is not None and given != exclude and exclude not in given.parents else None
        for pattern in globs:
            for file in given.glob(pattern):
                rel_parts = file.relative_to(given).parts[:-1]
                if file.is_file() and not any(p in SKIP_DIRS or p.startswith(".") for p in rel_parts):
                    relative = file.relative_to(given).as_posix()
                    if ignore and any_match(relative, ignore):
                        continue
                    resolved = file.resolve()
                    if resolved in found or resolved in left_out:
                        continue
                    if leave_out is not None and (resolved == leave_out or leave_out in resolved.parents):
                        note = f"{leave_out} (the Citewise home, inside {given}: never ingested)"
                        if skipped is not None and note not in skipped:
                            skipped.append(note)
                        continue
                    if is_theme_template(relative, lambda file=file: _head(file)) and not asks_for_template(
                        relative, globs
                    ):
                        left_out[resolved] = relative
                        continue
                    found.setdefault(resolved, (given, file))
    if left_out:
        listed = sorted(left_out.values())
        if skipped is not None:
            skipped.append(templates_note(listed))
        if templates is not None:
            templates += listed
    return sorted(found.values(), key=lambda rf: str(rf[1]))


def _head(file: Path) -> bytes:
    """The start of a file, enough to tell a template by (an unreadable one is left for its loader to report)."""
    try:
        with file.open("rb") as handle:
            return handle.read(65536)
    except OSError:
        return b""


def _source_url(base_url: str | None, relative: str) -> str | None:
    if not base_url:
        return None
    rel = PurePosixPath(relative)
    if rel.suffix.lower() in MARKDOWN_SUFFIXES | {".rst"}:
        rel = rel.with_suffix("")
    return base_url.rstrip("/") + "/" + str(rel)


class Ingestor:
    """Ingests files or in-memory documents into one knowledge base as one owner.

    `reassign_owner` lets a run take over documents indexed under another owner (otherwise that is refused);
    `wait_s`/`on_wait` say how long to wait for another writer on the home and whom to tell; `should_stop` is asked
    between documents and batches (the server's shutdown), and a stopped run leaves unfinished documents PENDING.
    """

    def __init__(
        self,
        kb: KnowledgeBase,
        *,
        owner: Owner | str = PUBLIC_OWNER,
        progress: Progress | None = None,
        reassign_owner: bool = False,
        wait_s: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.kb = kb
        self.settings = kb.settings
        self.owner = Owner.of(owner).id
        self.progress = progress or (lambda stage, done, total: None)
        self.reassign_owner = reassign_owner
        self._wait_s = wait_s
        self._on_wait = on_wait
        self._should_stop = should_stop or (lambda: False)
        self._fingerprint = kb.ingest_fingerprint()
        self._known: set[str] = set()  # doc ids the registry had when this run started
        self._pools_sentences = False  # whether chunks get sentence vectors: set per run (`_run`)
        self._texts_embedded = 0  # for the progress line: texts embedded this run, kept or not

    # -- entry points ------------------------------------------------------------------------------------------
    def ingest_paths(
        self,
        paths: Sequence[Path],
        *,
        prune: bool = False,
        globs: Sequence[str] | None = None,
        ignore: Sequence[str] = (),
    ) -> IngestReport:
        started = datetime.now(UTC)
        patterns = globs or self.settings.ingest.globs
        self._check_paths(paths)
        skipped: list[str] = []
        templates: list[str] = []
        files = discover(
            paths, patterns, exclude=self.settings.home.resolve(), skipped=skipped, ignore=ignore, templates=templates
        )
        if not files and not prune:  # with --prune an emptied folder is legitimate: everything under it goes
            raise ConfigError(
                f"No files to ingest under {', '.join(str(p) for p in paths)} (patterns: {', '.join(patterns)}). "
                f"Supported types: {', '.join(sorted(SUPPORTED_SUFFIXES))}."
                + (f" Left out: {'; '.join(skipped)}." if skipped else "")
            )
        with self._writing():
            jobs = [self._file_job(root, file) for root, file in files]
            report = self._run(jobs)
            report.skipped = skipped
            report.templates_skipped = len(templates)
            if prune and not report.interrupted:
                roots = [p.resolve() for p in paths]
                report.pruned = self._prune(roots, keep={j.doc_id for j in jobs})
            return self._finish(report, started)

    def ingest_documents(self, docs: Iterable[ParsedDocument]) -> IngestReport:
        """Index documents that exist only in memory (BEIR corpora, API uploads already parsed)."""
        started = datetime.now(UTC)
        jobs = []
        for doc in docs:
            content = "\n".join(b.text for b in doc.blocks)
            # Where a chunk links to and which commit it came from are part of what is indexed: a new URL template
            # or anchor re-writes the chunks (their vectors are reused). Documents without them hash as before.
            linked = (
                (doc.source_url or "", json.dumps(doc.anchors, sort_keys=True), doc.revision or "")
                if doc.source_url or doc.anchors or doc.revision
                else ()
            )
            jobs.append(
                _Job(
                    doc_id=make_doc_id(doc.source),
                    source=doc.source,
                    path="",
                    filename=doc.filename,
                    module="",
                    file_hash=digest(doc.title, content, self._fingerprint, self.owner, *linked),
                    load=lambda doc=doc: doc,
                    mtime_iso=doc.date,
                    relative=doc.source,
                    revision=doc.revision or "",
                )
            )
        with self._writing():
            return self._finish(self._run(jobs), started)

    def _writing(self):
        return self.kb.writing(wait_s=self._wait_s, on_wait=self._on_wait, cancelled=self._should_stop)

    # -- what may be ingested, and as whom ---------------------------------------------------------------------
    def _check_paths(self, paths: Sequence[Path]) -> None:
        """The home is Citewise's own data: ingesting it would index the index (and re-own uploads). The one
        exception is the uploads flow: HOME/uploads/<owner>/… ingested as that owner."""
        home = self.settings.home.resolve()
        uploads = self.settings.uploads_path.resolve()
        for given in paths:
            path = given.resolve()
            if path != home and home not in path.parents:
                continue
            own_uploads = uploads / self.owner
            if path == own_uploads or own_uploads in path.parents:
                continue
            hint = (
                f" Uploads are ingested as their owner: `citewise ingest {uploads}/OWNER --owner OWNER`."
                if path == uploads or uploads in path.parents
                else ""
            )
            raise ConfigError(f"{given} is inside the Citewise home {home}, which is never ingested.{hint}")

    def _check_owners(self, todo: list[_Job], records: dict[str, DocumentRecord]) -> None:
        """Refuse, before writing anything, to move documents from one owner to another unless asked to: an
        upload of alice's re-ingested as 'public' would become readable by everyone."""
        if self.reassign_owner:
            return
        taken = [(job, records[job.doc_id]) for job in todo if job.doc_id in records]
        taken = [(job, record) for job, record in taken if record.owner != self.owner]
        if not taken:
            return
        shown = "; ".join(f"{job.source} (owner {record.owner})" for job, record in taken[:10])
        more = f" and {len(taken) - 10} more" if len(taken) > 10 else ""
        owners = sorted({record.owner for _, record in taken})
        raise ConfigError(
            f"{len(taken)} document(s) are already indexed under another owner, and ingesting them as "
            f"{self.owner!r} would change who can read them: {shown}{more}. Ingest them as their owner "
            f"(--owner {owners[0]}), or pass --reassign-owner to give them to {self.owner!r} on purpose."
        )

    # -- steps -------------------------------------------------------------------------------------------------
    def _file_job(self, root: Path, file: Path) -> _Job:
        try:
            return self._readable_file_job(root, file)
        except OSError as exc:
            # Gone since discovery (an editor swapping files, a checkout) or unreadable: this file fails alone, the
            # way a file that cannot be parsed does, with the reason in the registry.
            if isinstance(exc, FileNotFoundError):
                error = f"{file.name}: no longer exists (it was removed after the ingest found it)"
            else:
                error = f"{file.name}: cannot read file: {exc.strerror or exc}"

            def fail() -> ParsedDocument:
                raise IngestError(error)

            parts = PurePosixPath(file.relative_to(root).as_posix()).parts
            return _Job(
                doc_id=make_doc_id(file.as_posix()),
                source=file.as_posix(),
                path=file.as_posix(),
                filename=file.name,
                module=parts[0] if len(parts) > 1 else "",
                file_hash="",  # matches no INDEXED row: the job runs, and fails
                load=fail,
            )

    def _readable_file_job(self, root: Path, file: Path) -> _Job:
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
            file_hash=digest(content, self._fingerprint, self.owner),
            load=load,
            mtime_iso=datetime.fromtimestamp(stat.st_mtime, UTC).date().isoformat(),
            relative=relative,
        )

    def _run(self, jobs: list[_Job]) -> IngestReport:
        report = IngestReport(seen=len(jobs))
        # An index an older Citewise wrote gets its chunks' answer units first: old and new chunks then read alike.
        report.upgraded = self.kb.upgrade()
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
        self._check_owners(todo, records)
        # Asked once, before anything changes: it reads the model's config, and a model that is gone must stop the
        # run here, not fail (and empty) each document it meets.
        self.kb.check_embedder()
        self._pools_sentences = self.kb.pools_sentences
        self._texts_embedded = 0

        registry.upsert(self._record(job, DocStatus.PENDING) for job in todo)
        try:
            self._write(todo, report)
        except _Interrupted:
            report.interrupted = True  # the uncommitted batch and the documents after it stay PENDING
        return report

    def _write(self, todo: list[_Job], report: IngestReport) -> None:
        batch = _Batch()
        size = self.settings.ingest.commit_every
        for done, job in enumerate(todo, 1):
            if self._should_stop():
                raise _Interrupted
            self.progress("parse", done, len(todo))
            doc = _Doc(job)
            parts = self._prepare(doc, size)
            while True:
                try:
                    chunks = next(parts, None)
                    if chunks is None:
                        break
                    batch.add(doc, chunks, self._stored_vectors(doc, chunks))
                except IngestError as exc:
                    self._fail(doc, batch, str(exc), report)
                    break
                except _Interrupted:
                    raise
                except Exception as exc:  # a parser bug must not sink the batch; the message still says which file
                    self._fail(doc, batch, f"{job.filename}: unexpected {type(exc).__name__}: {exc}", report)
                    break
                # Commit after `size` chunks to embed, or four times that reused (a big document re-ingested after
                # a small edit embeds little): either way one batch bounds what is held in memory. Outside the
                # `try`: an embedder or store failure is not this file's, and stops the run as the last commit's
                # does, this batch's documents PENDING with their stored chunks untouched for the next run. (The
                # provider refusing a text fails the documents it came from, this one perhaps: `_commit`.)
                if batch.to_embed >= size or len(batch.chunks) >= 4 * size:
                    self._commit(batch, report)
                    batch = _Batch()
                    if doc.failed:
                        break
        self._commit(batch, report)

    def _prepare(self, doc: _Doc, size: int) -> Iterator[list[Chunk]]:
        """The document's chunks in lists of at most `size`; `doc.complete` turns True with the last list."""
        job = doc.job
        parsed = job.load()
        ingest = self.settings.ingest
        doc.title = parsed.title
        source_url = parsed.source_url or _source_url(ingest.base_url, job.relative)
        markdown = PurePosixPath(job.relative).suffix.lower() in MARKDOWN_SUFFIXES
        if source_url and markdown and not parsed.source_url and not parsed.anchors and parsed.outline:
            # A Markdown file published at base_url: each chunk links to its section, by the slug rule of the site
            # (an HTML file's ids are its own: its generator's, not a slug rule's guess).
            parsed.anchors = outline_anchors(parsed.outline, style=ingest.slugs)
        chunks = iter_chunks(
            parsed,
            ingest,
            doc_id=job.doc_id,
            filename=job.filename,
            module=job.module,
            source_url=source_url,
            modified=parsed.date or job.mtime_iso,
            owner=self.owner,
        )
        part: list[Chunk] = []
        for chunk in chunks:
            if len(part) == size:
                doc.made += len(part)
                yield part
                part = []
            part.append(chunk)
        if not part and not doc.made:
            raise IngestError(f"{job.filename}: no text to index")
        doc.made += len(part)
        doc.complete = True
        yield part

    def _stored_vectors(self, doc: _Doc, chunks: list[Chunk]) -> list[_Stored | None]:
        key = self.kb.vectors_key
        if key:  # stored and looked up under the embedder's key: another build's vectors are never reused
            for chunk in chunks:
                chunk.content_hash = digest(chunk.content_hash, key)
        if doc.job.doc_id not in self._known and not doc.committed:
            return [None] * len(chunks)
        known = self.kb.store.vectors_by_hash([doc.job.doc_id], hashes=[c.content_hash for c in chunks])
        if self._pools_sentences:
            # A chunk stored before sentence vectors existed is embedded again, so the first ingest after an
            # upgrade brings the whole index up to date.
            known = {h: stored for h, stored in known.items() if stored[1] is not None}
        else:  # turned off (`ingest.sentence_vectors`): a chunk written again keeps its vector alone
            known = {h: (vector, None) for h, (vector, _) in known.items()}
        return [known.get(c.content_hash) for c in chunks]

    def _commit(self, batch: _Batch, report: IngestReport) -> None:
        if not batch.chunks:
            return
        reused = {c.chunk_id for c, v in zip(batch.chunks, batch.vectors, strict=True) if v is not None}
        try:
            self._embed(batch)
        except ProviderError as exc:
            # Any other provider failure stops the run (its documents stay PENDING for the next one). A refused
            # input would be refused again on every run: find the documents it came from, and fail those alone.
            if not exc.rejected_input:
                raise
            self._embed_each_document(batch, report, exc)
            if not batch.chunks:
                return
        finished = {d.job.doc_id: d.made for d in batch.docs if d.complete}
        stored = [pair for pair in batch.vectors if pair is not None]
        # The phase the time goes to, as it goes: the commits so far of the ones this run has begun.
        self.progress("write", report.commits, report.commits + 1)
        self.kb.store.write_chunks(
            batch.chunks,
            np.vstack([vector for vector, _ in stored]),
            finished=finished,
            sentences=[matrix for _, matrix in stored],
        )
        report.commits += 1
        self.progress("write", report.commits, report.commits)
        docs = {d.job.doc_id: d for d in batch.docs}
        for chunk in batch.chunks:
            doc = docs[chunk.doc_id]
            if chunk.chunk_id in reused:
                doc.reused += 1
                report.chunks_reused += 1
            else:
                doc.embedded += 1
                report.chunks_embedded += 1
        report.chunks_total += len(batch.chunks)
        for doc in batch.docs:
            doc.committed = True
        done = [d for d in batch.docs if d.complete]
        self.kb.registry.upsert(self._record(d.job, DocStatus.INDEXED, title=d.title, chunk_count=d.made) for d in done)
        report.indexed += len(done)

    def _embed(self, batch: _Batch, doc_id: str | None = None, per_call: int = 0) -> None:
        """Embed the batch's chunks that have no vector yet (only `doc_id`'s, when given; `per_call` texts a call,
        when given)."""
        missing = [
            (i, len(search_text(batch.chunks[i])))
            for i, v in enumerate(batch.vectors)
            if v is None and (doc_id is None or batch.chunks[i].doc_id == doc_id)
        ]
        # A batch of texts costs its longest member times its size, so the embedder sorts what it is given by
        # length. Handing it only one model batch at a time would leave nothing to sort: give it several, of
        # roughly similar length (characters here; it sorts by tokens within), and report progress per call.
        missing.sort(key=lambda item: item[1])
        size = per_call or max(_TEXTS_PER_CALL, self.settings.ingest.embed_batch_size)
        # Progress counts the texts embedded so far; the report counts only the chunks written (`_commit`): not
        # those of a document the provider then refuses.
        embedded = self._texts_embedded
        if missing:  # the bar shows from the first call on (a model loads then), not after it
            self.progress("embed", embedded, embedded + len(missing))
        for start in range(0, len(missing), size):
            if self._should_stop():  # checked per embedder call: a server shutdown waits for one call, not a batch
                raise _Interrupted
            part = missing[start : start + size]
            vectors, sentences = self.kb.embed_chunks([batch.chunks[i] for i, _ in part])
            for (i, _), vector, matrix in zip(part, vectors, sentences, strict=True):
                batch.vectors[i] = (vector, matrix)
            self._texts_embedded += len(part)
            self.progress("embed", self._texts_embedded, embedded + len(missing))

    def _embed_each_document(self, batch: _Batch, report: IngestReport, error: ProviderError) -> None:
        """After the provider refused part of a batch: embed it one document at a time, and a refused document one
        text a call (a server may refuse a call for its number of texts, not for any of them). Fail the documents
        with a text it refuses alone, with its words, while the others go on; but when it embeds nothing at all (a
        model that embeds nothing, a wrong setting), stop the run with its error and blame no document."""
        refused: list[tuple[_Doc, ProviderError]] = []
        for doc in list(batch.docs):
            try:
                self._embed(batch, doc.job.doc_id)
            except ProviderError as exc:
                if not exc.rejected_input:
                    raise
                try:
                    self._embed(batch, doc.job.doc_id, per_call=1)
                except ProviderError as alone:
                    if not alone.rejected_input:
                        raise
                    refused.append((doc, alone))
        if not refused:
            return
        try:
            self.kb.embed_documents(["Citewise checks that the embedding provider embeds a short text."])
        except ProviderError:
            raise error  # noqa: B904 - the refusal is the run's error; the probe's is its context
        for doc, exc in refused:
            self._fail(doc, batch, f"{doc.job.filename}: the embedding provider refused it: {exc}", report)

    def _fail(self, doc: _Doc, batch: _Batch, error: str, report: IngestReport) -> None:
        job = doc.job
        doc.failed = True
        report.failed += 1
        report.failures.append(IngestFailure(source=job.source, error=error))
        batch.drop(doc)
        # Stale chunks of a file that is now broken must not keep answering; nor may part of a big one.
        if job.doc_id in self._known or doc.committed:
            self.kb.store.delete_documents([job.doc_id])
        report.chunks_total -= doc.embedded + doc.reused  # deleted: the report counts the chunks written
        report.chunks_embedded -= doc.embedded
        report.chunks_reused -= doc.reused
        doc.embedded = doc.reused = 0
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
        if report.changed and not report.interrupted:
            self.progress("optimize", 0, 1)
            if self.kb.manifest:
                self.kb.store.optimize()
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
            revision=job.revision,
            **extra,
        )


def remove_document(
    kb: KnowledgeBase,
    doc_id: str,
    *,
    wait_s: float | None = None,
    on_wait: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> DocumentRecord:
    with kb.writing(wait_s=wait_s, on_wait=on_wait, cancelled=should_stop):
        record = kb.registry.get(doc_id)
        if record is None:
            raise ConfigError(f"No document with id {doc_id!r}. `citewise docs list` shows the ids.")
        if kb.manifest:
            kb.store.delete_documents([doc_id])
        kb.registry.delete([doc_id])
        return record


__all__ = [
    "SUPPORTED_SUFFIXES",
    "IngestReport",
    "Ingestor",
    "discover",
    "iter_chunks",
    "make_chunks",
    "remove_document",
]
