"""Syncing a source: bring the index in line with where its docs live, as the home's one writer, and record it.

A sync holds the home's write lock from start to end, so it never overlaps an ingest, an upload, a removal or
another sync (in this process or any other). It then:

1. reads the source (web: crawl with conditional requests; Git: the tree at the ref, by blob id; folder: today's
   `ingest --prune`), deciding per document: unchanged, new or changed, gone;
2. indexes the new and changed documents through the one ingest pipeline (vectors reused by chunk hash), removes
   the gone ones in the same sync, and
3. replaces the source's rows in the sources table.

A sync that fails before step 2 (the site or repository unreachable, robots.txt unreadable, the start URL gone, a
ref that does not exist, the network policy refusing the address) changes nothing in the index: it keeps what the
last good sync left and records the error. A single page or file that fails is reported and, if it was indexed
before, left as it was (web) or removed like any broken file (Git).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from citewise.errors import CitewiseError, IngestError, SourceError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.registry import now_iso
from citewise.ingest.anchors import outline_anchors
from citewise.ingest.globs import templates_note
from citewise.ingest.loaders import load_bytes
from citewise.ingest.pipeline import Ingestor, IngestReport, Progress
from citewise.settings import SourceKind, SourceSpec
from citewise.sources.config import all_specs, config_path, kind_of, remove_from_config, spec_of
from citewise.sources.git import GitRepository, document_source
from citewise.sources.state import SourceDocument, SourceRun, open_source_state
from citewise.sources.web import WebCrawler, normalize_url
from citewise.types import ParsedDocument, make_doc_id

log = logging.getLogger(__name__)

_MAX_LISTED = 100  # skipped pages / failures listed in one report (the counts are exact)


class SyncFailure(BaseModel):
    document: str
    error: str


class SyncReport(BaseModel):
    source: str
    kind: str = ""
    ok: bool = True
    error: str | None = None  # why the sync failed (the index was left as it was)
    started_at: str = ""
    elapsed_s: float = 0.0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    renamed: int = 0  # Git: files moved with their content (also counted as added and removed)
    failed: int = 0
    documents: int = 0  # indexed documents of the source after the sync
    chunks_embedded: int = 0
    chunks_reused: int = 0
    requests: int = 0  # web: HTTP requests sent
    not_modified: int = 0  # web: pages that answered 304
    redirected: int = 0  # web: pages reached through a redirect (the chain is recorded)
    revision: str | None = None  # Git: the commit synced
    complete: bool = True  # web: discovery ran to its end (else nothing undiscovered was removed)
    ran: bool = True  # False: a scheduled sync found the source synced meanwhile by another replica, and let it be
    failures: list[SyncFailure] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)  # web: URL → why it was not fetched or not indexed
    notes: list[str] = Field(default_factory=list)


def sync_source(
    kb: KnowledgeBase,
    name: str,
    *,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    wait_s: float | None = None,
    on_wait: Callable[[str], None] | None = None,
    only_if_due: bool = False,
) -> SyncReport:
    """Sync the source `name` (from citewise.toml or the home). Never raises for a failed sync: the report says.

    The whole sync holds the home's write lock (`KnowledgeBase.writing`: `wait_s` / `on_wait` as for any writer);
    `should_stop` (the server's shutdown) stops the crawl and the ingest at their next checkpoint. `only_if_due`
    (the scheduler): once the lock is held, sync only if the source is still due, since replicas sharing one
    PostgreSQL all find it due at the same moment and take turns on the lock; the first syncs, the others don't."""
    settings = kb.settings
    state = open_source_state(settings)
    report = SyncReport(source=name, started_at=now_iso())
    started = time.monotonic()
    spec: SourceSpec | None = None
    try:
        spec = spec_of(settings, name)
        kind = kind_of(spec)
        report.kind = str(kind)
        with kb.writing(wait_s=wait_s, on_wait=on_wait, cancelled=should_stop):
            # Looked up again with the lock held: `citewise sources remove` may have run while this sync waited for
            # it, and a sync of a removed source would bring its documents and state back.
            spec = all_specs(settings).get(name)
            if spec is None:
                if only_if_due:
                    report.ran = False
                    report.notes.append("removed while this sync waited for the write lock: not synced")
                    return report
                raise SourceError("the source was removed while this sync waited for the write lock; nothing changed")
            kind = kind_of(spec)
            report.kind = str(kind)
            if only_if_due and not _still_due(state, name, spec):
                report.ran = False
                report.notes.append("not due any more: another process synced it while this one waited")
                return report
            state.started(name, spec)
            ingestor = Ingestor(kb, owner=spec.owner, progress=progress, should_stop=should_stop)
            if kind == SourceKind.WEB:
                _sync_web(kb, ingestor, name, spec, state, report, should_stop)
            elif kind == SourceKind.GIT:
                _sync_git(kb, ingestor, name, spec, state, report)
            else:
                _sync_folder(kb, ingestor, name, spec, state, report)
    except CitewiseError as exc:
        report.ok, report.error = False, str(exc)
    except Exception as exc:  # a bug must still leave a recorded, reported failure, never a half-told story
        log.exception("sync of source %s failed unexpectedly", name)
        report.ok, report.error = False, f"unexpected {type(exc).__name__}: {exc}"
    report.elapsed_s = round(time.monotonic() - started, 3)
    report.failed = max(report.failed, len(report.failures))
    report.failures = report.failures[:_MAX_LISTED]
    if spec is not None:
        with contextlib.suppress(OSError, CitewiseError):
            state.finished(name, ok=report.ok, error=report.error, report=report.model_dump(mode="json"))
    return report


def remove_source(
    kb: KnowledgeBase, name: str, *, wait_s: float | None = None, on_wait: Callable[[str], None] | None = None
) -> int:
    """Remove a source: its documents leave the index, its state the home, its table citewise.toml. Returns how many
    documents were removed."""
    settings = kb.settings
    state = open_source_state(settings)
    spec_of(settings, name)  # says plainly when there is no such source
    with kb.writing(wait_s=wait_s, on_wait=on_wait):
        doc_ids = sorted({d.doc_id for d in state.documents(name).values() if d.doc_id})
        _remove(kb, doc_ids)
        state.forget(name)
        remove_from_config(config_path(), name)
        shutil.rmtree(settings.sources_dir / "git" / f"{name}.git", ignore_errors=True)
    return len(doc_ids)


def runs(settings) -> list[SourceRun]:
    return open_source_state(settings).runs(all_specs(settings))


def _still_due(state, name: str, spec: SourceSpec) -> bool:
    [run] = state.runs({name: spec})
    upcoming = next_run(run)
    return upcoming is not None and upcoming <= datetime.now(UTC)


def next_run(run: SourceRun, *, now: datetime | None = None) -> datetime | None:
    """When `citewise serve` syncs this source next: `every` after its last start, or now if it never ran."""
    every = run.spec.every_s
    if every is None:
        return None
    now = now or datetime.now(UTC)
    if not run.last_started:
        return now
    return datetime.fromisoformat(run.last_started) + timedelta(seconds=every)


# -- web -------------------------------------------------------------------------------------------------------
def _read_under(fingerprint: str, known: dict[str, SourceDocument]) -> dict[str, SourceDocument]:
    """The crawler's view of the pages stored last time. A page's stored hash is `FINGERPRINT:sha256(body)`: one read
    under another ingest fingerprint (chunking, embedding model or build) goes out with no conditional request and
    no hash to match, so it is read and ingested again instead of keeping what the old settings made of it."""
    view = {}
    for key, record in known.items():
        prefix, _, digest = record.content_hash.rpartition(":")
        if prefix == fingerprint:
            view[key] = replace(record, content_hash=digest)
        else:
            view[key] = replace(record, content_hash="", etag="", last_modified="")
    return view


def _sync_web(kb, ingestor, name, spec, state, report, should_stop) -> None:
    settings = kb.settings
    fingerprint = kb.ingest_fingerprint()
    known = state.documents(name)
    crawler = WebCrawler(spec, settings.sync, _read_under(fingerprint, known), should_stop=should_stop)
    crawl = asyncio.run(crawler.run(deadline_s=settings.sync.max_sync_s))
    if should_stop is not None and should_stop():
        raise SourceError("stopped before it finished (the server is shutting down); nothing was changed")
    report.requests, report.not_modified, report.complete = crawl.requests, crawl.not_modified, crawl.complete
    report.notes += crawl.notes
    report.skipped = dict(sorted(crawl.skipped.items())[:_MAX_LISTED])
    start = crawler.scope.start
    if start in crawl.failed:
        raise SourceError(f"the start URL failed: {crawl.failed[start]}; nothing was changed")
    if start in crawl.gone:
        raise SourceError(
            f"the start URL {start} answered 404/410; nothing was changed (`citewise sources remove {name}` if the "
            "site is gone)"
        )
    if start in crawl.skipped and start not in crawl.pages:
        raise SourceError(f"the start URL {start} was not fetched: {crawl.skipped[start]}; nothing was changed")
    for url, error in sorted(crawl.failed.items()):
        report.failures.append(SyncFailure(document=url, error=error))
    report.failed = len(crawl.failed)

    pages = crawl.pages
    report.redirected = sum(bool(p.record.redirects) for p in pages.values())
    docs = {p.url: p.doc for p in pages.values() if p.doc is not None}
    claimed = state.claimed((make_doc_id(u) for u in docs), besides=name)
    for url in list(docs):
        other = claimed.get(make_doc_id(url))
        if other:
            del docs[url]
            pages[url].record.doc_id, pages[url].record.note = "", f"indexed by source {other}"
            report.skipped[url] = f"indexed by source {other}"
    ingest = _index(ingestor, list(docs.values()), report)
    failed = {f.source: f.error for f in ingest.failures}
    rows: dict[str, SourceDocument] = {}
    for url, page in pages.items():
        if url in failed:  # read in full again next time: no hash to match, no conditional request
            page.record.note, page.record.content_hash = failed[url], ""
            page.record.etag = page.record.last_modified = ""
        elif page.record.content_hash:
            page.record.content_hash = f"{fingerprint}:{page.record.content_hash}"
        rows[url] = page.record
    for key, old in known.items():
        if key in rows or key in crawl.gone:
            continue
        if key in crawl.failed or not crawl.complete:
            rows[key] = old  # not reached, or failed for now: the document stays as it was
    new = [u for u in docs if u not in failed and not (known.get(u) and known[u].doc_id)]
    report.added = len(new)
    report.updated = max(ingest.indexed - len(new), 0)
    report.unchanged = sum(1 for p in pages.values() if p.indexed) - report.added - report.updated - len(failed)
    _finish(kb, name, state, known, rows, report)


# -- git -------------------------------------------------------------------------------------------------------
def _sync_git(kb, ingestor, name, spec, state, report) -> None:
    repo = GitRepository(name, spec, kb.settings)
    repo.open()
    try:
        _sync_git_snapshot(kb, ingestor, name, spec, state, report, repo)
    finally:
        repo.close()


def _sync_git_snapshot(kb, ingestor, name, spec, state, report, repo: GitRepository) -> None:
    snapshot = repo.snapshot()
    report.revision = snapshot.commit
    if snapshot.templates:
        report.notes.append(f"skipped {templates_note(snapshot.templates)}")
    # The ingest fingerprint too: a change of chunking or of what is stored per chunk (sentence vectors) re-reads
    # every file, as it does for `citewise ingest`; unchanged chunks still reuse their vectors.
    layout = f"{repo.layout(snapshot)}\0{kb.ingest_fingerprint()}"
    known = state.documents(name)
    rows: dict[str, SourceDocument] = {}
    docs: list[ParsedDocument] = []
    for path, blob in sorted(snapshot.files.items()):
        fingerprint = hashlib.sha256(f"{layout}\0{blob}".encode()).hexdigest()
        old = known.get(path)
        if old is not None and old.content_hash == fingerprint and old.doc_id:
            rows[path] = old
            continue
        source = document_source(name, path)
        row = SourceDocument(key=path, blob=blob, revision=snapshot.commit, content_hash=fingerprint)
        row.updated_at = now_iso()
        try:
            doc = load_bytes(repo.read(path, blob), name=PurePosixPath(path).name, source=source)
        except IngestError as exc:
            report.failures.append(SyncFailure(document=path, error=str(exc)))
            rows[path] = row
            row.note, row.content_hash = str(exc), ""
            continue
        doc.source_url = repo.source_url(snapshot, path)
        doc.revision = snapshot.commit
        if doc.source_url:
            doc.anchors = outline_anchors(doc.outline, style=spec.slugs)
        row.doc_id, row.url = make_doc_id(source), doc.source_url or ""
        rows[path] = row
        docs.append(doc)
    ingest = _index(ingestor, docs, report)
    for failure in ingest.failures:
        path = failure.source.removeprefix(f"sources/{name}/")
        if path in rows:
            rows[path].note, rows[path].content_hash = failure.error, ""
    gone = {p: d for p, d in known.items() if p not in snapshot.files}
    gone_blobs = {d.blob for d in gone.values()}
    new = [p for p in rows if p not in known]
    report.renamed = sum(1 for p in new if rows[p].blob in gone_blobs)
    report.added = len(new)
    report.updated = max(ingest.indexed - len([p for p in new if rows[p].doc_id]), 0)
    report.unchanged = len(snapshot.files) - len(docs) - len([r for r in rows.values() if r.note and not r.doc_id])
    _finish(kb, name, state, known, rows, report)


# -- folder ----------------------------------------------------------------------------------------------------
def _sync_folder(kb, ingestor, name, spec, state, report) -> None:
    root = Path(spec.url).expanduser().resolve()
    if not root.is_dir():
        raise SourceError(f"{spec.url}: no such folder; nothing was changed")
    known = state.documents(name)
    ingest = ingestor.ingest_paths([root], prune=True, globs=spec.include or None, ignore=spec.exclude)
    _count(ingest, report)
    report.notes += [f"skipped {note}" for note in ingest.skipped]
    report.updated, report.unchanged, report.removed = ingest.indexed, ingest.unchanged, ingest.pruned
    report.failures += [SyncFailure(document=f.source, error=f.error) for f in ingest.failures]
    rows = {}
    for record in kb.registry.list(owner=spec.owner):
        path = Path(record.path) if record.path else None
        if path is not None and (path == root or root in path.parents):
            key = path.relative_to(root).as_posix()
            rows[key] = SourceDocument(key=key, doc_id=record.doc_id, note=record.error or "", updated_at=now_iso())
    report.added = len([k for k in rows if k not in known])
    report.updated = max(report.updated - report.added, 0)
    state.replace_documents(name, rows.values())
    report.documents = sum(1 for r in rows.values() if r.doc_id and not r.note)


# -- shared steps ----------------------------------------------------------------------------------------------
def _index(ingestor: Ingestor, docs: list[ParsedDocument], report: SyncReport) -> IngestReport:
    ingest = ingestor.ingest_documents(docs) if docs else IngestReport()
    _count(ingest, report)
    if ingest.interrupted:  # the source's rows stay as they were: the next sync reads these documents again
        raise SourceError("stopped before it finished (the server is shutting down); the next sync completes it")
    report.failures += [SyncFailure(document=f.source, error=f.error) for f in ingest.failures]
    return ingest


def _count(ingest: IngestReport, report: SyncReport) -> None:
    report.chunks_embedded += ingest.chunks_embedded
    report.chunks_reused += ingest.chunks_reused


def _finish(kb, name, state, known, rows, report) -> None:
    """Remove what the source no longer has, in the same sync, then record the source's documents."""
    kept = {r.doc_id for r in rows.values() if r.doc_id}
    gone = sorted({d.doc_id for d in known.values() if d.doc_id and d.doc_id not in kept})
    _remove(kb, gone)
    report.removed = len(gone)
    state.replace_documents(name, rows.values())
    report.documents = sum(1 for r in rows.values() if r.doc_id and not r.note)


def _remove(kb: KnowledgeBase, doc_ids: list[str]) -> None:
    if not doc_ids:
        return
    if kb.manifest:
        kb.store.delete_documents(doc_ids)
    kb.registry.delete(doc_ids)  # readers see the removal with the store's next version (its own commit)


__all__ = ["SyncReport", "next_run", "normalize_url", "remove_source", "runs", "sync_source"]
