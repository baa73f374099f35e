"""The PostgreSQL store: when one machine is not enough.

The same records as the SQLite store (sentexes, justifications, the change log, the
domains' record tables) in a PostgreSQL schema, so a team can keep its store in a server
it already operates, replicates and backs up.

Invariants:
- One writer per database schema: the store holds a session-level advisory lock, keyed
  on the database and schema, for as long as it is open. A second opener is refused
  (`store-locked`), or with `standby=True` waits for the lock — which PostgreSQL releases
  the moment the writer's session ends, so a standby takes over when the writer dies.
- One write operation is one PostgreSQL transaction, committed before it is
  acknowledged. Whether a commit survives power loss is the server's synchronous_commit
  (on by default) and fsync; `synchronous="full"` sets synchronous_commit=on for the
  writer's session whatever the server's default.
- The schema is versioned in `koinii_meta.schema_version`; `_MIGRATIONS[i]` takes
  version i to i+1. Domains version their tables in `koinii_schema`, as on SQLite.

The location is a libpq URL; put `options=-csearch_path%3Dteam` in it to use a schema
other than `public`.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any

from koinii.errors import Refused
from koinii.kb.store import no_such_store
from koinii.kb.store.sql import SQLStore

_MIGRATIONS = [
    """
    CREATE TABLE IF NOT EXISTS koinii_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
    CREATE TABLE IF NOT EXISTS sentex (
        handle BIGINT PRIMARY KEY,
        context TEXT NOT NULL,
        positive BOOLEAN NOT NULL,
        text TEXT NOT NULL,
        premise BOOLEAN NOT NULL,
        strength SMALLINT NOT NULL,
        creator TEXT,
        created BIGINT NOT NULL,
        extra TEXT
    );
    CREATE TABLE IF NOT EXISTS justification (
        id BIGINT PRIMARY KEY,
        conclusion BIGINT NOT NULL,
        rule BIGINT NOT NULL,
        antecedents TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS change_log (
        seq BIGINT PRIMARY KEY,
        op TEXT NOT NULL,
        at BIGINT NOT NULL,
        next_handle BIGINT NOT NULL,
        diff TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS koinii_schema (domain TEXT PRIMARY KEY, version INTEGER NOT NULL);
    """,
]

_PLACEHOLDER = re.compile(r"\?")


class PostgresRecords:
    """The connection domain code gets on a PostgreSQL store: `execute` / `executemany`
    with `?` placeholders (as on SQLite), returning cursors with fetchone / fetchall."""

    dialect = "postgres"

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self._conn.execute(_PLACEHOLDER.sub("%s", sql.replace("%", "%%")), params)

    def executemany(self, sql: str, rows: Any) -> Any:
        cursor = self._conn.cursor()
        cursor.executemany(_PLACEHOLDER.sub("%s", sql.replace("%", "%%")), list(rows))
        return cursor

    @property
    def raw(self) -> Any:
        """The psycopg connection, for what only PostgreSQL can say."""
        return self._conn


class PostgresStore(SQLStore):
    def __init__(
        self,
        dsn: str,
        *,
        standby: bool = False,
        poll_s: float = 0.5,
        create: bool = True,
        synchronous: str = "normal",
    ) -> None:
        import psycopg  # imported here: SQLite users need not install it

        self._errors = (psycopg.Error,)
        self.location = _redact(dsn)
        try:
            self._conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise Refused(
                "store-error",
                f"cannot connect to {self.location}: {exc}",
                {"location": self.location},
            ) from exc
        try:
            if (
                not create
                and self._conn.execute("SELECT to_regclass('koinii_meta')").fetchone()[0] is None
            ):
                raise no_such_store(self.location)
            self._take_writer_lock(standby, poll_s)
            self._migrate()
            if synchronous == "full":  # whatever the server's default: wait for the flush
                self._conn.execute("SET synchronous_commit TO on")
            self.durability = {
                "backend": "postgresql",
                "synchronous_commit": self._conn.execute("SHOW synchronous_commit").fetchone()[0],
                "fsync": self._conn.execute("SHOW fsync").fetchone()[0],
            }
        except BaseException:
            self._conn.close()
            raise
        self._records = PostgresRecords(self._conn)

    # --- the writer lock ----------------------------------------------------------------

    def _take_writer_lock(self, standby: bool, poll_s: float) -> None:
        schema = self._conn.execute("SELECT current_schema()").fetchone()[0]
        if schema is None:
            raise Refused(
                "store-error",
                f"{self.location} names no schema that exists (check search_path)",
                {"location": self.location},
            )
        key_sql = "hashtext('koinii:' || current_database() || ':' || %s)"
        while True:
            (locked,) = self._conn.execute(
                f"SELECT pg_try_advisory_lock({key_sql})", (schema,)
            ).fetchone()
            if locked:
                return
            if not standby:
                raise Refused(
                    "store-locked",
                    f"{self.location} already has a writer (one writer per store: connect to "
                    "its daemon, or start this one with --standby to take over when it stops)",
                    {"location": self.location},
                )
            time.sleep(poll_s)

    # --- schema -------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._conn.transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS koinii_meta "
                "(key TEXT PRIMARY KEY, value BIGINT NOT NULL)"
            )
            row = self._conn.execute(
                "SELECT value FROM koinii_meta WHERE key = 'schema_version'"
            ).fetchone()
            version = row[0] if row else 0
            for number in range(version, len(_MIGRATIONS)):
                self._conn.execute(_MIGRATIONS[number])
                self._set_meta({"schema_version": number + 1})

    def ensure_schema(self, domain: str, migrations: Any) -> None:
        scripts = migrations["postgres"] if isinstance(migrations, dict) else migrations
        with self._translated("creating the record tables"), self._conn.transaction():
            row = self._conn.execute(
                "SELECT version FROM koinii_schema WHERE domain = %s", (domain,)
            ).fetchone()
            version = row[0] if row else 0
            for number in range(version, len(scripts)):
                self._conn.execute(scripts[number])
                self._conn.execute(
                    "INSERT INTO koinii_schema (domain, version) VALUES (%s, %s) "
                    "ON CONFLICT (domain) DO UPDATE SET version = EXCLUDED.version",
                    (domain, number + 1),
                )

    # --- the dialect ----------------------------------------------------------------

    def _run(self, sql: str, params: Any = ()) -> Any:
        return self._conn.execute(sql.replace("?", "%s"), params)

    def _run_many(self, sql: str, rows: list[tuple]) -> None:
        self._conn.cursor().executemany(sql.replace("?", "%s"), rows)

    def _transaction(self) -> Any:
        return self._conn.transaction()

    def close(self) -> None:
        # Release the writer lock before hanging up: the server drops a closed session's
        # locks only as its backend exits, so a reopen right after close could be refused.
        with contextlib.suppress(*self._errors):
            self._conn.execute("SELECT pg_advisory_unlock_all()")
        self._conn.close()


def _redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
