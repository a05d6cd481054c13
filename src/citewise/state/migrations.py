"""The PostgreSQL schema as an ordered list of migrations: `citewise db upgrade` (or the first process to connect,
with `postgres.auto_upgrade`) applies the ones a database has not seen, each in its own transaction, and records
it in `citewise_schema`. Never edit a released migration: add the next one (the next would be number 7;
a new field of `DocumentRecord` is a new column of `documents`, which the registry's tests catch when missing).

The chunks' vector column is created without a dimension: the first write types it to the embedding model's
dimension and builds the HNSW index (PostgresStore), since the model is a setting, not part of the schema.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


# What the full-text side indexes, as LanceDB's FTS does by default: accents folded to ASCII ("café" is "cafe"), words
# split on anything but letters and digits (its "simple" tokenizer), tokens over 40 characters dropped, lower-cased,
# stemmed (Snowball English), and then the English stop words removed — after stemming, so "does" (stem "doe") and
# "why" ("whi") stay, exactly as LanceDB keeps them. The list is NLTK's 179 words as LanceDB has it (probed word by
# word: the fragments "doesn", "ve", "ll" are stop words there too), so a passage's length, and with it BM25's
# length normalisation, is the same on both engines. PostgreSQL's own `english` configuration removes stop words
# before stemming, which dropped "does", "why" and "any" and cost 0.02 nDCG. A SQL function, so the generated
# column, the query and the document-frequency table all split text the same way; its search_path is fixed when it
# is created, so a logical restore (pg_restore runs with an empty search_path) recomputes the column the same way.
_STOP_WORDS = """ARRAY[
    'i', 'me', 'my', 'myself', 'we', 'our', 'ours', 'ourselves', 'you', 'your', 'yours', 'yourself', 'yourselves',
    'he', 'him', 'his', 'himself', 'she', 'her', 'hers', 'herself', 'it', 'its', 'itself', 'they', 'them', 'their',
    'theirs', 'themselves', 'what', 'which', 'who', 'whom', 'this', 'that', 'these', 'those', 'am', 'is', 'are',
    'was', 'were', 'be', 'been', 'being', 'have', 'has', 'had', 'having', 'do', 'does', 'did', 'doing', 'a', 'an',
    'the', 'and', 'but', 'if', 'or', 'because', 'as', 'until', 'while', 'of', 'at', 'by', 'for', 'with', 'about',
    'against', 'between', 'into', 'through', 'during', 'before', 'after', 'above', 'below', 'to', 'from', 'up',
    'down', 'in', 'out', 'on', 'off', 'over', 'under', 'again', 'further', 'then', 'once', 'here', 'there', 'when',
    'where', 'why', 'how', 'all', 'any', 'both', 'each', 'few', 'more', 'most', 'other', 'some', 'such', 'no',
    'nor', 'not', 'only', 'own', 'same', 'so', 'than', 'too', 'very', 's', 't', 'can', 'will', 'just', 'don',
    'should', 'now', 'd', 'll', 'm', 'o', 're', 've', 'y', 'ain', 'aren', 'couldn', 'didn', 'doesn', 'hadn',
    'hasn', 'haven', 'isn', 'ma', 'mightn', 'mustn', 'needn', 'shan', 'shouldn', 'wasn', 'weren', 'won', 'wouldn'
]"""

_LEXEMES = (
    r"""
CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE TEXT SEARCH DICTIONARY citewise_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION citewise_english (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION citewise_english
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part, numword, numhword,
        hword_numpart WITH citewise_stem;

CREATE FUNCTION citewise_lexemes(text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path FROM CURRENT
    AS $$ SELECT ts_delete(
        to_tsvector('citewise_english'::regconfig,
                    regexp_replace(
                        regexp_replace(unaccent('unaccent'::regdictionary, $1), '[[:alnum:]]{41,}', ' ', 'g'),
                        '[^[:alnum:]]+', ' ', 'g')),
        """
    + _STOP_WORDS
    + r"""::text[]) $$;

CREATE FUNCTION citewise_tsv_length(tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT coalesce(sum(array_length(u.positions, 1)), 0)::integer FROM unnest($1) AS u $$;
"""
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "knowledge base, registry, question log, LLM cache, rate limits",
        _LEXEMES
        + """
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE citewise_manifest (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    embeddings  text    NOT NULL,
    dimension   integer NOT NULL,
    updated_at  text    NOT NULL DEFAULT ''
);

-- The version row every replica checks: bumped in the same transaction as every write to the chunks, so a reader
-- that sees new rows sees a new version. It also keeps the corpus totals BM25 needs.
CREATE TABLE citewise_index (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    version       bigint  NOT NULL DEFAULT 0,
    chunks        bigint  NOT NULL DEFAULT 0,
    total_length  bigint  NOT NULL DEFAULT 0
);
INSERT INTO citewise_index DEFAULT VALUES;

CREATE TABLE chunks (
    chunk_id      text    PRIMARY KEY,
    doc_id        text    NOT NULL,
    chunk_index   integer NOT NULL,
    text          text    NOT NULL,
    search_text   text    NOT NULL,
    filename      text    NOT NULL,
    source_url    text,
    module        text    NOT NULL DEFAULT '',
    chapter       text    NOT NULL DEFAULT '',
    title         text    NOT NULL DEFAULT '',
    page          integer,
    modified      text,
    owner         text    NOT NULL,
    content_hash  text    NOT NULL DEFAULT '',
    embedding     vector  NOT NULL,
    tsv           tsvector GENERATED ALWAYS AS (citewise_lexemes(search_text)) STORED,
    doc_length    integer  GENERATED ALWAYS AS (citewise_tsv_length(citewise_lexemes(search_text))) STORED
);
CREATE INDEX chunks_doc ON chunks (doc_id, chunk_index);
CREATE INDEX chunks_owner ON chunks (owner);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);

-- Document frequency of every lexeme, kept by each write in its own transaction: the IDF of BM25.
CREATE TABLE citewise_lexemes (
    lexeme  text    PRIMARY KEY,
    df      integer NOT NULL
);

CREATE TABLE documents (
    doc_id       text PRIMARY KEY,
    source       text NOT NULL,
    path         text NOT NULL DEFAULT '',
    filename     text NOT NULL,
    title        text NOT NULL DEFAULT '',
    owner        text NOT NULL,
    status       text NOT NULL,
    error        text,
    chunk_count  integer NOT NULL DEFAULT 0,
    file_hash    text NOT NULL DEFAULT '',
    updated_at   text NOT NULL DEFAULT '',
    revision     text NOT NULL DEFAULT ''
);
CREATE INDEX documents_path ON documents (path);
CREATE INDEX documents_owner ON documents (owner);

-- The index's words per owner (spelling correction, corpus statistics), built once per index version by the first
-- reader that needs it and shared by all.
CREATE TABLE citewise_vocabulary (
    version   bigint PRIMARY KEY,
    body      jsonb  NOT NULL,
    built_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE questions (
    id        bigserial   PRIMARY KEY,
    asked_at  timestamptz NOT NULL DEFAULT now(),
    owner     text,
    record    jsonb       NOT NULL
);

CREATE TABLE llm_cache (
    key         text PRIMARY KEY,
    namespace   text NOT NULL,
    value       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE UNLOGGED TABLE rate_buckets (
    bucket       text             PRIMARY KEY,
    tokens       double precision NOT NULL,
    refilled_at  double precision NOT NULL
);
""",
    ),
    Migration(
        2,
        "sources and what each one's last sync brought in",
        """
-- sources/state.py's two tables, shared by every replica: a source added anywhere is listed everywhere, and a sync
-- (by `citewise sources sync` or any replica's scheduler) is seen by the next scheduler run on every other one.
CREATE TABLE sources (
    name           text PRIMARY KEY,
    spec           text NOT NULL,
    added_at       text NOT NULL,
    last_started   text,
    last_finished  text,
    last_ok        boolean,
    last_error     text,
    last_report    text,
    last_success   text
);

CREATE TABLE source_documents (
    source         text NOT NULL,
    key            text NOT NULL,
    doc_id         text NOT NULL DEFAULT '',
    url            text NOT NULL DEFAULT '',
    etag           text NOT NULL DEFAULT '',
    last_modified  text NOT NULL DEFAULT '',
    content_hash   text NOT NULL DEFAULT '',
    blob           text NOT NULL DEFAULT '',
    revision       text NOT NULL DEFAULT '',
    links          text NOT NULL DEFAULT '[]',
    redirects      text NOT NULL DEFAULT '[]',
    note           text NOT NULL DEFAULT '',
    updated_at     text NOT NULL DEFAULT '',
    PRIMARY KEY (source, key)
);
CREATE INDEX source_documents_doc ON source_documents (doc_id);
""",
    ),
    Migration(
        3,
        "answers kept for rating, and their ratings (feedback)",
        """
-- feedback/postgres.py: the answers a server gave and readers' ratings of them, one place for every replica (a
-- rating may reach another replica than the one that answered). Times are ISO 8601 text, as the embedded store's.
CREATE TABLE feedback_answers (
    answer_id      text PRIMARY KEY,
    owner          text NOT NULL,
    created_at     text NOT NULL,
    question       text NOT NULL,
    answer         text NOT NULL,
    status         text NOT NULL,
    exit_reason    text NOT NULL,
    refusal_reason text,
    mode           text NOT NULL DEFAULT '',
    citations      jsonb NOT NULL DEFAULT '[]',
    docs_version   bigint,
    session_id     text,
    surface        text NOT NULL DEFAULT ''
);
CREATE INDEX feedback_answers_created ON feedback_answers (created_at);

CREATE TABLE feedback_ratings (
    answer_id  text PRIMARY KEY REFERENCES feedback_answers (answer_id) ON DELETE CASCADE,
    owner      text NOT NULL,
    rating     text NOT NULL CHECK (rating IN ('up', 'down')),
    comment    text,
    rated_at   text NOT NULL
);
CREATE INDEX feedback_ratings_owner ON feedback_ratings (owner, rated_at);
""",
    ),
    Migration(
        4,
        "sources removed, and when",
        """
-- sources/state.py: `citewise sources remove` records the removal here, so a replica whose settings (read at its
-- start, or from its own copy of citewise.toml) still declare the source neither lists nor syncs it again.
CREATE TABLE removed_sources (
    name        text PRIMARY KEY,
    removed_at  text NOT NULL
);
""",
    ),
    Migration(
        5,
        "each chunk's sentence vectors",
        """
-- index/postgres_store.py: one vector per sentence of the chunk (store.dense_scores), float16 row after row. NULL for
-- the rows already there: they keep their cosine alone until their chunks are embedded again. A nullable column
-- without a default, so adding it rewrites no row.
ALTER TABLE chunks ADD COLUMN sentence_vectors bytea;
""",
    ),
    Migration(
        6,
        "each chunk's answer units, and the index format",
        """
-- index/postgres_store.py: the spans of a chunk's text quote mode may quote (Chunk.units, JSON). NULL for the rows
-- already there until `citewise doctor --repair` (or the next ingest) records them; the manifest's format says
-- whether every row has them (2) or the index predates them (1).
ALTER TABLE chunks ADD COLUMN units text;
ALTER TABLE citewise_manifest ADD COLUMN format integer NOT NULL DEFAULT 1;
""",
    ),
)

LATEST = MIGRATIONS[-1].version
