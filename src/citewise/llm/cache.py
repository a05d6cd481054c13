"""The LLM reply cache: a LangChain `BaseCache` kept in one SQLite file (settings.llm_cache_path), or in the
database's `llm_cache` table with `store = "postgres"`, shared by every replica.

LangChain consults it inside every chat model call when the model is built with `cache=`: the key is the prompt
(the serialised messages, ids stripped) and `llm_string` (the model's serialised parameters plus the call's
kwargs — which include the bound tool schemas, so a different tool set or temperature is a miss). A hit returns
without calling the vendor and without streaming tokens. We add the model spec as a namespace so two models whose
parameters happen to serialise alike never share replies.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.load import dumps, loads

if TYPE_CHECKING:
    from citewise.state.database import Database

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key        TEXT PRIMARY KEY,
    namespace  TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (datetime('now'))
)
"""


def _cache_key(namespace: str, prompt: str, llm_string: str) -> str:
    return hashlib.sha256(json.dumps([namespace, llm_string, prompt]).encode()).hexdigest()


def _decode(value: str) -> RETURN_VAL_TYPE | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `loads` is marked beta; what it reads back here we wrote ourselves
            return loads(value, allowed_objects="core")
    except Exception as exc:  # a row written by an incompatible LangChain: treat as a miss, it gets rewritten
        log.warning("Ignoring unreadable LLM cache entry: %s", exc)
        return None


class SQLiteLLMCache(BaseCache):
    """Thread-safe SQLite cache of chat model replies; one row per (namespace, llm_string, prompt)."""

    def __init__(self, path: Path | str, *, namespace: str = "") -> None:
        self.path = Path(path)
        self.namespace = namespace
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection guarded by a lock: the agent calls from the event loop and from executor threads.
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
        with self._lock:
            # WAL lets several processes (server workers, a CLI run) read while one writes.
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(_SCHEMA)

    def key(self, prompt: str, llm_string: str) -> str:
        return _cache_key(self.namespace, prompt, llm_string)

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM llm_cache WHERE key = ?", (self.key(prompt, llm_string),)
            ).fetchone()
        return None if row is None else _decode(row[0])

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        value = dumps(list(return_val), sort_keys=True)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO llm_cache (key, namespace, value) VALUES (?, ?, ?)",
                (self.key(prompt, llm_string), self.namespace, value),
            )

    def clear(self, **kwargs: Any) -> None:
        """Drop this namespace's entries (all entries when the cache has no namespace)."""
        with self._lock:
            if self.namespace:
                self._conn.execute("DELETE FROM llm_cache WHERE namespace = ?", (self.namespace,))
            else:
                self._conn.execute("DELETE FROM llm_cache")

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresLLMCache(BaseCache):
    """The same cache in PostgreSQL (`llm_cache` table, same keys): a reply one replica paid for serves them all."""

    def __init__(self, db: Database, *, namespace: str = "") -> None:
        self._db = db
        self.namespace = namespace

    def key(self, prompt: str, llm_string: str) -> str:
        return _cache_key(self.namespace, prompt, llm_string)

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        with self._db.transaction() as conn:
            row = conn.execute("SELECT value FROM llm_cache WHERE key = %s", (self.key(prompt, llm_string),)).fetchone()
        return None if row is None else _decode(row[0])

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        value = dumps(list(return_val), sort_keys=True)
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO llm_cache (key, namespace, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, created_at = now()",
                (self.key(prompt, llm_string), self.namespace, value),
            )

    def clear(self, **kwargs: Any) -> None:
        with self._db.transaction() as conn:
            if self.namespace:
                conn.execute("DELETE FROM llm_cache WHERE namespace = %s", (self.namespace,))
            else:
                conn.execute("DELETE FROM llm_cache")

    def __len__(self) -> int:
        with self._db.transaction() as conn:
            return conn.execute("SELECT count(*) FROM llm_cache").fetchone()[0]

    def close(self) -> None:
        """The pool belongs to the process's database handle, not to the cache."""
