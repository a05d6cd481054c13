"""Documents over HTTP: upload (stored under the uploads folder, CITEWISE_HOME/uploads/<owner>/ by default, and
ingested as that owner), list, delete, and open one chunk. Every operation is scoped to the caller: their own
documents plus public ones.

Uploads and deletes run through the server's write queue (writer.py): in order, bounded, each request answered
within `server.write_wait_s` (202 when its write is still queued or running, 503 + Retry-After when the queue is
full). An upload the queue refuses leaves nothing behind: it takes its place in the queue before storing a file,
and whatever it stored is undone (a replaced file put back) if the queue refuses it after all.

Another owner's document is answered exactly like a document that does not exist (404), so ids cannot be probed
across owners. A public document is visible to all, so refusing to delete it says so plainly (403).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import tempfile
import uuid
from concurrent.futures import Future
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated

from fastapi import APIRouter, Depends, File, HTTPException, Query, Response, UploadFile, status
from pydantic import BaseModel, create_model

from citewise.errors import CitewiseError, ConfigError, HomeBusyError
from citewise.ingest.pipeline import SUPPORTED_SUFFIXES, Ingestor, remove_document
from citewise.server.auth import writes
from citewise.server.deps import CallerDep, ServerState, StateDep
from citewise.server.schemas import GATE_ERRORS, error_responses
from citewise.server.writer import QueueFull, Slot
from citewise.settings import Settings
from citewise.types import Chunk, DocStatus, DocumentRecord, Owner, make_doc_id

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api", tags=["documents"], responses=error_responses(*GATE_ERRORS))

MAX_FILES_PER_UPLOAD = 20


def request_body_limit(settings: Settings) -> int:
    """The most bytes one upload request may send: every file at the size limit, plus room for the form framing."""
    return int(settings.server.max_upload_mb * 1024 * 1024) * MAX_FILES_PER_UPLOAD + 1024 * 1024


class DocumentOut(BaseModel):
    doc_id: str
    filename: str
    title: str = ""
    owner: str
    status: DocStatus
    error: str | None = None
    chunk_count: int = 0
    updated_at: str = ""

    @classmethod
    def of(cls, record: DocumentRecord) -> DocumentOut:
        # Not `path`/`source`: they are the server's file system layout.
        return cls(**record.model_dump(include=set(cls.model_fields)))


class UploadResult(BaseModel):
    documents: list[DocumentOut]
    indexed: int
    unchanged: int
    failed: int
    queued: bool = False  # true with status 202: the write goes on; GET /api/documents shows when it lands


class DeleteResult(BaseModel):
    doc_id: str
    filename: str
    deleted: bool = True
    queued: bool = False  # true with status 202 (deleted is then false until the write runs)


# A chunk as the API shows it: every field of `Chunk` but its content hash and answer units (index details),
# declared once there.
ChunkOut = create_model(
    "ChunkOut",
    __doc__="One chunk: its text and everything a citation needs.",
    **{name: (f.annotation, f) for name, f in Chunk.model_fields.items() if name not in ("content_hash", "units")},
)


def safe_filename(name: str | None) -> str:
    """The name an upload is stored under. Anything that names a directory is refused (400), not repaired: a client
    sending '../x.md' is either broken or probing, and silently writing 'x.md' would hide both."""
    if not name or "\0" in name:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="Each uploaded file needs a file name.")
    if PurePosixPath(name).name != name or PureWindowsPath(name).name != name or name in {".", ".."}:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST, detail=f"Invalid file name {name!r}: a name must not contain a path."
        )
    cleaned = _store_name(name)
    stem, dot, _ = cleaned.rpartition(".")
    if not dot or not stem.strip(" ._"):
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"Invalid file name {name!r}.")
    return cleaned[-200:] if len(cleaned) > 200 else cleaned


_DISPOSITION_FILENAME = re.compile(r'filename="((?:[^"\\]|\\.)*)"|filename=([^;]+)', re.IGNORECASE)


def sent_filename(upload: UploadFile) -> str | None:
    """The file name as the client sent it when it names a path. The multipart parser keeps only what follows the
    last backslash of an old browser's full Windows path ('C:\\evil.md' arrives as 'evil.md'), which would hide
    a path from `safe_filename`; the part's own Content-Disposition header still has it."""
    disposition = upload.headers.get("content-disposition", "") if upload.headers else ""
    match = _DISPOSITION_FILENAME.search(disposition)
    if match is None:
        return upload.filename
    raw = match.group(1) if match.group(1) is not None else match.group(2).strip()
    # Only to refuse a path: for anything else the parser's decoding of the name stands.
    has_path = PurePosixPath(raw).name != raw or PureWindowsPath(raw).name != raw
    return raw if has_path else upload.filename


def _safe_char(char: str) -> bool:
    return char.isalnum() or char in "._ -"


def _store_name(name: str) -> str:
    """The stored name: letters and digits of any script, '.', '_', ' ' and '-' as they are; everything else (and
    a leading or trailing dot or space) as %XX of its UTF-8 bytes. One-to-one, so two different names never land
    in one file: 'evil∕slash.md' and 'evil／slash.md' both became 'evil_slash.md', and the second upload silently
    replaced the first document. Names made only of safe characters keep their name, and so their document id."""
    out = []
    for index, char in enumerate(name):
        edge = index == 0 or index == len(name) - 1
        if _safe_char(char) and char != "%" and not (edge and char in ". "):
            out.append(char)
        else:
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
    return "".join(out)


def _upload_dir(settings: Settings, owner: str) -> Path:
    root = settings.uploads_path.resolve()
    target = (root / owner).resolve()
    if target.parent != root:  # owners come from configuration, but '..' matches the owner pattern too
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="This owner id cannot store uploads.")
    return target


@router.post(
    "/documents",
    summary="Upload documents and ingest them",
    dependencies=[Depends(writes)],
    responses={
        **error_responses(400, 403, 415, 502, 503, 504),  # 502/504 (and 429): the embedding provider failed
        202: {"description": "Accepted; still being written after server.write_wait_s (documents PENDING)"},
    },
)
async def upload(
    files: Annotated[list[UploadFile], File(description="One or more documents (.md, .mdx, .html, .pdf, .rst, .txt).")],
    caller: CallerDep,
    state: StateDep,
    response: Response,
) -> UploadResult:
    settings = state.settings
    if len(files) > MAX_FILES_PER_UPLOAD:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST, detail=f"At most {MAX_FILES_PER_UPLOAD} files per upload; got {len(files)}."
        )
    limit = int(settings.server.max_upload_mb * 1024 * 1024)
    names: list[str] = []
    # Check every file before storing any: a request is accepted or refused as a whole.
    for upload in files:
        name = safe_filename(sent_filename(upload))
        if Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
            raise HTTPException(
                status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                detail=f"{name}: unsupported file type. Supported: {', '.join(sorted(SUPPORTED_SUFFIXES))}.",
            )
        if upload.size is not None and upload.size > limit:
            raise HTTPException(
                status.HTTP_413_CONTENT_TOO_LARGE,
                detail=f"{name} is {upload.size / 1048576:.1f} MB; the limit is {settings.server.max_upload_mb:g} MB.",
            )
        names.append(name)
    if len(set(names)) != len(names):
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="Two uploaded files have the same name.")

    target = _upload_dir(settings, caller.owner.id)
    owner = caller.owner.id
    # A place in the queue before any file is stored: a refused upload must leave no file that the next start's
    # resume_uploads would ingest (as if it had been accepted), nor one that replaced an indexed document's source.
    with _reserve(state) as slot:
        # Stored before queueing: the request's files are closed once it is answered, and a queued write may run
        # later.
        staged = _StagedUploads()
        try:
            for upload, name in zip(files, names, strict=True):
                await asyncio.to_thread(staged.store, upload, target / name)
            paths = staged.paths

            def write(should_stop):
                return _ingest(state, owner, paths, should_stop)

            future = _submit(state, write, slot)
        except BaseException:
            staged.undo()
            raise
        staged.accept()
    report = await _outcome(state, future)
    if report is None:  # still queued or running: say what is known now
        response.status_code = status.HTTP_202_ACCEPTED
        documents = []
        for path in paths:
            record = state.kb.registry.get(make_doc_id(path.resolve().as_posix()))
            pending = DocumentOut(
                doc_id=make_doc_id(path.resolve().as_posix()), filename=path.name, owner=owner, status=DocStatus.PENDING
            )
            documents.append(DocumentOut.of(record) if record and record.status == DocStatus.PENDING else pending)
        return UploadResult(documents=documents, indexed=0, unchanged=0, failed=0, queued=True)
    records = [state.kb.registry.get(make_doc_id(p.resolve().as_posix())) for p in paths]
    return UploadResult(
        documents=[DocumentOut.of(r) for r in records if r is not None],
        indexed=report.indexed,
        unchanged=report.unchanged,
        failed=report.failed,
    )


def _queue_full(exc: QueueFull) -> HTTPException:
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        detail=f"Too many uploads and deletes are waiting ({exc}) Retry shortly.",
        headers={"Retry-After": "10"},
    )


def _reserve(state: ServerState) -> Slot:
    """A place in the write queue (503 when there is none)."""
    assert state.writer is not None, "the app's lifespan starts the writer"
    try:
        return state.writer.reserve()
    except QueueFull as exc:
        raise _queue_full(exc) from None


def _submit(state: ServerState, job, slot: Slot | None = None) -> Future:
    """Queue a write, in `slot` or a place taken now (503 when there is none)."""
    assert state.writer is not None, "the app's lifespan starts the writer"
    try:
        return slot.submit(job) if slot is not None else state.writer.submit(job)
    except QueueFull as exc:
        raise _queue_full(exc) from None


async def _outcome(state: ServerState, future: Future):
    """Wait for a queued write at most `server.write_wait_s`: its result, or None if it is still going."""
    waiter = asyncio.wrap_future(future)
    done, _ = await asyncio.wait({waiter}, timeout=state.settings.server.write_wait_s)
    if done:
        return waiter.result()
    # Answered before the write ended: its outcome is read from the registry later, not from this future. A write
    # that fails as a whole (the embedding provider down: its documents stay PENDING) has nobody left to tell but
    # the log.
    future.add_done_callback(_log_failure)
    waiter.add_done_callback(lambda f: f.cancelled() or f.exception())
    return None


def _log_failure(future: Future) -> None:
    error = None if future.cancelled() else future.exception()
    if isinstance(error, HomeBusyError):  # dropped at shutdown: the next start ingests them (said by the queue)
        log.info("A queued write did not run: %s", error)
    elif error is not None:
        log.error(
            "A queued write failed; its documents stay PENDING until the server starts again: %s",
            error,
            exc_info=None if isinstance(error, CitewiseError) else error,
        )


class _StagedUploads:
    """The files one upload stored, and copies of those they replaced, until the write queue takes the upload.
    `undo` (the queue refused it, the server began shutting down, the disk filled half-way) removes what it stored
    and puts every replaced file back; `accept` drops the copies."""

    def __init__(self) -> None:
        self.paths: list[Path] = []
        self._replaced: dict[Path, Path] = {}  # stored path → a hidden copy of the file it replaced

    def store(self, upload: UploadFile, path: Path) -> None:
        path = path.resolve()
        if path.is_file():
            self._replaced[path] = _copy_aside(path)
        self.paths.append(_store(upload, path))

    def undo(self) -> None:
        for path in self.paths:
            before = self._replaced.pop(path, None)
            if before is not None:
                os.replace(before, path)
            else:
                path.unlink(missing_ok=True)
        self.accept()  # a copy whose file was never replaced (its store failed): the file is as it was

    def accept(self) -> None:
        for copy in self._replaced.values():
            copy.unlink(missing_ok=True)
        self._replaced.clear()


def _copy_aside(path: Path) -> Path:
    """A copy of `path` beside it, under a hidden name (resume_uploads skips those): a hard link, or a real copy
    where the file system has none."""
    copy = path.with_name(f".replaced-{uuid.uuid4().hex}")
    try:
        os.link(path, copy)
    except OSError:
        shutil.copy2(path, copy)
    return copy


def _store(upload: UploadFile, path: Path) -> Path:
    """Write-then-rename, so a reader (or a crash) never sees half a file. Runs in a worker thread: copying a large
    upload must not stall the event loop."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
    try:
        upload.file.seek(0)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(upload.file, out, 1024 * 1024)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path.resolve()


def _ingest(state: ServerState, owner: str, paths: list[Path], should_stop=None):
    # A file that cannot be parsed is recorded FAILED by the pipeline and the others go on. `should_stop` is the
    # server's shutdown: the ingest stops between two commits and leaves what it did not finish PENDING.
    return Ingestor(state.kb, owner=owner, should_stop=should_stop, on_wait=log.info).ingest_paths(paths)


def resume_uploads(state: ServerState) -> None:
    """Queue the uploads a previous run stored but did not finish (shut down first, or killed): files under
    uploads/<owner>/ with no registry row, or a PENDING one. Runs at start-up; the writes happen in the queue."""
    root = state.settings.uploads_path
    if not root.is_dir():
        return
    known = {r.doc_id: r for r in state.kb.registry.list()}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            owner = Owner.of(folder.name).id
        except CitewiseError:
            continue
        todo = []
        for path in sorted(folder.iterdir()):
            if path.is_file() and not path.name.startswith(".") and path.suffix.lower() in SUPPORTED_SUFFIXES:
                record = known.get(make_doc_id(path.resolve().as_posix()))
                if record is None or record.status == DocStatus.PENDING:
                    todo.append(path.resolve())
        if todo and state.writer is not None:
            log.info("Resuming %d unfinished upload(s) of %s", len(todo), owner)
            try:
                future = state.writer.submit(lambda should_stop, o=owner, t=todo: _ingest(state, o, t, should_stop))
                future.add_done_callback(_log_failure)
            except QueueFull:
                log.warning("Write queue full; %d upload(s) of %s wait for the next start", len(todo), owner)


@router.get("/documents", summary="Documents the caller can see: their own and public ones")
async def list_documents(
    caller: CallerDep,
    state: StateDep,
    status_filter: Annotated[
        DocStatus | None, Query(alias="status", description="Only documents in this state.")
    ] = None,
) -> list[DocumentOut]:
    records = await asyncio.to_thread(state.kb.registry.list, status=status_filter)
    return [DocumentOut.of(r) for r in records if caller.owner.sees(r.owner)]


@router.delete(
    "/documents/{doc_id}",
    summary="Delete one of the caller's documents",
    dependencies=[Depends(writes)],
    responses={
        **error_responses(403, 404, 503),
        202: {"description": "Accepted; the delete is still queued after server.write_wait_s"},
    },
)
async def delete_document(doc_id: uuid.UUID, caller: CallerDep, state: StateDep, response: Response) -> DeleteResult:
    record = state.kb.registry.get(str(doc_id))
    if record is None or not caller.owner.sees(record.owner):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"No document with id {doc_id}.")
    if record.owner != caller.owner.id:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            detail="Public documents are managed by the server's operator (`citewise docs remove`).",
        )

    def write(should_stop):
        removed = remove_document(state.kb, record.doc_id, should_stop=should_stop, on_wait=log.info)
        _remove_upload(state.settings, removed)
        return removed

    future = _submit(state, write)
    try:
        done = await _outcome(state, future)
    except ConfigError:  # removed by an earlier write in the queue
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"No document with id {doc_id}.") from None
    if done is None:
        response.status_code = status.HTTP_202_ACCEPTED
        return DeleteResult(doc_id=record.doc_id, filename=record.filename, deleted=False, queued=True)
    return DeleteResult(doc_id=record.doc_id, filename=record.filename)


def _remove_upload(settings: Settings, record: DocumentRecord) -> None:
    """Delete the stored upload too, so re-ingesting the uploads folder cannot bring the document back."""
    if not record.path:
        return
    uploads = settings.uploads_path.resolve()
    path = Path(record.path)
    if uploads in path.parents:
        path.unlink(missing_ok=True)


@router.get(
    "/chunks/{chunk_id}", summary="One chunk the caller can see (opening a citation)", responses=error_responses(404)
)
async def get_chunk(chunk_id: uuid.UUID, caller: CallerDep, state: StateDep) -> ChunkOut:  # type: ignore[valid-type]
    chunk = await asyncio.to_thread(state.retriever.open, str(chunk_id), owner=caller.owner)
    if chunk is None:  # another owner's chunk is answered exactly like a missing one
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"No chunk with id {chunk_id}.")
    return ChunkOut(**chunk.model_dump(include=set(ChunkOut.model_fields)))
