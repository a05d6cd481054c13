"""One PostgreSQL database per deployment: the connection pool of this process, and the schema's version.

`database(settings)` hands out one `Database` per URL per process (the server's request threads, the retriever
and the writers share its pool). Connecting checks the schema: migrations the database has not seen are applied
under an advisory lock when `postgres.auto_upgrade` is on (the default; the first of several replicas starting
at once applies them, the others wait and find them done), else the process refuses to start and says to run
`citewise db upgrade`. A database migrated by a newer Citewise is refused, never written to.

Error messages never echo the URL: it usually carries a password.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from citewise.errors import ConfigError, MissingExtraError, RetrievalError
from citewise.state.migrations import LATEST, MIGRATIONS

if TYPE_CHECKING:
    import psycopg

    from citewise.settings import Settings

log = logging.getLogger(__name__)

# Advisory lock keys (one 64-bit namespace per database): schema migrations, and the writers' lock (locks.py).
MIGRATION_LOCK = 0x43495445_0001
WRITE_LOCK = 0x43495445_0002


def _psycopg():
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise MissingExtraError('The PostgreSQL backend (store = "postgres")', "postgres") from exc
    return psycopg, psycopg_pool


def _register_vector(conn: psycopg.Connection) -> None:
    """numpy float32 arrays ↔ pgvector's `vector`, in pgvector's binary format (int16 dim, int16 0, float32 BE)."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        return  # not migrated yet: the pool is reopened after upgrade() anyway

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: Any) -> bytes:
            array = np.asarray(obj, dtype=">f4").reshape(-1)
            return len(array).to_bytes(2, "big") + b"\0\0" + array.tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            return np.frombuffer(bytes(data)[4:], dtype=">f4").astype(np.float32)

    class VectorTextLoader(Loader):
        format = Format.TEXT

        def load(self, data: Any) -> np.ndarray:
            return np.array(bytes(data).decode()[1:-1].split(","), dtype=np.float32)

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)
    conn.adapters.register_loader(info.oid, VectorTextLoader)


def _unreachable(exc: BaseException) -> ConfigError:
    return ConfigError(
        f"Cannot connect to PostgreSQL (CITEWISE_DATABASE_URL): {type(exc).__name__}. Check that it is running and "
        "that the URL, user and password are right."
    )


class Database:
    def __init__(self, url: str, *, pool_size: int = 10, connect_timeout_s: float = 10.0, auto_upgrade: bool = True):
        self.url = url
        self._pool_size = pool_size
        self._timeout = connect_timeout_s
        self._auto_upgrade = auto_upgrade
        self._pool = None
        self._lock = threading.Lock()

    # -- connections -------------------------------------------------------------------------------------------
    def connect(self, **kwargs: Any) -> psycopg.Connection:
        """A connection of its own, outside the pool (the write lock holds one for a whole ingest)."""
        psycopg, _ = _psycopg()
        try:
            conn = psycopg.connect(self.url, connect_timeout=max(1, int(self._timeout)), **kwargs)
        except psycopg.OperationalError as exc:
            raise _unreachable(exc) from None
        _register_vector(conn)
        return conn

    def _open(self):
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self.check_schema()
                    _, psycopg_pool = _psycopg()
                    pool = psycopg_pool.ConnectionPool(
                        self.url,
                        min_size=1,
                        max_size=self._pool_size,
                        open=False,
                        configure=_register_vector,
                        kwargs={"connect_timeout": max(1, int(self._timeout))},
                        name="citewise",
                    )
                    try:
                        pool.open(wait=True, timeout=self._timeout)
                    except Exception as exc:
                        pool.close()
                        raise _unreachable(exc) from None
                    self._pool = pool
        return self._pool

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """A pooled connection inside one transaction: committed when the block ends, rolled back if it raises."""
        psycopg, psycopg_pool = _psycopg()
        pool = self._open()
        try:
            with pool.connection(timeout=self._timeout) as conn:
                yield conn
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            # The server went away or every connection is busy: a typed error the CLI and the API report plainly.
            raise RetrievalError(f"PostgreSQL failed: {type(exc).__name__}: {_first_line(exc)}") from exc

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    # -- schema ------------------------------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self.connect(autocommit=True) as conn:
            return _version(conn)

    def check_schema(self) -> int:
        """The schema version, after applying what is missing when allowed to; raises when it can't be used."""
        version = self.schema_version()
        if version > LATEST:
            raise ConfigError(
                f"This database's schema is at version {version}, newer than this Citewise knows ({LATEST}): "
                "upgrade Citewise on this machine before pointing it at that database."
            )
        if version < LATEST:
            if not self._auto_upgrade:
                raise ConfigError(
                    f"This database's schema is at version {version}; this Citewise needs {LATEST}. Run "
                    "`citewise db upgrade` (or set postgres.auto_upgrade)."
                )
            self.upgrade()
        return LATEST

    def upgrade(self) -> list[int]:
        """Apply the migrations this database has not seen, in order, each in its own transaction; returns their
        versions. Concurrent upgrades wait for each other on an advisory lock and never apply one twice."""
        applied: list[int] = []
        with self.connect(autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            try:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS citewise_schema (version integer PRIMARY KEY, name text NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now())"
                )
                current = _version(conn)
                for migration in MIGRATIONS:
                    if migration.version <= current:
                        continue
                    with conn.transaction():
                        conn.execute(migration.sql)
                        conn.execute(
                            "INSERT INTO citewise_schema (version, name) VALUES (%s, %s)",
                            (migration.version, migration.name),
                        )
                    applied.append(migration.version)
                    log.info("Applied schema migration %d (%s)", migration.version, migration.name)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        return applied


def _version(conn: psycopg.Connection) -> int:
    exists = conn.execute("SELECT to_regclass('citewise_schema') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM citewise_schema").fetchone()[0]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


_databases: dict[tuple, Database] = {}
_databases_lock = threading.Lock()


def database(settings: Settings) -> Database:
    """This process's handle on the configured database (one pool per URL and pool settings)."""
    if settings.database_url is None:
        raise ConfigError('store = "postgres" needs database_url (CITEWISE_DATABASE_URL)')
    url = settings.database_url.get_secret_value()
    pg = settings.postgres
    key = (url, pg.pool_size, pg.connect_timeout_s, pg.auto_upgrade)
    with _databases_lock:
        db = _databases.get(key)
        if db is None:
            db = _databases[key] = Database(
                url, pool_size=pg.pool_size, connect_timeout_s=pg.connect_timeout_s, auto_upgrade=pg.auto_upgrade
            )
        return db
