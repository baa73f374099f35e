"""The session tables, in the same database as the KB (domain `sessions`).

Invariants, kept by the writer (`store.py`) and relied on by every read:
- A session's turns are one rowid range: `turn.n = (session.n << 20) | ordinal`, where
  `ordinal` counts the turns ever started in that session (`session.turn_seq`). Reading a
  session is a range scan, and the full-text row of a turn has the same rowid, so a
  search hit names its session with a shift and no lookup (`session_of`).
- `turn_text` holds one row per turn (same rowid): the user request, every reply
  (assistant prose), every thinking text and everything its tools gave back (`tools`:
  block results, output, errors) recorded for it, across all its attempts.
  The full-text index over it is derived: FTS5 `turn_search` on SQLite (kept by
  triggers), GIN expression indexes on PostgreSQL.
- `session.title` / `title_fold` are the latest state's title (and its casefold, for the
  title band); `turn_count` is the number of turns on the active chain; `modified_at` is
  the newest turn's time, else `created_at`. The writer changes them with the rows they
  summarise, in the same transaction.
- Every timestamp is ISO-8601 UTC with milliseconds and `Z`, so text order is time order.
- `session.owner` is the principal that started (or imported) the session over an
  authenticated daemon, and never changes; NULL when it was recorded in-process, by an
  open daemon, or before owners were kept. Over the wire only the owner and operators
  write a session (`store.py`, the `authorize` of each operation).
- An import is keyed by who imported it and the source's id: (`owner`, `external_id`) is
  unique, not `external_id` alone (version 4), so an agent that takes another's
  transcript id first neither blocks the other's own import nor becomes its session's
  parent (issue 37; store.py, "Who writes").
- Token counts of an attempt are the sum of its iterations' unless `finish_turn` was
  given totals; `input` counts every prompt token, including the `cached` (read from a
  cache) and `cache_created` (written to one) tokens, so `uncached = input - cached -
  cache_created`.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from koinii.kb.store import register_records

log = logging.getLogger("koinii.sessions")

DOMAIN = "sessions"
TURN_BITS = 20  # up to 1,048,575 turns per session
TURN_MASK = (1 << TURN_BITS) - 1

# The tables, written once for both stores: {pk} {int} {real} {key} are filled in per
# dialect ({key}: text that must sort and compare bytewise, such as ids and times).
_TABLES = """
CREATE TABLE session (
    n {pk},
    id {key} NOT NULL UNIQUE,
    channel TEXT NOT NULL,
    external_id {key} UNIQUE,
    title TEXT,
    title_fold TEXT,
    project_id TEXT,
    provider TEXT,
    model TEXT,
    created_at {key} NOT NULL,
    modified_at {key} NOT NULL,
    parent_session_n {int},
    turn_count {int} NOT NULL DEFAULT 0,
    turn_seq {int} NOT NULL DEFAULT 0,
    meta TEXT
);
CREATE INDEX session_recent ON session (parent_session_n, modified_at);
CREATE TABLE state (
    n {pk},
    id {key} NOT NULL UNIQUE,
    session_n {int} NOT NULL,
    version {int} NOT NULL,
    parent_state_n {int},
    fork_position {int},
    title TEXT,
    system_prompt TEXT,
    provider TEXT,
    model TEXT,
    created_at {key} NOT NULL,
    UNIQUE (session_n, version)
);
CREATE TABLE turn (
    n {pk},
    id {key} NOT NULL UNIQUE,
    state_n {int} NOT NULL,
    position {int} NOT NULL,
    user_request TEXT NOT NULL,
    created_at {key} NOT NULL
);
CREATE TABLE turn_text (
    n {pk},
    request TEXT,
    reply TEXT,
    thinking TEXT
);
CREATE TABLE attempt (
    n {pk},
    turn_n {int} NOT NULL,
    version {int} NOT NULL,
    status TEXT NOT NULL,
    outcome TEXT,
    iteration_count {int} NOT NULL DEFAULT 0,
    duration_ms {int},
    input_tokens {int} NOT NULL DEFAULT 0,
    cached_tokens {int} NOT NULL DEFAULT 0,
    cache_created_tokens {int} NOT NULL DEFAULT 0,
    output_tokens {int} NOT NULL DEFAULT 0,
    reasoning_tokens {int} NOT NULL DEFAULT 0,
    cost_usd {real},
    answer TEXT,
    error TEXT,
    created_at {key} NOT NULL,
    finished_at {key},
    UNIQUE (turn_n, version)
);
CREATE TABLE iteration (
    n {pk},
    id {key} NOT NULL UNIQUE,
    attempt_n {int} NOT NULL,
    position {int} NOT NULL,
    thinking TEXT,
    prose TEXT,
    provider TEXT,
    model TEXT,
    actual_provider TEXT,
    actual_model TEXT,
    fallback {int} NOT NULL DEFAULT 0,
    input_tokens {int} NOT NULL DEFAULT 0,
    cached_tokens {int} NOT NULL DEFAULT 0,
    cache_created_tokens {int} NOT NULL DEFAULT 0,
    output_tokens {int} NOT NULL DEFAULT 0,
    reasoning_tokens {int} NOT NULL DEFAULT 0,
    cost_usd {real},
    started_at {key},
    duration_ms {int},
    first_token_ms {int},
    UNIQUE (attempt_n, position)
);
CREATE TABLE block (
    n {pk},
    id {key} NOT NULL UNIQUE,
    iteration_n {int} NOT NULL,
    position {int} NOT NULL,
    tool TEXT,
    code TEXT,
    result TEXT,
    stdout TEXT,
    error TEXT,
    duration_ms {int},
    timeout {int} NOT NULL DEFAULT 0,
    UNIQUE (iteration_n, position)
);
CREATE TABLE routing_event (
    n {pk},
    session_n {int} NOT NULL,
    turn_n {int},
    kind TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    to_provider TEXT,
    to_model TEXT,
    reason TEXT,
    created_at {key} NOT NULL
);
CREATE INDEX routing_of_session ON routing_event (session_n);
CREATE TABLE attachment (
    n {pk},
    id {key} NOT NULL UNIQUE,
    turn_n {int} NOT NULL,
    filename TEXT,
    media_type TEXT,
    size_bytes {int},
    sha256 TEXT,
    created_at {key} NOT NULL
);
CREATE INDEX attachment_of_turn ON attachment (turn_n);
"""

# The title index's triggers, which a rebuilt session table needs again (v4).
_TITLE_TRIGGERS = """
CREATE TRIGGER session_inserted AFTER INSERT ON session BEGIN
    INSERT INTO session_title (rowid, title_fold) VALUES (new.n, new.title_fold);
END;
CREATE TRIGGER session_deleted AFTER DELETE ON session BEGIN
    INSERT INTO session_title (session_title, rowid, title_fold)
    VALUES ('delete', old.n, old.title_fold);
END;
CREATE TRIGGER session_retitled AFTER UPDATE OF title_fold ON session BEGIN
    INSERT INTO session_title (session_title, rowid, title_fold)
    VALUES ('delete', old.n, old.title_fold);
    INSERT INTO session_title (rowid, title_fold) VALUES (new.n, new.title_fold);
END;
"""

# SQLite: an FTS5 index over turn_text (external content: the text is stored once), and
# a trigram index over the folded titles (substring search), kept in step by triggers,
# so whatever writes the rows (the writer, `koinii migrate`) indexes them.
_SQLITE_SEARCH = f"""
CREATE VIRTUAL TABLE turn_search USING fts5 (
    request, reply, thinking, content = 'turn_text', content_rowid = 'n', prefix = '2 3'
);
CREATE TRIGGER turn_text_inserted AFTER INSERT ON turn_text BEGIN
    INSERT INTO turn_search (rowid, request, reply, thinking)
    VALUES (new.n, new.request, new.reply, new.thinking);
END;
CREATE TRIGGER turn_text_deleted AFTER DELETE ON turn_text BEGIN
    INSERT INTO turn_search (turn_search, rowid, request, reply, thinking)
    VALUES ('delete', old.n, old.request, old.reply, old.thinking);
END;
CREATE TRIGGER turn_text_updated AFTER UPDATE ON turn_text BEGIN
    INSERT INTO turn_search (turn_search, rowid, request, reply, thinking)
    VALUES ('delete', old.n, old.request, old.reply, old.thinking);
    INSERT INTO turn_search (rowid, request, reply, thinking)
    VALUES (new.n, new.request, new.reply, new.thinking);
END;
CREATE VIRTUAL TABLE session_title USING fts5 (
    title_fold, content = 'session', content_rowid = 'n', tokenize = 'trigram case_sensitive 1'
);
{_TITLE_TRIGGERS}"""

# PostgreSQL: one GIN index per searchable column, on the expression search.py matches.
_POSTGRES_SEARCH = "".join(
    f"CREATE INDEX turn_text_{column} ON turn_text USING gin "
    f"(to_tsvector('simple', coalesce({column}, '')));\n"
    for column in ("request", "reply", "thinking")
)

_OWNER = "ALTER TABLE session ADD COLUMN owner TEXT;"

# Version 3: what the tools returned (block results, output and errors) is searchable, in
# a `tools` column of turn_text — on SQLite the FTS5 index is made again with it and
# rebuilt; on PostgreSQL it gets its GIN index, and the titles a trigram index (pg_trgm)
# when the server has the extension (else the title band scans, and says so: `ready`).
_TOOLS_SQLITE = """
ALTER TABLE turn_text ADD COLUMN tools TEXT;
DROP TRIGGER turn_text_inserted;
DROP TRIGGER turn_text_deleted;
DROP TRIGGER turn_text_updated;
DROP TABLE turn_search;
CREATE VIRTUAL TABLE turn_search USING fts5 (
    request, reply, thinking, tools,
    content = 'turn_text', content_rowid = 'n', prefix = '2 3'
);
CREATE TRIGGER turn_text_inserted AFTER INSERT ON turn_text BEGIN
    INSERT INTO turn_search (rowid, request, reply, thinking, tools)
    VALUES (new.n, new.request, new.reply, new.thinking, new.tools);
END;
CREATE TRIGGER turn_text_deleted AFTER DELETE ON turn_text BEGIN
    INSERT INTO turn_search (turn_search, rowid, request, reply, thinking, tools)
    VALUES ('delete', old.n, old.request, old.reply, old.thinking, old.tools);
END;
CREATE TRIGGER turn_text_updated AFTER UPDATE ON turn_text BEGIN
    INSERT INTO turn_search (turn_search, rowid, request, reply, thinking, tools)
    VALUES ('delete', old.n, old.request, old.reply, old.thinking, old.tools);
    INSERT INTO turn_search (rowid, request, reply, thinking, tools)
    VALUES (new.n, new.request, new.reply, new.thinking, new.tools);
END;
INSERT INTO turn_search (turn_search) VALUES ('rebuild');
"""
TITLE_TRIGRAMS = "session_title_trgm"
_TOOLS_POSTGRES = f"""
ALTER TABLE turn_text ADD COLUMN tools TEXT;
CREATE INDEX turn_text_tools ON turn_text USING gin (to_tsvector('simple', coalesce(tools, '')));
DO $$
DECLARE home TEXT;
BEGIN
    BEGIN
        CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'koinii sessions: cannot create the pg_trgm extension (%)', SQLERRM;
    END;
    SELECT extnamespace::regnamespace::text INTO home FROM pg_extension
    WHERE extname = 'pg_trgm';
    IF home IS NOT NULL THEN
        EXECUTE format(
            'CREATE INDEX {TITLE_TRIGRAMS} ON session USING gin (title_fold %s.gin_trgm_ops)',
            home
        );
    END IF;
END $$;
"""

# Version 4: an external id is unique per owner (the importer), not across the store.
# SQLite cannot drop a column's UNIQUE: the table is made again (same columns, same row
# numbers, so the title index and every turn's rowid stay valid) with its triggers.
_SESSION_COLUMNS = (
    "n, id, channel, external_id, title, title_fold, project_id, provider, model, "
    "created_at, modified_at, parent_session_n, turn_count, turn_seq, meta, owner"
)
_IMPORT_KEY = "CREATE UNIQUE INDEX session_import ON session ((coalesce(owner, '')), external_id);"
_OWNED_IMPORTS_SQLITE = f"""
CREATE TABLE session_owned (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    channel TEXT NOT NULL,
    external_id TEXT,
    title TEXT,
    title_fold TEXT,
    project_id TEXT,
    provider TEXT,
    model TEXT,
    created_at TEXT NOT NULL,
    modified_at TEXT NOT NULL,
    parent_session_n INTEGER,
    turn_count INTEGER NOT NULL DEFAULT 0,
    turn_seq INTEGER NOT NULL DEFAULT 0,
    meta TEXT,
    owner TEXT
);
INSERT INTO session_owned ({_SESSION_COLUMNS}) SELECT {_SESSION_COLUMNS} FROM session;
DROP TABLE session;
ALTER TABLE session_owned RENAME TO session;
CREATE INDEX session_recent ON session (parent_session_n, modified_at);
{_IMPORT_KEY}
{_TITLE_TRIGGERS}"""
_OWNED_IMPORTS_POSTGRES = f"""
ALTER TABLE session DROP CONSTRAINT session_external_id_key;
{_IMPORT_KEY}
"""

# Version 5: each owner's sessions, newest first, found by an index probe (the roster's
# members' newest sessions: a pass over every session read them before).
_BY_OWNER = "CREATE INDEX session_owner ON session (owner, modified_at, n);"

MIGRATIONS = {
    "sqlite": [
        _TABLES.format(pk="INTEGER PRIMARY KEY", int="INTEGER", real="REAL", key="TEXT")
        + _SQLITE_SEARCH,
        _OWNER,
        _TOOLS_SQLITE,
        _OWNED_IMPORTS_SQLITE,
        _BY_OWNER,
    ],
    "postgres": [
        _TABLES.format(
            pk="BIGINT PRIMARY KEY", int="BIGINT", real="DOUBLE PRECISION", key='TEXT COLLATE "C"'
        )
        + _POSTGRES_SEARCH,
        _OWNER,
        _TOOLS_POSTGRES,
        _OWNED_IMPORTS_POSTGRES,
        _BY_OWNER,
    ],
}

# What `koinii migrate` copies, parents first; the search index rebuilds from turn_text.
TABLES = (
    "session",
    "state",
    "turn",
    "turn_text",
    "attempt",
    "iteration",
    "block",
    "routing_event",
    "attachment",
)

TOKEN_COLUMNS = (
    "input_tokens",
    "cached_tokens",
    "cache_created_tokens",
    "output_tokens",
    "reasoning_tokens",
)

_READY: weakref.WeakSet[Any] = weakref.WeakSet()


def ready(kb: Any) -> None:
    """Create or upgrade the session tables of `kb` (once per KB object)."""
    if kb not in _READY:
        kb.ensure_schema(DOMAIN, MIGRATIONS)
        _READY.add(kb)
        if not kb.read_records(has_title_trigrams):
            log.warning(
                "koinii sessions: PostgreSQL has no pg_trgm here, so the title band of the "
                "session search scans every title; install the extension (postgresql-contrib) "
                "and run CREATE EXTENSION pg_trgm, then CREATE INDEX %s ON session USING gin "
                "(title_fold gin_trgm_ops)",
                TITLE_TRIGRAMS,
            )


def has_title_trigrams(db: Any) -> bool:
    """Whether the title band has its index (SQLite's FTS5 trigram table always does)."""
    if getattr(db, "dialect", "sqlite") != "postgres":
        return True
    found = db.execute(
        "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?",
        (TITLE_TRIGRAMS,),
    ).fetchone()
    return found is not None


def next_n(db: Any, table: str) -> int:
    """The next row number of `table`. Numbers are chosen here, not by the database, so
    that rows copied between stores keep theirs and later inserts never collide."""
    return db.execute(f"SELECT coalesce(max(n), 0) + 1 FROM {table}").fetchone()[0]


def turn_range(session_n: int) -> tuple[int, int]:
    """The rowids a session's turns (and their search rows) may take."""
    return session_n << TURN_BITS, (session_n << TURN_BITS) | TURN_MASK


def session_of(turn_n: int) -> int:
    return turn_n >> TURN_BITS


register_records(DOMAIN, MIGRATIONS, TABLES)
