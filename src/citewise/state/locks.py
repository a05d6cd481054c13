"""The write lock, when the knowledge base lives in PostgreSQL: a session-level advisory lock.

It plays the part HOME/write.lock plays for an embedded home (index/write_lock.py), with the same interface and
messages: every writer — `citewise ingest`, `docs remove`, `doctor --repair`, any replica's uploads and deletes —
holds it for its whole run, on a connection of its own, so two ingest workers on two machines take turns. The
server releases it when the holder's connection ends, however its process ends (a kill -9 included), so a crashed
writer never leaves it held. The holder names itself in `application_name`, which a waiting writer shows.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from citewise.errors import HomeBusyError
from citewise.state.database import WRITE_LOCK, Database

log = logging.getLogger(__name__)

_POLL_S = 0.2
_held = threading.local()  # re-entrant within a thread, like the file lock


def _me() -> str:
    command = " ".join(Path(sys.argv[0]).name if i == 0 else arg for i, arg in enumerate(sys.argv))
    return f"citewise writer pid {os.getpid()}: {command}"[:63]  # application_name holds 63 bytes


def holder(db: Database) -> str:
    """'pid 1234: citewise ingest docs (on 10.0.0.7)' for the connection that holds the lock, or 'unknown'."""
    try:
        with db.connect(autocommit=True) as conn:
            row = conn.execute(
                "SELECT a.application_name, a.client_addr::text FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s LIMIT 1",
                (WRITE_LOCK,),
            ).fetchone()
    except Exception:
        return "unknown"
    if row is None:
        return "unknown"
    name, address = row
    name = (name or "").removeprefix("citewise writer ") or "a writer"
    return name + (f" on {address}" if address else "")


@contextmanager
def advisory_write_lock(
    db: Database,
    *,
    wait_s: float,
    on_wait: Callable[[str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[None]:
    """Hold the database's write lock for the block (same contract as `index.write_lock.write_lock`)."""
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    conn = db.connect(autocommit=True, application_name=_me())
    try:
        if not _try(conn):
            who = holder(db)
            if wait_s <= 0:
                raise HomeBusyError(
                    f"Another writer ({who}) is writing to the database; not waiting for it (--no-wait). Try again "
                    "when it has finished."
                )
            (on_wait or log.info)(f"Waiting for another writer on the database ({who}) to finish…")
            started = time.monotonic()
            while not _try(conn):
                if cancelled is not None and cancelled():
                    raise HomeBusyError(f"Stopped waiting for another writer on the database ({who}).")
                if time.monotonic() - started >= wait_s:
                    raise HomeBusyError(
                        f"Another writer ({holder(db)}) held the database's write lock for "
                        f"{time.monotonic() - started:.0f}s; gave up waiting (ingest.write_lock_wait_s). Try again "
                        "when it has finished."
                    )
                time.sleep(_POLL_S)
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
    finally:
        conn.close()  # ends the session: the lock goes with it


def _try(conn) -> bool:
    return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (WRITE_LOCK,)).fetchone()[0])
