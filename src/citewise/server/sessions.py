"""Where conversations live between requests: the LangGraph checkpointer the server hands to the agent.

SQLite under CITEWISE_HOME (`sessions.sqlite3`) by default; PostgreSQL when `CITEWISE_DATABASE_URL` is set, so
several server processes can share sessions. The saver is opened inside the app's lifespan because both savers bind
to the event loop that opens them, and closed when the server stops.

Sessions are kept for `server.keep_sessions_days` after their last turn (`tidying`: when the server starts, then
daily, in the background). A session's age is the time of its newest checkpoint, the `ts` LangGraph stamps on every
checkpoint it saves: in PostgreSQL it is read from the checkpoint's JSON, in SQLite (where a checkpoint is a msgpack
blob) the candidates are found by their checkpoint id, a time-ordered UUIDv6 LangGraph stamps at the same moment,
and each one's `ts` is then read to confirm it. A session continued within the window has a newer checkpoint and is
never a candidate. Expired threads are removed with the saver's own `adelete_thread` (checkpoints, writes and, in
PostgreSQL, blobs), a bounded page of them at a time. Nothing else keys on a session: the thread id is derived from
the owner and the client's session id (server/deps.py), so there is no table of the server's own to tidy with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from langgraph.checkpoint.base import BaseCheckpointSaver

from citewise.errors import ConfigError, MissingExtraError
from citewise.settings import Settings

log = logging.getLogger(__name__)

SESSIONS_SETUP_LOCK = 0x43495445_0003  # an advisory lock key (state/database.py holds the others)
TIDY_EVERY_S = 24 * 3600.0  # how often a running server looks for expired sessions again
TIDY_BATCH = 200  # expired threads looked up (and deleted) per query


@asynccontextmanager
async def open_checkpointer(settings: Settings) -> AsyncIterator[BaseCheckpointSaver]:
    """The checkpointer `settings` asks for, set up (tables created) and closed on exit."""
    if settings.database_url is not None:
        async with _postgres(settings.database_url.get_secret_value()) as saver:
            yield saver
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = settings.sessions_path
    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        log.info("Sessions stored in %s", path)
        yield saver


@asynccontextmanager
async def _postgres(url: str) -> AsyncIterator[BaseCheckpointSaver]:
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as exc:
        raise MissingExtraError("PostgreSQL sessions (CITEWISE_DATABASE_URL)", "postgres") from exc

    # A pool rather than the single connection `from_conn_string` opens: concurrent requests would queue on it.
    # These connection options are the ones AsyncPostgresSaver requires (autocommit, dict rows, no prepared
    # statements so it also works behind pgbouncer).
    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=10,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    try:
        await pool.open(wait=True, timeout=10)
    except Exception as exc:
        await pool.close()
        # Never echo the URL: it usually carries a password.
        raise ConfigError(
            f"Cannot connect to the sessions database (CITEWISE_DATABASE_URL): {type(exc).__name__}. "
            "Check that PostgreSQL is running and the URL, user and password are right."
        ) from exc
    try:
        saver = AsyncPostgresSaver(pool)
        # LangGraph's own migrations are not safe to run twice at once: replicas starting together took the same
        # migration number and all but one failed to start. An advisory lock makes them take turns — polled, not
        # waited on: one of those migrations is a CREATE INDEX CONCURRENTLY, which waits for every open statement,
        # a blocked pg_advisory_lock included, and the two replicas deadlocked.
        async with pool.connection() as lock:
            while not await _try_lock(lock, SESSIONS_SETUP_LOCK):
                await asyncio.sleep(0.1)
            try:
                await saver.setup()
            finally:
                await lock.execute("SELECT pg_advisory_unlock(%s)", (SESSIONS_SETUP_LOCK,))
        log.info("Sessions stored in PostgreSQL")
        yield saver
    finally:
        await pool.close()


async def _try_lock(conn, key: int) -> bool:
    row = await (await conn.execute("SELECT pg_try_advisory_lock(%s) AS held", (key,))).fetchone()
    return bool(row["held"])


# -- retention: forget sessions nobody continued for server.keep_sessions_days ---------------------------------------


@asynccontextmanager
async def tidying(saver: BaseCheckpointSaver, days: float, *, every_s: float = TIDY_EVERY_S) -> AsyncIterator[None]:
    """Forget expired sessions in the background while the block runs: at once, then every `every_s`. Off when
    `days` is 0. On exit the delete in progress finishes (a thread is never left half deleted) and the task ends."""
    if days <= 0:
        yield
        return
    stop = asyncio.Event()
    task = asyncio.create_task(_tidy_loop(saver, days, stop, every_s), name="citewise-session-tidy")
    try:
        yield
    finally:
        stop.set()
        # A lookup query still running after that is cancelled: the saver closes next.
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=10)


async def _tidy_loop(saver: BaseCheckpointSaver, days: float, stop: asyncio.Event, every_s: float) -> None:
    while not stop.is_set():
        try:
            forgotten = await forget_old_sessions(saver, days, should_stop=stop.is_set)
        except Exception as exc:  # the server still answers; the next round tries again
            log.warning("Could not tidy the sessions store: %s: %s", type(exc).__name__, exc)
        else:
            if forgotten:
                log.info("Forgot %d conversation session(s) idle for more than %g days", forgotten, days)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=every_s)


async def forget_old_sessions(
    saver: BaseCheckpointSaver,
    days: float,
    *,
    now: datetime | None = None,
    batch: int = TIDY_BATCH,
    should_stop: Callable[[], bool] = lambda: False,
) -> int:
    """Delete every session (thread) whose newest checkpoint is older than `days` days before `now`, and return how
    many. `days` 0 keeps everything. Works through the expired threads `batch` at a time, in thread id order."""
    if days <= 0:
        return 0
    cutoff = (now or datetime.now(UTC)) - timedelta(days=days)
    expired = _expired_lookup(saver)
    if expired is None:  # an in-memory saver (tests, `citewise chat`): it goes with its process
        return 0
    forgotten, after = 0, ""
    while after is not None and not should_stop():
        thread_ids, after = await expired(saver, cutoff, after, batch)
        for thread_id in thread_ids:
            if should_stop():
                break
            await saver.adelete_thread(thread_id)
            forgotten += 1
    return forgotten


def _expired_lookup(saver: BaseCheckpointSaver):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if isinstance(saver, AsyncSqliteSaver):
        return _expired_sqlite
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:  # the postgres extra is not installed, so this is not its saver
        return None
    return _expired_postgres if isinstance(saver, AsyncPostgresSaver) else None


async def _expired_postgres(saver, cutoff: datetime, after: str, batch: int) -> tuple[list[str], str | None]:
    """The next `batch` threads (by id, after `after`) whose newest checkpoint's `ts` is before `cutoff`; and where
    to look next (None: there is nothing after them)."""
    from psycopg.rows import tuple_row
    from psycopg_pool import AsyncConnectionPool

    query = (
        "SELECT thread_id FROM checkpoints WHERE thread_id > %s GROUP BY thread_id "
        "HAVING max((checkpoint ->> 'ts')::timestamptz) < %s ORDER BY thread_id LIMIT %s"
    )
    pool = saver.conn
    connection = pool.connection() if isinstance(pool, AsyncConnectionPool) else _held(saver)
    async with connection as conn, conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(query, (after, cutoff, batch))
        thread_ids = [row[0] for row in await cur.fetchall()]
    return thread_ids, (thread_ids[-1] if len(thread_ids) == batch else None)


@asynccontextmanager
async def _held(saver) -> AsyncIterator:
    async with saver.lock:  # a saver on one connection: take turns with it
        yield saver.conn


async def _expired_sqlite(saver, cutoff: datetime, after: str, batch: int) -> tuple[list[str], str | None]:
    """As `_expired_postgres`. SQLite keeps each checkpoint as a msgpack blob, so SQL cannot read its `ts`: the
    candidates are the threads whose greatest checkpoint id (LangGraph's own order: the one it resumes from) was
    stamped before `cutoff`, and the `ts` of each candidate's newest checkpoint confirms it."""
    async with (
        saver.lock,
        saver.conn.execute(
            "SELECT thread_id, max(checkpoint_id) FROM checkpoints WHERE thread_id > ? GROUP BY thread_id "
            "HAVING max(checkpoint_id) < ? ORDER BY thread_id LIMIT ?",
            (after, checkpoint_id_floor(cutoff), batch),
        ) as cur,
    ):
        candidates = list(await cur.fetchall())
    from citewise.agent.state import with_session_types  # the agent's serializer: its types load without warnings

    serde = with_session_types(saver).serde
    expired = []
    for thread_id, checkpoint_id in candidates:
        async with (
            saver.lock,
            saver.conn.execute(
                "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ? LIMIT 1",
                (thread_id, checkpoint_id),
            ) as cur,
        ):
            row = await cur.fetchone()
        if row is not None and await asyncio.to_thread(_saved_before, serde, row, cutoff):
            expired.append(thread_id)
    return expired, (candidates[-1][0] if len(candidates) == batch else None)


def _saved_before(serde, row: tuple, cutoff: datetime) -> bool:
    """Whether the checkpoint in `row` (its serializer's type, its bytes) was saved before `cutoff`. One that can't
    be read, or has no time, is kept: a session is deleted only when it is known to be old."""
    try:
        checkpoint = serde.loads_typed((row[0], row[1]))
        saved = datetime.fromisoformat(checkpoint["ts"])
    except Exception as exc:
        log.debug("A session checkpoint without a readable time is kept: %s", exc)
        return False
    return (saved if saved.tzinfo else saved.replace(tzinfo=UTC)) < cutoff


_UUID_EPOCH = datetime(1582, 10, 15, tzinfo=UTC)  # UUID time counts 100 ns intervals from the Gregorian reform


def checkpoint_id_floor(when: datetime) -> str:
    """The smallest checkpoint id LangGraph could stamp at `when`. Its ids are UUIDv6 (`uuid6(clock_seq=step)` in
    langgraph.checkpoint.base.id): the time comes first, most significant bits first, so an id stamped before `when`
    sorts below this one, as text too."""
    ticks = (when - _UUID_EPOCH) // timedelta(microseconds=1) * 10
    value = (ticks >> 12 & 0xFFFF_FFFF_FFFF) << 80 | 0x6 << 76 | (ticks & 0x0FFF) << 64 | 1 << 63  # version, variant
    return str(uuid.UUID(int=value))
