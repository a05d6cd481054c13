"""The question log: one JSON line per question the agent answered, appended to `settings.questions_log_path`
(CITEWISE_HOME/questions.jsonl) — or inserted into the database's `questions` table when state lives in PostgreSQL
(`store = "postgres"`) — unless `server.log_questions` is off. `citewise gaps` (citewise.eval.gaps) reads
it back and groups what the docs could not answer.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from citewise.types import PUBLIC_OWNER

if TYPE_CHECKING:
    from citewise.settings import Settings
    from citewise.types import Answer, Owner

try:  # POSIX: an advisory lock keeps lines from two processes whole; Windows appends are already atomic enough
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

# Threads of one process serialise here; flock below serialises processes.
_append_lock = threading.Lock()


def question_record(answer: Answer, queries: list[str], *, owner: Owner | str | None = None) -> dict:
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
    if owner is not None and str(owner) != PUBLIC_OWNER:  # the public asker is everyone: nothing to record
        record["owner"] = str(owner)
    return record


def log_question(settings: Settings, answer: Answer, queries: list[str], *, owner: Owner | str | None = None) -> None:
    """Append one JSON line describing `answer` to the question log, when `settings.server.log_questions` is on.

    Never raises: a full disk or an unwritable home must not turn an answered question into an error, so failures
    are logged as warnings. Each line is written with one `write()` on an O_APPEND descriptor under an exclusive
    lock, so concurrent writers (threads or processes) never interleave inside a line.
    """
    try:
        if not settings.server.log_questions:
            return
        if settings.uses_postgres:  # one log for every replica: a row of the database's questions table
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
