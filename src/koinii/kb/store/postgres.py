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
  acknowledged (synchronous_commit as the server is configured; on by default).
- The schema is versioned in `koinii_meta.schema_version`; `_MIGRATIONS[i]` takes
  version i to i+1. Domains version their tables in `koinii_schema`, as on SQLite.

The location is a libpq URL; put `options=-csearch_path%3Dteam` in it to use a schema
other than `public`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from koinii.errors import Refused
from koinii.kb.store import Commit, JustificationRow, Loaded, LogEntry, SentexRow

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

_UPSERT = (
    "INSERT INTO sentex (handle, context, positive, text, premise, strength, creator, created, "
    "extra) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (handle) DO UPDATE SET "
    "premise = EXCLUDED.premise, strength = EXCLUDED.strength, creator = EXCLUDED.creator, "
    "extra = EXCLUDED.extra"
)
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


class PostgresStore:
    def __init__(self, dsn: str, *, standby: bool = False, poll_s: float = 0.5) -> None:
        import psycopg  # imported here: SQLite users need not install it

        self._psycopg = psycopg
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
            self._take_writer_lock(standby, poll_s)
            self._migrate()
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
        with self._conn.transaction():
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

    def read(self, reader: Callable[[Any], Any]) -> Any:
        try:
            return reader(self._records)
        except self._psycopg.Error as exc:
            raise Refused(
                "store-error", f"a read failed: {exc}", {"location": self.location}
            ) from exc

    # --- reading ------------------------------------------------------------------------

    def _meta(self, key: str, default: int) -> int:
        row = self._conn.execute("SELECT value FROM koinii_meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else default

    def load(self) -> Loaded:
        conn = self._conn
        last = conn.execute(
            "SELECT seq, next_handle FROM change_log ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        top = conn.execute("SELECT MAX(handle) FROM sentex").fetchone()[0] or 0
        next_handle = max(self._meta("next_handle", 1), last[1] if last else 1, top + 1)
        seq = max(self._meta("seq", 0), last[0] if last else 0)
        sentexes = [
            SentexRow(h, c, p, t, pr, s, cr, cd, json.loads(x) if x else None)
            for h, c, p, t, pr, s, cr, cd, x in conn.execute(
                "SELECT handle, context, positive, text, premise, strength, creator, created, "
                "extra FROM sentex ORDER BY handle"
            )
        ]
        justifications = [
            JustificationRow(i, c, r, tuple(json.loads(a)))
            for i, c, r, a in conn.execute(
                "SELECT id, conclusion, rule, antecedents FROM justification ORDER BY id"
            )
        ]
        return Loaded(sentexes, justifications, next_handle, seq, self.floor())

    def changes(self, since: int, limit: int) -> list[LogEntry]:
        rows = self._conn.execute(
            "SELECT seq, op, at, diff FROM change_log WHERE seq > %s ORDER BY seq LIMIT %s",
            (since, limit),
        ).fetchall()
        out = []
        for seq, op, at, diff in rows:
            decoded = json.loads(diff)
            out.append(
                LogEntry(seq, op, at, decoded["added"], decoded["removed"], decoded.get("records"))
            )
        return out

    def floor(self) -> int:
        return self._meta("log_floor", 0)

    # --- writing ------------------------------------------------------------------------

    def commit(self, commit: Commit) -> Any:
        psycopg = self._psycopg
        entry = commit.entry
        try:
            with self._conn.transaction():
                cursor = self._conn.cursor()
                if commit.upserts:
                    cursor.executemany(
                        _UPSERT,
                        [
                            (
                                n.handle,
                                n.context,
                                n.positive,
                                n.text,
                                n.premise,
                                n.strength,
                                n.creator,
                                n.created,
                                json.dumps(n.extra) if n.extra else None,
                            )
                            for n in commit.upserts
                        ],
                    )
                if commit.deletes:
                    cursor.execute("DELETE FROM sentex WHERE handle = ANY(%s)", (commit.deletes,))
                if commit.new_justifications:
                    cursor.executemany(
                        "INSERT INTO justification (id, conclusion, rule, antecedents) "
                        "VALUES (%s, %s, %s, %s)",
                        [
                            (
                                j.id,
                                j.conclusion.handle,
                                j.rule.handle,
                                json.dumps([a.handle for a in j.antecedents]),
                            )
                            for j in commit.new_justifications
                        ],
                    )
                if commit.dropped_justifications:
                    cursor.execute(
                        "DELETE FROM justification WHERE id = ANY(%s)",
                        (commit.dropped_justifications,),
                    )
                result = commit.records(self._records) if commit.records is not None else None
                diff: dict[str, Any] = {"added": entry.added, "removed": entry.removed}
                if entry.records is not None:
                    diff["records"] = entry.records
                cursor.execute(
                    "INSERT INTO change_log (seq, op, at, next_handle, diff) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (entry.seq, entry.op, entry.at, commit.next_handle, json.dumps(diff)),
                )
        except psycopg.Error as exc:
            raise Refused(
                "store-error", f"the write could not be stored: {exc}", {"location": self.location}
            ) from exc
        return result

    def _set_meta(self, values: dict[str, int]) -> None:
        cursor = self._conn.cursor()
        cursor.executemany(
            "INSERT INTO koinii_meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            list(values.items()),
        )

    def save_next_handle(self, next_handle: int) -> None:
        with self._conn.transaction():
            self._set_meta({"next_handle": next_handle})

    def compact(self, keep: int) -> int:
        with self._conn.transaction():
            row = self._conn.execute(
                "SELECT seq FROM change_log ORDER BY seq DESC LIMIT 1 OFFSET %s", (keep,)
            ).fetchone()
            if row is None:
                return 0
            last = self._conn.execute(
                "SELECT MAX(seq), MAX(next_handle) FROM change_log"
            ).fetchone()
            dropped = self._conn.execute(
                "DELETE FROM change_log WHERE seq <= %s", (row[0],)
            ).rowcount
            self._set_meta(
                {
                    "log_floor": row[0],
                    "seq": max(self._meta("seq", 0), last[0]),
                    "next_handle": max(self._meta("next_handle", 1), last[1]),
                }
            )
            return dropped

    # --- moving a store (koinii migrate) -------------------------------------------

    def is_empty(self) -> bool:
        conn = self._conn
        return not (
            conn.execute("SELECT 1 FROM sentex LIMIT 1").fetchone()
            or conn.execute("SELECT 1 FROM change_log LIMIT 1").fetchone()
        )

    def export_log(self) -> list[tuple]:
        return self._conn.execute(
            "SELECT seq, op, at, next_handle, diff FROM change_log ORDER BY seq"
        ).fetchall()

    def import_core(self, loaded: Loaded, log: list[tuple], meta: dict[str, int]) -> None:
        with self._conn.transaction():
            cursor = self._conn.cursor()
            cursor.executemany(
                _UPSERT,
                [
                    (
                        r.handle,
                        r.context,
                        r.positive,
                        r.text,
                        r.premise,
                        r.strength,
                        r.creator,
                        r.created,
                        json.dumps(r.extra) if r.extra else None,
                    )
                    for r in loaded.sentexes
                ],
            )
            cursor.executemany(
                "INSERT INTO justification (id, conclusion, rule, antecedents) "
                "VALUES (%s, %s, %s, %s)",
                [
                    (j.id, j.conclusion, j.rule, json.dumps(list(j.antecedents)))
                    for j in loaded.justifications
                ],
            )
            cursor.executemany(
                "INSERT INTO change_log (seq, op, at, next_handle, diff) "
                "VALUES (%s, %s, %s, %s, %s)",
                log,
            )
            self._set_meta(meta)

    def import_rows(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        names = ", ".join(columns)
        marks = ", ".join("%s" for _ in columns)
        with self._conn.transaction():
            self._conn.cursor().executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)

    def close(self) -> None:
        self._conn.close()  # ends the session: the advisory lock goes with it


def _redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
