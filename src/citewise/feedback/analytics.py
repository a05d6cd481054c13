"""What to fix in the docs, from what readers asked and how they rated the answers.

One report, two readers: `GET /api/analytics` (an admin key, for its own owner) and `citewise gaps` (the operator,
every owner unless `--owner`). It puts together

- the most asked unanswered questions: the question log's refusals and partial answers, grouped (eval/gaps.py);
- the answers marked bad: thumbs down, with the reader's comment, the answer, its citations and exit reason;
- refusals by reason (`weak_evidence`, `empty_retrieval`, … and failed runs by exit reason), in words as well;
- the answer rate over time: per day, questions asked, answered, refused, failed.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from citewise.eval.gaps import group_gaps, is_gap
from citewise.feedback.store import FeedbackStore, Rating
from citewise.types import PUBLIC_OWNER

if TYPE_CHECKING:
    from pathlib import Path

    from citewise.settings import Settings

# The refusal codes in words: the one table. The analytics list refusals by them, and the server sends them as a
# refused answer's refusal_detail (server/answer_text.py), which the web chat, the widget and MCP show as they are.
REFUSAL_WORDS = {
    "empty_retrieval": "Nothing in the docs matched the question.",
    "weak_evidence": "The closest passages don't answer the question.",
    "not_in_documentation": "The passages that were read don't answer the question.",
    "uncited_answer": "The answer could not be tied to a passage of the docs.",
}


def analytics_report(
    settings: Settings,
    store: FeedbackStore | None,
    *,
    owner: str | None,
    days: int = 30,
    top: int = 20,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The report for `owner`'s questions and ratings of the last `days` days (owner None: every owner's)."""
    now = now or datetime.now(UTC)
    since = (now - timedelta(days=days)).isoformat(timespec="seconds")
    recent, unreadable = read_questions(settings, owner=owner, since=since)

    totals = Counter(_outcome(r) for r in recent)
    asked = len(recent)
    reasons: Counter[str] = Counter()
    for r in recent:
        if r.get("status") == "refused":
            reasons[str(r.get("refusal_reason") or "refused")] += 1
        elif r.get("status") == "error":
            reasons[str(r.get("exit_reason") or "error")] += 1

    ratings = {"up": 0, "down": 0}
    marked_bad: list[dict[str, Any]] = []
    if store is not None:
        ratings = store.rating_counts(owner, since=since)
        marked_bad = [a.model_dump(mode="json") for a in store.rated(owner, rating=Rating.DOWN, since=since, limit=top)]
    return {
        "owner": owner,
        "days": days,
        "since": since,
        "questions": asked,
        "answered": totals["answered"],
        "refused": totals["refused"],
        "failed": totals["failed"],
        "answer_rate": round(totals["answered"] / asked, 4) if asked else None,
        "by_day": _by_day(recent),
        "refusals_by_reason": [
            {"reason": reason, "count": count, "meaning": REFUSAL_WORDS.get(reason, "")}
            for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "unanswered": group_gaps([r for r in recent if is_gap(r)])[:top],
        "ratings": ratings,
        "marked_bad": marked_bad,
        "unreadable_log_lines": unreadable,
    }


def read_questions(settings: Settings, *, owner: str | None, since: str) -> tuple[list[dict[str, Any]], int]:
    """The question log's records of `owner` (None: every owner's) from `since` on, and how many of the lines read
    could not be. Filtered where they are read, so a request never holds every owner's questions of all time: a
    WHERE in PostgreSQL; in the JSON-lines log, line by line, an older line passed over by its timestamp before it
    is parsed."""
    if settings.uses_postgres:
        from citewise.state.database import database
        from citewise.state.tables import read_questions as read_table

        return read_table(database(settings), owner=owner, since=since), 0
    return _read_log(settings.questions_log_path, owner=owner, since=since)


# question_record (agent/question_log.py) writes the timestamp first: enough to pass over an older line unparsed.
_STAMP = re.compile(r'\{"timestamp": "([^"]*)"')


def _read_log(path: Path, *, owner: str | None, since: str) -> tuple[list[dict[str, Any]], int]:
    if not path.is_file():
        return [], 0
    records: list[dict[str, Any]] = []
    unreadable = 0
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            stamp = _STAMP.match(line)
            if (stamp and stamp.group(1) < since) or not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a crash mid-write can leave half a line
                unreadable += 1
                continue
            if not isinstance(record, dict) or not isinstance(record.get("question"), str):
                unreadable += 1
            elif str(record.get("timestamp") or "") >= since and (owner is None or _owner_of(record) == owner):
                records.append(record)
    return records, unreadable


def _owner_of(record: dict[str, Any]) -> str:
    return str(record.get("owner") or PUBLIC_OWNER)  # the CLI logs questions asked without --owner with no owner


def _outcome(record: dict[str, Any]) -> str:
    status = record.get("status")
    if status == "refused":
        return "refused"
    if status == "error":
        return "failed"
    return "answered"


def _by_day(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    days: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        days[str(r.get("timestamp") or "")[:10]][_outcome(r)] += 1
    out = []
    for day in sorted(days):
        counts = days[day]
        asked = sum(counts.values())
        out.append(
            {
                "date": day,
                "questions": asked,
                "answered": counts["answered"],
                "refused": counts["refused"],
                "failed": counts["failed"],
                "answer_rate": round(counts["answered"] / asked, 4) if asked else None,
            }
        )
    return out
