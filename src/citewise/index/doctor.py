"""`citewise doctor`: check that a home's index and registry agree, and repair what does not.

What it looks for, and what `--repair` does about it (under the home's write lock, like any writer):

- duplicate chunk rows (one chunk_id stored twice, as two unserialised writers used to leave): one copy is kept;
- orphan chunks (their doc_id is not in the registry): deleted, since nothing can list or remove them;
- INDEXED documents whose stored chunk count differs from the registry's, or that have no chunks at all: marked
  PENDING with the reason, so the next `citewise ingest` of their folder (or the server, for uploads) redoes them;
- an index written by an older Citewise (its chunks lack their answer units, which quote mode reads): upgraded in
  place — each chunk's units computed from its stored text, as ingest computes them; nothing is re-embedded.

PENDING documents are not checked: a writer may be between two commits of one of them.

It also reports what the home holds on disk, part by part (`home_usage`): one `os.scandir` walk that follows no
symbolic link and only reads.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field

from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.registry import now_iso
from citewise.settings import Settings
from citewise.types import DocStatus


class ProblemKind(StrEnum):
    DUPLICATE_CHUNKS = "duplicate_chunks"
    ORPHAN_CHUNKS = "orphan_chunks"
    COUNT_MISMATCH = "count_mismatch"
    NO_CHUNKS = "no_chunks"
    OUTDATED_INDEX = "outdated_index"


class Problem(BaseModel):
    kind: ProblemKind
    doc_id: str
    detail: str
    fixed: str = ""  # what --repair did about it


# What a home holds, in the order `citewise doctor` lists it, with the words it uses.
HOME_PARTS = {
    "index": "index",
    "registry": "registry and state databases",
    "sessions": "conversation sessions",
    "feedback": "feedback",
    "llm_cache": "LLM cache",
    "question_log": "question log",
    "sources": "sources",
    "uploads": "uploads",
    "models": "models",
    "other": "other",
}


class HomeUsage(BaseModel):
    """Bytes on disk under the home, by part (every part of HOME_PARTS, 0 when absent), and their total."""

    home: str
    parts: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(HOME_PARTS, 0))
    total: int = 0


class DoctorReport(BaseModel):
    documents: int = 0
    chunk_rows: int = 0
    problems: list[Problem] = Field(default_factory=list)
    repaired: bool = False
    home_usage: HomeUsage | None = None  # None: the home does not exist

    @property
    def remaining(self) -> list[Problem]:
        return [p for p in self.problems if not p.fixed]


def check(
    kb: KnowledgeBase,
    *,
    repair: bool = False,
    wait_s: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> DoctorReport:
    if not repair:
        return _inspect(kb)
    with kb.writing(wait_s=wait_s, on_wait=on_wait):
        report = _inspect(kb)
        _repair(kb, report)
        return report


def _inspect(kb: KnowledgeBase) -> DoctorReport:
    records = {r.doc_id: r for r in kb.registry.list()}
    report = DoctorReport(documents=len(records))
    kb.version  # noqa: B018 - opens the latest commit (another process may have written since)
    rows = kb.store.chunk_rows() if kb.manifest is not None else []
    report.chunk_rows = len(rows)
    if kb.outdated:
        report.problems.append(
            Problem(
                kind=ProblemKind.OUTDATED_INDEX,
                doc_id="",
                detail=f"written by an older Citewise: {kb.store.missing_units()} chunk(s) lack their answer units",
            )
        )
    copies = Counter(chunk_id for chunk_id, _ in rows)
    per_doc: dict[str, set[str]] = defaultdict(set)
    doubled: dict[str, list[str]] = defaultdict(list)
    for chunk_id, doc_id in rows:
        per_doc[doc_id].add(chunk_id)
    for chunk_id, doc_id in dict(rows).items():
        if copies[chunk_id] > 1:
            doubled[doc_id].append(chunk_id)
    for doc_id, chunk_ids in sorted(doubled.items()):
        extra = sum(copies[c] - 1 for c in chunk_ids)
        report.problems.append(
            Problem(
                kind=ProblemKind.DUPLICATE_CHUNKS,
                doc_id=doc_id,
                detail=f"{len(chunk_ids)} chunk(s) stored more than once ({extra} extra row(s))",
            )
        )
    for doc_id in sorted(set(per_doc) - set(records)):
        report.problems.append(
            Problem(
                kind=ProblemKind.ORPHAN_CHUNKS,
                doc_id=doc_id,
                detail=f"{len(per_doc[doc_id])} chunk(s) of a document the registry does not know",
            )
        )
    for doc_id, record in sorted(records.items()):
        if record.status != DocStatus.INDEXED:
            continue
        stored = len(per_doc.get(doc_id, ()))
        if stored == 0:
            report.problems.append(
                Problem(kind=ProblemKind.NO_CHUNKS, doc_id=doc_id, detail=f"{record.source}: INDEXED but no chunks")
            )
        elif stored != record.chunk_count:
            report.problems.append(
                Problem(
                    kind=ProblemKind.COUNT_MISMATCH,
                    doc_id=doc_id,
                    detail=f"{record.source}: registry says {record.chunk_count} chunk(s), the index holds {stored}",
                )
            )
    return report


def _repair(kb: KnowledgeBase, report: DoctorReport) -> None:
    report.repaired = True
    by_kind: dict[ProblemKind, list[Problem]] = defaultdict(list)
    for problem in report.problems:
        by_kind[problem.kind].append(problem)
    if by_kind[ProblemKind.DUPLICATE_CHUNKS]:
        removed = kb.store.dedupe()
        for problem in by_kind[ProblemKind.DUPLICATE_CHUNKS]:
            problem.fixed = "kept one copy of each chunk"
        report.chunk_rows -= removed
    orphans = [p.doc_id for p in by_kind[ProblemKind.ORPHAN_CHUNKS]]
    if orphans:
        kb.store.delete_documents(orphans)
        for problem in by_kind[ProblemKind.ORPHAN_CHUNKS]:
            problem.fixed = "deleted"
    stale = by_kind[ProblemKind.COUNT_MISMATCH] + by_kind[ProblemKind.NO_CHUNKS]
    if stale:
        records = [kb.registry.get(p.doc_id) for p in stale]
        kb.registry.upsert(
            r.model_copy(
                update={
                    "status": DocStatus.PENDING,
                    "file_hash": "",
                    "error": f"doctor: {p.detail}; the next ingest redoes it",
                    "updated_at": now_iso(),
                }
            )
            for r, p in zip(records, stale, strict=True)
            if r is not None
        )
        for problem in stale:
            problem.fixed = "marked PENDING: the next `citewise ingest` of its folder redoes it"
    for problem in by_kind[ProblemKind.OUTDATED_INDEX]:
        problem.fixed = f"upgraded in place: answer units recorded for {kb.upgrade()} chunk(s)"


def home_usage(settings: Settings) -> HomeUsage | None:
    """What the home holds on disk, by part (None when there is no home). Files are counted by their size; a part
    that settings put outside the home (`models_dir`, `uploads_dir`, `generation.cache_path`) is not counted, it is
    not the home's, and what is left in its old place counts as "other". A symbolic link counts as itself, never as
    what it points at."""
    home = Path(os.path.abspath(settings.home))
    if not home.is_dir():
        return None
    places = {
        settings.index_dir: "index",
        settings.index_dir / "registry.sqlite3": "registry",
        settings.index_dir / "sources.sqlite3": "registry",
        settings.sessions_path: "sessions",
        settings.feedback_path: "feedback",
        settings.llm_cache_path: "llm_cache",
        settings.questions_log_path: "question_log",
        settings.sources_dir: "sources",
        settings.uploads_path: "uploads",
        settings.home / "models": "models",  # where models were kept before they moved to a per-machine cache
        settings.model_cache_dir: "models",
    }
    rules: dict[tuple[str, ...], str] = {}
    for path, part in places.items():
        try:
            rules[Path(os.path.abspath(path)).relative_to(home).parts] = part
        except ValueError:  # moved out of the home
            continue
    usage = HomeUsage(home=str(home))
    _add_sizes(str(home), (), "other", rules, usage.parts)
    usage.total = sum(usage.parts.values())
    return usage


# SQLite keeps a database's journal beside it: `x.sqlite3-wal`, `-shm`, `-journal` belong to `x.sqlite3`'s part.
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _add_sizes(folder: str, rel: tuple[str, ...], part: str, rules: dict, sizes: dict[str, int]) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:  # unreadable, or gone since: what can't be read isn't counted
        return
    for entry in entries:
        name = entry.name
        own = rules.get((*rel, name))
        if own is None:
            base = next((name.removesuffix(s) for s in _SQLITE_SIDE_FILES if name.endswith(s)), None)
            own = rules.get((*rel, base), part) if base else part
        try:
            if entry.is_dir(follow_symlinks=False):
                _add_sizes(entry.path, (*rel, name), own, rules, sizes)
            else:
                sizes[own] += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue


def human_bytes(size: int) -> str:
    """1536 → "1.5 KB": binary multiples, as the rest of Citewise counts megabytes."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TB"
