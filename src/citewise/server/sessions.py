"""Where conversations live between requests: the LangGraph checkpointer the server hands to the agent.

SQLite under CITEWISE_HOME (`sessions.sqlite3`) by default; PostgreSQL when `CITEWISE_DATABASE_URL` is set, so
several server processes can share sessions. The saver is opened inside the app's lifespan because both savers bind
to the event loop that opens them, and closed when the server stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.base import BaseCheckpointSaver

from citewise.errors import ConfigError, MissingExtraError
from citewise.settings import Settings

log = logging.getLogger(__name__)

SESSIONS_SETUP_LOCK = 0x43495445_0003  # an advisory lock key (state/database.py holds the others)


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
