"""What to fix in the docs, from what readers asked and how they rated the answers.

One report, two readers: `GET /api/analytics` (an admin key, for its own owner) and `citewise gaps` (the operator,
every owner unless `--owner`). It puts together

- the most asked unanswered questions: the question log's refusals and partial answers, grouped (eval/gaps.py);
- the answers marked bad: thumbs down, with the reader's comment, the answer, its citations and exit reason;
- refusals by reason (`weak_evidence`, `empty_retrieval`, … and failed runs by exit reason), in words as well;
- the answer rate over time: per day, questions asked, answered, refused, failed.

A refusal a reader rated down says the reader expected an answer: the docs may well hold it, and the refusal was
the mistake, not the docs. Such questions are marked in the unanswered groups (`mark_rated_refusals`), so nobody
writes a page the docs already have.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from citewise.eval.gaps import group_gaps, is_gap, load_log
from citewise.feedback.store import FeedbackStore, Rating

if TYPE_CHECKING:
    from citewise.settings import Settings

# The refusal codes in words: the one table. The analytics list refusals by them, and the server sends them as a
# refused answer's refusal_detail (server/answer_text.py), which the web chat, the widget and MCP show as they are.
# Written for the reader who asked, not for whoever built the index: no "passages", "chunks", "retrieval" or scores.
REFUSAL_WORDS = {
    "empty_retrieval": "Nothing in the docs matches this question.",
    "weak_evidence": "What the docs say that comes closest to this question doesn't answer it.",
    "not_in_documentation": "The parts of the docs that were read don't answer this question.",
    "uncited_answer": "An answer was drafted, but nothing in the docs backs it, so it isn't shown.",
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
    recent, unreadable, _ = load_log(settings, owner=owner, since=since)

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
        "unanswered": mark_rated_refusals(group_gaps([r for r in recent if is_gap(r)])[:top], store, owner=owner),
        "ratings": ratings,
        "marked_bad": marked_bad,
        "unreadable_log_lines": unreadable,
    }


RATED_REFUSALS_READ = 1000  # the newest refusals rated down that gap groups are matched against
COMMENTS_SHOWN = 3


def mark_rated_refusals(
    groups: list[dict[str, Any]], store: FeedbackStore | None, *, owner: str | None
) -> list[dict[str, Any]]:
    """Mark each gap group (eval/gaps.py) with the refusals of its questions that a reader rated down:
    `rated_wrong`, how many ratings, and `rated_wrong_comments`, what the readers said (newest first). A group
    with none gets 0 and []. A question matches by its wording (case and spaces aside); `owner` None: every
    owner's ratings (the operator's `citewise gaps`). Returns `groups`, marked in place."""
    wrong: dict[str, list[str | None]] = defaultdict(list)
    if store is not None:
        for rated in store.rated(owner, rating=Rating.DOWN, limit=RATED_REFUSALS_READ):
            if rated.status == "refused":
                wrong[_wording(rated.question)].append(rated.comment)
    for group in groups:
        comments = [c for q in group["questions"] for c in wrong.get(_wording(q["question"]), [])]
        group["rated_wrong"] = len(comments)
        group["rated_wrong_comments"] = [c for c in comments if c][:COMMENTS_SHOWN]
    return groups


def _wording(question: str) -> str:
    return " ".join(question.lower().split())


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
