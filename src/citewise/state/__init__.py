"""State shared by every process of a deployment, in PostgreSQL (`store = "postgres"`).

With the embedded default everything lives in files under CITEWISE_HOME; with PostgreSQL configured the same
things live in one database, so API replicas and ingest workers hold no state of their own:

    database.py    the connection pool per process, the schema version, and `upgrade()` (versioned migrations)
    migrations.py  the schema, as an ordered list of migrations; a new table (feedback) is a new entry
    locks.py       the write lock as a PostgreSQL advisory lock: one writer at a time across machines
    tables.py      registry, manifest, index version row, vocabulary, question log, rate-limit buckets

The vector store itself is `citewise.index.postgres_store.PostgresStore`; the LLM reply cache is
`citewise.llm.cache.PostgresLLMCache`; sessions are LangGraph's own PostgreSQL checkpointer.
"""
