"""The docs-gap report: which questions the docs could not answer, grouped, most frequent first.

The agent appends every question it answers to the question log (`citewise.agent.question_log`: a JSON-lines file
in the home, or the `questions` table when state lives in PostgreSQL); `citewise gaps` reads that log back.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from citewise.text import content_terms, jaccard
from citewise.types import PUBLIC_OWNER

if TYPE_CHECKING:
    from citewise.settings import Settings

DEFAULT_SIMILARITY = 0.5


def content_tokens(text: str) -> frozenset[str]:
    """What a question is about: the stems of its content words (citewise.text), so "rotate API keys" and "API keys
    rotated" meet and "how do I" counts for nothing."""
    return frozenset(content_terms(text))


def is_gap(record: dict) -> bool:
    """A logged question the docs could not (fully) answer: refused, or answered while naming insufficiencies."""
    return record.get("status") == "refused" or bool(record.get("insufficiencies"))


# question_record (agent/question_log.py) writes the timestamp first: enough to pass over an older line unparsed.
_STAMP = re.compile(r'\{"timestamp": "([^"]*)"')


def owner_of(record: dict) -> str:
    """A logged question's owner (the CLI logs questions asked without --owner with no owner: public ones)."""
    return str(record.get("owner") or PUBLIC_OWNER)


def read_log(path: Path, *, owner: str | None = None, since: str | None = None) -> tuple[list[dict], int]:
    """The log's records and the number of unreadable lines skipped (a crash mid-write can leave half a line):
    `owner`'s only, else every owner's; from `since` on (an ISO timestamp), else all. Filtered as they are read, so a
    request never holds every owner's questions of all time: an older line is passed over by its timestamp before it
    is parsed."""
    if not path.is_file():
        return [], 0
    records, bad = [], 0
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.strip():
                continue
            if since is not None and (stamp := _STAMP.match(line)) and stamp.group(1) < since:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not isinstance(record, dict) or not isinstance(record.get("question"), str):
                bad += 1
            elif (since is None or str(record.get("timestamp") or "") >= since) and (
                owner is None or owner_of(record) == owner
            ):
                records.append(record)
    return records, bad


def load_log(settings: Settings, *, owner: str | None = None, since: str | None = None) -> tuple[list[dict], int, str]:
    """The question log wherever this deployment keeps it, filtered as `read_log` filters: (records, unreadable
    lines, where it was read)."""
    if settings.uses_postgres:  # every replica's questions in one table, filtered by a WHERE
        from citewise.state.database import database
        from citewise.state.tables import read_questions

        return read_questions(database(settings), owner=owner, since=since), 0, "the database's questions table"
    records, bad = read_log(settings.questions_log_path, owner=owner, since=since)
    return records, bad, str(settings.questions_log_path)


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
            if jaccard(tokens, token_sets[j], empty=0.0) >= similarity:
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


def gap_report(
    settings: Settings, *, min_count: int = 1, similarity: float = DEFAULT_SIMILARITY, owner: str | None = None
) -> dict:
    """What `citewise gaps` prints: the grouped gaps plus how much of the log they come from (only `owner`'s
    questions when given; questions logged without an owner are the public owner's)."""
    records, bad, log_name = load_log(settings)
    if owner is not None:
        records = [r for r in records if (r.get("owner") or "public") == owner]
    groups = group_gaps(records, similarity=similarity, min_count=min_count)
    return {
        "log": log_name,
        "questions": len(records),
        "gaps": sum(is_gap(r) for r in records),
        "unreadable_lines": bad,
        "groups": groups,
    }
