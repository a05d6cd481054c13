"""The docs-gap report: which questions the docs could not answer, grouped, most frequent first.

Every question asked through the CLI or the API is appended as one JSON line to `settings.questions_log_path`
(CITEWISE_HOME/questions.jsonl) unless `server.log_questions` is off — or, with `store = "postgres"`, inserted as
one row of the database's `questions` table, so every replica's questions land in one log. `citewise gaps` reads
that log back.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from citewise.settings import Settings
    from citewise.types import Answer

try:  # POSIX: an advisory lock keeps lines from two processes whole; Windows appends are already atomic enough
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

# Threads of one process serialise here; flock below serialises processes.
_append_lock = threading.Lock()


def question_record(answer: Answer, queries: list[str], *, owner: str | None = None) -> dict:
    """The log line for one answered question (also what `citewise gaps` reads back)."""
    record = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "question": answer.question,
        "status": str(answer.status),
        "exit_reason": str(answer.exit_reason),
        "insufficiencies": list(answer.insufficiencies),
        "refusal_reason": answer.refusal_reason,
        "queries": [q for q in queries if q],
        "mode": answer.mode,
    }
    if owner:
        record["owner"] = owner
    return record


def log_question(settings: Settings, answer: Answer, queries: list[str], *, owner: str | None = None) -> None:
    """Append one JSON line describing `answer` to the question log, when `settings.server.log_questions` is on.

    Never raises: a full disk or an unwritable home must not turn an answered question into an error, so failures
    are logged as warnings. Each line is written with one `write()` on an O_APPEND descriptor under an exclusive
    lock, so concurrent writers (threads or processes) never interleave inside a line.
    """
    try:
        if not settings.server.log_questions:
            return
        if settings.uses_postgres:
            from citewise.state.database import database
            from citewise.state.tables import log_question as insert_question

            insert_question(database(settings), question_record(answer, queries, owner=owner))
            return
        path = settings.questions_log_path
        line = (json.dumps(question_record(answer, queries, owner=owner), ensure_ascii=False) + "\n").encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        with _append_lock:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                view = memoryview(line)
                while view:  # a short write is rare but legal; finish the line before releasing the lock
                    written = os.write(fd, view)
                    view = view[written:]
            finally:
                os.close(fd)  # closing releases the flock
    except Exception as exc:  # logging a question must never fail the caller
        log.warning("Could not log the question to %s: %s", getattr(settings, "questions_log_path", "?"), exc)


# -- the report --------------------------------------------------------------------------------------------------
# Words that carry no topic. Grouping compares what questions are *about*, so "how do I", "what is" must not make
# two unrelated questions look alike.
_STOPWORDS_TEXT = """
a about above after again all am an and any are as at be been being below between both but by can could did do does
doing done down during each few for from further get gets got had has have having he her here hers him his how i if
in into is it its itself just me more most my no nor not now of off on once only or other our out over own please
same she should so some such than that the their them then there these they this those through to too under until up
use used using very was way we were what when where which while who whom why will with would you your yours
"""
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.\-]*[a-z0-9]|[a-z0-9]")

DEFAULT_SIMILARITY = 0.5


def _stem(word: str) -> str:
    """A deliberately crude English stemmer: enough that "rotate", "rotated", "rotating" and "keys"/"key" meet."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def content_tokens(text: str) -> frozenset[str]:
    """Lower-cased, crudely stemmed words minus stopwords: what a question is about."""
    return frozenset(_stem(token) for token in _TOKEN.findall(text.lower()) if token not in _STOPWORDS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are not similar (0)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def is_gap(record: dict) -> bool:
    """A logged question the docs could not (fully) answer: refused, or answered while naming insufficiencies."""
    return record.get("status") == "refused" or bool(record.get("insufficiencies"))


def read_log(path: Path) -> tuple[list[dict], int]:
    """The log's records and the number of unreadable lines skipped (a crash mid-write can leave half a line)."""
    if not path.is_file():
        return [], 0
    records, bad = [], 0
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(record, dict) and isinstance(record.get("question"), str):
                records.append(record)
            else:
                bad += 1
    return records, bad


class _DisjointSets:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def group_gaps(records: list[dict], *, similarity: float = DEFAULT_SIMILARITY, min_count: int = 1) -> list[dict]:
    """Group gap questions whose content-word sets overlap by at least `similarity` (Jaccard), transitively.

    Single-link grouping with union-find gives the same groups whatever the log's order. Only pairs that share a
    word are compared (an inverted index), so a large log stays fast. Groups are sorted by size, then by the
    latest question, so what users ask most and most recently comes first.
    """
    gaps = [r for r in records if is_gap(r)]
    # Identical questions (after normalising) are one node: the comparison work grows with distinct questions.
    distinct: dict[str, int] = {}
    members: list[list[dict]] = []
    for record in gaps:
        key = " ".join(record["question"].lower().split())
        if key not in distinct:
            distinct[key] = len(members)
            members.append([])
        members[distinct[key]].append(record)
    token_sets = [content_tokens(key) for key in distinct]
    sets = _DisjointSets(len(members))
    by_token: dict[str, list[int]] = {}
    for i, tokens in enumerate(token_sets):
        candidates = {j for token in tokens for j in by_token.get(token, ())}
        for j in sorted(candidates):
            if jaccard(tokens, token_sets[j]) >= similarity:
                sets.union(i, j)
        for token in tokens:
            by_token.setdefault(token, []).append(i)

    clusters: dict[int, list[int]] = {}
    for i in range(len(members)):
        clusters.setdefault(sets.find(i), []).append(i)
    groups = [_describe([members[i] for i in nodes]) for nodes in clusters.values()]
    groups = [g for g in groups if g["count"] >= min_count]
    groups.sort(key=lambda g: (-g["count"], _descending(g["last_seen"]), g["question"]))
    return groups


def _descending(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def _describe(variants: list[list[dict]]) -> dict:
    """One group: its most asked wording, every wording with its count, the queries tried, why it failed."""
    records = [r for variant in variants for r in variant]
    wordings: Counter[str] = Counter()
    for variant in variants:  # case/space twins count as one wording, shown as their most used (then first) form
        forms = Counter(r["question"].strip() for r in variant)
        wordings[min(forms, key=lambda form: (-forms[form], form))] += len(variant)
    queries = Counter(q for r in records for q in dict.fromkeys(r.get("queries") or []) if isinstance(q, str))
    insufficiencies = Counter(i for r in records for i in r.get("insufficiencies") or [] if isinstance(i, str))
    reasons = Counter(r["refusal_reason"] for r in records if isinstance(r.get("refusal_reason"), str))
    stamps = sorted(str(r.get("timestamp") or "") for r in records)
    ranked = sorted(wordings.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "count": len(records),
        "question": ranked[0][0],
        "questions": [{"question": q, "count": n} for q, n in ranked],
        "queries": [q for q, _ in sorted(queries.items(), key=lambda kv: (-kv[1], kv[0]))],
        "refused": sum(r.get("status") == "refused" for r in records),
        "insufficiencies": [i for i, _ in sorted(insufficiencies.items(), key=lambda kv: (-kv[1], kv[0]))],
        "refusal_reasons": [i for i, _ in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))],
        "exit_reasons": dict(sorted(Counter(str(r.get("exit_reason")) for r in records).items())),
        "first_seen": stamps[0],
        "last_seen": stamps[-1],
    }


def gap_report(settings: Settings, *, min_count: int = 1, similarity: float = DEFAULT_SIMILARITY) -> dict:
    """What `citewise gaps` prints: the grouped gaps plus how much of the log they come from."""
    if settings.uses_postgres:
        from citewise.state.database import database
        from citewise.state.tables import read_questions

        records, bad, log_name = read_questions(database(settings)), 0, "the database's questions table"
    else:
        records, bad = read_log(settings.questions_log_path)
        log_name = str(settings.questions_log_path)
    groups = group_gaps(records, similarity=similarity, min_count=min_count)
    return {
        "log": log_name,
        "questions": len(records),
        "gaps": sum(is_gap(r) for r in records),
        "unreadable_lines": bad,
        "groups": groups,
    }
